package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/internal/geminitest"
	"github.com/office-server/office-server/internal/openaitest"
	"github.com/office-server/office-server/internal/testenv"
)

// TestServeGeminiAndCodexPermission runs the built `office-server serve`
// on PostgreSQL with a real Gemini CLI agent (kind gemini, qa) and a real
// Codex agent (kind codex, ops, approval policy on-request), their models
// scripted servers: qa's first request carries the office's instructions;
// qa's reply to a person's message is far taller than its terminal (the
// CLI clears and repaints it) and holds one [ASK_USER] — one question row,
// whose answer reaches qa once; ops's model asks to run a command outside
// its sandbox — Codex's PermissionRequest hook makes it a permission
// question row, a member's answer "allow once" (SQL under RLS) runs it and
// its output reaches the model once. Both start from a new user's HOME
// (only the provider settings), ops's folder a git checkout; the server
// keeps both trust dialogs away without writing the person's files.
func TestServeGeminiAndCodexPermission(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the Gemini CLI and Codex")
	}
	gemini, codex := testenv.CLIBin(t, "gemini"), testenv.CLIBin(t, "codex")
	bin := buildServer(t)
	gsrv, osrv := geminitest.New(t), openaitest.New(t)
	geminiCodexModels(gsrv, osrv)
	dbURL := testenv.NewDatabase(t)
	work := t.TempDir()
	dirs := []string{filepath.Join(work, "qa"), filepath.Join(work, "ops")}
	geminiHome, codexHome := t.TempDir(), t.TempDir()
	if err := geminitest.Prepare(geminiHome); err != nil {
		t.Fatal(err)
	}
	if err := osrv.PrepareCodex(codexHome); err != nil {
		t.Fatal(err)
	}
	testenv.GitInit(t, dirs[1]) // ops's folder: Codex would ask whether to trust it
	geminiSettings := testenv.ReadPersonFile(t, filepath.Join(geminiHome, ".gemini", "settings.json"))
	codexConfig := testenv.ReadPersonFile(t, filepath.Join(codexHome, ".codex", "config.toml"))
	officeFile := geminiCodexOffice(t, gemini, codex, dirs, geminiHome, codexHome, gsrv, osrv)
	const token = "e2e-token-0123456789abcdef"
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8", "DATABASE_URL=" + dbURL, "OFFICE_ADMIN_TOKEN=" + token, "OFFICE_SECRETS_KEY=" + e2eSecretsKey}
	c := startServe(t, bin, officeFile, env, token, func() { logGeminiCodex(t, gsrv, osrv, geminiHome) })
	officeID := c.waitReady(2, 120*time.Second, "crashed", "failed")
	api, wait := c.api, c.wait
	ctx := context.Background()
	member := "00000000-0000-0000-0000-00000000e2e2"
	db := memberDB(t, dbURL, officeID, member, "member2@example.com")
	post := func(agent, text string) {
		t.Helper()
		if st := api("POST", "/api/offices/"+officeID+"/messages", map[string]string{"agent": agent, "content": text, "user_id": member}, nil); st != 201 && st != 200 {
			t.Fatalf("post message: %d", st)
		}
	}
	question := func(category string) (id, text string) {
		_ = db.QueryRow(ctx, `select id::text, question from user_questions where office_id = $1 and coalesce(category, '') = $2`, officeID, category).Scan(&id, &text)
		return id, text
	}

	// qa: a long repainted reply with one [ASK_USER] is one question.
	post("qa", "Please review the release.")
	var qID string
	wait("qa's question row", 60*time.Second, func() bool { qID, _ = question(""); return qID != "" })
	answerWithRLS(t, db, member, qID, "yes")
	wait("the answer to reach qa", 120*time.Second, func() bool { return geminiCount(gsrv, "Answer to question") > 0 })

	// ops: Codex's permission request is a question; allowed by a member.
	post("ops", "Run the deploy check.")
	var pID, pText string
	wait("ops's permission row", 120*time.Second, func() bool { pID, pText = question("permission"); return pID != "" })
	if !strings.Contains(pText, "ops") || !strings.Contains(pText, "mkdir -p checked && echo deploy-check-ok") {
		t.Errorf("permission question %q: want ops and the command", pText)
	}
	answerWithRLS(t, db, member, pID, "allow once")
	outputs := func() int {
		n := 0
		for _, r := range osrv.MainRequests() {
			if lastInput(r.Body) == "function_call_output" && strings.Contains(strings.Join(r.FunctionOutputs(), "\n"), "deploy-check-ok") {
				n++
			}
		}
		return n
	}
	wait("the command's output to reach ops's model", 120*time.Second, func() bool { return outputs() > 0 })
	if _, err := os.Stat(filepath.Join(dirs[1], "checked")); err != nil {
		t.Errorf("the allowed command did not run: %v", err)
	}
	geminiSettings.Same(t)
	codexConfig.Kept(t, "[projects", "trust_level")
	absent(t, filepath.Join(codexHome, ".codex", "AGENTS.md")) // the instructions go as a -c override

	time.Sleep(3 * time.Second) // anything acted on twice would show by now
	checkGeminiCodexOnce(t, db, officeID, gsrv, osrv, outputs)
}

