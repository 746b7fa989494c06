package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/office-server/office-server/migrations"
)

func init() { commands["migrate"] = migrateCmd }

// migrateCmd applies the embedded migrations to DATABASE_URL (or
// --database-url). goose records each applied version in
// office_migrations.goose_db_version, so running it again applies only what
// is new, and an advisory lock keeps two concurrent runs from racing.
func migrateCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL to migrate (env DATABASE_URL); for Supabase, the project's direct connection string")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *url == "" {
		return errors.New("no database: set DATABASE_URL or pass --database-url")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	applied, err := migrations.ApplyURL(ctx, *url)
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
