package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/agentstest"

	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
)

// hangStore is a store whose AppendEvent hangs while held (a database
// that stopped answering: every message is acted on through that call
// first), and that counts the events it is asked to append.
type hangStore struct {
	office.Store
	path    string // the embedded store's file
	mu      sync.Mutex
	gate    chan struct{}          // nil: not held
	appends sync.Map               // kind + " " + agent ID → *atomic.Int64
	failKey atomic.Pointer[string] // an event dedupe key refused once
}

// newHangStore returns a hangStore over the embedded store.
func newHangStore(t *testing.T) *hangStore {
	st, path := engine.NewTestStore(t)
	return &hangStore{Store: st, path: path}
}

func (s *hangStore) hold() {
	s.mu.Lock()
	s.gate = make(chan struct{})
	s.mu.Unlock()
}

func (s *hangStore) release() {
	s.mu.Lock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
	s.mu.Unlock()
}

func (s *hangStore) wait(ctx context.Context) error {
	s.mu.Lock()
	g := s.gate
	s.mu.Unlock()
	if g == nil {
		return nil
	}
	select {
	case <-g:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *hangStore) count(kind, agentID string) int64 {
	v, _ := s.appends.LoadOrStore(kind+" "+agentID, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

func (s *hangStore) AppendEvent(ctx context.Context, e office.Event) (office.Event, bool, error) {
	if err := s.wait(ctx); err != nil {
		return office.Event{}, false, err
	}
	v, _ := s.appends.LoadOrStore(e.Kind+" "+e.AgentID, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	if k := s.failKey.Load(); k != nil && *k == e.DedupeKey && s.failKey.CompareAndSwap(k, nil) {
		return office.Event{}, false, fmt.Errorf("database refused the write")
	}
	return s.Store.AppendEvent(ctx, e)
}

// standInClaude takes Claude Code's arguments and appends n assistant
// entries, each holding one [STEP_COMPLETE] block, to its transcript, in
// batches, printing a line to the terminal per batch and "cc-done" at the
// end; then it waits. Like Claude Code, it keeps its transcripts under
// $CLAUDE_CONFIG_DIR (the agent's own, set by the session), else
// $HOME/.claude.
const standInClaude = `
while [ $# -gt 0 ]; do
  case "$1" in
  --session-id|--resume) id=$2; shift ;;
  esac
  shift
done
dir=${CLAUDE_CONFIG_DIR:-$HOME/.claude}/projects/$(pwd | sed 's/[^a-zA-Z0-9]/-/g')
mkdir -p "$dir"
f=$dir/$id.jsonl
pad=$(printf '%0300d' 0)
b=0
while [ $b -lt $BATCHES ]; do
  awk -v b=$b -v pad=$pad 'BEGIN{for(i=b*100;i<b*100+100;i++) printf "{\"type\":\"assistant\",\"uuid\":\"e%05d\",\"isSidechain\":false,\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"[STEP_COMPLETE]\\nstep: S%05d %s\\n[/STEP_COMPLETE]\"}],\"stop_reason\":\"end_turn\"}}\n", i, i, pad}' >> "$f"
  echo "cc batch $b"
  b=$((b+1))
  sleep 0.01
done
echo cc-done
exec sleep 1000
`

// loudCommand prints a protocol block (whose handling hangs on the store),
// then about 4 MB of lines, then "cmd-done", then waits.
const loudCommand = `printf '[STEP_COMPLETE]\nstep: begin\n[/STEP_COMPLETE]\n'
awk 'BEGIN{for(i=0;i<40000;i++) printf "out %06d aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", i}'
echo cmd-done
exec sleep 1000
`

// watch attaches a viewer and reports on seen when want appears in the
// terminal output.
func watch(t *testing.T, mgr *session.Manager, k session.Key, want string) <-chan struct{} {
	t.Helper()
	s, ok := mgr.Get(k)
	if !ok {
		t.Fatalf("no session %v", k)
	}
	v := s.Attach(1 << 16)
	seen := make(chan struct{})
	go func() {
		var tail []byte
		found := false
		for chunk := range v.C() {
			tail = append(tail, chunk...)
			if !found && bytes.Contains(tail, []byte(want)) {
				found = true
				close(seen)
			}
			if len(tail) > 64 {
				tail = tail[len(tail)-64:]
			}
		}
	}()
	t.Cleanup(v.Close)
	return seen
}

// TestBoundedWhileStoreHangs: the database stops answering while a CLI
// agent prints 4 MB and a Claude Code agent writes 3 MB of transcript
// holding 8000 messages. The PTY readers keep draining (viewers see the
// end of both outputs), what the office holds stays bounded, the screen
// text that could not be kept is recorded as lost, and once the database
// answers again every transcript message is handled exactly once.
func TestBoundedWhileStoreHangs(t *testing.T) {
	const batches, inboxBytes = 80, 64 << 10
	n := batches * 100
	st := newHangStore(t)
	b := startBounded(t, st, batches, inboxBytes)

	st.hold()
	for _, name := range []string{"CMD", "CC"} {
		if err := b.r.StartAgent(context.Background(), b.ids[name]); err != nil {
			t.Fatal(err)
		}
	}
	cmdDone := watch(t, b.mgr, session.Key{OfficeID: b.officeID, AgentID: b.ids["CMD"]}, "cmd-done")
	ccDone := watch(t, b.mgr, session.Key{OfficeID: b.officeID, AgentID: b.ids["CC"]}, "cc-done")
	for name, c := range map[string]<-chan struct{}{"CMD": cmdDone, "CC": ccDone} {
		select {
		case <-c:
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: the viewer never saw the end of the output while the store hung", name)
		}
	}
	// Let the sessions run on a while with the store still down.
	time.Sleep(time.Second)
	if c := st.count("message.step_complete", b.ids["CC"]); c != 0 {
		t.Fatalf("%d messages handled while the store hung", c)
	}
	if p := b.peak("CMD"); p == 0 || p > inboxBytes {
		t.Errorf("CMD inbox peak %d bytes, want (0, %d]", p, inboxBytes)
	}
	// Transcript text may pass the bound by one transcript poll (256 KiB
	// of JSON, less as text).
	if p := b.peak("CC"); p == 0 || p > inboxBytes+256<<10 {
		t.Errorf("CC inbox peak %d bytes while %d messages (3 MB) wait; want at most %d", p, n, inboxBytes+256<<10)
	}
	if !b.r.Backlogged(b.officeID, b.ids["CC"]) {
		t.Error("CC not backlogged while the store hangs")
	}

	st.release()
	deadline := time.Now().Add(120 * time.Second)
	for st.count("message.step_complete", b.ids["CC"]) < int64(n) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // anything handled twice would show by now
	if c := st.count("message.step_complete", b.ids["CC"]); c != int64(n) {
		t.Fatalf("%d STEP_COMPLETE appends after recovery, want exactly %d", c, n)
	}
	checkEachOnce(t, st, b.ids["CC"], n)
	lostLines := b.checkOutputLost(t, st)
	t.Logf("CMD peak %d B, CC peak %d B, CMD lines lost %d", b.peak("CMD"), b.peak("CC"), lostLines)
}

// boundedRun is TestBoundedWhileStoreHangs's office: CMD, a CLI agent
// running loudCommand, and CC, a Claude Code stand-in writing batches of
// 100 transcript messages, on a Router whose log it keeps.
type boundedRun struct {
	r        *engine.Router
	mgr      *session.Manager
	officeID string
	ids      map[string]string // agent name → ID
	logMu    sync.Mutex
	logs     bytes.Buffer
}

// startBounded syncs the office over st with an inbox bound of inboxBytes
// and runs the Router until the test ends.
func startBounded(t *testing.T, st *hangStore, batches, inboxBytes int) *boundedRun {
	t.Helper()
	b := &boundedRun{ids: map[string]string{}}
	lw := engine.WriterFunc(func(p []byte) (int, error) { b.logMu.Lock(); defer b.logMu.Unlock(); return b.logs.Write(p) })
	r, mgr, err := agentstest.NewManaged(engine.Config{
		Store: st, DataDir: t.TempDir(), InboxBytes: inboxBytes, Tick: 50 * time.Millisecond,
		SecretsKey: testSecretsKey, // the launch env's literal values are stored sealed
		Logger:     slog.New(slog.NewTextHandler(lw, nil)),
	}, session.Options{StopGrace: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b.r, b.mgr = r, mgr
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		_ = mgr.Close(cctx)
		cancel()
		st.release()
		<-done
	})
	off, as, err := r.SyncOffice(ctx, engine.OfficeConfig{Office: office.Office{Name: "acme"}, Agents: []office.Agent{
		{Name: "CMD", Launch: office.LaunchSpec{Kind: "command", Command: script(t, "cmd", loudCommand)}},
		{Name: "CC", Launch: office.LaunchSpec{Command: script(t, "cc", standInClaude), Env: map[string]string{"BATCHES": fmt.Sprint(batches)}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	b.officeID = off.ID
	for _, a := range as {
		b.ids[a.Name] = a.ID
	}
	go func() { _ = r.Run(ctx); close(done) }()
	return b
}

// peak is the most the named agent's inbox held, in bytes.
func (b *boundedRun) peak(name string) int { return engine.InboxPeak(b.r, b.officeID, b.ids[name]) }

// checkEachOnce checks that each of the n transcript entries of the agent
// was recorded as exactly one STEP_COMPLETE event (naming the first few
// that were not).
func checkEachOnce(t *testing.T, st office.Events, agentID string, n int) {
	t.Helper()
	seen := map[string]int{}
	for _, e := range engine.AllEvents(t, st, agentID) {
		if e.Kind == "message.step_complete" {
			seen[e.DedupeKey]++
		}
	}
	lost := 0
	for i := range n {
		if k := fmt.Sprintf("e%05d#0", i); seen[k] != 1 {
			t.Errorf("message of entry %d recorded %d times", i, seen[k])
			if lost++; lost > 5 {
				break
			}
		}
	}
}

// checkOutputLost checks that the CLI agent's block printed before its
// flood was acted on once, and that the output it dropped is on record
// (an output.lost event and a log line); it returns the lines lost.
func (b *boundedRun) checkOutputLost(t *testing.T, st *hangStore) int {
	t.Helper()
	if c := st.count("message.step_complete", b.ids["CMD"]); c != 1 {
		t.Errorf("CLI agent's first block handled %d times, want 1", c)
	}
	evs := engine.AllEvents(t, st, b.ids["CMD"])
	lostLines := 0
	for _, e := range evs {
		if e.Kind == "output.lost" {
			var p struct{ Lines int }
			_ = json.Unmarshal(e.Payload, &p)
			lostLines += p.Lines
		}
	}
	if lostLines == 0 {
		t.Errorf("no output.lost event for the CLI agent (events: %d)", len(evs))
	}
	b.logMu.Lock()
	l := b.logs.String()
	b.logMu.Unlock()
	if !strings.Contains(l, "agent output lost") {
		t.Error("lost output not logged")
	}
	return lostLines
}
