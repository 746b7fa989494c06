package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/internal/geminitest"
	"github.com/office-server/office-server/internal/openaitest"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/server"
	"github.com/office-server/office-server/session/screen"
)

// cliModel is a scripted model for TestCLIPermissionRequests: "please run
// <word>" makes it ask for the shell command mkdir -p d-<word> && echo
// ran-<word>; a tool's result makes it say so; anything else "OK".
type cliModel struct {
	launch  func(t *testing.T) string   // the agent's launch line in the office file
	results func() []string             // the tool results the model got
	users   func() []string             // the user texts the model got
	askedAt func(word string) time.Time // when it asked for the command of word
	trace   func() string               // every request it got, for a failure's log
}

func scriptedCommand(word string) string { return "mkdir -p d-" + word + " && echo ran-" + word }

// wordIn returns the word of "please run <word>" in u.
func wordIn(u string) string {
	_, rest, ok := strings.Cut(u, "please run ")
	if !ok || strings.Contains(u, "was interrupted") || strings.Contains(u, "not approved") {
		return ""
	}
	return strings.Fields(rest + " x")[0]
}

type askTimes struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (a *askTimes) note(w string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.at == nil {
		a.at = map[string]time.Time{}
	}
	if _, ok := a.at[w]; !ok {
		a.at[w] = time.Now()
	}
}

func (a *askTimes) get(w string) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.at[w]
}

// geminiModel is Gemini CLI's: in a HOME the office makes (only the key and
// the model server's address in the launch environment), or in a person's
// (their API-key settings).
func geminiModel(t *testing.T, officeHome bool) cliModel {
	bin := testenv.CLIBin(t, "gemini")
	srv := geminitest.New(t)
	times := &askTimes{}
	srv.Reply(func(r geminitest.Request) geminitest.Response {
		if outs := r.FunctionResponses(); r.LastIsFunctionResponse() {
			return geminitest.Response{Text: "tool said: " + outs[len(outs)-1]}
		}
		if w := wordIn(r.LastUserText()); w != "" {
			times.note(w)
			return geminitest.Response{Calls: []geminitest.Call{{Name: "run_shell_command", Args: map[string]any{"command": scriptedCommand(w), "description": "make " + w}}}}
		}
		return geminitest.Response{Text: "OK"}
	})
	return cliModel{
		launch: func(t *testing.T) string {
			env := fmt.Sprintf("GOOGLE_GEMINI_BASE_URL: %q, GEMINI_API_KEY: %q", srv.URL, srv.Key)
			if !officeHome {
				home := t.TempDir()
				if err := geminitest.Prepare(home); err != nil {
					t.Fatal(err)
				}
				env += fmt.Sprintf(", HOME: %q", home)
			}
			return fmt.Sprintf("{kind: gemini, command: %q, dir: %q, env: {%s}}", bin, filepath.Join(t.TempDir(), "work"), env)
		},
		results: func() []string {
			var out []string
			for _, r := range srv.MainRequests() {
				if r.LastIsFunctionResponse() {
					out = append(out, r.FunctionResponses()[len(r.FunctionResponses())-1])
				}
			}
			return out
		},
		users: func() []string {
			var out []string
			for _, r := range srv.MainRequests() {
				out = append(out, r.LastUserText())
			}
			return out
		},
		askedAt: times.get,
		trace: func() string {
			var b strings.Builder
			for _, r := range srv.Requests() {
				fmt.Fprintf(&b, "%s %s main=%v tools=%d user=%q\n", r.Time.Format("15:04:05.000"), r.Path, r.Main, r.Tools, r.LastUserText())
			}
			fmt.Fprintf(&b, "other requests: %q", srv.Unknown())
			return b.String()
		},
	}
}

