package sqlite

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/office-server/office-server/internal/reconnect"
	"github.com/office-server/office-server/office"
)

// The change feed is in-process: the store publishes a Change after each
// write that leaves a row awaiting the office has committed (an answer, a new
// user message, a dependency provided, rejected or expired). Each Watch has a
// bounded queue of its own so a write never waits for a slow watcher; a
// watcher whose queue overflows, or that is told another process wrote to
// the file, drops its queue and runs the catch-up query again, which reports
// every row still awaiting the office. Nothing is lost; a row may be reported
// twice, which the office tolerates (it acts through conditional updates).

// maxQueue bounds each watcher's queue of live changes (a variable for tests).
var maxQueue = 4096

// pollInterval is how often the store checks whether another process wrote
// to the file when it has no file notifications; with them (Linux: inotify
// on the database's directory) a commit by another process is checked at
// once and the poll is only a safety net, every notifiedPoll.
const (
	pollInterval = 500 * time.Millisecond
	notifiedPoll = 10 * time.Second
)

type feed struct {
	mu        sync.Mutex
	subs      map[*sub]struct{}
	closed    bool
	done      chan struct{} // closed by close
	connected atomic.Int32  // watchers caught up and live
	// deaf drops every change, as a dead connection would; only tests set
	// it (KillFeedForTest) to prove that a catch-up recovers what was lost.
	deaf atomic.Bool
}

func newFeed() *feed { return &feed{subs: map[*sub]struct{}{}, done: make(chan struct{})} }

// sub is one Watch's subscription.
type sub struct {
	offices map[string]bool // nil: every office

	mu       sync.Mutex
	queue    []office.Change
	overflow bool // changes were dropped: catch up
	resync   bool // another process wrote: catch up
	wake     chan struct{}
}

func (f *feed) subscribe(officeIDs []string) (*sub, bool) {
	s := &sub{wake: make(chan struct{}, 1)}
	if len(officeIDs) > 0 {
		s.offices = map[string]bool{}
		for _, id := range officeIDs {
			s.offices[id] = true
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, false
	}
	f.subs[s] = struct{}{}
	return s, true
}

func (f *feed) unsubscribe(s *sub) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, s)
}

// publish hands c to every watcher of its office. It never blocks on them.
func (f *feed) publish(c office.Change) {
	if f.deaf.Load() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		if s.offices != nil && !s.offices[c.OfficeID] {
			continue
		}
		s.mu.Lock()
		if len(s.queue) >= maxQueue {
			s.overflow = true
			s.queue = nil
		} else if !s.overflow {
			s.queue = append(s.queue, c)
		}
		s.mu.Unlock()
		s.signal()
	}
}

// resyncAll makes every watcher catch up again.
func (f *feed) resyncAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		s.mu.Lock()
		s.resync = true
		s.mu.Unlock()
		s.signal()
	}
}

func (f *feed) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		close(f.done)
	}
}

func (s *sub) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take empties the queue and reports whether a catch-up is needed.
func (s *sub) take() (changes []office.Change, catchUp bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changes, s.queue = s.queue, nil
	catchUp = s.overflow || s.resync
	s.overflow, s.resync = false, false
	return changes, catchUp
}

// Watch calls fn for every change in the given offices (all when empty)
// until ctx ends, when it returns nil, or the store is closed, when it
// returns EUNAVAILABLE. It first reports with Op CATCHUP every row awaiting
// the office: answered questions not yet delivered, pending user messages,
// and provided, rejected or expired dependency requests not yet delivered.
// fn is called from Watch's goroutine, one change at a time.
func (s *Store) Watch(ctx context.Context, officeIDs []string, fn func(office.Change)) error {
	sb, ok := s.feed.subscribe(officeIDs)
	if !ok {
		return office.Errorf(office.EUNAVAILABLE, "sqlite: watch: store closed")
	}
	defer s.feed.unsubscribe(sb)
	live := false
	setLive := func(v bool) {
		if v != live {
			live = v
			if v {
				s.feed.connected.Add(1)
			} else {
				s.feed.connected.Add(-1)
			}
		}
	}
	defer setLive(false)

	catchUp := true
	backoff := reconnect.Backoff(50*time.Millisecond, 5*time.Second)
	for {
		if catchUp {
			setLive(false)
			// Anything queued so far is covered by the catch-up.
			sb.take()
			if err := s.catchUp(ctx, officeIDs, fn); err != nil {
				select {
				case <-ctx.Done():
					return nil
				case <-s.feed.done:
					return office.Errorf(office.EUNAVAILABLE, "sqlite: watch: store closed")
				case <-time.After(backoff.NextBackOff()):
				}
				continue
			}
			backoff.Reset()
			catchUp = false
			setLive(true)
		}
		changes, again := sb.take()
		for _, c := range changes {
			if ctx.Err() != nil {
				return nil
			}
			fn(c)
		}
		if again {
			catchUp = true
			continue
		}
		if len(changes) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.feed.done:
			return office.Errorf(office.EUNAVAILABLE, "sqlite: watch: store closed")
		case <-sb.wake:
		}
	}
}

