package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/anthropictest"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/supabase/supabasetest"
)

// TestClaudePermissionSupabase: the serve command on the Supabase store
// (the stand-in project: PostgREST over the real PostgreSQL with the real
// migrations, and Realtime) with one real Claude Code agent in the default
// permission mode. A member answers through answer_question over PostgREST,
// as the frontend does: "allow once" runs the command and its output
// reaches the model once; "deny: <reason>" gives the model the reason,
// once. Both questions end delivered, and nothing is typed for them.
func TestClaudePermissionSupabase(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Claude Code, PostgreSQL and the Supabase stand-ins")
	}
	claude := testenv.ClaudeBin(t)
	p := supabasetest.New(t)
	srv := anthropictest.New(t)
	srv.Reply(bashOnAsk)
	home, work := t.TempDir(), t.TempDir()
	for k, v := range map[string]string{"HOME": home, "LANG": "C.UTF-8", "ANTHROPIC_API_KEY": srv.Key, "ANTHROPIC_BASE_URL": srv.URL,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"} {
		t.Setenv(k, v)
	}
	officeFile := filepath.Join(t.TempDir(), "office.yaml")
	if err := os.WriteFile(officeFile, []byte(`office:
  name: Supabase permission office
agents:
  - name: po
    role: Product owner
    launch:
      kind: claude
      command: "`+claude+`"
      dir: "`+work+`"
      permission_mode: default
`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startSupabaseMainWith(t, p, officeFile)
	r.waitReady(t, "at start")
	oid := r.officeID(t)
	member := p.MemberOf(t, oid, "member@example.com")
	waitFor := func(what string, timeout time.Duration, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(timeout); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	ready := func() bool {
		var ss []struct{ Status string }
		r.get(t, "/api/offices/"+oid+"/sessions", &ss)
		return len(ss) == 1 && ss[0].Status == "ready"
	}
	results := func(marker string) ([]string, []bool) { return toolResults(srv, marker) }
	ask := func(c string) office.Question {
		t.Helper()
		waitFor("po ready", 90*time.Second, ready)
		if st, body := r.do(t, "POST", "/api/offices/"+oid+"/messages", `{"agent":"po","content":"please run `+c+`"}`); st != 201 {
			t.Fatalf("post message: %d %s", st, body)
		}
		q := r.waitQuestion(t, oid, office.QuestionPending, 90*time.Second)
		if q.Category != office.QuestionPermission || !strings.Contains(q.Question, "echo ran-"+c) {
			t.Fatalf("question %+v: want a permission question naming the command", q)
		}
		return q
	}

	qa := ask("sallow")
	answerAsMember(t, p, member, qa.ID, "allow once")
	waitFor("the allowed command's output", 60*time.Second, func() bool { o, _ := results("ran-sallow"); return len(o) > 0 })
	if _, err := os.Stat(filepath.Join(work, "dir-sallow")); err != nil {
		t.Errorf("the allowed command did not run: %v", err)
	}

	const reason = "not on this store (sdeny)"
	qd := ask("sdeny")
	answerAsMember(t, p, member, qd.ID, "deny: "+reason)
	waitFor("the deny", 60*time.Second, func() bool { o, _ := results(reason); return len(o) > 0 })
	waitFor("po ready at the end", 60*time.Second, ready)
	time.Sleep(2 * time.Second) // time for anything sent twice

	checkAllowDeny(t, r, srv, work, reason, qa.ID, qd.ID)
}

// bashOnAsk is po's model: told "please run sallow" or "sdeny", it runs a
// Bash command making dir-<that> and echoing ran-<that>; given a tool's
// result, it repeats it.
func bashOnAsk(r anthropictest.Request) anthropictest.Response {
	if out, isErr, ok := r.ToolResult(); ok {
		return anthropictest.Response{Text: fmt.Sprintf("tool said (error %v): %s", isErr, out)}
	}
	for _, c := range []string{"sallow", "sdeny"} {
		if strings.Contains(r.LastUserText(), "please run "+c) {
			return anthropictest.Response{Text: "Running it.", ToolUses: []anthropictest.ToolUse{{
				Name: "Bash", Input: map[string]string{"command": "mkdir -p dir-" + c + " && echo ran-" + c, "description": "Make dir-" + c},
			}}}
		}
	}
	return anthropictest.Response{Text: "OK"}
}

// toolResults are the tool results the model got that hold marker, and
// whether each was an error.
func toolResults(srv *anthropictest.Server, marker string) (outs []string, errs []bool) {
	for _, req := range srv.MainRequests() {
		if out, isErr, ok := req.ToolResult(); ok && strings.Contains(out, marker) {
			outs, errs = append(outs, out), append(errs, isErr)
		}
	}
	return outs, errs
}

// checkAllowDeny: the allowed command's output reached the model once,
// the deny's reason once as an error; the denied command did not run;
// both questions are delivered and no answer was typed into the agent.
func checkAllowDeny(t *testing.T, r *liveServer, srv *anthropictest.Server, work, reason string, questions ...string) {
	results := func(marker string) ([]string, []bool) { return toolResults(srv, marker) }
	if o, e := results("ran-sallow"); len(o) != 1 || e[0] || strings.TrimSpace(o[0]) != "ran-sallow" {
		t.Errorf("allowed: the model got %q (errors %v), want the output once", o, e)
	}
	if o, e := results(reason); len(o) != 1 || !e[0] {
		t.Errorf("denied: the model got %q (errors %v), want one error carrying the reason", o, e)
	}
	if _, err := os.Stat(filepath.Join(work, "dir-sdeny")); err == nil {
		t.Error("the denied command ran")
	}
	for _, id := range questions {
		var q office.Question
		r.get(t, "/api/questions/"+id, &q)
		if q.Status != office.QuestionDelivered {
			t.Errorf("question %s is %s, want delivered", id, q.Status)
		}
	}
	if k := countUserText(srv, "Answer to question"); k != 0 {
		t.Errorf("an answer was typed into the agent %d times", k)
	}
}
