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
	"github.com/office-server/office-server/store/postgres"
)

func init() { commands["migrate"] = migrateCmd }

// migrateCmd applies the embedded migrations to DATABASE_URL (or
// --database-url). Each applied file is recorded in the Supabase CLI's
// history (supabase_migrations.schema_migrations) as `supabase db push`
// records it, so running either tool again applies only what is new, and
// an advisory lock keeps two concurrent runs from racing.
func migrateCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL to migrate (env DATABASE_URL); for Supabase, the session pooler's connection string (port 5432)")
	to := fs.Int64("to", 0, "apply the migrations up to this version (<yyyymmddhhmmss>) only; 0: all")
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
	if err := postgres.CheckSessionURL(*url); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	applied, err := migrations.ApplyURLTo(ctx, *url, *to)
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
	if *to > 0 && *to < latest {
		latest = *to
	}
	if len(applied) == 0 {
		fmt.Fprintf(stdout, "database is up to date (version %d)\n", latest)
	} else {
		fmt.Fprintf(stdout, "database migrated to version %d\n", latest)
	}
	return nil
}
