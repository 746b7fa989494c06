package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

// countedRows counts the event tail's reads.
type countedRows struct {
	*memStore
	reads atomic.Int32
}

func (c *countedRows) ListEvents(ctx context.Context, f office.EventFilter) ([]office.Event, error) {
	c.reads.Add(1)
	return c.memStore.ListEvents(ctx, f)
}

// An event the office appended and offers to the tail is published without
// a read when it follows the last one the tail has; after a gap (another
// process's event in between) the tail reads the store, and each event
// reaches a stream once, in id order. Events offered out of order within
// offerGrace are published in order without a read.
func TestEventTailOffer(t *testing.T) {
	f := newFixture(t, nil)
	st := &countedRows{memStore: f.store}
	ev := func(id int64) office.Event { return office.Event{ID: id, OfficeID: "o1", Kind: "k"} }
	f.store.mu.Lock()
	f.store.events = append(f.store.events, ev(1))
	f.store.mu.Unlock()
	h := newEventHub(st, f.srv.metrics, f.srv.log, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.run(ctx)
	sub := h.subscribe("o1")
	for h.lastID() != 1 {
		time.Sleep(time.Millisecond)
	}
	reads := st.reads.Load()
	next := func(want int64) {
		t.Helper()
		select {
		case got := <-sub.c:
			if got.ID != want {
				t.Fatalf("stream got event %d; want %d", got.ID, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d not published", want)
		}
	}
	for id := int64(2); id <= 4; id++ {
		f.store.mu.Lock()
		f.store.events = append(f.store.events, ev(id))
		f.store.mu.Unlock()
		h.Offer(ctx, ev(id))
		next(id)
	}
	if n := st.reads.Load() - reads; n != 0 {
		t.Errorf("the tail read the store %d times for offered events that follow; want 0", n)
	}
	// Event 5 was written by another process: 6 is offered after a gap.
	f.store.mu.Lock()
	f.store.events = append(f.store.events, ev(5), ev(6))
	f.store.mu.Unlock()
	h.Offer(ctx, ev(6))
	next(5)
	next(6)
	h.Offer(ctx, ev(6)) // again: not published twice
	select {
	case got := <-sub.c:
		t.Fatalf("stream got event %d again", got.ID)
	case <-time.After(100 * time.Millisecond):
	}
	// Two goroutines appended 7 and 8 at once, and 8 is offered first: it
	// waits for 7, and neither costs a read.
	f.store.mu.Lock()
	f.store.events = append(f.store.events, ev(7), ev(8))
	f.store.mu.Unlock()
	reads = st.reads.Load()
	h.Offer(ctx, ev(8))
	time.Sleep(offerGrace / 4)
	h.Offer(ctx, ev(7))
	next(7)
	next(8)
	time.Sleep(2 * offerGrace)
	if n := st.reads.Load() - reads; n != 0 {
		t.Errorf("the tail read the store %d times for events offered out of order; want 0", n)
	}
}
