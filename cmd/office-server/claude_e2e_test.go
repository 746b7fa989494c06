package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/internal/anthropictest"
	"github.com/office-server/office-server/internal/testenv"
)

// TestServeClaudeFirstContact runs the built `office-server serve` with an
// office of two real Claude Code agents (their model is a scripted Messages
// API server) on PostgreSQL, as a new user would, from four homes: one
// where claude was prepared for these folders, one where it was used but
// never in these folders, one where it never ran (key in the environment),
// and one where the user logged in (no key; credentials in ~/.claude). In
// each, the server prepares Claude Code itself: a person's message reaches
// po's model, po's question becomes a row, a member's answer (SQL UPDATE
// under RLS) reaches po once, po's INVOKE reaches dev, dev's result reaches
// po; the user's own ~/.claude.json is left as it was.
func TestServeClaudeFirstContact(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs Claude Code")
	}
	claude := testenv.ClaudeBin(t)
	bin := buildServer(t)
	homes := []struct {
		name   string
		login  bool // no API key: a logged-in claude
		prep   func(t *testing.T, home, key string, dirs []string)
		claude bool // ~/.claude.json exists before
	}{
		{name: "prepared", claude: true, prep: func(t *testing.T, home, key string, dirs []string) {
			projects := map[string]any{}
			for _, d := range dirs {
				projects[d] = map[string]any{"hasTrustDialogAccepted": true}
			}
			writeJSON(t, filepath.Join(home, ".claude.json"), map[string]any{"hasCompletedOnboarding": true, "theme": "dark",
				"customApiKeyResponses": map[string]any{"approved": []string{key[len(key)-20:]}, "rejected": []string{}}, "projects": projects})
		}},
		{name: "used elsewhere", claude: true, prep: func(t *testing.T, home, key string, _ []string) {
			writeJSON(t, filepath.Join(home, ".claude.json"), map[string]any{"hasCompletedOnboarding": true, "theme": "light",
				"customApiKeyResponses": map[string]any{"approved": []string{key[len(key)-20:]}, "rejected": []string{}},
				"projects":              map[string]any{"/somewhere/else": map[string]any{"hasTrustDialogAccepted": true}}})
		}},
		{name: "never run", prep: func(*testing.T, string, string, []string) {}},
		{name: "logged in", login: true, claude: true, prep: func(t *testing.T, home, key string, _ []string) {
			writeJSON(t, filepath.Join(home, ".claude.json"), map[string]any{"hasCompletedOnboarding": true,
				"oauthAccount": map[string]any{"emailAddress": "user@example.com", "accountUuid": "00000000-0000-0000-0000-0000000000aa"}})
			writeJSON(t, filepath.Join(home, ".claude", ".credentials.json"), map[string]any{"claudeAiOauth": map[string]any{
				"accessToken": key, "refreshToken": "sk-ant-ort01-test", "expiresAt": time.Now().Add(10 * time.Hour).UnixMilli(),
				"scopes": []string{"user:inference", "user:profile"}, "subscriptionType": "max"}})
		}},
	}
	for _, h := range homes {
		t.Run(h.name, func(t *testing.T) {
			runClaudeOffice(t, bin, claude, h.login, h.claude, h.prep)
		})
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// officeModel scripts po and dev: po asks on a person's message, invokes
// dev on the answer, and thanks for the result; dev delivers.
func officeModel(r anthropictest.Request) anthropictest.Response {
	u := r.LastUserText()
	switch {
	case strings.Contains(r.System, "You are po"):
		switch {
		case strings.Contains(u, "Message from a person"):
			return anthropictest.Response{Text: "One question first.\n\n[ASK_USER]\nquestion: Which login method?\ntype: selection\noptions: [\"email\", \"SSO\"]\n[/ASK_USER]"}
		case strings.Contains(u, "Answer to question"):
			return anthropictest.Response{Text: "[INVOKE:dev]\nImplement SSO login.\n[/INVOKE:dev]"}
		case strings.Contains(u, "Result from dev"):
			return anthropictest.Response{Text: "Received, thanks."}
		}
	case strings.Contains(r.System, "You are dev"):
		if strings.Contains(u, "[OFFICE] Task ") {
			return anthropictest.Response{Text: "[DELIVER_RESULT:po]\ntype: markdown\ncontent: Done: SSO login.\n[/DELIVER_RESULT:po]"}
		}
	}
	return anthropictest.Response{Text: "OK"}
}

func runClaudeOffice(t *testing.T, bin, claude string, login, hadConfig bool, prep func(t *testing.T, home, key string, dirs []string)) {
	srv := anthropictest.New(t)
	srv.Reply(officeModel)
	dbURL := testenv.NewDatabase(t)
	home := t.TempDir()
	// The agents' folders sit inside a git checkout, as they do for people
	// who run the server from their repository.
	repo := t.TempDir()
	if err := os.Mkdir(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	dirs := []string{filepath.Join(repo, "work", "po"), filepath.Join(repo, "work", "dev")}
	prep(t, home, srv.Key, dirs)
	before, _ := os.ReadFile(filepath.Join(home, ".claude.json"))

	const token = "e2e-token-0123456789abcdef"
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8",
		"DATABASE_URL=" + dbURL, "OFFICE_ADMIN_TOKEN=" + token,
		"ANTHROPIC_BASE_URL=" + srv.URL, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
	if !login {
		env = append(env, "ANTHROPIC_API_KEY="+srv.Key)
	}
	c := startServe(t, bin, claudeOfficeFile(t, claude, dirs), env, token, nil)
	officeID := c.waitReady(2, 90*time.Second, "needs_attention", "crashed", "failed")

	ctx := context.Background()
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	member := "00000000-0000-0000-0000-00000000e2e0"
	mustExec(t, db, `insert into auth.users (id, email) values ($1, 'member@example.com')`, member)
	mustExec(t, db, `insert into office_members (office_id, user_id) values ($1, $2)`, officeID, member)

	if st := c.api("POST", "/api/offices/"+officeID+"/messages", map[string]string{"agent": "po", "content": "Please start the login feature.", "user_id": member}, nil); st != 201 && st != 200 {
		t.Fatalf("post message: %d", st)
	}
	var qID string
	c.wait("po's question row", 90*time.Second, func() bool {
		return db.QueryRow(ctx, `select id::text from user_questions where office_id = $1`, officeID).Scan(&qID) == nil
	})
	var msgStatus string
	if err := db.QueryRow(ctx, `select status from user_messages where office_id = $1`, officeID).Scan(&msgStatus); err != nil || msgStatus != "delivered" {
		t.Errorf("person's message: status %q (%v), want delivered once po's model had it", msgStatus, err)
	}
	answerWithRLS(t, db, member, qID, "SSO")
	c.wait("dev's result to reach po", 120*time.Second, func() bool {
		for _, r := range srv.MainRequests() {
			if strings.Contains(r.System, "You are po") && strings.Contains(r.LastUserText(), "Result from dev") {
				return true
			}
		}
		return false
	})
	checkClaudeRound(t, srv, db, officeID, qID, login)
	after, _ := os.ReadFile(filepath.Join(home, ".claude.json"))
	if !bytes.Equal(before, after) {
		t.Errorf("the user's ~/.claude.json changed:\nbefore %s\nafter  %s", before, after)
	}
	if _, err := os.Stat(filepath.Join(home, ".claude.json")); hadConfig == os.IsNotExist(err) {
		t.Errorf("~/.claude.json existence changed (had %v): %v", hadConfig, err)
	}
	c.stop()
	checkStoppedRows(t, db, officeID, 2)
}

// claudeOfficeFile writes the office of po and dev, two Claude Code
// agents in dirs, and returns its path.
func claudeOfficeFile(t *testing.T, claude string, dirs []string) string {
	officeFile := filepath.Join(t.TempDir(), "office.yaml")
	yaml := fmt.Sprintf(`office:
  name: Claude office
agents:
  - name: po
    role: Product owner
    allowed_actions: [ask_user, invoke]
    launch: {kind: claude, command: %[1]q, dir: %[2]q}
  - name: dev
    role: Developer
    allowed_actions: [deliver_result, ask_user]
    launch: {kind: claude, command: %[1]q, dir: %[3]q}
`, claude, dirs[0], dirs[1])
	if err := os.WriteFile(officeFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return officeFile
}

// checkClaudeRound: each model got each step once; one question, one
// invocation completed, the question delivered; a logged-in agent used
// the user's credentials.
func checkClaudeRound(t *testing.T, srv *anthropictest.Server, db *pgx.Conn, officeID, qID string, login bool) {
	ctx := context.Background()
	count := func(agent, text string) int {
		n := 0
		for _, r := range srv.MainRequests() {
			if strings.Contains(r.System, "You are "+agent) && strings.Contains(r.LastUserText(), text) {
				n++
			}
		}
		return n
	}
	for _, c := range []struct {
		agent, text string
	}{{"po", "Message from a person"}, {"po", "Answer to question"}, {"dev", "[OFFICE] Task "}, {"po", "Result from dev"}} {
		if n := count(c.agent, c.text); n != 1 {
			t.Errorf("%s's model got %q %d times, want once", c.agent, c.text, n)
		}
	}
	var questions, invocations int
	var invStatus string
	_ = db.QueryRow(ctx, `select count(*) from user_questions where office_id = $1`, officeID).Scan(&questions)
	_ = db.QueryRow(ctx, `select count(*), max(status) from agent_invocations where office_id = $1`, officeID).Scan(&invocations, &invStatus)
	if questions != 1 || invocations != 1 || invStatus != "completed" {
		t.Errorf("%d questions, %d invocations (%s); want 1, 1 completed", questions, invocations, invStatus)
	}
	var qStatus string
	_ = db.QueryRow(ctx, `select status from user_questions where id = $1`, qID).Scan(&qStatus)
	if qStatus != "delivered" {
		t.Errorf("question %s, want delivered", qStatus)
	}
	if login {
		for _, r := range srv.MainRequests() {
			if r.Header.Get("Authorization") != "Bearer "+srv.Key {
				t.Errorf("logged-in agent did not use the user's credentials: auth %q", r.Header.Get("Authorization"))
				break
			}
		}
	}
}

func mustExec(t *testing.T, db *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// answerWithRLS answers a question as the frontend does: an UPDATE under
// the member's JWT claims and the authenticated role (RLS applies).
func answerWithRLS(t *testing.T, db *pgx.Conn, member, questionID, response string) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	claims := fmt.Sprintf(`{"sub":%q,"role":"authenticated","aud":"authenticated"}`, member)
	if _, err := tx.Exec(ctx, `select set_config('request.jwt.claims', $1, true)`, claims); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "set local role authenticated"); err != nil {
		t.Fatal(err)
	}
	tag, err := tx.Exec(ctx, `select public.answer_question($2, $1)`, response, questionID)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("answer as member: %v (%d rows)", err, tag.RowsAffected())
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
