package session

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

// TestScreenLines: the viewers' screen as text, rendered only when its
// version moved on; a resize moves it on too.
func TestScreenLines(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{})
	agent := script(t, `echo 'first row'; printf '> '; while read -r l; do echo "got: $l"; printf '> '; done`)
	s, err := m.Start(context.Background(), Key{"o", "lines"}, Spec{Kind: KindCommand, Command: agent, PromptPattern: `^>`, Cols: 40, Rows: 6})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 5*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	rows, v := s.ScreenLines(0)
	if want := []string{"first row", ">", "", "", "", ""}; !slices.Equal(rows, want) || v == 0 {
		t.Fatalf("ScreenLines(0) = %q, version %d; want %q and a version above 0", rows, v, want)
	}
	if again, v2 := s.ScreenLines(v); again != nil || v2 != v {
		t.Errorf("ScreenLines(%d) with nothing new = %q, %d; want nil, %d", v, again, v2, v)
	}
	if err := s.Send(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, v2 := s.ScreenLines(v)
		if got != nil && strings.Contains(strings.Join(got, "\n"), "got: x") {
			if v2 <= v {
				t.Errorf("version %d after output, want above %d", v2, v)
			}
			v = v2
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the echo never showed: %q", got)
		}
	}
	if err := s.Resize(30, 4); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ScreenLines(v); len(got) != 4 {
		t.Errorf("after a resize to 30x4, ScreenLines = %q, want 4 rows", got)
	}
	_ = m.Stop(context.Background(), Key{"o", "lines"})
}
