package engine

import (
	"github.com/office-server/office-server/office"
	"sync"
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
func (o *eventLog) subscribe(n int) *Subscription {
	if n <= 0 {
		n = 64
	}
	s := &Subscription{o: o, c: make(chan office.Event, n)}
	o.mu.Lock()
	o.subs[s] = struct{}{}
	o.mu.Unlock()
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

func (o *eventLog) publish(ev office.Event) {
	o.mu.Lock()
	subs := make([]*Subscription, 0, len(o.subs))
	for s := range o.subs {
		subs = append(subs, s)
	}
	o.mu.Unlock()
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
