//go:build linux

package session

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

// TestPromptReadEndsTurn: a program asleep reading its terminal under its
// prompt has ended its turn: the turn's words come at once, not after the
// quiescence period (2 s here). With and without the keeper.
func TestPromptReadEndsTurn(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		env  []string
	}{{"plain", Options{}, nil}, {"keeper", Options{Keeper: testKeeper}, nil}} {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			r := newRecorder()
			m := newTestManager(t, r, tc.o)
			ctx := context.Background()
			const q = 2 * time.Second
			s, err := m.Start(ctx, Key{"o", "a"}, Spec{Kind: KindCommand, Command: script(t, replAgent), PromptPattern: `^>$`, Quiescence: q, Cols: 80, Rows: 10, Env: tc.env})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			r.waitFor(t, "ready", 10*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
			if d := time.Since(start); d >= q {
				t.Errorf("ready after %v, want well under the quiescence period %v", d, q)
			}
			for i := range 3 {
				if err := s.Send(ctx, "hello"); err != nil {
					t.Fatal(err)
				}
				r.waitFor(t, "answer", 10*time.Second, func(st []Status, ts []Text) bool {
					return lastStatus(st) == office.SessionReady && len(turns(ts)) == i+2
				})
				seen := time.Now()
				if d := seen.Sub(s.Info().LastOutputAt); d > 100*time.Millisecond {
					t.Errorf("turn %d: ended %v after the prompt, want under 100ms", i, d)
				}
				_, ts := r.snapshot()
				if got := turns(ts)[i+1]; got != "got: hello" {
					t.Errorf("turn %d: %q, want %q", i, got, "got: hello")
				}
			}
		})
	}
}

// TestPromptWithoutReadWaits: a program that prints its prompt's text but
// goes on working (not reading its terminal) has not ended its turn: the
// quiescence rule decides, and the turn holds what it printed after.
func TestPromptWithoutReadWaits(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{})
	ctx := context.Background()
	const q = 1500 * time.Millisecond
	body := `printf '> '
while IFS= read -r line; do
  echo "working on $line"
  printf '> '
  sleep 1
  echo "done: $line"
  printf '> '
done
`
	s, err := m.Start(ctx, Key{"o", "a"}, Spec{Kind: KindCommand, Command: script(t, body), PromptPattern: `^>`, Quiescence: q, Cols: 80, Rows: 10})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 10*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	sent := time.Now()
	if err := s.Send(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "answer", 10*time.Second, func(st []Status, ts []Text) bool {
		return lastStatus(st) == office.SessionReady && len(turns(ts)) == 2
	})
	_, ts := r.snapshot()
	if got := turns(ts)[1]; !strings.Contains(got, "done: job") {
		t.Errorf("turn %q ended before the work was done (after %v)", got, time.Since(sent))
	}
}

// TestPromptReadOnAltScreenWaits: a full-screen program (the alternate
// screen, as Go TUIs keep a thread reading their terminal while they
// stream) asleep in a read under its prompt is not taken as done: the
// quiescence period decides.
func TestPromptReadOnAltScreenWaits(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{})
	const q = 1500 * time.Millisecond
	body := `printf '\033[?1049h\033[H> '
while IFS= read -r line; do
  printf 'got: %s\r\n> ' "$line"
done
`
	start := time.Now()
	if _, err := m.Start(context.Background(), Key{"o", "a"}, Spec{Kind: KindCommand, Command: script(t, body), PromptPattern: `^>$`, Quiescence: q, Cols: 80, Rows: 10}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 10*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	if d := time.Since(start); d < q {
		t.Errorf("ready after %v on the alternate screen, want the quiescence period %v", d, q)
	}
}
