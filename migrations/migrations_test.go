package migrations_test

import (
	"context"
	"database/sql"
	"io/fs"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

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
	if err := db.QueryRowContext(ctx, "select count(*) from "+migrations.HistoryTable).Scan(&n); err != nil {
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
	// Columns added after the table joined the publication travel too.
	var hasDetail bool
	if err := db.QueryRowContext(ctx, `select 'detail' = any(attnames) from pg_publication_tables where pubname = 'supabase_realtime' and tablename = 'agent_sessions'`).Scan(&hasDetail); err != nil {
		t.Fatal(err)
	}
	if !hasDetail {
		t.Fatal("agent_sessions.detail is not in the realtime publication")
	}
}

// TestSessionDetailUpgrade: a database migrated before agent_sessions had
// detail upgrades in place; its sessions keep their status and read detail
// the empty string; needs_attention is a status; a detail over 4000 bytes
// is refused.
func TestSessionDetailUpgrade(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, db := openDB(t)
	const before = 20261122000300 // office_change_feed
	if _, err := migrations.ApplyURLTo(ctx, url, before); err != nil {
		t.Fatalf("migrate up to %d: %v", before, err)
	}
	exec := func(sql string, args ...any) error {
		_, err := db.ExecContext(ctx, sql, args...)
		return err
	}
	officeID, agentID, sessionID := uuid.NewString(), uuid.NewString(), uuid.NewString()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"insert into offices (id, name) values ($1, 'A')", []any{officeID}},
		{"insert into office_agents (id, office_id, name) values ($1, $2, 'PO')", []any{agentID, officeID}},
		{"insert into agent_sessions (id, office_id, agent_id, status, exit_code) values ($1, $2, $3, 'crashed', 2)", []any{sessionID, officeID, agentID}},
	} {
		if err := exec(q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	if err := exec("update agent_sessions set status = 'needs_attention' where id = $1", sessionID); sqlState(err) != "23514" {
		t.Fatalf("needs_attention before the migration: err %v, want check violation (23514)", err)
	}

	res, err := migrations.Up(ctx, db)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	if len(res) == 0 || res[0].Version <= before {
		t.Fatalf("Up applied %v, want the migrations after %d", res, before)
	}
	var status, detail string
	if err := db.QueryRowContext(ctx, "select status, detail from agent_sessions where id = $1", sessionID).Scan(&status, &detail); err != nil {
		t.Fatal(err)
	}
	if status != "crashed" || detail != "" {
		t.Fatalf("upgraded session: status %q detail %q, want crashed and ''", status, detail)
	}
	trust := "Do you trust the files in this folder?\n❯ 1. Yes, proceed"
	if err := exec("update agent_sessions set status = 'needs_attention', detail = $2 where id = $1", sessionID, trust); err != nil {
		t.Fatalf("needs_attention with a detail: %v", err)
	}
	if err := exec("update agent_sessions set status = 'asleep' where id = $1", sessionID); sqlState(err) != "23514" {
		t.Fatalf("unknown status: err %v, want check violation (23514)", err)
	}
	if err := exec("update agent_sessions set detail = $2 where id = $1", sessionID, strings.Repeat("가", 1334)); sqlState(err) != "23514" {
		t.Fatalf("4002-byte detail: err %v, want check violation (23514)", err)
	}
	if err := exec("update agent_sessions set detail = $2 where id = $1", sessionID, strings.Repeat("가", 1333)); err != nil {
		t.Fatalf("3999-byte detail: %v", err)
	}
}

// TestFilesFitSupabaseCLI: the names are the Supabase CLI's, and no file
// has a Down section (supabase db push would run it right after the Up).
func TestFilesFitSupabaseCLI(t *testing.T) {
	names, err := fs.Glob(migrations.FS(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no embedded migrations")
	}
	name := regexp.MustCompile(`^[0-9]{14}_[a-z0-9_]+\.sql$`)
	for _, n := range names {
		if !name.MatchString(n) {
			t.Errorf("%s: want <yyyymmddhhmmss>_<name>.sql", n)
		}
		b, err := fs.ReadFile(migrations.FS(), n)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if strings.Count(s, "-- +goose Up") != 1 {
			t.Errorf("%s: want exactly one -- +goose Up", n)
		}
		if strings.Contains(s, "+goose Down") {
			t.Errorf("%s: has a Down section, which supabase db push would run after the Up", n)
		}
		if strings.Count(s, "-- +goose StatementBegin") != strings.Count(s, "-- +goose StatementEnd") {
			t.Errorf("%s: unbalanced StatementBegin/StatementEnd", n)
		}
	}
}

// TestApplyConcurrently: two servers starting at once on an empty database
// both succeed, and each migration is applied once (goose's advisory lock).
func TestApplyConcurrently(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, _ := openDB(t)
	var wg sync.WaitGroup
	results := make([][]migrations.Result, 3)
	errs := make([]error, 3)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = migrations.ApplyURL(ctx, url) })
	}
	wg.Wait()
	total := 0
	for i := range results {
		if errs[i] != nil {
			t.Errorf("concurrent Apply #%d: %v", i, errs[i])
		}
		total += len(results[i])
	}
	names, _ := fs.Glob(migrations.FS(), "*.sql")
	if total != len(names) {
		t.Errorf("concurrent Applies applied %d migrations in all; want each of %d once", total, len(names))
	}
}
