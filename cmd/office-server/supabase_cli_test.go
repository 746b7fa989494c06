package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/migrations"
	"github.com/office-server/office-server/migrations/supabasetest"
)

// supabaseProject is a folder as a person keeps one for the Supabase CLI:
// supabase/migrations/ holding some of migrations/*.sql, and nothing else
// (no config.toml, no `supabase init`, no `link`: `--db-url` names the
// database).
type supabaseProject struct {
	bin, dir, home string
}

// newSupabaseProject makes the folder with the first n files (all for n < 0).
func newSupabaseProject(t *testing.T, n int) *supabaseProject {
	t.Helper()
	p := &supabaseProject{bin: testenv.SupabaseCLI(t), dir: t.TempDir(), home: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(p.dir, "supabase", "migrations"), 0o755); err != nil {
		t.Fatal(err)
	}
	p.copyFiles(t, n)
	return p
}

// copyFiles puts the first n migration files (all for n < 0) in the folder.
func (p *supabaseProject) copyFiles(t *testing.T, n int) {
	t.Helper()
	names := migrationFiles(t)
	if n < 0 {
		n = len(names)
	}
	for _, name := range names[:n] {
		b, err := fs.ReadFile(migrations.FS(), name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p.dir, "supabase", "migrations", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// run runs `supabase args… --db-url url --yes` in the folder, with a fresh
// HOME and the CLI's telemetry and update check off (nothing leaves the
// machine), and returns its output.
func (p *supabaseProject) run(t *testing.T, url string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, append(args, "--db-url", url, "--yes")...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "HOME="+p.home, "DO_NOT_TRACK=1", "SUPABASE_TELEMETRY_DISABLED=1", "SUPABASE_NO_UPDATE_NOTIFIER=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// push runs `supabase db push` and fails the test if it fails.
func (p *supabaseProject) push(t *testing.T, url string) string {
	t.Helper()
	out, err := p.run(t, url, "db", "push")
	if err != nil {
		t.Fatalf("supabase db push: %v\n%s", err, out)
	}
	return out
}

// listed returns `supabase migration list`'s rows: local and remote version.
func (p *supabaseProject) listed(t *testing.T, url string) [][2]string {
	t.Helper()
	out, err := p.run(t, url, "migration", "list")
	if err != nil {
		t.Fatalf("supabase migration list: %v\n%s", err, out)
	}
	row := regexp.MustCompile("(?m)^\\s*`?([0-9]{14})?`?\\s*\\|\\s*`?([0-9]{14})?`?\\s*\\|")
	var rows [][2]string
	for _, m := range row.FindAllStringSubmatch(out, -1) {
		rows = append(rows, [2]string{m[1], m[2]})
	}
	return rows
}

func migrationFiles(t *testing.T) []string {
	t.Helper()
	names, err := fs.Glob(migrations.FS(), "*.sql")
	if err != nil || len(names) < 2 {
		t.Fatalf("embedded migrations: %v %v", names, err)
	}
	return names
}

// supabaseDatabase is a fresh database prepared as a Supabase project is
// before any user migration (migrations/supabasetest).
func supabaseDatabase(t *testing.T) string {
	t.Helper()
	url := testenv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := supabasetest.Apply(ctx, url); err != nil {
		t.Fatal(err)
	}
	return url
}

// officeMigrate runs `office-server migrate` (the command's Main) and
// returns its output.
func officeMigrate(t *testing.T, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	if code := run(ctx, append([]string{"migrate", "--database-url", url}, args...), nil, &out, &errb); code != 0 {
		t.Fatalf("office-server migrate: exit %d\n%s%s", code, out.String(), errb.String())
	}
	return out.String()
}

// officeServe runs `office-server serve` on url until it listens (the
// migrations ran, the store opened), then stops it.
func officeServe(t *testing.T, url string) {
	t.Helper()
	dir := t.TempDir()
	cfg, err := parseServeConfig([]string{"--database-url", url, "--data-dir", dir, "--addr", "127.0.0.1:0", "--no-autostart"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := runMain(t, cfg, dir)
	if err := r.stop(); err != nil {
		t.Fatalf("serve: %v\n%s", err, r.logs.String())
	}
}

// schemaDump is pg_dump --schema-only of url, without the lines that name
// the database or differ per dump.
func schemaDump(t *testing.T, url string) string {
	t.Helper()
	out, err := exec.Command("pg_dump", "--schema-only", "--no-owner", "--no-privileges", url).Output()
	if err != nil {
		t.Fatalf("pg_dump: %v", err)
	}
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, `\restrict`) || strings.HasPrefix(l, `\unrestrict`) || strings.HasPrefix(l, "-- Dumped") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// grantsDump lists every privilege on the database's own objects, which
// pg_dump --no-privileges leaves out and TestSupabaseCLIAnyOrder compares too.
func grantsDump(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
		select format('%s %s.%s %s', c.relkind, n.nspname, c.relname, coalesce(c.relacl::text, ''))
		from pg_class c join pg_namespace n on n.oid = c.relnamespace
		where n.nspname in ('public', 'auth', 'office_cluster', 'supabase_migrations')
		union all
		select format('f %s.%s(%s) %s', n.nspname, p.proname, pg_get_function_identity_arguments(p.oid), coalesce(p.proacl::text, ''))
		from pg_proc p join pg_namespace n on n.oid = p.pronamespace
		where n.nspname in ('public', 'auth', 'office_cluster')
		order by 1`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// historyRows is the CLI's history as text, to compare two databases.
func historyRows(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "select format('%s %s %s', version, name, statements) from "+migrations.HistoryTable+" order by version")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// TestSupabaseCLIAnyOrder: the real Supabase CLI (`supabase db push`) and
// office-server (`migrate`, `serve`) on one database, in every order and
// for upgrades either way: neither fails, neither applies twice,
// `supabase migration list` shows every file applied, and the schema,
// grants and history are those of a database office-server migrated alone.
func TestSupabaseCLIAnyOrder(t *testing.T) {
	names := migrationFiles(t)
	last := len(names) - 1
	newest := fileVersion(names[last])
	beforeNewest := fileVersion(names[last-1])

	ref := supabaseDatabase(t)
	officeMigrate(t, ref)
	wantSchema, wantGrants, wantHistory := schemaDump(t, ref), grantsDump(t, ref), historyRows(t, ref)

	for _, tc := range []struct {
		name  string
		steps func(t *testing.T, p *supabaseProject, url string)
	}{
		{"push then migrate", func(t *testing.T, p *supabaseProject, url string) {
			p.push(t, url)
			if out := officeMigrate(t, url); !strings.Contains(out, "database is up to date") {
				t.Errorf("migrate after push: %s", out)
			}
		}},
		{"migrate then push", func(t *testing.T, p *supabaseProject, url string) {
			officeMigrate(t, url)
			if out := p.push(t, url); !strings.Contains(out, "up to date") {
				t.Errorf("push after migrate applied something:\n%s", out)
			}
		}},
		{"push then serve", func(t *testing.T, p *supabaseProject, url string) {
			p.push(t, url)
			officeServe(t, url)
		}},
		{"serve then push", func(t *testing.T, p *supabaseProject, url string) {
			officeServe(t, url)
			if out := p.push(t, url); !strings.Contains(out, "up to date") {
				t.Errorf("push after serve applied something:\n%s", out)
			}
		}},
		{"upgrade: push all but the newest, serve, push", func(t *testing.T, p *supabaseProject, url string) {
			p2 := newSupabaseProject(t, last)
			if out := p2.push(t, url); strings.Contains(out, names[last]) {
				t.Fatalf("push of all but the newest applied it:\n%s", out)
			}
			officeServe(t, url)
			if out := p.push(t, url); !strings.Contains(out, "up to date") {
				t.Errorf("push after serve applied something:\n%s", out)
			}
		}},
		{"upgrade: migrate all but the newest, push, migrate", func(t *testing.T, p *supabaseProject, url string) {
			officeMigrate(t, url, "--to", fmt.Sprint(beforeNewest))
			out := p.push(t, url)
			if !strings.Contains(out, "Applying migration "+names[last]) || strings.Count(out, "Applying migration") != 1 {
				t.Errorf("push after migrating all but the newest: want only %s applied:\n%s", names[last], out)
			}
			if out := officeMigrate(t, url); !strings.Contains(out, fmt.Sprintf("database is up to date (version %d)", newest)) {
				t.Errorf("migrate after push: %s", out)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := supabaseDatabase(t)
			p := newSupabaseProject(t, -1)
			tc.steps(t, p, url)
			checkSameAsOffice(t, p, url, names, wantSchema, wantGrants, wantHistory)
		})
	}
}

// checkSameAsOffice: `supabase migration list` shows every file applied
// (local and remote), and the schema, grants and history are those of a
// database office-server migrated alone.
func checkSameAsOffice(t *testing.T, p *supabaseProject, url string, names []string, wantSchema, wantGrants, wantHistory string) {
	rows := p.listed(t, url)
	if len(rows) != len(names) {
		t.Fatalf("migration list has %d rows; want %d: %v", len(rows), len(names), rows)
	}
	for i, r := range rows {
		if v := names[i][:14]; r[0] != v || r[1] != v {
			t.Errorf("migration list row %d = %v; want %s applied (local and remote)", i, r, v)
		}
	}
	if got := schemaDump(t, url); got != wantSchema {
		t.Errorf("schema differs from office-server's alone:\n%s", lineDiff(got, wantSchema))
	}
	if got := grantsDump(t, url); got != wantGrants {
		t.Errorf("grants differ from office-server's alone:\n%s", lineDiff(got, wantGrants))
	}
	if got := historyRows(t, url); got != wantHistory {
		t.Errorf("history differs from office-server's alone:\n%s", lineDiff(got, wantHistory))
	}
}

// TestSupabaseCLIRepairsHalfFilled: databases that the CLI and an older
// office-server (which kept goose's office_migrations.goose_db_version) left
// half-migrated, each failing on what the other had applied, are repaired
// by the next `office-server migrate`: it applies only what neither did,
// `supabase db push` is then up to date, and `supabase migration list`
// shows every file applied.
func TestSupabaseCLIRepairsHalfFilled(t *testing.T) {
	names := migrationFiles(t)
	for _, tc := range []struct {
		name        string
		break_      func(t *testing.T, url string)
		wantApplied int // files the repairing migrate applies
	}{
		{"old migrate then push", func(t *testing.T, url string) {
			if err := gooseUp(t, url); err != nil {
				t.Fatalf("old server: %v", err)
			}
			// The CLI records the stand-ins (idempotent), then fails.
			if out, err := newSupabaseProject(t, -1).run(t, url, "db", "push"); err == nil {
				t.Fatalf("push after the old server succeeded; the bug is not reproduced:\n%s", out)
			}
		}, 0},
		{"push all but the newest then old serve", func(t *testing.T, url string) {
			newSupabaseProject(t, len(names)-1).push(t, url)
			// The old server records the stand-ins, then fails.
			if err := gooseUp(t, url); err == nil {
				t.Fatal("the old server migrated after push; the bug is not reproduced")
			}
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := supabaseDatabase(t)
			tc.break_(t, url)
			out := officeMigrate(t, url)
			if n := strings.Count(out, "applied "); n != tc.wantApplied {
				t.Errorf("repairing migrate applied %d files; want %d:\n%s", n, tc.wantApplied, out)
			}
			p := newSupabaseProject(t, -1)
			if out := p.push(t, url); !strings.Contains(out, "up to date") {
				t.Errorf("push after the repair applied something:\n%s", out)
			}
			rows := p.listed(t, url)
			if len(rows) != len(names) {
				t.Fatalf("migration list has %d rows; want %d: %v", len(rows), len(names), rows)
			}
			for i, r := range rows {
				if v := names[i][:14]; r[0] != v || r[1] != v {
					t.Errorf("migration list row %d = %v; want %s applied", i, r, v)
				}
			}
		})
	}
}

// gooseUp migrates url as office-server did before it kept the Supabase
// CLI's history: goose, versions in office_migrations.goose_db_version.
func gooseUp(t *testing.T, url string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "create schema if not exists office_migrations"); err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS(),
		goose.WithTableName("office_migrations.goose_db_version"), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Up(ctx)
	return err
}

func fileVersion(file string) int64 {
	var v int64
	fmt.Sscanf(file, "%d_", &v)
	return v
}

// lineDiff lists the lines only one of a and b has.
func lineDiff(a, b string) string {
	count := map[string]int{}
	for _, l := range strings.Split(a, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(b, "\n") {
		count[l]--
	}
	var out []string
	for l, n := range count {
		switch {
		case n > 0:
			out = append(out, "+ "+l)
		case n < 0:
			out = append(out, "- "+l)
		}
	}
	return strings.Join(out, "\n")
}

// TestSupabaseCLIConcurrentPush: `supabase db push` and `office-server
// migrate` at the same moment on an empty database: both wait behind a lock
// the test holds on the (empty) history table, then start together. One of
// them may fail (the CLI's insert of a version the server recorded
// meanwhile, or a deadlock PostgreSQL breaks); whatever happens, no file is
// applied twice or half, and after running the failed one again the
// database is the one office-server migrates alone.
func TestSupabaseCLIConcurrentPush(t *testing.T) {
	ref := supabaseDatabase(t)
	officeMigrate(t, ref)
	wantSchema, wantHistory := schemaDump(t, ref), historyRows(t, ref)
	for i := range 3 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			url := supabaseDatabase(t)
			p := newSupabaseProject(t, -1)
			hold := holdHistory(t, url)
			var pushOut string
			var pushErr error
			done := make(chan struct{})
			go func() {
				defer close(done)
				pushOut, pushErr = p.run(t, url, "db", "push")
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var out, errb bytes.Buffer
			migrated := make(chan int)
			go func() { migrated <- run(ctx, []string{"migrate", "--database-url", url}, nil, &out, &errb) }()
			hold()
			migrateCode := <-migrated
			<-done
			t.Logf("push: %v\n%s\nmigrate: exit %d\n%s%s", pushErr, pushOut, migrateCode, out.String(), errb.String())
			if pushErr != nil {
				p.push(t, url)
			}
			officeMigrate(t, url)
			if got := historyRows(t, url); got != wantHistory {
				t.Errorf("history differs:\n%s", lineDiff(got, wantHistory))
			}
			if got := schemaDump(t, url); got != wantSchema {
				t.Errorf("schema differs:\n%s", lineDiff(got, wantSchema))
			}
		})
	}
}

// holdHistory creates the history table as the CLI does and locks it until
// the returned release is called, which waits until two sessions (a push
// and a migrate started meanwhile) wait on the lock, then lets them go at
// once.
func holdHistory(t *testing.T, url string) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE SCHEMA IF NOT EXISTS supabase_migrations",
		"CREATE TABLE IF NOT EXISTS supabase_migrations.schema_migrations (version text NOT NULL PRIMARY KEY, statements text[], name text)",
		"begin",
		"lock table supabase_migrations.schema_migrations in access exclusive mode",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		defer conn.Close(ctx)
		deadline := time.Now().Add(30 * time.Second)
		for {
			var waiting int
			if err := conn.QueryRow(ctx, "select count(distinct pid) from pg_locks where not granted and relation = 'supabase_migrations.schema_migrations'::regclass").Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			if waiting == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%d sessions wait on the history table after 30 s; want 2 (push and migrate)", waiting)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if _, err := conn.Exec(ctx, "commit"); err != nil {
			t.Fatal(err)
		}
	}
}
