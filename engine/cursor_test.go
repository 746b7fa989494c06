package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/agentstest"

	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
)

// resumingClaude stands in for Claude Code across restarts: each start
// appends $ENTRIES assistant entries (each a turn holding one
// [STEP_COMPLETE] block) after those already in its transcript, then waits.
// Like Claude Code, it keeps its transcripts under $CLAUDE_CONFIG_DIR (the
// agent's own, set by the session), else $HOME/.claude.
const resumingClaude = `
while [ $# -gt 0 ]; do
  case "$1" in
  --session-id|--resume) id=$2; shift ;;
  esac
  shift
done
dir=${CLAUDE_CONFIG_DIR:-$HOME/.claude}/projects/$(pwd | sed 's/[^a-zA-Z0-9]/-/g')
mkdir -p "$dir"
f=$dir/$id.jsonl
n0=$(cat "$f" 2>/dev/null | wc -l)
awk -v a=$n0 -v n=$ENTRIES 'BEGIN{for(i=a;i<a+n;i++) printf "{\"type\":\"assistant\",\"uuid\":\"e%05d\",\"isSidechain\":false,\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"[STEP_COMPLETE]\\nstep: S%05d\\n[/STEP_COMPLETE]\"}],\"stop_reason\":\"end_turn\"}}\n", i, i}' >> "$f"
echo started
exec sleep 1000
`

// serverLife is one life of the server: a router and its session manager
// on a shared store and data directory (which holds the Claude Code
// agents' configuration directories, so their transcripts outlive a life).
type serverLife struct {
	r     *engine.Router
	mgr   *session.Manager
	texts atomic.Int64 // chunks the session layer handed to the office
	lines atomic.Int64
	stop  func()
}

func startLife(t *testing.T, st office.Store, data string) *serverLife {
	t.Helper()
	l := &serverLife{}
	r, mgr, err := agentstest.NewManaged(engine.Config{Store: st, DataDir: data, Tick: 50 * time.Millisecond,
		SecretsKey: testSecretsKey, // the launch env's literal values are stored sealed
		Logger:     slog.New(slog.DiscardHandler)},
		session.Options{StopGrace: 300 * time.Millisecond, OnText: func(tx session.Text) {
			l.texts.Add(1)
			l.lines.Add(int64(len(tx.Lines)))
		}})
	if err != nil {
		t.Fatal(err)
	}
	l.r, l.mgr = r, mgr
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	var stopped atomic.Bool
	l.stop = func() {
		if stopped.Swap(true) {
			return
		}
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		_ = mgr.Close(cctx)
		cancel()
		<-done
	}
	t.Cleanup(l.stop)
	return l
}

