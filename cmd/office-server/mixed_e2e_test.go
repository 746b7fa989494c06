package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/internal/anthropictest"
	"github.com/office-server/office-server/internal/geminitest"
	"github.com/office-server/office-server/internal/openaitest"
	"github.com/office-server/office-server/internal/testenv"
)

// TestServeClaudeCodexGemini runs the built `office-server serve` on
// PostgreSQL with one office of three real CLIs, each against its own
// scripted model server: po is Claude Code (kind claude, a fresh HOME the
// server prepares itself), dev is Codex (kind codex, its folder a git
// checkout), qa is the Gemini CLI (kind gemini); Codex and Gemini CLI
// start from a HOME with only the provider settings, and the server keeps
// their trust dialogs away without writing the person's files. A
// person's message makes po ask a question; a member's answer (SQL under
// RLS) makes po invoke dev; dev invokes qa; qa's reply is far taller than
// its terminal (the CLI clears and repaints it) and ends in its result for
// dev; dev delivers to po. Every model gets each hand-off
// once, every row exists once, and each model's first request carries the
// office's instructions.
func TestServeClaudeCodexGemini(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs Claude Code, Codex and the Gemini CLI")
	}
	claude, codex, gemini := testenv.ClaudeBin(t), testenv.CLIBin(t, "codex"), testenv.CLIBin(t, "gemini")
	bin := buildServer(t)
	asrv, osrv, gsrv := anthropictest.New(t), openaitest.New(t), geminitest.New(t)
	asrv.Reply(officeModel) // po: asks, invokes dev on the answer, thanks for the result
	mixedModels(osrv, gsrv)

	home, codexHome, geminiHome := t.TempDir(), t.TempDir(), t.TempDir()
	work := t.TempDir()
	dirs := []string{filepath.Join(work, "po"), filepath.Join(work, "dev"), filepath.Join(work, "qa")}
	if err := osrv.PrepareCodex(codexHome); err != nil {
		t.Fatal(err)
	}
	if err := geminitest.Prepare(geminiHome); err != nil {
		t.Fatal(err)
	}
	testenv.GitInit(t, dirs[1]) // dev's folder: Codex would ask whether to trust it
	geminiSettings := testenv.ReadPersonFile(t, filepath.Join(geminiHome, ".gemini", "settings.json"))
	codexConfig := testenv.ReadPersonFile(t, filepath.Join(codexHome, ".codex", "config.toml"))
	o := startLiveOffice(t, bin, fmt.Sprintf(`office:
  name: Three CLIs
agents:
  - name: po
    role: Product owner
    allowed_actions: [ask_user, invoke]
    launch: {kind: claude, command: %q, dir: %q}
  - name: dev
    role: Developer
    allowed_actions: [invoke, deliver_result]
    launch: {kind: codex, command: %q, dir: %q, env: {CODEX_HOME: %q, OPENAITEST_KEY: %q}}
  - name: qa
    role: Reviewer
    allowed_actions: [deliver_result]
    launch: {kind: gemini, command: %q, dir: %q, env: {HOME: %q, GOOGLE_GEMINI_BASE_URL: %q, GEMINI_API_KEY: %q}}
`, claude, dirs[0], codex, dirs[1], filepath.Join(codexHome, ".codex"), osrv.Key, gemini, dirs[2], geminiHome, gsrv.URL, gsrv.Key),
		"HOME="+home, "ANTHROPIC_BASE_URL="+asrv.URL, "ANTHROPIC_API_KEY="+asrv.Key, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range asrv.MainRequests() {
				t.Logf("claude request: %.120q", r.LastUserText())
			}
			for _, r := range osrv.MainRequests() {
				t.Logf("codex request %d: %.120q", r.Seq, r.LastUserText())
			}
			for _, r := range gsrv.MainRequests() {
				t.Logf("gemini request %d: %.120q", r.Seq, r.LastUserText())
			}
		}
	})
	o.waitReady(3, 180*time.Second)
	member := o.addMember("00000000-0000-0000-0000-00000000e2e3", "member3@example.com")
	o.post("po", member, "Please start the login feature.")
	var qID string
	waitUntil(t, 120*time.Second, "po's question row", func() bool {
		return o.db.QueryRow(context.Background(), `select id::text from user_questions where office_id = $1`, o.id).Scan(&qID) == nil
	})
	answerWithRLS(t, o.db, member, qID, "SSO")

	poGot := func(text string) int {
		n := 0
		for _, r := range asrv.MainRequests() {
			if strings.Contains(r.System, "You are po") && strings.Contains(r.LastUserText(), text) {
				n++
			}
		}
		return n
	}
	waitUntil(t, 240*time.Second, "dev's result to reach po", func() bool { return poGot("Result from dev") > 0 })
	time.Sleep(3 * time.Second) // anything acted on twice would show by now
	checkMixedOnce(t, asrv, osrv, gsrv, poGot)
	checkMixedRows(t, o)
	o.p.stop(t)
	geminiSettings.Same(t)
	codexConfig.Kept(t, "[projects", "trust_level")
	absent(t, filepath.Join(codexHome, ".codex", "AGENTS.md")) // the instructions go as a -c override
}

