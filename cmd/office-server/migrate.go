package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/office-server/office-server/migrations"
)

func init() { commands["migrate"] = migrateCmd }

const migrateSummary = `usage: office-server migrate [flags]

Apply the PostgreSQL migrations and exit (serve applies them too).
`

// migrateCmd applies the embedded migrations to DATABASE_URL (or
// --database-url). goose records each applied version in
// office_migrations.goose_db_version, so running it again applies only what
// is new, and an advisory lock keeps two concurrent runs from racing.
func migrateCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var url string
	var timeout time.Duration
	s := newSettings("migrate", migrateSummary, os.Getenv, stderr)
	s.String(&url, "database-url", "DATABASE_URL", "", "PostgreSQL URL to migrate; for Supabase, the project's direct connection string")
	s.Duration(&timeout, "timeout", "OFFICE_MIGRATE_TIMEOUT", 5*time.Minute, "give up after this long")
	if err := s.Parse(args); err != nil {
		return err
	}
	if url == "" {
		return usagef("no database: set DATABASE_URL or pass --database-url")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	applied, err := migrations.ApplyURL(ctx, url)
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
	if len(applied) == 0 {
		fmt.Fprintf(stdout, "database is up to date (version %d)\n", latest)
	} else {
		fmt.Fprintf(stdout, "database migrated to version %d\n", latest)
	}
	return nil
}
