package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/office-server/office-server/office"
)

// Subscription receives the office's events as they are appended, for the
// live console. Its queue is bounded: a subscriber that falls behind is
// dropped (C is closed and Dropped reports true) rather than slowing the
// office down.
type Subscription struct {
	o       *eventLog
	c       chan office.Event
	mu      sync.Mutex
	closed  bool
	dropped bool
}

// subscribe returns a subscription with a queue of n events (64 when n <= 0).
func (el *eventLog) subscribe(n int) *Subscription {
	if n <= 0 {
		n = 64
	}
	s := &Subscription{o: el, c: make(chan office.Event, n)}
	el.mu.Lock()
	el.subs[s] = struct{}{}
	el.mu.Unlock()
	return s
}

// C returns the events channel; it is closed when the subscription ends.
func (s *Subscription) C() <-chan office.Event { return s.c }

// Dropped reports whether the subscriber was dropped for being too slow.
func (s *Subscription) Dropped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Close ends the subscription.
func (s *Subscription) Close() { s.end(false) }

func (s *Subscription) end(dropped bool) {
	s.o.mu.Lock()
	delete(s.o.subs, s)
	s.o.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.dropped = dropped
		close(s.c)
	}
}

func (el *eventLog) publish(ev office.Event) {
	el.mu.Lock()
	subs := make([]*Subscription, 0, len(el.subs))
	for s := range el.subs {
		subs = append(subs, s)
	}
	el.mu.Unlock()
	for _, s := range subs {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			continue
		}
		select {
		case s.c <- ev:
			s.mu.Unlock()
		default:
			s.mu.Unlock()
			s.end(true)
		}
	}
}

// record appends an event the caller has nothing else to do with: its
// failure is logged here (and counted by event), never dropped.
func (el *eventLog) record(ctx context.Context, officeID, agentID, kind string, payload any, key string) {
	if _, err := el.event(ctx, officeID, agentID, kind, payload, "", key); err != nil && ctx.Err() == nil {
		el.log.Error("audit event not recorded", "office", officeID, "agent", agentID, "kind", kind, "err", err)
	}
}

// failures returns how many events could not be appended to the
// event log since New (the store refused them); cmd/office-server exports
// it in /metrics.
func (el *eventLog) failures() uint64 { return el.auditFailures.Load() }

// event appends an event (deduplicated when key is set) and publishes it to
// subscribers when it was inserted. A failure is counted (AuditFailures)
// and returned.
func (el *eventLog) event(ctx context.Context, officeID, agentID, kind string, payload any, raw, key string) (bool, error) {
	var pj json.RawMessage
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			return false, fmt.Errorf("event %s: %w", kind, err)
		}
		pj = b
	}
	ev, inserted, err := el.store.AppendEvent(ctx, office.Event{OfficeID: officeID, AgentID: agentID, Kind: kind, Payload: pj, Raw: raw, DedupeKey: key})
	if err != nil {
		el.auditFailures.Add(1)
		return false, fmt.Errorf("append event %s: %w", kind, err)
	}
	if inserted {
		el.publish(ev)
	}
	return inserted, nil
}
