package sqlite

import (
	"context"
	"strings"
	"time"

	"github.com/office-server/office-server/office"
)

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

// AnsweredPlanForTest returns SQLite's plan for ListAnsweredUndelivered(d).
func (s *Store) AnsweredPlanForTest(ctx context.Context, d office.Due) (string, error) {
	q, args := answeredQuery(d)
	rows, err := s.r.QueryContext(ctx, "explain query plan "+q, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			return "", err
		}
		plan = append(plan, detail)
	}
	return strings.Join(plan, "; "), rows.Err()
}
