package postgres_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/migrations"
	"github.com/office-server/office-server/migrations/supabasetest"
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

// appRole is a login role without superuser, CREATEROLE or BYPASSRLS: what
// the "postgres" role of a Supabase project is to the office's tables.
const appRole, appPassword = "office_pg_store_test", "office_pg_store_test"

// supabaseLikeDatabase returns the URL, as appRole, of a fresh database set
// up as on Supabase: the stand-in for what Supabase provides (applied as the
// administrator), appRole owning the database and Supabase's default
// privileges for it, and the migrations applied by appRole itself.
func supabaseLikeDatabase(t testing.TB) string {
	app, _ := supabaseLike(t)
	return app
}

// supabaseLike is supabaseLikeDatabase, also returning the administrator's URL.
func supabaseLike(t testing.TB) (app, adminURL string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adminURL = testenv.NewDatabase(t)
	if err := supabasetest.Apply(ctx, adminURL); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, `do $$ begin
		create role `+appRole+` login password '`+appPassword+`' nosuperuser nocreaterole nocreatedb nobypassrls;
	exception when duplicate_object or unique_violation then null; end $$`)
	if err != nil {
		t.Fatalf("create role: %v", err)
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	for _, q := range []string{
		"alter database " + db + " owner to " + appRole,
		"grant usage on schema auth to " + appRole,
		"grant select, references on auth.users to " + appRole,
		"alter publication supabase_realtime owner to " + appRole,
		"alter default privileges for role " + appRole + " in schema public grant all on tables to anon, authenticated, service_role",
		"alter default privileges for role " + appRole + " in schema public grant all on sequences to anon, authenticated, service_role",
		"alter default privileges for role " + appRole + " in schema public grant all on functions to anon, authenticated, service_role",
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	u.User = url.UserPassword(appRole, appPassword)
	app = u.String()
	if _, err := migrations.ApplyURL(ctx, app); err != nil {
		t.Fatalf("migrate as %s: %v", appRole, err)
	}
	return app, adminURL
}

// TestConformanceSupabaseLike runs the suite as a role with no superuser
// powers on a database laid out as a Supabase project's: the store, its
// feed and the kill (pg_terminate_backend of one's own backend) need none.
func TestConformanceSupabaseLike(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) (office.Store, office.ChangeFeed) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := postgres.Open(ctx, supabaseLikeDatabase(t), postgres.Options{})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			return s, s
		},
		KillFeed: func(t *testing.T, s office.Store, _ office.ChangeFeed) {
			killFeed(t, s.(*postgres.Store))
		},
	})
}
