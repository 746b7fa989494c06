package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/migrations"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/store/postgres"
	"github.com/office-server/office-server/store/storetest"
)

// open returns a Store on a fresh, migrated database of the test's own and
// the database's URL.
func open(t testing.TB, opts postgres.Options) (*postgres.Store, string) {
	t.Helper()
	url := testenv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := migrations.ApplyURL(ctx, url); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	s, err := postgres.Open(ctx, url, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, url
}

// killFeed terminates the backends the store's feed LISTENs on, as an
// administrator (or the same role: no superuser needed) would with
// pg_terminate_backend, and waits until they are gone.
func killFeed(t testing.TB, s *postgres.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var pids []uint32
	for len(pids) == 0 {
		pids = s.FeedPIDs()
		if len(pids) == 0 {
			if ctx.Err() != nil {
				t.Fatal("the feed has no LISTEN connection to kill")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for _, pid := range pids {
		var ok bool
		if err := s.Pool().QueryRow(ctx, "select pg_terminate_backend($1)", int32(pid)).Scan(&ok); err != nil {
			t.Fatalf("pg_terminate_backend(%d): %v", pid, err)
		}
		if !ok {
			t.Fatalf("pg_terminate_backend(%d) = false", pid)
		}
		for {
			var alive bool
			if err := s.Pool().QueryRow(ctx, "select exists (select 1 from pg_stat_activity where pid = $1)", int32(pid)).Scan(&alive); err != nil {
				t.Fatalf("pg_stat_activity: %v", err)
			}
			if !alive {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) (office.Store, office.ChangeFeed) {
			s, _ := open(t, postgres.Options{})
			return s, s
		},
		KillFeed: func(t *testing.T, s office.Store, _ office.ChangeFeed) {
			killFeed(t, s.(*postgres.Store))
		},
	})
}

var _ = pgx.ErrNoRows
