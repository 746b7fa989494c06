// Package migrations holds the SQL schema of the office for Supabase Postgres
// (and any PostgreSQL 15+), one file per change, named as the Supabase CLI
// names them (<yyyymmddhhmmss>_<name>.sql) so that a user can copy them into
// a Supabase project and run `supabase db push`.
//
// Both tools keep one history: the Supabase CLI's own table,
// supabase_migrations.schema_migrations (version, name, statements). Up
// records each file there exactly as `supabase db push` does and reads what
// the CLI applied, so either tool, in any order, applies only what the other
// has not (docs/notes/migrations.md).
//
// The files have no "-- +goose Down" sections: the Supabase CLI runs a
// migration file whole, so a Down section would run right after its Up.
// Schema changes go forward only, as new files. Their "-- +goose" lines are
// comments to both tools (older servers ran the files with goose).
//
// Files in subdirectories (supabasetest) are not part of the production set.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib" // also registers the "pgx" database/sql driver
)

//go:embed *.sql
var files embed.FS

// FS returns the production migrations (the *.sql files of this directory).
func FS() fs.FS { return files }

// HistorySchema and HistoryTable name the Supabase CLI's migration history
// (supabase/cli, apps/cli-go/pkg/migration/history.go), which Up reads and
// writes as the CLI does.
const (
	HistorySchema = "supabase_migrations"
	HistoryTable  = HistorySchema + ".schema_migrations"
)

// legacyTable is where office-server recorded versions with goose before it
// used the CLI's history; Up moves what it finds there into HistoryTable.
const legacyTable = "office_migrations.goose_db_version"

// lockID keys the session advisory lock Up holds while it migrates: goose's
// default (github.com/pressly/goose/v3/lock.DefaultLockID), so that a server
// of this version and an older one starting on the same database also wait
// for each other.
const lockID int64 = 4097083626

// Result is one migration file.
type Result struct {
	Version int64
	Name    string // the file name
}

// migration is one embedded file as the Supabase CLI reads it.
type migration struct {
	version    string // "20261122000100"
	name       string // "office_schema"
	file       string // "20261122000100_office_schema.sql"
	statements []string
}

func (m migration) result() Result {
	v, _ := strconv.ParseInt(m.version, 10, 64)
	return Result{Version: v, Name: m.file}
}

// load reads the embedded files in version order.
func load() ([]migration, error) {
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []migration
	for _, n := range names {
		version, name, ok := strings.Cut(strings.TrimSuffix(n, ".sql"), "_")
		if _, err := strconv.ParseInt(version, 10, 64); !ok || err != nil || len(version) != 14 {
			return nil, fmt.Errorf("migration %s: name must be <yyyymmddhhmmss>_<name>.sql", n)
		}
		b, err := fs.ReadFile(files, n)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: version, name: name, file: n, statements: Statements(string(b))})
	}
	return out, nil
}

// Up applies every embedded migration whose version is not recorded in
// HistoryTable, in version order, and returns those it applied (none when
// the database is current). Each file runs in one transaction, statement by
// statement as the Supabase CLI runs it, and is recorded in the same
// transaction with the CLI's version, name and statements; a failed file is
// rolled back and reported with its name and statement.
//
// Before that, Up creates HistoryTable as the CLI does when it is missing,
// and moves the versions an older office-server recorded with goose into it
// (a database both tools half-filled is so repaired). Concurrent servers are
// serialised by a session advisory lock; a concurrent `supabase db push` by
// a lock on HistoryTable, so a file is applied and recorded once.
func Up(ctx context.Context, db *sql.DB) ([]Result, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("apply migrations: %w", err)
	}
	defer c.Close()
	var res []Result
	err = c.Raw(func(dc any) error {
		res, err = up(ctx, dc.(*stdlib.Conn).Conn(), 0)
		return err
	})
	return res, err
}

// Apply applies the pending migrations to db (see Up).
func Apply(ctx context.Context, db *sql.DB) error {
	_, err := Up(ctx, db)
	return err
}

// ApplyURL connects to databaseURL (a postgres:// URL or key=value DSN),
// applies the pending migrations (see Up) and disconnects.
func ApplyURL(ctx context.Context, databaseURL string) ([]Result, error) {
	return ApplyURLTo(ctx, databaseURL, 0)
}

