// Package migrations holds the SQL schema of the office for Supabase Postgres
// (and any PostgreSQL 15+), one file per change, named as the Supabase CLI
// names them (<yyyymmddhhmmss>_<name>.sql) so that a user can copy them into
// a Supabase project and run `supabase db push`. Each file carries goose
// annotations (SQL comments, which Supabase ignores); Apply runs them with
// goose from the embedded copy.
//
// The files have no "-- +goose Down" sections: the Supabase CLI runs a
// migration file whole, so a Down section would run right after its Up.
// Schema changes go forward only, as new files.
//
// Files in subdirectories (supabasetest) are not part of the production set.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// FS returns the production migrations (the *.sql files of this directory).
func FS() fs.FS { return files }

// VersionSchema and VersionTable name where goose records the applied
// versions. A schema of its own keeps the record out of the API-exposed
// public schema of a Supabase project.
const (
	VersionSchema = "office_migrations"
	VersionTable  = VersionSchema + ".goose_db_version"
)

// Result is one migration that Up applied.
type Result struct {
	Version int64
	Name    string // the file name
}

// Up applies every migration not yet recorded in VersionTable, in version
// order, and returns those it applied (none when the database is current).
// Concurrent callers are serialised by a Postgres advisory lock, so two
// servers starting at once apply each migration once. A failed migration is
// rolled back (each runs in a transaction) and reported with its file name.
func Up(ctx context.Context, db *sql.DB) ([]Result, error) {
	p, err := provider(ctx, db)
	if err != nil {
		return nil, err
	}
	res, err := p.Up(ctx)
	var out []Result
	for _, r := range res {
		if r.Error == nil {
			out = append(out, Result{Version: r.Source.Version, Name: fileName(r.Source.Path)})
		}
	}
	if err != nil {
		return out, fmt.Errorf("apply migrations: %w", err)
	}
	return out, nil
}

func provider(ctx context.Context, db *sql.DB) (*goose.Provider, error) {
	if err := createVersionSchema(ctx, db); err != nil {
		return nil, err
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files,
		goose.WithTableName(VersionTable),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, nil
}

// Apply applies the pending migrations to db (see Up).
func Apply(ctx context.Context, db *sql.DB) error {
	_, err := Up(ctx, db)
	return err
}

// ApplyURL opens databaseURL (a postgres:// URL or key=value DSN) with pgx's
// database/sql driver, applies the pending migrations and closes it.
func ApplyURL(ctx context.Context, databaseURL string) ([]Result, error) {
	db, err := sql.Open("pgx", databaseURL)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	defer db.Close()
	return Up(ctx, db)
}

// Latest returns the highest version among the embedded migrations.
func Latest() (int64, error) {
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		return 0, err
	}
	var max int64
	for _, n := range names {
		var v int64
		if _, err := fmt.Sscanf(n, "%d_", &v); err != nil {
			return 0, fmt.Errorf("migration %s: name must start with <yyyymmddhhmmss>_: %w", n, err)
		}
		if v > max {
			max = v
		}
	}
	return max, nil
}

// createVersionSchema creates VersionSchema if missing. "create schema if
// not exists" is not safe against a concurrent twin (it fails on the unique
// index), so concurrent callers are serialised by a transaction-scoped
// advisory lock first.
func createVersionSchema(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create schema %s: %w", VersionSchema, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "select pg_advisory_xact_lock(hashtext('office-server migrations'))"); err != nil {
		return fmt.Errorf("create schema %s: lock: %w", VersionSchema, err)
	}
	if _, err := tx.ExecContext(ctx, "create schema if not exists "+VersionSchema); err != nil {
		return fmt.Errorf("create schema %s: %w", VersionSchema, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create schema %s: %w", VersionSchema, err)
	}
	return nil
}

func fileName(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[i+1:]
		}
	}
	return path
}