// mixedModels scripts dev's model (Codex: invokes qa on its task, then
// delivers to po) and qa's (Gemini: a review far taller than the
// terminal, repainted, that ends in its result for dev).
func mixedModels(osrv *openaitest.Server, gsrv *geminitest.Server) {
	osrv.Reply(func(r openaitest.Request) openaitest.Response {
		switch u := r.LastUserText(); {
		case strings.Contains(u, "Result from qa"):
			return openaitest.Response{Text: "[DELIVER_RESULT:po]\ntype: markdown\ncontent: Done: SSO login, reviewed by qa.\n[/DELIVER_RESULT:po]"}
		case strings.Contains(u, "[OFFICE] Task "):
			return openaitest.Response{Text: "Implemented. Asking qa for a review.\n[INVOKE:qa]\nReview the SSO login.\n[/INVOKE:qa]"}
		}
		return openaitest.Response{Text: "OK"}
	})
	var long strings.Builder
	long.WriteString("Review of the SSO login.\n")
	for i := 1; i <= 80; i++ {
		fmt.Fprintf(&long, "Check %d: line %d of a long review, taller than the terminal (%d).\n", i, i, i*i)
	}
	long.WriteString("[DELIVER_RESULT:dev]\ntype: markdown\ncontent: Reviewed: 80 checks passed.\n[/DELIVER_RESULT:dev]")
	gsrv.Reply(func(r geminitest.Request) geminitest.Response {
		if strings.Contains(r.LastUserText(), "[OFFICE] Task ") {
			return geminitest.Response{Text: long.String(), Delay: 3 * time.Millisecond}
		}
		return geminitest.Response{Text: "Noted."}
	})

}

// checkMixedOnce: every model got each hand-off once, and each model's
// first request carries the office's instructions.
func checkMixedOnce(t *testing.T, asrv *anthropictest.Server, osrv *openaitest.Server, gsrv *geminitest.Server, poGot func(string) int) {
	devGot := func(text string) int {
		n := 0
		for _, r := range osrv.MainRequests() {
			if strings.Contains(r.LastUserText(), text) {
				n++
			}
		}
		return n
	}
	qaGot := func(text string) int {
		n := 0
		for _, r := range gsrv.MainRequests() {
			if strings.Contains(r.LastUserText(), text) {
				n++
			}
		}
		return n
	}
	for _, c := range []struct {
		who, text string
		got       func(string) int
	}{
		{"po", "Message from a person", poGot}, {"po", "Answer to question", poGot}, {"po", "Result from dev", poGot},
		{"dev", "[OFFICE] Task ", devGot}, {"dev", "Result from qa", devGot},
		{"qa", "[OFFICE] Task ", qaGot},
	} {
		if n := c.got(c.text); n != 1 {
			t.Errorf("%s's model got %q %d times, want once", c.who, c.text, n)
		}
	}
	firsts := map[string]bool{}
	if rs := asrv.MainRequests(); len(rs) > 0 {
		firsts["po (Claude Code)"] = strings.Contains(rs[0].System, "[ASK_USER]") && strings.Contains(rs[0].System, "[DELIVER_RESULT:")
	}
	if rs := osrv.MainRequests(); len(rs) > 0 {
		firsts["dev (Codex)"] = rs[0].Has("You are dev") && rs[0].Has("[INVOKE:")
	}
	if rs := gsrv.MainRequests(); len(rs) > 0 {
		firsts["qa (Gemini CLI)"] = rs[0].Has("You are qa") && rs[0].Has("[DELIVER_RESULT:")
	}
	if len(firsts) != 3 {
		t.Errorf("first requests seen: %v, want one from each model", firsts)
	}
	for who, ok := range firsts {
		if !ok {
			t.Errorf("%s: its first request lacks the office's instructions", who)
		}
	}
}

