package session

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

// TestBlockReadOnceAcrossScrolls: a line program on the main screen prints
// a block, then the server types the same long answer twice (its echo
// wraps over several rows and scrolls the screen): the block, read at its
// turn's end, is never read again — not when the rows it was read from
// scroll, not when a wrapped echo sits among them, not when identical lines
// follow it. (Found by the proxy end-to-end test: a second [PROXY_REQUEST]
// was acted on twice.)
func TestBlockReadOnceAcrossScrolls(t *testing.T) {
	script := `echo 'req>'
while IFS= read -r l; do
  case "$l" in
    *SEND*) printf '[PROXY_REQUEST]\n{\n  "action": "create_plan",\n  "tasks": [ {"content": "x"} ]\n}\n[/PROXY_REQUEST]\n';;
  esac
  echo 'req>'
done
`
	answer := "［PROXY_RESPONSE]\n" + `{"success":true,"proxy":"pm","tasks_created":1,"task_ids":["sse-debe92"],"status":"assigned","message":"pm keeps these tasks as its work until they are closed with update_status, and this line is long enough to wrap twice"}` + "\n［/PROXY_RESPONSE]"
	r := newRecorder()
	m := newTestManager(t, r, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := m.Start(ctx, Key{"o", "r"}, Spec{Kind: KindCommand, Command: "/bin/sh", Args: []string{"-c", script}, PromptPattern: "^req>$", Cols: 80, Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 5*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	for _, text := range []string{"SEND one", answer, "SEND two", answer, answer} {
		if err := s.Send(ctx, text); err != nil {
			t.Fatal(err)
		}
		r.waitFor(t, "ready again", 5*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	}
	time.Sleep(300 * time.Millisecond)
	_, ts := r.snapshot()
	n := 0
	for _, x := range ts {
		for _, l := range x.Lines {
			if strings.TrimSpace(l) == "[PROXY_REQUEST]" {
				n++
			}
		}
	}
	if n != 2 {
		t.Errorf("%d [PROXY_REQUEST] lines read, want 2 (one per block printed)", n)
	}
}
