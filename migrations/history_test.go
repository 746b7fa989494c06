package migrations_test

import (
	"context"
	"database/sql"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/office-server/office-server/migrations"
)

// gooseUpTo migrates db as office-server did before it kept the Supabase
// CLI's history: goose, versions in office_migrations.goose_db_version.
func gooseUpTo(ctx context.Context, t *testing.T, db *sql.DB, version int64) {
	t.Helper()
	if _, err := db.ExecContext(ctx, "create schema if not exists office_migrations"); err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS(),
		goose.WithTableName("office_migrations.goose_db_version"), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		t.Fatalf("goose up to %d: %v", version, err)
	}
}

// history returns the CLI history's rows: version → name and statements.
func history(ctx context.Context, t *testing.T, db *sql.DB) map[string][]string {
	t.Helper()
	rows, err := db.QueryContext(ctx, "select version, coalesce(name, ''), array_to_json(statements)::text from "+migrations.HistoryTable)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var v, name, stmts string
		if err := rows.Scan(&v, &name, &stmts); err != nil {
			t.Fatal(err)
		}
		out[v] = []string{name, stmts}
	}
	return out
}

// TestLegacyHistoryMoved: a database an older office-server migrated with
// goose (all but the newest files) upgrades: Up moves goose's versions into
// the CLI's history with the files' names and statements, applies the
// newest only, and drops goose's table and schema.
func TestLegacyHistoryMoved(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, db := openDB(t)
	names, _ := fs.Glob(migrations.FS(), "*.sql")
	latest, _ := migrations.Latest()
	var before int64
	for _, n := range names[:len(names)-1] {
		before = version(t, n)
	}
	gooseUpTo(ctx, t, db, before)

	res, err := migrations.Up(ctx, db)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	if len(res) != 1 || res[0].Version != latest {
		t.Fatalf("Up applied %v; want only %d", res, latest)
	}
	h := history(ctx, t, db)
	if len(h) != len(names) {
		t.Fatalf("history has %d versions; want %d", len(h), len(names))
	}
	// The moved rows are those the server writes for a file it applies.
	_, freshDB := openDB(t)
	if _, err := migrations.Up(ctx, freshDB); err != nil {
		t.Fatal(err)
	}
	if want := history(ctx, t, freshDB); !reflect.DeepEqual(h, want) {
		t.Errorf("moved history differs from a fresh one")
	}
	var left bool
	if err := db.QueryRowContext(ctx, "select exists (select 1 from pg_namespace where nspname = 'office_migrations')").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left {
		t.Error("schema office_migrations is still there")
	}
	if res, err := migrations.Up(ctx, db); err != nil || len(res) != 0 {
		t.Fatalf("second Up: %v %v; want nothing", res, err)
	}
}

// TestHalfFilledRepaired: today's bug left each tool's history with part of
// the files (the CLI recorded the first, the server the first three); Up
// counts both, applies the rest once, and leaves one history.
func TestHalfFilledRepaired(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, db := openDB(t)
	names, _ := fs.Glob(migrations.FS(), "*.sql")
	gooseUpTo(ctx, t, db, version(t, names[2]))
	// The CLI's history as `supabase db push` left it after its first file.
	if _, err := migrations.ApplyURLTo(ctx, url, version(t, names[0])); err != nil {
		t.Fatal(err)
	}
	res, err := migrations.Up(ctx, db)
	if err != nil {
		t.Fatalf("Up on a half-filled database: %v", err)
	}
	if len(res) != len(names)-3 {
		t.Fatalf("Up applied %d files; want %d", len(res), len(names)-3)
	}
	if h := history(ctx, t, db); len(h) != len(names) {
		t.Fatalf("history has %d versions; want %d", len(h), len(names))
	}
}

// TestPendingURL: what a server started with --no-migrate reports missing.
func TestPendingURL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, _ := openDB(t)
	names, _ := fs.Glob(migrations.FS(), "*.sql")
	missing, err := migrations.PendingURL(ctx, url)
	if err != nil || len(missing) != len(names) {
		t.Fatalf("empty database: missing %v, %v; want all %d", missing, err, len(names))
	}
	if _, err := migrations.ApplyURLTo(ctx, url, version(t, names[len(names)-2])); err != nil {
		t.Fatal(err)
	}
	missing, err = migrations.PendingURL(ctx, url)
	if err != nil || len(missing) != 1 || missing[0].Name != names[len(names)-1] {
		t.Fatalf("missing %v, %v; want only %s", missing, err, names[len(names)-1])
	}
}

func version(t *testing.T, file string) int64 {
	t.Helper()
	v, _, _ := strings.Cut(file, "_")
	var n int64
	for _, c := range v {
		n = n*10 + int64(c-'0')
	}
	return n
}