// logGeminiCodex logs what both models were asked and the Gemini CLI's
// files, for a failed test.
func logGeminiCodex(t *testing.T, gsrv *geminitest.Server, osrv *openaitest.Server, geminiHome string) {
	t.Logf("gemini: other requests %q", gsrv.Unknown())
	for _, r := range gsrv.Requests() {
		t.Logf("gemini request %d %s main=%v: %.200q", r.Seq, r.Path, r.Main, r.LastUserText())
	}
	_ = filepath.WalkDir(filepath.Join(geminiHome, ".gemini"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			t.Logf("%s:\n%.1500s", p, b)
		}
		return nil
	})
	for _, r := range osrv.Requests() {
		t.Logf("codex request %d main=%v: %.120q", r.Seq, r.Main, r.LastUserText())
	}
}

// geminiCodexModels scripts qa's model (Gemini: a reply taller than the
// terminal, repainted, with one [ASK_USER]) and ops's (Codex: a command
// outside its sandbox, then thanks for its output).
func geminiCodexModels(gsrv *geminitest.Server, osrv *openaitest.Server) {
	var long strings.Builder
	long.WriteString("Before the release I need one decision.\n")
	for i := 1; i <= 80; i++ {
		fmt.Fprintf(&long, "Check %d: line %d of a long review, taller than the terminal (%d).\n", i, i, i*i)
	}
	long.WriteString("[ASK_USER]\nquestion: Ship on Friday?\ntype: confirmation\n[/ASK_USER]")
	gsrv.Reply(func(r geminitest.Request) geminitest.Response {
		if strings.Contains(r.LastUserText(), "Answer to question") {
			return geminitest.Response{Text: "Thanks, noted."}
		}
		return geminitest.Response{Text: long.String(), Delay: 3 * time.Millisecond}
	})
	osrv.Reply(func(r openaitest.Request) openaitest.Response {
		if lastInput(r.Body) == "function_call_output" {
			return openaitest.Response{Text: "The check passed."}
		}
		args, _ := json.Marshal(map[string]any{"cmd": "mkdir -p checked && echo deploy-check-ok", "justification": "run the deploy check", "sandbox_permissions": "require_escalated"})
		return openaitest.Response{Calls: []openaitest.Call{{Name: "exec_command", Arguments: string(args)}}}
	})
}

// geminiCodexOffice writes the office of qa (Gemini) and ops (Codex) and
// returns its path.
func geminiCodexOffice(t *testing.T, gemini, codex string, dirs []string, geminiHome, codexHome string, gsrv *geminitest.Server, osrv *openaitest.Server) string {
	officeFile := filepath.Join(t.TempDir(), "office.yaml")
	yaml := fmt.Sprintf(`office:
  name: Gemini and Codex office
agents:
  - name: qa
    role: Reviewer
    allowed_actions: [ask_user]
    launch: {kind: gemini, command: %q, dir: %q, env: {HOME: %q, GOOGLE_GEMINI_BASE_URL: %q, GEMINI_API_KEY: %q}}
  - name: ops
    role: Operator
    allowed_actions: [ask_user]
    launch: {kind: codex, command: %q, dir: %q, args: [--ask-for-approval, on-request], env: {CODEX_HOME: %q, OPENAITEST_KEY: %q}}
`, gemini, dirs[0], geminiHome, gsrv.URL, gsrv.Key, codex, dirs[1], filepath.Join(codexHome, ".codex"), osrv.Key)
	if err := os.WriteFile(officeFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return officeFile
}

// checkGeminiCodexOnce: one question and one permission request; each
// model got its answer once; each first request carries the instructions.
func checkGeminiCodexOnce(t *testing.T, db *pgx.Conn, officeID string, gsrv *geminitest.Server, osrv *openaitest.Server, outputs func() int) {
	ctx := context.Background()
	var questions, perms int
	_ = db.QueryRow(ctx, `select count(*) filter (where coalesce(category, '') <> 'permission'), count(*) filter (where category = 'permission') from user_questions where office_id = $1`, officeID).Scan(&questions, &perms)
	if questions != 1 || perms != 1 {
		t.Errorf("%d questions and %d permission requests, want 1 and 1", questions, perms)
	}
	if n := geminiCount(gsrv, "Answer to question"); n != 1 {
		t.Errorf("qa's model got the answer %d times, want once", n)
	}
	if n := outputs(); n != 1 {
		t.Errorf("ops's model got the command's output %d times, want once", n)
	}
	if rs := gsrv.MainRequests(); len(rs) == 0 || !rs[0].Has("[ASK_USER]") || !rs[0].Has("You are qa") {
		t.Error("qa's first request lacks the office's instructions")
	}
	if rs := osrv.MainRequests(); len(rs) == 0 || !rs[0].Has("[ASK_USER]") {
		t.Error("ops's first request lacks the office's instructions")
	}
}

// geminiCount counts the main requests whose last user turn mentions text.
func geminiCount(s *geminitest.Server, text string) int {
	n := 0
	for _, r := range s.MainRequests() {
		if strings.Contains(r.LastUserText(), text) {
			n++
		}
	}
	return n
}

// lastInput is the type of the last input item of a Responses API request.
func lastInput(body []byte) string {
	var b struct {
		Input []struct {
			Type string `json:"type"`
		} `json:"input"`
	}
	_ = json.Unmarshal(body, &b)
	if len(b.Input) == 0 {
		return ""
	}
	return b.Input[len(b.Input)-1].Type
}