// ApplyURLTo is ApplyURL applying no migration after version to
// (<yyyymmddhhmmss>; 0: all of them).
func ApplyURLTo(ctx context.Context, databaseURL string, to int64) ([]Result, error) {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return up(ctx, conn, to)
}

// PendingURL connects to databaseURL and returns the embedded migrations
// it lacks, changing nothing: for a server whose schema is managed
// elsewhere (serve --no-migrate). Versions an older office-server recorded
// with goose count as applied.
func PendingURL(ctx context.Context, databaseURL string) ([]Result, error) {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	all, err := load()
	if err != nil {
		return nil, err
	}
	applied := map[string]bool{}
	for _, table := range []string{HistoryTable, legacyTable} {
		vs, err := recorded(ctx, conn, table)
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			applied[v] = true
		}
	}
	var out []Result
	for _, m := range all {
		if !applied[m.version] {
			out = append(out, m.result())
		}
	}
	return out, nil
}

// Latest returns the highest version among the embedded migrations.
func Latest() (int64, error) {
	all, err := load()
	if err != nil {
		return 0, err
	}
	if len(all) == 0 {
		return 0, errors.New("no migrations")
	}
	return all[len(all)-1].result().Version, nil
}

// up applies the pending migrations, up to version last when it is not 0.
func up(ctx context.Context, conn *pgx.Conn, last int64) ([]Result, error) {
	all, err := load()
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "select pg_advisory_lock($1)", lockID); err != nil {
		return nil, fmt.Errorf("apply migrations: lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "select pg_advisory_unlock($1)", lockID)
	if err := createHistory(ctx, conn); err != nil {
		return nil, err
	}
	if err := moveLegacy(ctx, conn, all); err != nil {
		return nil, err
	}
	done, err := recorded(ctx, conn, HistoryTable)
	if err != nil {
		return nil, err
	}
	applied := map[string]bool{}
	for _, v := range done {
		applied[v] = true
	}
	var out []Result
	for _, m := range all {
		if applied[m.version] || last > 0 && m.result().Version > last {
			continue
		}
		ran, err := applyOne(ctx, conn, m)
		if err != nil {
			return out, err
		}
		if ran {
			out = append(out, m.result())
		}
	}
	return out, nil
}

// createHistory creates HistoryTable with the Supabase CLI's statements
// (pkg/migration/history.go, CreateMigrationTable), in one transaction with
// its lock timeout, unless it has its three columns already (the check the
// CLI 2.117 makes first, seen in its trace): ALTER TABLE would otherwise
// lock the table against every reader at each start. "create … if not
// exists" can still fail on a catalog unique index when the CLI creates the
// same object at the same moment: then the second try finds it.
func createHistory(ctx context.Context, conn *pgx.Conn) error {
	var ready bool
	if err := conn.QueryRow(ctx, `select count(*) = 3 from pg_attribute
		where attrelid = to_regclass('supabase_migrations.schema_migrations')
		  and attname in ('version', 'name', 'statements') and not attisdropped`).Scan(&ready); err != nil {
		return fmt.Errorf("read %s: %w", HistoryTable, err)
	}
	if ready {
		return nil
	}
	var err error
	for range 2 {
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for _, q := range []string{
				"SET LOCAL lock_timeout = '4s'",
				"CREATE SCHEMA IF NOT EXISTS supabase_migrations",
				"CREATE TABLE IF NOT EXISTS supabase_migrations.schema_migrations (version text NOT NULL PRIMARY KEY)",
				"ALTER TABLE supabase_migrations.schema_migrations ADD COLUMN IF NOT EXISTS statements text[]",
				"ALTER TABLE supabase_migrations.schema_migrations ADD COLUMN IF NOT EXISTS name text",
			} {
				if _, err := tx.Exec(ctx, q); err != nil {
					return err
				}
			}
			return nil
		})
		if code := sqlState(err); code != "23505" && code != "42P06" && code != "42P07" {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", HistoryTable, err)
	}
	return nil
}

