package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/office-server/office-server/migrations"
	"github.com/office-server/office-server/store/postgres"
)

func init() { commands["migrate"] = migrateCmd }

const migrateSummary = `usage: office-server migrate [flags]

Apply the PostgreSQL migrations and exit (serve applies them too).
`

// migrateCmd applies the embedded migrations to DATABASE_URL (or
// --database-url). Each applied file is recorded in the Supabase CLI's
// history (supabase_migrations.schema_migrations) as `supabase db push`
// records it, so running either tool again applies only what is new, and
// an advisory lock keeps two concurrent runs from racing.
func migrateCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var url, to string
	var timeout time.Duration
	s := newSettings("migrate", migrateSummary, os.Getenv, stderr)
	s.String(&url, "database-url", "DATABASE_URL", "", "PostgreSQL URL to migrate; for Supabase, the session pooler's connection string (port 5432)")
	s.String(&to, "to", "OFFICE_MIGRATE_TO", "", "apply the migrations up to this version (<yyyymmddhhmmss>) only; empty: all")
	s.Duration(&timeout, "timeout", "OFFICE_MIGRATE_TIMEOUT", 5*time.Minute, "give up after this long")
	if err := s.Parse(args); err != nil {
		return err
	}
	if url == "" {
		return usagef("no database: set DATABASE_URL or pass --database-url")
	}
	var upTo int64
	if to != "" {
		v, err := strconv.ParseInt(to, 10, 64)
		if err != nil || v <= 0 {
			return usagef("--to %q: want a migration version (<yyyymmddhhmmss>)", to)
		}
		upTo = v
	}
	if err := postgres.CheckSessionURL(url); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	applied, err := migrations.ApplyURLTo(ctx, url, upTo)
	for _, r := range applied {
		fmt.Fprintf(stdout, "applied %s\n", r.Name)
	}
	if err != nil {
		return err
	}
	latest, err := migrations.Latest()
	if err != nil {
		return err
	}
	if upTo > 0 && upTo < latest {
		latest = upTo
	}
	if len(applied) == 0 {
		fmt.Fprintf(stdout, "database is up to date (version %d)\n", latest)
	} else {
		fmt.Fprintf(stdout, "database migrated to version %d\n", latest)
	}
	return nil
}