// checkMixedRows: one question, two results, and the invocations
// po→dev and dev→qa, both completed.
func checkMixedRows(t *testing.T, o *liveOffice) {
	ctx := context.Background()
	var questions, results int
	_ = o.db.QueryRow(ctx, `select count(*) from user_questions where office_id = $1`, o.id).Scan(&questions)
	_ = o.db.QueryRow(ctx, `select count(*) from agent_results where office_id = $1`, o.id).Scan(&results)
	rows, err := o.db.Query(ctx, `select caller_agent_id::text, callee_agent_id::text, status from agent_invocations where office_id = $1 order by created_at`, o.id)
	if err != nil {
		t.Fatal(err)
	}
	var raw [][3]string
	for rows.Next() {
		var r [3]string
		if err := rows.Scan(&r[0], &r[1], &r[2]); err != nil {
			t.Fatal(err)
		}
		raw = append(raw, r)
	}
	rows.Close()
	var invs []string
	for _, r := range raw {
		invs = append(invs, o.agentName(r[0])+"→"+o.agentName(r[1])+" "+r[2])
	}
	if want := []string{"po→dev completed", "dev→qa completed"}; questions != 1 || results != 2 || strings.Join(invs, ", ") != strings.Join(want, ", ") {
		t.Errorf("%d questions, %d results, invocations %q; want 1, 2, %q", questions, results, invs, want)
	}
}

// liveOffice is `office-server serve` run by a test on a PostgreSQL
// database of its own, with one office from a YAML file, an admin token
// and a connection to the database.
type liveOffice struct {
	t     *testing.T
	p     *serverProc
	token string
	id    string // the office's id
	db    *pgx.Conn
}

// startLiveOffice starts bin serve with officeYAML on a new database; env
// adds to (and overrides) the test's environment.
func startLiveOffice(t *testing.T, bin, officeYAML string, env ...string) *liveOffice {
	t.Helper()
	dbURL := testenv.NewDatabase(t)
	officeFile := filepath.Join(t.TempDir(), "office.yaml")
	if err := os.WriteFile(officeFile, []byte(officeYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	o := &liveOffice{t: t, token: "e2e-token-0123456789abcdef"}
	env = append([]string{"LANG=C.UTF-8", "DATABASE_URL=" + dbURL, "OFFICE_ADMIN_TOKEN=" + o.token, "OFFICE_SECRETS_KEY=" + e2eSecretsKey}, env...)
	o.p = launchServer(t, bin, env, "--office", officeFile, "--data-dir", t.TempDir())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", o.p.stderr.String())
		}
	})
	o.p.waitHealthy(t)
	var offices []struct{ ID string }
	waitUntil(t, 60*time.Second, "the office", func() bool {
		return o.api("GET", "/api/offices", nil, &offices) == 200 && len(offices) == 1
	})
	o.id = offices[0].ID
	db, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	o.db = db
	return o
}

// api calls the server's API as the admin and decodes a 2xx answer into v;
// it returns the status (0 when the request failed).
func (o *liveOffice) api(method, path string, body, v any) int {
	o.t.Helper()
	return apiClient{t: o.t, base: o.p.base, token: o.token}.try(method, path, body, v)
}

// waitReady waits until n sessions are ready, failing at once when one
// needs attention, crashed or failed (with its detail).
func (o *liveOffice) waitReady(n int, d time.Duration) {
	o.t.Helper()
	waitUntil(o.t, d, fmt.Sprintf("%d agents ready", n), func() bool {
		var sessions []struct {
			AgentName string `json:"agent_name"`
			Status    string `json:"status"`
			Detail    string `json:"detail"`
		}
		o.api("GET", "/api/offices/"+o.id+"/sessions", nil, &sessions)
		ready := 0
		for _, s := range sessions {
			switch s.Status {
			case "needs_attention", "crashed", "failed":
				o.t.Fatalf("agent %s is %s: %s", s.AgentName, s.Status, s.Detail)
			case "ready":
				ready++
			}
		}
		return ready == n
	})
}

// addMember makes a user and a member of the office; it returns the id.
func (o *liveOffice) addMember(id, email string) string {
	mustExec(o.t, o.db, `insert into auth.users (id, email) values ($1, $2)`, id, email)
	mustExec(o.t, o.db, `insert into office_members (office_id, user_id) values ($1, $2)`, o.id, id)
	return id
}

// post sends a person's message to an agent through the API.
func (o *liveOffice) post(agent, member, text string) {
	o.t.Helper()
	if st := o.api("POST", "/api/offices/"+o.id+"/messages", map[string]string{"agent": agent, "content": text, "user_id": member}, nil); st != 201 && st != 200 {
		o.t.Fatalf("post message to %s: %d", agent, st)
	}
}

// agentName is the name of the office's agent with id (the id when none).
func (o *liveOffice) agentName(id string) string {
	var name string
	if err := o.db.QueryRow(context.Background(), `select name from office_agents where id = $1`, id).Scan(&name); err != nil {
		return id
	}
	return name
}
