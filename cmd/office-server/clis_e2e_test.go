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

	"github.com/office-server/office-server/internal/openaitest"
	"github.com/office-server/office-server/internal/testenv"
)

// TestServeCodexAndQwen runs the built `office-server serve` on PostgreSQL
// with an office of a real Codex agent (kind codex, po) and a real Qwen
// Code agent (kind qwen, dev), their model a scripted OpenAI-compatible
// server: each model's first request carries the office's instructions;
// po's reply to a person's message is far taller than its screen and holds
// one [ASK_USER] — one question row; the member's answer reaches po once,
// po's INVOKE reaches dev once, dev's result (read from Qwen Code's chat
// recording) reaches po once. Both start from a new user's HOME (only
// the provider settings), po's folder a git checkout (the server trusts
// it for Codex); the person's config files get nothing of the office's.
func TestServeCodexAndQwen(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs Codex and Qwen Code")
	}
	codex, qwen := testenv.CLIBin(t, "codex"), testenv.CLIBin(t, "qwen")
	bin := buildServer(t)
	srv := codexQwenModel(t)
	dbURL := testenv.NewDatabase(t)
	work := t.TempDir()
	dirs := []string{filepath.Join(work, "po"), filepath.Join(work, "dev")}
	codexHome, qwenHome := t.TempDir(), t.TempDir()
	if err := srv.PrepareCodex(codexHome); err != nil {
		t.Fatal(err)
	}
	if err := openaitest.PrepareQwen(qwenHome); err != nil {
		t.Fatal(err)
	}
	testenv.GitInit(t, dirs[0]) // po's folder: Codex would ask whether to trust it
	codexConfig := testenv.ReadPersonFile(t, filepath.Join(codexHome, ".codex", "config.toml"))
	officeFile := codexQwenOffice(t, codex, qwen, dirs, codexHome, qwenHome, srv)
	const token = "e2e-token-0123456789abcdef"
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8", "DATABASE_URL=" + dbURL, "OFFICE_ADMIN_TOKEN=" + token, "OFFICE_SECRETS_KEY=" + e2eSecretsKey}
	c := startServe(t, bin, officeFile, env, token, func() {
		for _, r := range srv.Requests() {
			t.Logf("model request %d %s main=%v: %.120q", r.Seq, r.Path, r.Main, r.LastUserText())
		}
	})
	officeID := c.waitReady(2, 120*time.Second, "needs_attention", "crashed", "failed")
	api, wait := c.api, c.wait

	ctx := context.Background()
	member := "00000000-0000-0000-0000-00000000e2e1"
	db := memberDB(t, dbURL, officeID, member, "member@example.com")
	if st := api("POST", "/api/offices/"+officeID+"/messages", map[string]string{"agent": "po", "content": "Please start the login feature.", "user_id": member}, nil); st != 201 && st != 200 {
		t.Fatalf("post message: %d", st)
	}
	var qID string
	wait("po's question row", 120*time.Second, func() bool {
		return db.QueryRow(ctx, `select id::text from user_questions where office_id = $1`, officeID).Scan(&qID) == nil
	})
	answerWithRLS(t, db, member, qID, "SSO")
	count := func(agent, text string) int {
		n := 0
		for _, r := range srv.MainRequests() {
			if r.Has("You are "+agent) && strings.Contains(r.LastUserText(), text) {
				n++
			}
		}
		return n
	}
	wait("dev's result to reach po", 180*time.Second, func() bool { return count("po", "Result from dev") > 0 })
	time.Sleep(2 * time.Second) // anything acted on twice would show by now
	checkOnceWithInstructions(t, srv)
	checkQwenRecordingAndRows(t, db, officeID, qwenHome)

	// The server stops its agents, and nothing they started is left.
	c.stop()
	time.Sleep(time.Second)
	for _, dir := range []string{codexHome, qwenHome, work} {
		if left := processesMentioning(dir); len(left) > 0 {
			t.Errorf("processes left running from %s: %q", dir, left)
		}
	}
	codexConfig.Kept(t, "[projects", "trust_level")
	absent(t, filepath.Join(codexHome, ".codex", "AGENTS.md")) // the instructions go as a -c override
	noSecurity(t, filepath.Join(qwenHome, ".qwen", "settings.json"))
}

// codexQwenModel is the model of po (Codex) and dev (Qwen Code): po's
// reply to the person is far taller than the screen and asks one
// question; the answer makes po invoke dev, who delivers.
func codexQwenModel(t *testing.T) *openaitest.Server {
	srv := openaitest.New(t)
	srv.Side(openaitest.QwenSide)
	var long strings.Builder
	long.WriteString("Before building anything I need one decision.\n")
	for i := 1; i <= 80; i++ {
		fmt.Fprintf(&long, "Consideration %d: a line of a long analysis, far taller than the terminal.\n", i)
	}
	long.WriteString("[ASK_USER]\nquestion: Which login method?\ntype: selection\noptions: [\"email\", \"SSO\"]\n[/ASK_USER]")
	srv.Reply(func(r openaitest.Request) openaitest.Response {
		u := r.LastUserText()
		switch {
		case r.Has("You are po") && strings.Contains(u, "[OFFICE] Result from dev"):
			return openaitest.Response{Text: "Received, thanks."}
		case r.Has("You are po") && strings.Contains(u, "Answer to question"):
			return openaitest.Response{Text: "[INVOKE:dev]\nImplement SSO login.\n[/INVOKE:dev]"}
		case r.Has("You are po"):
			return openaitest.Response{Text: long.String()}
		case r.Has("You are dev") && strings.Contains(u, "[OFFICE] Task "):
			return openaitest.Response{Text: "[DELIVER_RESULT:po]\ntype: markdown\ncontent: Done: SSO login.\n[/DELIVER_RESULT:po]"}
		}
		return openaitest.Response{Text: "OK"}
	})
	return srv
}