// qwenModel is Qwen Code's, in a person's HOME.
func qwenModel(t *testing.T) cliModel {
	bin := testenv.CLIBin(t, "qwen")
	srv := openaitest.New(t)
	srv.Side(openaitest.QwenSide)
	times := &askTimes{}
	srv.Reply(func(r openaitest.Request) openaitest.Response {
		switch {
		case strings.HasPrefix(r.System, "You are a security classifier"):
			return openaitest.Response{Calls: []openaitest.Call{{Name: "respond_in_schema", Arguments: `{"shouldBlock":"unsure"}`}}}
		case r.LastIsToolOutput():
			outs := r.FunctionOutputs()
			return openaitest.Response{Text: "tool said: " + outs[len(outs)-1]}
		}
		if w := wordIn(r.LastUserText()); w != "" {
			times.note(w)
			args, _ := json.Marshal(map[string]any{"command": scriptedCommand(w), "description": "make " + w})
			return openaitest.Response{Calls: []openaitest.Call{{Name: "run_shell_command", Arguments: string(args)}}}
		}
		return openaitest.Response{Text: "OK"}
	})
	return cliModel{
		launch: func(t *testing.T) string {
			home := t.TempDir()
			if err := openaitest.PrepareQwen(home); err != nil {
				t.Fatal(err)
			}
			var env []string
			for _, kv := range srv.QwenEnv(home) {
				k, v, _ := strings.Cut(kv, "=")
				env = append(env, fmt.Sprintf("%s: %q", k, v))
			}
			return fmt.Sprintf("{kind: qwen, command: %q, dir: %q, env: {%s}}", bin, filepath.Join(t.TempDir(), "work"), strings.Join(env, ", "))
		},
		results: func() []string {
			var out []string
			for _, r := range srv.MainRequests() {
				if r.LastIsToolOutput() {
					outs := r.FunctionOutputs()
					out = append(out, outs[len(outs)-1])
				}
			}
			return out
		},
		users: func() []string {
			var out []string
			for _, r := range srv.MainRequests() {
				out = append(out, r.LastUserText())
			}
			return out
		},
		askedAt: times.get,
	}
}

// TestCLIPermissionRequests runs the built `office-server serve` on
// PostgreSQL with one real CLI agent at a time, in its default approval
// mode, whose model asks to run shell commands: Gemini CLI in a HOME the
// office made (its BeforeTool hook), Gemini CLI in a person's HOME (its
// dialog, read from the screen and answered with keys) and Qwen Code (its
// PermissionRequest hook). For each, as for Claude Code: a request is a
// permission question row; a member's "allow once" (UPDATE under RLS)
// runs it and its output reaches the model once; a deny with a reason
// keeps it from running and the model gets the reason once; "allow for
// this session" runs it, and the same command again runs without a
// question; nobody answering denies at the office's timeout; the office's
// deny rule refuses without a question; the server SIGKILLed while a
// request waits cancels it after the restart and tells the agent once.
// It logs request → row and answer → decision latencies.
func TestCLIPermissionRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs Gemini CLI and Qwen Code on PostgreSQL")
	}
	for _, c := range []struct {
		name  string
		model func(t *testing.T) cliModel
		via   string
	}{
		{"gemini-hook", func(t *testing.T) cliModel { return geminiModel(t, true) }, "hook"},
		{"gemini-screen", func(t *testing.T) cliModel { return geminiModel(t, false) }, "screen"},
		{"qwen-hook", qwenModel, "hook"},
	} {
		t.Run(c.name, func(t *testing.T) { cliPermissionRound(t, c.model(t), c.via) })
	}
}

