package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const token = "e2e-token-0123456789abcdef"
	cmd := exec.Command(bin, "serve", "--office", officeFile, "--data-dir", t.TempDir(), "--addr", addr)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8", "DATABASE_URL=" + dbURL, "OFFICE_ADMIN_TOKEN=" + token, "OFFICE_SECRETS_KEY=" + e2eSecretsKey}
	cmd.Dir = t.TempDir()
	stderr := &lockedBuf{}
	cmd.Stdout, cmd.Stderr = &lockedBuf{}, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // a killed test leaves no server behind
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("server log:\n%s", stderr.String())
			for _, r := range srv.Requests() {
				t.Logf("model request %d %s main=%v: %.120q", r.Seq, r.Path, r.Main, r.LastUserText())
			}
		}
	})
	api := func(method, path string, body, v any) int {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, "http://"+addr+path, rd)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if v != nil && res.StatusCode < 300 {
			if err := json.Unmarshal(b, v); err != nil {
				t.Fatalf("%s %s: %v: %s", method, path, err, b)
			}
		}
		return res.StatusCode
	}
	wait := func(what string, d time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	var offices []struct{ ID string }
	wait("the API", 60*time.Second, func() bool { return api("GET", "/api/offices", nil, &offices) == 200 && len(offices) == 1 })
	officeID := offices[0].ID
	wait("both agents ready", 120*time.Second, func() bool {
		var sessions []struct {
			AgentName string `json:"agent_name"`
			Status    string `json:"status"`
			Detail    string `json:"detail"`
		}
		api("GET", "/api/offices/"+officeID+"/sessions", nil, &sessions)
		ready := 0
		for _, s := range sessions {
			if s.Status == "needs_attention" || s.Status == "crashed" || s.Status == "failed" {
				t.Fatalf("agent %s is %s: %s", s.AgentName, s.Status, s.Detail)
			}
			if s.Status == "ready" {
				ready++
			}
		}
		return ready == 2
	})

	ctx := context.Background()
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	member := "00000000-0000-0000-0000-00000000e2e1"
	mustExec(t, db, `insert into auth.users (id, email) values ($1, 'member@example.com')`, member)
	mustExec(t, db, `insert into office_members (office_id, user_id) values ($1, $2)`, officeID, member)
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
	// dev's words came from its chat recording, named by the office's
	// conversation id, and the office recorded a resume cursor there.
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

	// The server stops its agents, and nothing they started is left.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30s of SIGTERM")
	}
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
