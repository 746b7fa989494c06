package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

// TestClaudeIdleWakesOnTranscript: an idle Claude Code session sets no
// timer, yet an entry written to its transcript while it is ready (no
// terminal output) is read within milliseconds: the file is watched. With
// the 500 ms poll most of them took longer than the bound.
func TestClaudeIdleWakesOnTranscript(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{})
	ctx := context.Background()
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "work")
	s, err := m.Start(ctx, Key{"o", "watch"}, Spec{Command: script(t, fakeClaude), Home: home, Dir: dir, Env: []string{"ANTHROPIC_API_KEY=sk-test-0123456789abcdefghijklmnop"}})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 10*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	if err := s.Send(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "turn", 10*time.Second, func(st []Status, ts []Text) bool {
		return lastStatus(st) == office.SessionReady && len(turns(ts)) == 1
	})
	path := s.Info().Transcript
	time.Sleep(300 * time.Millisecond)
	slow := 0
	for i := 1; i <= 5; i++ {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		fmt.Fprintf(f, `{"type":"assistant","uuid":"late%d","isSidechain":false,"message":{"role":"assistant","content":[{"type":"text","text":"late %d"}],"stop_reason":"end_turn"}}`+"\n", i, i)
		f.Close()
		r.waitFor(t, "late entry", 5*time.Second, func(_ []Status, ts []Text) bool { return len(turns(ts)) == 1+i })
		if d := time.Since(t0); d > 150*time.Millisecond {
			t.Logf("entry %d read after %v", i, d)
			slow++
		}
		time.Sleep(time.Duration(100+37*i) * time.Millisecond)
	}
	if slow > 1 {
		t.Errorf("%d of 5 entries read after more than 150 ms: the transcript is polled", slow)
	}
}
