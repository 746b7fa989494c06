package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/internal/reconnect"
	"github.com/office-server/office-server/office"
)

// catchUpSQL finds every row still awaiting the office: answered questions
// not delivered, pending user messages, and dependency requests provided,
// rejected or expired but not delivered. $1: office UUIDs, NULL for all.
const catchUpSQL = `
select 'user_questions', id::text, office_id::text, agent_id::text, status, created_at from user_questions
	where status = 'answered' and ($1::uuid[] is null or office_id = any($1))
union all
select 'user_messages', id::text, office_id::text, agent_id::text, status, created_at from user_messages
	where status = 'pending' and ($1::uuid[] is null or office_id = any($1))
union all
select 'dependency_requests', id::text, office_id::text, agent_id::text, status, created_at from dependency_requests
	where status in ('provided', 'rejected', 'expired') and delivered_at is null
		and ($1::uuid[] is null or office_id = any($1))
order by 6, 2`

// Watch reports changes of the offices (all when empty) to fn until ctx
// ends or the store is closed, then returns nil. It LISTENs on a connection
// of its own; when that drops it reconnects, waiting MinBackoff, doubling up
// to MaxBackoff, each wait jittered (reconnect.Backoff). After every
// (re)connect — LISTEN first, so nothing falls between — it reports every
// row still awaiting the office with Op=CATCHUP, and only then counts as
// Connected. A row may so be reported
// twice (catch-up and notification); the office acts through conditional
// transitions, so it acts once.
func (s *Store) Watch(ctx context.Context, officeIDs []string, fn func(office.Change)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.closing, cancel)
	defer stop()

	offices, none := officeSet(officeIDs)
	want := map[string]bool{}
	for _, id := range officeIDs {
		want[id] = true
	}
	if none {
		// Offices that cannot exist: nothing to report, but keep the
		// contract (connected until ctx ends).
		s.connected.Add(1)
		defer s.connected.Add(-1)
		<-ctx.Done()
		return nil
	}
	deliver := func(c office.Change) {
		if len(want) == 0 || want[c.OfficeID] {
			fn(c)
		}
	}
	backoff := reconnect.Backoff(s.opts.MinBackoff, s.opts.MaxBackoff)
	for {
		caughtUp, err := s.watchOnce(ctx, offices, deliver)
		if ctx.Err() != nil {
			return nil
		}
		if caughtUp {
			backoff.Reset()
		}
		wait := backoff.NextBackOff()
		s.log.Warn("change feed disconnected, reconnecting", "err", err, "in", wait)
		if s.opts.Reconnected != nil {
			s.opts.Reconnected()
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Connected reports whether a Watch is connected and caught up now.
func (s *Store) Connected() bool { return s.connected.Load() > 0 }

// watchOnce runs one connection of the feed until it fails or ctx ends.
// caughtUp reports whether it got as far as the live phase.
func (s *Store) watchOnce(ctx context.Context, offices any, deliver func(office.Change)) (caughtUp bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.feedCfg)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	l := &listener{pid: conn.PgConn().PID()}
	s.mu.Lock()
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()

	if _, err := conn.Exec(ctx, "listen "+Channel); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	changes, err := catchUp(ctx, conn, offices)
	if err != nil {
		return false, fmt.Errorf("catch up: %w", err)
	}
	for _, c := range changes {
		deliver(c)
	}
	s.connected.Add(1)
	defer s.connected.Add(-1)

	for {
		wctx, cancel := context.WithTimeout(ctx, s.opts.PingInterval)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return true, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			// Quiet for a while: check that the connection still works.
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return true, fmt.Errorf("ping: %w", err)
			}
			continue
		case err != nil:
			return true, fmt.Errorf("wait for notification: %w", err)
		}
		var c office.Change
		if err := json.Unmarshal([]byte(n.Payload), &c); err != nil {
			s.log.Error("change feed: bad notification payload", "payload", n.Payload, "err", err)
			continue
		}
		deliver(c)
	}
}

func catchUp(ctx context.Context, conn *pgx.Conn, offices any) ([]office.Change, error) {
	rows, err := conn.Query(ctx, catchUpSQL, offices)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (office.Change, error) {
		c := office.Change{Op: office.OpCatchUp}
		var created time.Time
		err := r.Scan(&c.Table, &c.ID, &c.OfficeID, &c.AgentID, &c.Status, &created)
		return c, err
	})
}
