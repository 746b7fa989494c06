package engine

import (
	"slices"
	"time"

	"github.com/office-server/office-server/office"
)

// What the external tests (package office_test) reach of the package's
// internals. They are external because they wire the router through
// agents.New, and agents imports office.

// MemStore is the in-memory Store of the unit tests (fakes_test.go).
type MemStore = memStore

// NewMemStore returns an empty MemStore whose clock is now.
func NewMemStore(now func() time.Time) *MemStore { return newMemStore(now) }

// DropEvents removes from the event log the events drop picks; drop is
// asked about each event from the newest to the oldest, with the store
// locked (it must not call the store).
func (s *memStore) DropEvents(drop func(office.Event) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var kept []office.Event
	for i := len(s.events) - 1; i >= 0; i-- {
		if e := s.events[i]; !drop(e) {
			kept = append(kept, e)
		}
	}
	slices.Reverse(kept)
	s.events = kept
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
