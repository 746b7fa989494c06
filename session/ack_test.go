package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCommandTypedAgainAfterCrash: a command agent has received a line
// when its terminal's input queue is empty after the Enter. A line typed
// into an agent that never read it and died was not received: it is typed
// again into the restarted process, and reaches it exactly once. With
// echo on, the terminal shows the line before anyone reads it: that
// output is no sign either, once the process has ended.
func TestCommandTypedAgainAfterCrash(t *testing.T) {
	for _, echo := range []string{"-echo", "echo"} {
		t.Run(echo, func(t *testing.T) { typedAgainAfterCrash(t, echo) })
	}
}

func typedAgainAfterCrash(t *testing.T, echo string) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "started-once")
	// First life: never reads, dies after 1 s. Second life: reads lines
	// and says what it got (with a final "." — a screen line that ends
	// with the typed text is taken for its echo behind a prompt).
	script := `if [ ! -e ` + marker + ` ]; then touch ` + marker + `; stty ` + echo + `; sleep 1; exit 1; fi
stty -echo; echo ready; while read -r l; do echo "got:$l."; done`
	r := newRecorder()
	m := newTestManager(t, r, Options{RestartBackoff: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := m.Start(ctx, Key{"o", "cmd"}, Spec{Kind: KindCommand, Command: "sh", Args: []string{"-c", script}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, "the task"); err != nil {
		t.Fatalf("Send: %v", err)
	}
	r.waitFor(t, "the line in the second life", 20*time.Second, func(_ []Status, ts []Text) bool {
		return strings.Contains(joinTexts(ts), "got:the task.")
	})
	time.Sleep(500 * time.Millisecond)
	_, ts := r.snapshot()
	if n := strings.Count(joinTexts(ts), "got:the task."); n != 1 {
		t.Errorf("the line reached the agent %d times, want once", n)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the first life never ran: %v", err)
	}
	if i := s.Info(); i.Restarts != 1 {
		t.Errorf("restarts = %d, want 1", i.Restarts)
	}
}

func joinTexts(ts []Text) string {
	var b strings.Builder
	for _, t := range ts {
		for _, l := range t.Lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
