package engine

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/store/sqlite"
)

// What the external tests (package office_test) reach of the package's
// internals. They are external because they wire the router through
// agents.New, and agents imports office.

// NewTestStore returns the embedded store in a file of its own
// (newTestStore), and the file's path.
func NewTestStore(t testing.TB) (*sqlite.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "office.db")
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}

// DropNewestEvents deletes the newest n events of kind of an agent from the
// embedded store's file at path, as if the server had died before it
// recorded them.
func DropNewestEvents(t testing.TB, path, kind, agentID string, n int) {
	t.Helper()
	db, err := sql.Open(sqlite.DriverName, "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(`delete from office_events where id in
		(select id from office_events where kind = ? and agent_id = ? order by id desc limit ?)`, kind, agentID, n)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := res.RowsAffected(); got != int64(n) {
		t.Fatalf("dropped %d %s events, want %d", got, kind, n)
	}
}

// AllEvents returns every event of the store (of agentID when set),
// oldest first.
func AllEvents(t testing.TB, st office.Events, agentID ...string) []office.Event {
	return allEvents(t, st, agentID...)
}

// CursorEvent is the kind of the event recording a transcript cursor.
const CursorEvent = cursorEvent

// InboxPeak returns the most bytes the agent's inbox ever held; 0 if it
// has none.
func InboxPeak(r *Router, officeID, agentID string) int {
	r.mu.Lock()
	d := r.desks[agentKey{officeID, agentID}]
	r.mu.Unlock()
	if d == nil {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peak
}

// WriterFunc is an io.Writer that calls itself (router_test.go).
type WriterFunc = writerFunc
