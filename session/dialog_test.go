package session

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/anthropictest"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
)

// claudeDialog is a first-contact dialog of Claude Code: the
// ~/.claude.json that makes it show, text in it, the keys that answer it
// and the --permission-mode.
type claudeDialog struct {
	name   string
	config func(key, dir string) map[string]any
	want   string // in the dialog's text
	answer []string
	mode   string // --permission-mode
}

var claudeDialogs = []claudeDialog{
	{
		name: "folder trust",
		config: func(key, _ string) map[string]any {
			return map[string]any{"hasCompletedOnboarding": true,
				"customApiKeyResponses": map[string]any{"approved": []string{key[len(key)-20:]}, "rejected": []string{}}}
		},
		want:   "Yes, I trust this folder",
		answer: []string{"\x1b[B", "\r"}, // down to "Yes, I trust", Enter
	},
	{
		name: "API key approval",
		config: func(_, dir string) map[string]any {
			return map[string]any{"hasCompletedOnboarding": true,
				"projects": map[string]any{dir: map[string]any{"hasTrustDialogAccepted": true}}}
		},
		want:   "Do you want to use this API key?",
		answer: []string{"\x1b[A", "\r"}, // up to "Yes", Enter
	},
	{
		name: "bypass permissions confirmation",
		config: func(key, dir string) map[string]any {
			return map[string]any{"hasCompletedOnboarding": true,
				"customApiKeyResponses": map[string]any{"approved": []string{key[len(key)-20:]}, "rejected": []string{}},
				"projects":              map[string]any{dir: map[string]any{"hasTrustDialogAccepted": true}}}
		},
		mode:   "bypassPermissions",
		want:   "Bypass Permissions mode",
		answer: []string{"\x1b[B", "\r"}, // down to "Yes, I accept", Enter
	},
}

// TestClaudeDialogs runs the real Claude Code binary in homes the server
// did not prepare (a user's own configuration, as it is) so that it shows
// each first-contact dialog it has: the session says needs_attention with
// the dialog's text, nothing queued is typed into the dialog (the model
// gets no request), and once a person answers the dialog through the
// console's input, the queued message reaches the model, acknowledged.
func TestClaudeDialogs(t *testing.T) {
	bin := testenv.ClaudeBin(t)
	for _, tc := range claudeDialogs {
		t.Run(tc.name, func(t *testing.T) { runClaudeDialog(t, bin, tc) })
	}
}

func runClaudeDialog(t *testing.T, bin string, tc claudeDialog) {
	srv := anthropictest.New(t)
	srv.Enqueue(anthropictest.Response{Text: "hello back"})
	home := t.TempDir()
	dir := t.TempDir()
	b, _ := json.Marshal(tc.config(srv.Key, dir))
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	env := srv.Env(home)
	if tc.mode == "bypassPermissions" && os.Geteuid() == 0 {
		// Claude Code refuses bypass mode as root unless told it
		// runs in a sandbox (CI runs as root).
		env = append(env, "IS_SANDBOX=1")
	}
	r := newRecorder()
	m := newTestManager(t, r, Options{EnterDelay: 300 * time.Millisecond, StopGrace: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := m.Start(ctx, Key{"o", "a"}, Spec{Command: bin, Dir: dir, Home: home, Env: env, PermissionMode: tc.mode, Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "needs_attention", 60*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionNeedsAttention })
	if d := s.Info().Detail; !strings.Contains(d, tc.want) {
		t.Errorf("dialog text %q, want it to contain %q", d, tc.want)
	}
	sent := make(chan error, 1)
	go func() { sent <- s.Send(ctx, "first message after the dialog") }()
	time.Sleep(2 * time.Second)
	if n := len(srv.MainRequests()); n != 0 {
		t.Fatalf("%d model requests while the dialog was up: text was typed into it", n)
	}
	if st := s.Status(); st != office.SessionNeedsAttention {
		t.Fatalf("status %s while the dialog is up", st)
	}
	select {
	case err := <-sent:
		t.Fatalf("Send returned %v while the dialog was up", err)
	default:
	}
	for _, k := range tc.answer {
		if err := s.Input([]byte(k)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
	}
	select {
	case err := <-sent:
		if err != nil {
			t.Fatalf("Send after the dialog: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("message not acknowledged after the dialog; status %s; screen:\n%s", s.Status(), strings.Join(s.Screen(), "\n"))
	}
	req, err := srv.WaitMain(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := req.LastUserText(); got != "first message after the dialog" {
		t.Errorf("model got %q", got)
	}
}