// Connected reports whether a Watch is running and caught up.
func (s *Store) Connected() bool {
	select {
	case <-s.feed.done:
		return false
	default:
	}
	return s.feed.connected.Load() > 0 && !s.feed.deaf.Load()
}

// catchUp reports every row awaiting the office with Op CATCHUP.
func (s *Store) catchUp(ctx context.Context, officeIDs []string, fn func(office.Change)) error {
	qs, err := s.ListAnsweredUndelivered(ctx, office.Due{OfficeIDs: officeIDs})
	if err != nil {
		return err
	}
	ms, err := s.ListPendingUserMessages(ctx, office.Due{OfficeIDs: officeIDs})
	if err != nil {
		return err
	}
	ds, err := s.ListUndeliveredDependencies(ctx, office.Due{OfficeIDs: officeIDs})
	if err != nil {
		return err
	}
	for _, q := range qs {
		fn(office.Change{Table: office.TableQuestions, Op: office.OpCatchUp, ID: q.ID, OfficeID: q.OfficeID, AgentID: q.AgentID, Status: q.Status})
	}
	for _, m := range ms {
		fn(office.Change{Table: office.TableMessages, Op: office.OpCatchUp, ID: m.ID, OfficeID: m.OfficeID, AgentID: m.AgentID, Status: m.Status})
	}
	for _, d := range ds {
		fn(dependencyChange(office.OpCatchUp, d))
	}
	return nil
}

// watchOtherWriters notices commits by other processes on the same file and
// makes every watcher catch up. PRAGMA data_version on the write connection
// changes exactly when another connection commits: every write of this
// process goes through that connection, so the store's own writes (already
// published) do not count.
//
// last is the data_version read when the store opened: commits by others
// before that are older than any Watch, whose first catch-up covers them.
//
// changed is fileChanges' channel for the database's files, or nil.
func (s *Store) watchOtherWriters(ctx context.Context, last int64, changed <-chan struct{}) {
	every := pollInterval
	if changed != nil {
		every = notifiedPoll
	}
	t := time.NewTicker(every)
	defer t.Stop()
	// A file event can come before its commit is visible (the WAL frames
	// are written before the wal-index, a shared mapping that makes no
	// event, says they are committed): an event that finds no new version
	// is looked at again shortly, a few times.
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	defer settle.Stop()
	var tries int
	for {
		event := false
		select {
		case <-ctx.Done():
			if changed != nil {
				for range changed { // wait for the watcher to let go
				}
			}
			return
		case <-t.C:
		case <-settle.C:
			event = true
		case _, ok := <-changed:
			if !ok {
				changed, every = nil, pollInterval
				t.Reset(every)
				continue
			}
			event, tries = true, 0
		}
		var v int64
		if err := s.ws.queryRow(ctx, "pragma data_version").Scan(&v); err != nil {
			continue
		}
		if v != last {
			s.feed.resyncAll()
		} else if event && tries < len(settleAfter) {
			settle.Reset(settleAfter[tries])
			tries++
		}
		last = v
	}
}

// settleAfter are the delays of the second looks after a file event that
// found no new version (see watchOtherWriters).
var settleAfter = []time.Duration{2 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond, 250 * time.Millisecond}
