package session

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

// TestCommandApprovalDialog runs a command agent that answers a prompt
// with a tool-approval dialog drawn as Gemini CLI and Qwen Code draw theirs
// (a question, "● 1. Allow once"): once its screen is still the agent is
// needs_attention with the dialog's text, keys a person types answer it,
// and the turn then ends as usual. Text that only mentions choices is not
// a dialog.
func TestCommandApprovalDialog(t *testing.T) {
	checkGoroutines(t)
	script := `printf 'ready> '; read a
printf 'Shell mkdir made-by-agent\nAllow execution of: '"'"'mkdir made-by-agent'"'"'?\n\n● 1. Allow once\n  2. Allow always\n  3. No, suggest changes (esc)\n'
read b
printf 'chose %s\nready> ' "$b"; read c`
	r := newRecorder()
	m := newTestManager(t, r, Options{StopGrace: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := Key{"office", "approval"}
	s, err := m.Start(ctx, key, Spec{Kind: KindCommand, Command: "bash", Args: []string{"-c", script}, PromptPattern: `^ready>`, Quiescence: 300 * time.Millisecond, Cols: 80, Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 20*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	if err := s.Send(ctx, "make the folder"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "needs attention", 20*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionNeedsAttention })
	if d := s.Info().Detail; !strings.Contains(d, "Allow execution of: 'mkdir made-by-agent'?") || !strings.Contains(d, "1. Allow once") {
		t.Errorf("detail %q, want the dialog's question and choices", d)
	}
	if err := s.Input([]byte("1\r")); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "turn end", 20*time.Second, func(st []Status, ts []Text) bool {
		return lastStatus(st) == office.SessionReady && strings.Contains(strings.Join(r.lines(), "\n"), "chose 1")
	})
	if d := s.Info().Detail; d != "" {
		t.Errorf("detail %q after the dialog was answered, want none", d)
	}
	if err := m.Stop(ctx, key); err != nil {
		t.Fatal(err)
	}

	for _, rows := range [][]string{
		{"Pick one of these?", "Options: 1. Yes is fine"},
		{"1. Allow once", "no question above"},
	} {
		if got := approvalDialog(rows, nil); got != "" {
			t.Errorf("approvalDialog(%q) = %q, want none", rows, got)
		}
	}
}
