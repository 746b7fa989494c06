package session

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

// fakeClaude stands in for Claude Code where the real binary is not the
// point: it takes the same arguments, draws the prompt box (a rule, "❯ ", a
// rule, as 2.1.330 does) after turning on bracketed paste, and per prompt signals UserPromptSubmit, appends a user
// entry and an assistant entry to the transcript (the latter in two writes
// with a pause, so the follower meets a partial line; the file itself only
// appears with the first prompt), then signals Stop. An Enter on its empty
// box does nothing, as in Claude Code (the session presses Enter again
// when a prompt's submission is not seen in time, as under load).
const fakeClaude = `
while [ $# -gt 0 ]; do
  case "$1" in
  --session-id) id=$2; mode=new; shift ;;
  --resume) id=$2; mode=resume; shift ;;
  --settings) settings=$2; shift ;;
  esac
  shift
done
sig=$(dirname "$settings")/signals
dir=$HOME/.claude/projects/$(pwd | sed 's/[^a-zA-Z0-9]/-/g')
f=$dir/$id.jsonl
echo "mode: $mode"
printf '\033[?2004h'
sleep 0.2
box() { printf '\r\n────────────────────\r\n\342\235\257 \r\n────────────────────\r\n\033[2A\033[3G'; }
box
n=$(cat "$f" 2>/dev/null | grep -c '"type":"user"')
while IFS= read -r line; do
  [ -n "$line" ] || continue # Enter on an empty prompt box does nothing
  echo prompt >> "$sig"
  mkdir -p "$dir"
  n=$((n+1))
  printf '{"type":"user","uuid":"u%s","message":{"role":"user","content":"%s"}}\n' $n "$line" >> "$f"
  printf '{"type":"assistant","uuid":"a%s","isSidechain":false,"message":{"role":"assistant","content":[{"type":"text","text":"[RESULT] reply %s\\n두 번째 줄' $n $n >> "$f"
  sleep 0.4
  printf '"}],"stop_reason":"end_turn"}}\n' >> "$f"
  echo stop >> "$sig"
  box
done
`

func TestClaudeKindWithStandIn(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{})
	ctx := context.Background()
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "work")
	key := Key{"o", "fake"}
	s, err := m.Start(ctx, key, Spec{Command: script(t, fakeClaude), Home: home, Dir: dir, Env: []string{"ANTHROPIC_API_KEY=sk-test-0123456789abcdefghijklmnop"}})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 10*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	for i := 1; i <= 2; i++ {
		if err := s.Send(ctx, fmt.Sprintf("prompt %d [INVOKE:X]", i)); err != nil {
			t.Fatal(err)
		}
		r.waitFor(t, "turn", 10*time.Second, func(st []Status, ts []Text) bool {
			return lastStatus(st) == office.SessionReady && len(turns(ts)) == i
		})
	}
	st, ts := r.snapshot()
	want := []Status{office.SessionStarting, office.SessionReady, office.SessionBusy, office.SessionReady, office.SessionBusy, office.SessionReady}
	if fmt.Sprint(st) != fmt.Sprint(want) {
		t.Errorf("statuses %v, want %v", st, want)
	}
	if got := turns(ts); fmt.Sprint(got) != fmt.Sprint([]string{"[RESULT] reply 1\n두 번째 줄", "[RESULT] reply 2\n두 번째 줄"}) {
		t.Errorf("turns %q", got)
	}
	if ts[0].ID != "a1" || ts[1].ID != "a2" {
		t.Errorf("ids %s, %s, want the entry uuids", ts[0].ID, ts[1].ID)
	}
	if err := m.Restart(ctx, key, nil); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready after restart", 10*time.Second, func(st []Status, _ []Text) bool {
		return lastStatus(st) == office.SessionReady && countStatus(st, office.SessionStarting) == 2
	})
	v := s.Attach(1)
	replay := string(<-v.C())
	v.Close()
	if !strings.Contains(replay, "mode: resume") {
		t.Errorf("restart did not resume: %q", replay)
	}
	if err := s.Send(ctx, "prompt 3"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "third turn", 10*time.Second, func(st []Status, ts []Text) bool {
		return lastStatus(st) == office.SessionReady && len(turns(ts)) == 3
	})
	_, ts = r.snapshot()
	if len(ts) != 3 || ts[2].ID != "a3" {
		t.Errorf("after restart: %+v", ts)
	}
}
