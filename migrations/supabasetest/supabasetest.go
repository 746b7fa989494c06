// Package supabasetest recreates, for tests on a plain PostgreSQL, what a
// Supabase project provides before the office's migrations run: the roles
// anon, authenticated and service_role, schema auth with auth.users and
// auth.uid() defined as Supabase defines it, the default privileges of a
// project created today (none for the API roles on new objects in schema
// public) and the supabase_realtime publication. It is not part of
// the production migrations (package migrations embeds only its own
// directory's files) and only tests and the load driver (cmd/office-load)
// import it.
package supabasetest

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"
)

//go:embed supabase.sql
var script string

// Apply runs the script on the database of databaseURL. Run it before
// migrations.Apply, as on Supabase the objects exist before any user
// migration. It is idempotent.
func Apply(ctx context.Context, databaseURL string) error {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	// The simple protocol runs the whole multi-statement script at once.
	if _, err := conn.PgConn().Exec(ctx, script).ReadAll(); err != nil {
		return fmt.Errorf("apply supabase stand-in: %w", err)
	}
	return nil
}
