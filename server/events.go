package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/office-server/office-server/office"
)

// eventHub tails office_events in the store and fans new events out to the
// live streams (SSE) and the metrics. It polls the store, so it sees every
// event whoever wrote it (this process, another server, the office core);
// the events this process appends are handed to it (Offer) and published
// without a read when they follow the last one it has. A slow subscriber
// only loses its own stream: it is dropped, never waited for.
type eventHub struct {
	store   Rows
	metrics *Metrics
	log     *slog.Logger
	poll    time.Duration
	wake    chan struct{}

	mu     sync.Mutex
	subs   map[*eventSub]struct{}
	last   int64
	ahead  map[int64]office.Event // offered before the ids under them (Offer)
	closed bool                   // shutting down: new subscriptions end at once
}

// offerGrace is how long an event offered ahead of the next id waits for
// the ones before it before the tail reads the store.
const offerGrace = 200 * time.Millisecond

type eventSub struct {
	officeID string
	c        chan office.Event
	dropped  bool
}

// subQueue is how many events a live stream may lag before it is dropped.
const subQueue = 256

func newEventHub(store Rows, m *Metrics, log *slog.Logger, poll time.Duration) *eventHub {
	return &eventHub{store: store, metrics: m, log: log, poll: poll, wake: make(chan struct{}, 1), subs: map[*eventSub]struct{}{}}
}

// Poke makes the tail poll now instead of at the next tick.
func (h *eventHub) Poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Offer hands the tail an event this process appended. One that follows
// the last event the tail has (the next id) is published at once, and the
// ones offered ahead of it that now follow too. One ahead of the next id
// waits offerGrace for the ids under it: the office's goroutines append
// at once and offer in any order. A gap still open then (another
// process's events, an id a refused insert used up) makes the tail read
// the store, which publishes the waiting ones too.
func (h *eventHub) Offer(ctx context.Context, ev office.Event) {
	h.mu.Lock()
	if h.last != 0 && ev.ID > h.last+1 {
		if h.ahead == nil {
			h.ahead = map[int64]office.Event{}
		}
		h.ahead[ev.ID] = ev
		first := len(h.ahead) == 1
		h.mu.Unlock()
		if first {
			time.AfterFunc(offerGrace, h.gapOpen)
		}
		return
	}
	next := h.last != 0 && ev.ID == h.last+1
	h.mu.Unlock()
	if !next || !h.publish(ev) {
		h.Poke()
		return
	}
	h.metrics.observeEvent(ctx, h.store, ev)
	for {
		h.mu.Lock()
		ev, ok := h.ahead[h.last+1]
		h.mu.Unlock()
		if !ok || !h.publish(ev) {
			return
		}
		h.metrics.observeEvent(ctx, h.store, ev)
	}
}

// gapOpen reads the store when events offered ahead still wait for the
// ids under them.
func (h *eventHub) gapOpen() {
	h.mu.Lock()
	open := len(h.ahead) > 0
	clear(h.ahead) // the read publishes them
	h.mu.Unlock()
	if open {
		h.Poke()
	}
}

// run polls until ctx ends. It starts at the end of the log: history is for
// the list endpoint, not for the metrics.
func (h *eventHub) run(ctx context.Context) error {
	for {
		evs, err := h.store.ListEvents(ctx, office.EventFilter{AfterID: h.lastID(), Limit: 1000})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			h.log.Warn("event tail: skip to end", "err", err)
			break
		}
		if len(evs) == 0 {
			break
		}
		h.setLast(evs[len(evs)-1].ID)
	}
	t := time.NewTicker(h.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-h.wake:
		}
		for {
			evs, err := h.store.ListEvents(ctx, office.EventFilter{AfterID: h.lastID(), Limit: 500})
			if err != nil {
				if ctx.Err() == nil {
					h.log.Warn("event tail", "err", err)
				}
				break
			}
			for _, ev := range evs {
				if h.publish(ev) {
					h.metrics.observeEvent(ctx, h.store, ev)
				}
			}
			if len(evs) < 500 {
				break
			}
		}
	}
}

func (h *eventHub) lastID() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

func (h *eventHub) setLast(id int64) {
	h.mu.Lock()
	if id > h.last {
		h.last = id
	}
	h.mu.Unlock()
}

// publish fans ev out to the streams; false when the tail had it already
// (offered and then read, or the other way round).
func (h *eventHub) publish(ev office.Event) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ev.ID <= h.last {
		return false
	}
	h.last = ev.ID
	delete(h.ahead, ev.ID)
	for s := range h.subs {
		if s.officeID != "" && s.officeID != ev.OfficeID {
			continue
		}
		select {
		case s.c <- ev:
		default:
			s.dropped = true
			close(s.c)
			delete(h.subs, s)
		}
	}
	return true
}

func (h *eventHub) subscribe(officeID string) *eventSub {
	s := &eventSub{officeID: officeID, c: make(chan office.Event, subQueue)}
	h.mu.Lock()
	if h.closed {
		close(s.c)
	} else {
		h.subs[s] = struct{}{}
	}
	h.mu.Unlock()
	return s
}

func (h *eventHub) unsubscribe(s *eventSub) {
	h.mu.Lock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		close(s.c)
	}
	h.mu.Unlock()
}

// closeSubscribers ends every live stream (shutdown).
func (h *eventHub) closeSubscribers() {
	h.mu.Lock()
	h.closed = true
	for s := range h.subs {
		delete(h.subs, s)
		close(s.c)
	}
	h.mu.Unlock()
}

// streamEvents is the live event stream as Server-Sent Events: first every
// event after ?after_id (or Last-Event-ID) from the store, then live ones.
// Each SSE id is the event id, so a reconnecting EventSource resumes where
// it stopped. A client that lags too far is disconnected and resumes.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) {
	o, err := s.office(r.Context(), r.PathValue("office"))
	if err != nil {
		writeError(w, err)
		return
	}
	after, err := afterID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	rc := http.NewResponseController(w)
	sub := s.events.subscribe(o.ID)
	defer s.events.unsubscribe(sub)

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	send := func(ev office.Event) error {
		b, _ := json.Marshal(ev)
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		if _, err := fmt.Fprintf(w, "id: %d\nevent: event\ndata: %s\n\n", ev.ID, b); err != nil {
			return err
		}
		return rc.Flush()
	}
	// Catch up from the store, page by page, then switch to the live
	// subscription (taken before, so nothing falls in between; duplicates
	// are skipped by id).
	for {
		evs, err := s.cfg.Store.ListEvents(r.Context(), office.EventFilter{OfficeID: o.ID, AfterID: after, Limit: 500})
		if err != nil {
			return
		}
		for _, ev := range evs {
			if err := send(ev); err != nil {
				return
			}
			after = ev.ID
		}
		if len(evs) < 500 {
			break
		}
	}
	_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	fmt.Fprint(w, ": live\n\n")
	_ = rc.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-sub.c:
			if !ok {
				return
			}
			if ev.ID <= after {
				continue
			}
			if err := send(ev); err != nil {
				return
			}
			after = ev.ID
		case <-keep.C:
			_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}
}
