package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/store/sqlite"
)

// newTestStore returns the embedded store (SQLite, the server's default)
// in a file of its own: the unit tests run on a real store, so that the
// store's semantics (conditional transitions, conflicts, ordering) are the
// production ones; tests that need a fault wrap it.
func newTestStore(t testing.TB) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "office.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// allEvents returns every event of the store (of agentID when set),
// oldest first.
func allEvents(t testing.TB, st office.Events, agentID ...string) []office.Event {
	t.Helper()
	var out []office.Event
	f := office.EventFilter{Limit: 1000}
	if len(agentID) > 0 {
		f.AgentID = agentID[0]
	}
	for {
		if len(out) > 0 {
			f.AfterID = out[len(out)-1].ID
		}
		evs, err := st.ListEvents(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, evs...)
		if len(evs) < 1000 {
			return out
		}
	}
}

// eventKinds returns the kinds of every event of the store, oldest first.
func eventKinds(t testing.TB, st office.Events) []string {
	var out []string
	for _, e := range allEvents(t, st) {
		out = append(out, e.Kind)
	}
	return out
}

// fakeSessions records what is typed into each agent. Send fails for an
// agent without a running session, as the real layer does.
type fakeSessions struct {
	mu      sync.Mutex
	running map[string]bool
	starts  map[string][]SessionSpec
	typed   map[string][]string
	sent    chan sent // unused by the harness; kept for benchmarks
	// StartFn, when set, runs on Start (e.g. to refuse).
	StartFn func(SessionSpec) error
}

type sent struct{ agentID, text string }

func newFakeSessions() *fakeSessions {
	return &fakeSessions{running: map[string]bool{}, starts: map[string][]SessionSpec{}, typed: map[string][]string{}, sent: make(chan sent, 100)}
}

func (f *fakeSessions) Start(_ context.Context, spec SessionSpec) error {
	if f.StartFn != nil {
		if err := f.StartFn(spec); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running[spec.AgentID] = true
	f.starts[spec.AgentID] = append(f.starts[spec.AgentID], spec)
	return nil
}
func (f *fakeSessions) Restart(ctx context.Context, spec SessionSpec) error {
	return f.Start(ctx, spec)
}
func (f *fakeSessions) Stop(_ context.Context, _, agentID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running[agentID] = false
	return nil
}
func (f *fakeSessions) Send(_ context.Context, _, agentID, text string) error {
	f.mu.Lock()
	if !f.running[agentID] {
		f.mu.Unlock()
		return fmt.Errorf("no session for %s", agentID)
	}
	f.typed[agentID] = append(f.typed[agentID], text)
	f.mu.Unlock()
	select {
	case f.sent <- sent{agentID, text}:
	default:
	}
	return nil
}
func (f *fakeSessions) Running(_, agentID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running[agentID]
}
func (f *fakeSessions) setRunning(agentID string, on bool) {
	f.mu.Lock()
	f.running[agentID] = on
	f.mu.Unlock()
}