func cliPermissionRound(t *testing.T, m cliModel, via string) {
	bin := buildServer(t)
	dbURL := testenv.NewDatabase(t)
	officeFile := filepath.Join(t.TempDir(), "office.yaml")
	if err := os.WriteFile(officeFile, []byte(`office:
  name: CLI permission office
  permissions:
    timeout: 6s
    deny: ["Bash(mkdir -p d-never:*)"]
agents:
  - name: qa
    role: Tester
    launch: `+m.launch(t)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const token = "cli-perm-token-0123456789abcdef"
	env := []string{"HOME=" + t.TempDir(), "LANG=C.UTF-8", "OFFICE_ADMIN_TOKEN=" + token, "DATABASE_URL=" + dbURL, "OFFICE_SECRETS_KEY=" + e2eSecretsKey}
	args := []string{"--office", officeFile, "--data-dir", t.TempDir()}
	p := launchServer(t, bin, env, args...)
	p.waitHealthy(t)
	cur := p
	var offices []struct{ ID string }
	defer func() {
		if t.Failed() {
			t.Logf("server log:\n%s", cur.stderr.String())
			t.Logf("model results %q; user texts %q", m.results(), m.users())
			if m.trace != nil {
				t.Logf("model requests:\n%s", m.trace())
			}
		}
	}()
	c := apiClient{t: t, base: p.base, token: token}
	defer func() {
		if t.Failed() && len(offices) == 1 {
			var ss, evs []map[string]any
			c.do("GET", "/api/offices/"+offices[0].ID+"/sessions", "", &ss)
			c.do("GET", "/api/offices/"+offices[0].ID+"/events?limit=40", "", &evs)
			t.Logf("sessions %v", ss)
			for _, e := range evs {
				t.Logf("event %v %v", e["kind"], e["payload"])
			}
			if len(ss) == 1 {
				t.Logf("qa's screen:\n%s", agentScreen(t, p.base, token, offices[0].ID, fmt.Sprint(ss[0]["agent_id"])))
			}
		}
	}()
	c.wait("the office", 30*time.Second, func() bool { return c.do("GET", "/api/offices", "", &offices) == 200 && len(offices) == 1 })
	officeID := offices[0].ID
	session := func() string {
		var ss []struct{ Status, Detail string }
		c.do("GET", "/api/offices/"+officeID+"/sessions", "", &ss)
		if len(ss) != 1 {
			return ""
		}
		if ss[0].Status == "failed" {
			t.Fatalf("qa failed: %s", ss[0].Detail)
		}
		return ss[0].Status
	}
	ready := func(what string) {
		c.wait("qa ready "+what, 120*time.Second, func() bool { return session() == "ready" })
	}
	ready("at start")

	ctx := context.Background()
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	member := "00000000-0000-0000-0000-0000000000c1"
	mustExec(t, db, `insert into auth.users (id, email) values ($1, 'cli-member@example.com')`, member)
	mustExec(t, db, `insert into office_members (office_id, user_id) values ($1, $2)`, officeID, member)
	send := func(text string) {
		t.Helper()
		if st := c.do("POST", "/api/offices/"+officeID+"/messages", `{"agent":"qa","content":"`+text+`"}`, nil); st != 201 && st != 200 {
			t.Fatalf("post message: %d", st)
		}
	}
	type row struct{ ID, Question, Status string }
	rows := func(word string) []row {
		var out []row
		rs, err := db.Query(ctx, `select id::text, question, status from user_questions where office_id = $1 and category = 'permission' and question like '%' || $2 || '%' order by created_at`, officeID, "d-"+word)
		if err != nil {
			return nil
		}
		defer rs.Close()
		for rs.Next() {
			var r row
			_ = rs.Scan(&r.ID, &r.Question, &r.Status)
			out = append(out, r)
		}
		return out
	}
	var toRow, toDecision []time.Duration
	rowOf := func(word string) row {
		t.Helper()
		var r []row
		c.wait("the permission row of "+word, 120*time.Second, func() bool { r = rows(word); return len(r) > 0 && r[len(r)-1].Status == "pending" })
		toRow = append(toRow, time.Since(m.askedAt(word)))
		return r[len(r)-1]
	}
	results := func(marker string) int {
		n := 0
		for _, r := range m.results() {
			if strings.Contains(r, marker) {
				n++
			}
		}
		return n
	}
	told := func(marker string) int {
		n := 0
		for _, u := range m.users() {
			if strings.Contains(u, marker) {
				n++
			}
		}
		return n
	}
	work := func() string {
		var dir string
		_ = db.QueryRow(ctx, `select launch_spec->>'dir' from office_agents where office_id = $1`, officeID).Scan(&dir)
		return dir
	}
	ran := func(word string) bool { _, err := os.Stat(filepath.Join(work(), "d-"+word)); return err == nil }
	decided := func(answered time.Time, cond func() bool) {
		t.Helper()
		c.wait("the decision to reach the model", 120*time.Second, cond)
		toDecision = append(toDecision, time.Since(answered))
	}

	// Allow once, by a member's UPDATE under RLS.
	send("please run one")
	r := rowOf("one")
	if !strings.HasPrefix(r.Question, "qa wants to run a command: "+scriptedCommand("one")) {
		t.Errorf("question %q: want qa and the command", r.Question)
	}
	answered := time.Now()
	answerWithRLS(t, db, member, r.ID, "allow once")
	decided(answered, func() bool { return results("ran-one") > 0 })
	if !ran("one") {
		t.Error("the allowed command did not run")
	}
	ready("after one")

	// Deny with a reason.
	const reason = "not on Fridays (two refused)"
	send("please run two")
	r = rowOf("two")
	answered = time.Now()
	answerWithRLS(t, db, member, r.ID, "deny: "+reason)
	if via == "hook" {
		decided(answered, func() bool { return results(reason) > 0 })
	} else {
		decided(answered, func() bool { return told(reason) > 0 })
	}
	if ran("two") {
		t.Error("the denied command ran")
	}
	ready("after two")

	// Allow for this session, then the same command again: not asked.
	send("please run three")
	r = rowOf("three")
	answerWithRLS(t, db, member, r.ID, "allow for this session")
	c.wait("three ran", 120*time.Second, func() bool { return results("ran-three") == 1 })
	ready("after three")
	send("please run three again")
	c.wait("three ran again", 120*time.Second, func() bool { return results("ran-three") >= 2 })
	if n := len(rows("three")); n != 1 {
		t.Errorf("allowed for the session, the same command was asked %d times, want once", n)
	}
	ready("after three again")

	// Nobody answers: the office's timeout (6 s) denies.
	send("please run four")
	r = rowOf("four")
	c.wait("the timeout's deny", 120*time.Second, func() bool {
		return results("No one in the office answered") > 0 || told("No one in the office answered") > 0
	})
	if ran("four") {
		t.Error("a command nobody allowed ran")
	}
	var st string
	_ = db.QueryRow(ctx, `select status from user_questions where id = $1`, r.ID).Scan(&st)
	if st != "expired" {
		t.Errorf("timed-out question %s, want expired", st)
	}
	ready("after four")

	// The office's deny rule: refused without a question.
	send("please run never")
	c.wait("the rule's deny", 120*time.Second, func() bool {
		return results("Bash(mkdir -p d-never:*)") > 0 || told("Bash(mkdir -p d-never:*)") > 0
	})
	if n := len(rows("never")); n != 0 || ran("never") {
		t.Errorf("a command the office's rule denies: %d questions, ran %v", n, ran("never"))
	}
	ready("after never")

	// The server is SIGKILLed while a request waits: after the restart
	// the question is cancelled and the agent told, once.
	send("please run five")
	r = rowOf("five")
	if err := cur.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-cur.exited
	cur = launchServer(t, bin, env, args...)
	cur.waitHealthy(t)
	c = apiClient{t: t, base: cur.base, token: token}
	c.wait("the interrupted request cancelled", 120*time.Second, func() bool {
		_ = db.QueryRow(ctx, `select status from user_questions where id = $1`, r.ID).Scan(&st)
		return st == "cancelled"
	})
	c.wait("the agent told", 180*time.Second, func() bool { return told("ran-five) was interrupted") > 0 })
	ready("after the restart")
	if ran("five") {
		t.Error("a command nobody allowed ran across the restart")
	}

	time.Sleep(2 * time.Second) // anything told twice would show by now
	if n := results("ran-one"); n != 1 {
		t.Errorf("the model got the allowed command's output %d times, want once", n)
	}
	if n := told("ran-five) was interrupted"); n != 1 {
		t.Errorf("the agent was told of the interrupted request %d times, want once", n)
	}
	var vias []string
	rs, err := db.Query(ctx, `select distinct payload->>'via' from office_events where office_id = $1 and kind like 'permission.%' and payload ? 'via'`, officeID)
	if err == nil {
		for rs.Next() {
			var v string
			_ = rs.Scan(&v)
			vias = append(vias, v)
		}
		rs.Close()
	}
	if strings.Join(vias, ",") != via {
		t.Errorf("the events name the path %q, want %q", vias, via)
	}
	t.Logf("%s: request → row %s; answer → decision at the model %s", t.Name(), spread(toRow), spread(toDecision))
}

// agentScreen is what the console shows of an agent: its screen drawn
// from the snapshot a viewer joining now is sent.
func agentScreen(t *testing.T, base, token, officeID, agentID string) string {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/ws/offices/"+officeID+"/agents/"+agentID, h)
	if err != nil {
		return "console: " + err.Error()
	}
	defer ws.Close()
	scr := screen.New(200, 50)
	_ = ws.SetReadDeadline(time.Now().Add(time.Second))
	for {
		_, b, err := ws.ReadMessage()
		if err != nil {
			break
		}
		if len(b) > 0 && b[0] == server.FrameOutput {
			_, _ = scr.Write(b[1:])
		}
	}
	return strings.TrimRight(strings.Join(scr.Lines(), "\n"), "\n ")
}
