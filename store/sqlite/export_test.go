package sqlite

import "time"

// KillFeedForTest makes the feed lose every change from now on, as a dropped
// connection would, and after down makes every watcher catch up, as a
// reconnect does. It returns at once.
func (s *Store) KillFeedForTest(down time.Duration) {
	s.feed.deaf.Store(true)
	time.AfterFunc(down, func() {
		// Undeafen first, then resync: changes after this point are
		// queued, and the catch-up covers everything before it.
		s.feed.deaf.Store(false)
		s.feed.resyncAll()
	})
}

// SetMaxQueueForTest sets the watchers' queue bound and returns a func that
// restores it.
func SetMaxQueueForTest(n int) func() {
	old := maxQueue
	maxQueue = n
	return func() { maxQueue = old }
}