// TestTranscriptCursorAcrossRestart: a Claude Code agent's transcript holds
// 1500 turns when the server restarts; the new server resumes the
// conversation from the cursor the office recorded, so none of the old
// entries reaches the parser or the store again, the 40 new turns are acted
// on once each, and every message is in the event log exactly once. When
// the newest cursors are missing (the server died after acting on turns
// but before recording them), only those turns are read again, and their
// messages are not acted on twice.
func TestTranscriptCursorAcrossRestart(t *testing.T) {
	const first, more = 1500, 40
	st := newHangStore(t)
	data := t.TempDir()
	agent := office.Agent{Name: "CC", Launch: office.LaunchSpec{Command: script(t, "cc", resumingClaude), Env: map[string]string{"ENTRIES": fmt.Sprint(first)}}}
	ctx := context.Background()

	life := startLife(t, st, data)
	_, as, err := life.r.SyncOffice(ctx, engine.OfficeConfig{Office: office.Office{Name: "acme"}, Agents: []office.Agent{agent}})
	if err != nil {
		t.Fatal(err)
	}
	id := as[0].ID
	if err := life.r.StartAgent(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitCount := func(want int64) { t.Helper(); waitStepCount(t, st, id, want) }
	waitCount(first)
	life.stop()

	// Server life 2: the next launch appends `more` turns.
	setEntries := func(n int) { setAgentEntries(t, st, id, n) }
	setEntries(more)
	life = startLife(t, st, data)
	if err := life.r.StartAgent(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitCount(first + more)
	if n := life.lines.Load(); n != 3*more {
		t.Errorf("the office was handed %d lines after the restart, want %d (the new turns only)", n, 3*more)
	}
	life.stop()

	// Server life 3: the newest 5 cursors are gone (as if the server died
	// before recording them); those 5 turns are read again, acted on
	// never twice, and the next launch's turns once.
	const lostCursors = 5
	engine.DropNewestEvents(t, st.path, engine.CursorEvent, id, lostCursors)
	setEntries(more)
	life = startLife(t, st, data)
	if err := life.r.StartAgent(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitCount(first + 2*more + lostCursors) // the re-read turns reach the store, deduplicated
	if n := life.lines.Load(); n != 3*(more+lostCursors) {
		t.Errorf("the office was handed %d lines after the restart, want %d", n, 3*(more+lostCursors))
	}
	evs, _ := engine.AllEvents(t, st, id), error(nil)
	seen := map[string]int{}
	for _, e := range evs {
		if e.Kind == "message.step_complete" {
			seen[e.DedupeKey]++
		}
	}
	for i := range first + 2*more {
		if k := fmt.Sprintf("e%05d#0", i); seen[k] != 1 {
			t.Fatalf("message of entry %d in the log %d times", i, seen[k])
		}
	}
	if len(seen) != first+2*more {
		t.Errorf("%d messages in the log, want %d", len(seen), first+2*more)
	}
}

// waitStepCount waits up to 60 s for want step messages of the agent id,
// each with its cursor recorded, and checks no more come.
func waitStepCount(t *testing.T, st *hangStore, id string, want int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for st.count("message.step_complete", id) < want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for st.count(engine.CursorEvent, id) < st.count("message.step_complete", id) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if c := st.count("message.step_complete", id); c != want {
		t.Fatalf("%d message appends, want %d", c, want)
	}
}

// setAgentEntries sets how many turns the agent id's next launch appends.
func setAgentEntries(t *testing.T, st *hangStore, id string, n int) {
	ctx := context.Background()
	a, err := st.Store.GetAgent(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	a.Launch.Env = map[string]string{"ENTRIES": fmt.Sprint(n)}
	if _, err := st.Store.UpsertAgent(ctx, a); err != nil {
		t.Fatal(err)
	}
}

// TestTranscriptCursorHeldAfterFailure: when acting on a message fails (the
// store refused its event), the cursor does not move past it, so after a
// restart that message is read and acted on again: nothing lost.
func TestTranscriptCursorHeldAfterFailure(t *testing.T) {
	const first, failAt = 30, 10
	st := newHangStore(t)
	key := fmt.Sprintf("e%05d#0", failAt)
	st.failKey.Store(&key)
	data := t.TempDir()
	agent := office.Agent{Name: "CC", Launch: office.LaunchSpec{Command: script(t, "cc", resumingClaude), Env: map[string]string{"ENTRIES": fmt.Sprint(first)}}}
	ctx := context.Background()
	life := startLife(t, st, data)
	_, as, err := life.r.SyncOffice(ctx, engine.OfficeConfig{Office: office.Office{Name: "acme"}, Agents: []office.Agent{agent}})
	if err != nil {
		t.Fatal(err)
	}
	id := as[0].ID
	if err := life.r.StartAgent(ctx, id); err != nil {
		t.Fatal(err)
	}
	logged := func() map[string]int {
		evs, _ := engine.AllEvents(t, st, id), error(nil)
		seen := map[string]int{}
		for _, e := range evs {
			if e.Kind == "message.step_complete" {
				seen[e.DedupeKey]++
			}
		}
		return seen
	}
	waitFor := func(what string, f func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !f() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("the first life's messages", func() bool { return len(logged()) == first-1 })
	time.Sleep(300 * time.Millisecond)
	if c := st.count(engine.CursorEvent, id); c != failAt {
		t.Errorf("%d cursors recorded, want %d (none after the failed message)", c, failAt)
	}
	life.stop()

	a, _ := st.Store.GetAgent(ctx, id)
	a.Launch.Env = map[string]string{"ENTRIES": "0"}
	if _, err := st.Store.UpsertAgent(ctx, a); err != nil {
		t.Fatal(err)
	}
	life = startLife(t, st, data)
	if err := life.r.StartAgent(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitFor("the failed message acted on", func() bool { return logged()[key] == 1 })
	time.Sleep(300 * time.Millisecond)
	seen := logged()
	for i := range first {
		if k := fmt.Sprintf("e%05d#0", i); seen[k] != 1 {
			t.Errorf("message of entry %d in the log %d times", i, seen[k])
		}
	}
	if n := life.lines.Load(); n != 3*(first-failAt) {
		t.Errorf("the office was handed %d lines after the restart, want %d (from the failed turn on)", n, 3*(first-failAt))
	}
}

// testSecretsKey seals the launch env of the tests' agents (SyncOffice
// stores literal values only sealed).
var testSecretsKey = []byte("0123456789abcdef0123456789abcdef")