// codexQwenOffice writes the office of po (Codex) and dev (Qwen Code)
// and returns its path.
func codexQwenOffice(t *testing.T, codex, qwen string, dirs []string, codexHome, qwenHome string, srv *openaitest.Server) string {
	officeFile := filepath.Join(t.TempDir(), "office.yaml")
	yaml := fmt.Sprintf(`office:
  name: CLI office
agents:
  - name: po
    role: Product owner
    allowed_actions: [ask_user, invoke]
    launch: {kind: codex, command: %q, dir: %q, env: {CODEX_HOME: %q, OPENAITEST_KEY: %q}}
  - name: dev
    role: Developer
    allowed_actions: [deliver_result]
    launch:
      kind: qwen
      command: %q
      dir: %q
      env: {HOME: %q, OPENAI_API_KEY: %q, OPENAI_BASE_URL: %q, OPENAI_MODEL: %q}
`, codex, dirs[0], filepath.Join(codexHome, ".codex"), srv.Key, qwen, dirs[1], qwenHome, srv.Key, srv.URL, openaitest.Model)
	if err := os.WriteFile(officeFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return officeFile
}

// checkOnceWithInstructions: each model got each step once, and each
// agent's first request carries the protocol instructions.
func checkOnceWithInstructions(t *testing.T, srv *openaitest.Server) {
	count := func(agent, text string) int {
		n := 0
		for _, r := range srv.MainRequests() {
			if r.Has("You are "+agent) && strings.Contains(r.LastUserText(), text) {
				n++
			}
		}
		return n
	}
	for _, c := range []struct{ agent, text string }{{"po", "Please start the login feature."}, {"po", "Answer to question"}, {"dev", "[OFFICE] Task "}, {"po", "Result from dev"}} {
		if n := count(c.agent, c.text); n != 1 {
			t.Errorf("%s's model got %q %d times, want once", c.agent, c.text, n)
		}
	}
	for _, agent := range []string{"po", "dev"} {
		for _, r := range srv.MainRequests() {
			if r.Has("You are " + agent) {
				if !r.Has("[ASK_USER]") || !r.Has("[DELIVER_RESULT:") {
					t.Errorf("%s's first request lacks the protocol instructions", agent)
				}
				break
			}
		}
	}
}

// checkQwenRecordingAndRows: dev's words came from its chat recording,
// named by the office's conversation id, and the office recorded a resume
// cursor there; one question, one invocation, completed.
func checkQwenRecordingAndRows(t *testing.T, db *pgx.Conn, officeID, qwenHome string) {
	ctx := context.Background()
	var devConv string
	var cursors int
	_ = db.QueryRow(ctx, `select s.agent_session_id from agent_sessions s join office_agents a on a.id = s.agent_id where a.office_id = $1 and a.name = 'dev'`, officeID).Scan(&devConv)
	_ = db.QueryRow(ctx, `select count(*) from office_events where office_id = $1 and kind = 'transcript.cursor' and payload->>'conversation_id' = $2`, officeID, devConv).Scan(&cursors)
	if m, _ := filepath.Glob(filepath.Join(qwenHome, ".qwen", "projects", "*", "chats", devConv+".jsonl")); devConv == "" || len(m) != 1 || cursors == 0 {
		t.Errorf("dev's conversation %q: recordings %q, %d cursors; want its chat recording and a cursor in it", devConv, m, cursors)
	}
	var questions, invocations int
	var invStatus string
	_ = db.QueryRow(ctx, `select count(*) from user_questions where office_id = $1`, officeID).Scan(&questions)
	_ = db.QueryRow(ctx, `select count(*), max(status) from agent_invocations where office_id = $1`, officeID).Scan(&invocations, &invStatus)
	if questions != 1 || invocations != 1 || invStatus != "completed" {
		t.Errorf("%d questions, %d invocations (%s); want 1, 1 completed", questions, invocations, invStatus)
	}
}

// processesMentioning returns the command lines of running processes that
// mention s (their executable or an argument).
func processesMentioning(s string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		if c := strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(c, s) {
			out = append(out, c)
		}
	}
	return out
}

// e2eSecretsKey is the OFFICE_SECRETS_KEY of the tests' servers on
// PostgreSQL: the literal values of their agents' launch env are stored
// sealed with it.
const e2eSecretsKey = "5ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7"