// recorded returns the versions table holds (none when it does not
// exist). For goose's table, a version counts when its latest row says it
// is applied.
func recorded(ctx context.Context, conn *pgx.Conn, table string) ([]string, error) {
	var exists bool
	if err := conn.QueryRow(ctx, "select to_regclass($1) is not null", table).Scan(&exists); err != nil {
		return nil, fmt.Errorf("read %s: %w", table, err)
	}
	if !exists {
		return nil, nil
	}
	q := "select version from " + HistoryTable
	if table == legacyTable {
		q = `select version_id::text from (
		       select distinct on (version_id) version_id, is_applied from ` + legacyTable + `
		       where version_id > 0 order by version_id, id desc) v
		     where is_applied`
	}
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", table, err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", table, err)
	}
	return vs, nil
}

// moveLegacy records in HistoryTable the versions an older office-server
// recorded with goose (with the embedded file's name and statements), then
// drops goose's table and its schema, in one transaction: the CLI's table
// is then the one history.
func moveLegacy(ctx context.Context, conn *pgx.Conn, all []migration) error {
	vs, err := recorded(ctx, conn, legacyTable)
	if err != nil || vs == nil {
		return err
	}
	byVersion := map[string]migration{}
	for _, m := range all {
		byVersion[m.version] = m
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, v := range vs {
			m, ok := byVersion[v]
			if !ok {
				// Applied by a newer server: keep the version, as the CLI
				// keeps a version whose file it lacks.
				m = migration{version: v}
			}
			if _, err := tx.Exec(ctx, "INSERT INTO supabase_migrations.schema_migrations(version, name, statements) VALUES($1, nullif($2, ''), $3) ON CONFLICT (version) DO NOTHING",
				m.version, m.name, m.statements); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, "drop table "+legacyTable); err != nil {
			return err
		}
		var others bool
		if err := tx.QueryRow(ctx, "select exists (select 1 from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'office_migrations')").Scan(&others); err != nil {
			return err
		}
		if !others {
			_, err = tx.Exec(ctx, "drop schema office_migrations")
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("move %s into %s: %w", legacyTable, HistoryTable, err)
	}
	return nil
}

// applyOne runs m and records it, in one transaction that first locks
// HistoryTable against a concurrent `supabase db push` (whose INSERT of the
// same version then waits, and fails on the key, rolling its copy back)
// and skips m when the CLI recorded it meanwhile. A deadlock with the CLI's
// own transaction is retried. ran says whether m ran.
func applyOne(ctx context.Context, conn *pgx.Conn, m migration) (ran bool, err error) {
	for try := 0; ; try++ {
		// As the CLI does before each file: a file's "set" does not leak
		// into the next.
		if _, err = conn.Exec(ctx, "RESET ALL"); err != nil {
			return false, fmt.Errorf("apply %s: %w", m.file, err)
		}
		ran, err = applyTx(ctx, conn, m)
		if sqlState(err) != "40P01" || try == 2 {
			return ran, err
		}
	}
}

func applyTx(ctx context.Context, conn *pgx.Conn, m migration) (ran bool, err error) {
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "lock table "+HistoryTable+" in share row exclusive mode"); err != nil {
			return fmt.Errorf("apply %s: lock %s: %w", m.file, HistoryTable, err)
		}
		var done bool
		if err := tx.QueryRow(ctx, "select exists (select 1 from "+HistoryTable+" where version = $1)", m.version).Scan(&done); err != nil {
			return fmt.Errorf("apply %s: %w", m.file, err)
		}
		if done {
			return nil
		}
		for i, s := range m.statements {
			// One statement per Parse, as the CLI's batch sends them.
			if _, err := tx.Conn().PgConn().ExecParams(ctx, s, nil, nil, nil, nil).Close(); err != nil {
				return fmt.Errorf("apply %s: statement %d (%s): %w", m.file, i+1, firstLine(s), err)
			}
		}
		if _, err := tx.Exec(ctx, "INSERT INTO supabase_migrations.schema_migrations(version, name, statements) VALUES($1, $2, $3)",
			m.version, m.name, m.statements); err != nil {
			return fmt.Errorf("apply %s: record: %w", m.file, err)
		}
		ran = true
		return nil
	})
	return ran, err
}

// firstLine is the first line of statement s that is not a comment, cut to
// 80 bytes, to name it in an error.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "--") {
			if len(l) > 80 {
				l = l[:80] + "…"
			}
			return l
		}
	}
	return ""
}

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
