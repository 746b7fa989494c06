package tstypes_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/migrations"
	"github.com/office-server/office-server/migrations/supabasetest"
	"github.com/office-server/office-server/migrations/tstypes"
)

// migrated connects to a new database migrated as a Supabase project would
// be: the stand-ins of Supabase's own schemas and roles, then ours.
func migrated(ctx context.Context, t *testing.T) *pgx.Conn {
	t.Helper()
	url := testenv.NewDatabase(t)
	if err := supabasetest.Apply(ctx, url); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.ApplyURL(ctx, url); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

var update = flag.Bool("update", false, "rewrite examples/web-office/database.types.ts from the migrations")

// TestTypesMatchMigrations generates the TypeScript definitions from a
// database migrated as a Supabase project would be and compares them with
// the committed examples/web-office/database.types.ts: a migration that
// changes what the frontend sees fails here until the file is regenerated
// (-update) and committed with it.
func TestTypesMatchMigrations(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := migrated(ctx, t)
	got, err := tstypes.Generate(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(testenv.RepoRoot(), "examples", "web-office", "database.types.ts")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it with -update)", err)
	}
	if d := cmp.Diff(got, string(want)); d != "" {
		t.Errorf("%s is not what the migrations give; run go test ./migrations/tstypes -run TestTypesMatchMigrations -update (-generated +committed):\n%s", path, d)
	}
	// The member's view: no launch_spec, no dependency value.
	for _, leak := range []string{`office_agents: "id" | "office_id" | "name"`, `"launch_spec"`} {
		member := got[strings.Index(got, "export type MemberColumns"):]
		if strings.Contains(member, leak) != (leak != `"launch_spec"`) {
			t.Errorf("MemberColumns: %q present = %t", leak, strings.Contains(member, leak))
		}
	}
}
