package migrations_test

import (
	"context"
	"database/sql"
	"io/fs"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/migrations"
	"github.com/office-server/office-server/migrations/supabasetest"
)

// openDB opens a fresh database of the test's own.
func openDB(t *testing.T) (string, *sql.DB) {
	t.Helper()
	url := testenv.NewDatabase(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return url, db
}

func TestApplyTwicePlainPostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, db := openDB(t)
	res, err := migrations.Up(ctx, db)
	if err != nil {
		t.Fatalf("first Up: %v", err)
	}
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if len(res) == 0 || res[len(res)-1].Version != latest {
		t.Fatalf("first Up applied %v, want every migration up to %d", res, latest)
	}
	res, err = migrations.Up(ctx, db)
	if err != nil {
		t.Fatalf("second Up: %v", err)
	}
	if len(res) != 0 {
		t.Fatalf("second Up applied %v, want nothing", res)
	}
	var n int
	if err := db.QueryRowContext(ctx, "select count(*) from "+migrations.VersionTable+" where version_id > 0 and is_applied").Scan(&n); err != nil {
		t.Fatal(err)
	}
	names, _ := fs.Glob(migrations.FS(), "*.sql")
	if n != len(names) {
		t.Fatalf("recorded %d versions, want %d", n, len(names))
	}
	// Plain Postgres: no realtime publication was created by us.
	var pub bool
	if err := db.QueryRowContext(ctx, "select exists (select 1 from pg_publication where pubname = 'supabase_realtime')").Scan(&pub); err != nil {
		t.Fatal(err)
	}
	if pub {
		t.Fatal("the migrations created publication supabase_realtime; they must only join it when it exists")
	}
}

func TestApplyOnSupabaseStandIn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, db := openDB(t)
	if err := supabasetest.Apply(ctx, url); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Apply(ctx, db); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if err := migrations.Apply(ctx, db); err != nil {
		t.Fatalf("second Apply: %v", err)
	}
	rows, err := db.QueryContext(ctx, `select tablename from pg_publication_tables where pubname = 'supabase_realtime' order by 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	want := []string{"agent_invocations", "agent_results", "agent_sessions", "dependency_requests", "office_agents", "office_events", "user_messages", "user_questions"}
	if len(got) != len(want) {
		t.Fatalf("published tables %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("published tables %v, want %v", got, want)
		}
	}
	// The value column of dependency_requests is not published.
	var hasValue bool
	if err := db.QueryRowContext(ctx, `select 'value' = any(attnames) from pg_publication_tables where pubname = 'supabase_realtime' and tablename = 'dependency_requests'`).Scan(&hasValue); err != nil {
		t.Fatal(err)
	}
	if hasValue {
		t.Fatal("dependency_requests.value is in the realtime publication")
	}
	var ident string
	if err := db.QueryRowContext(ctx, `select relreplident::text from pg_class where oid = 'public.user_questions'::regclass`).Scan(&ident); err != nil {
		t.Fatal(err)
	}
	if ident != "f" {
		t.Fatalf("user_questions replica identity %q, want f (full)", ident)
	}
}

func TestMigrationsDown(t *testing.T) {
	// Every Down section must undo its Up, so that Up works again after it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, db := openDB(t)
	if err := migrations.Apply(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Reset(ctx, db); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `select count(*) from pg_tables where schemaname = 'public'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d tables left in public after Reset", n)
	}
	if err := migrations.Apply(ctx, db); err != nil {
		t.Fatalf("Apply after Reset: %v", err)
	}
}
