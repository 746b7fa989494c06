package main

import (
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/migrations"
)

// TestTransactionPoolerRefused: the built binary refuses a DATABASE_URL
// through a transaction pooler (port 6543, pgbouncer=true) at start, for
// serve and migrate, saying to use the session pooler; it exits before it
// connects anywhere.
func TestTransactionPoolerRefused(t *testing.T) {
	bin := buildServer(t)
	const pooler = "postgres://postgres.abcdefghijklmnopqrst:secret-pw@aws-0-eu-central-1.pooler.supabase.com:6543/postgres"
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"serve 6543", []string{"DATABASE_URL=" + pooler}, []string{"serve", "--data-dir", t.TempDir()}},
		{"serve pgbouncer=true", []string{"DATABASE_URL=postgres://u:secret-pw@127.0.0.1:5432/x?pgbouncer=true"}, []string{"serve", "--data-dir", t.TempDir()}},
		{"migrate 6543", nil, []string{"migrate", "--database-url", pooler}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = append(cmd.Environ(), "DATABASE_URL=", "SUPABASE_URL=")
			cmd.Env = append(cmd.Env, tc.env...)
			began := time.Now()
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("started with a transaction pooler:\n%s", out)
			}
			for _, want := range []string{"transaction pooler", "Session pooler", ":5432"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(string(out), "secret-pw") {
				t.Errorf("output shows the password:\n%s", out)
			}
			if d := time.Since(began); d > 10*time.Second {
				t.Errorf("refused after %v; want at once", d)
			}
		})
	}
}

// TestServeNoMigrate: with --no-migrate (or OFFICE_NO_MIGRATE=true) the
// built binary applies nothing: on an empty database it exits naming the
// missing files; on a migrated one it serves.
func TestServeNoMigrate(t *testing.T) {
	bin := buildServer(t)
	url := testenv.NewDatabase(t)
	cmd := exec.Command(bin, "serve", "--no-migrate", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	cmd.Env = append(cmd.Environ(), "DATABASE_URL="+url, "SUPABASE_URL=")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("serve --no-migrate started on an empty database:\n%s", out)
	}
	latest, _ := migrations.Latest()
	for _, want := range []string{"--no-migrate: the database lacks", "supabase db push", "office-server migrate", "20261122000100_office_schema.sql", mustLatestName(t, latest)} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if missing, err := migrations.PendingURL(t.Context(), url); err != nil || len(missing) == 0 {
		t.Fatalf("serve --no-migrate changed the database: missing %v, %v", missing, err)
	}

	officeMigrate(t, url)
	p := launchServer(t, bin, []string{"DATABASE_URL=" + url, "OFFICE_NO_MIGRATE=true"}, "--data-dir", t.TempDir(), "--no-autostart")
	p.waitHealthy(t)
	p.stop(t)
}

// mustLatestName is the file name of the newest migration.
func mustLatestName(t *testing.T, latest int64) string {
	t.Helper()
	for _, n := range migrationFiles(t) {
		if fileVersion(n) == latest {
			return n
		}
	}
	t.Fatalf("no file of version %d", latest)
	return ""
}

// TestParseNoMigrate: --no-migrate and OFFICE_NO_MIGRATE (the flag wins);
// a value that is not a boolean is an error naming it.
func TestParseNoMigrate(t *testing.T) {
	for _, tc := range []struct {
		env  string
		args []string
		want bool
		err  string
	}{
		{"", nil, false, ""},
		{"", []string{"--no-migrate"}, true, ""},
		{"true", nil, true, ""},
		{"1", nil, true, ""},
		{"false", []string{"--no-migrate"}, true, ""},
		{"true", []string{"--no-migrate=false"}, false, ""},
		{"yes please", nil, false, `OFFICE_NO_MIGRATE="yes please": want true or false`},
	} {
		env := map[string]string{"OFFICE_NO_MIGRATE": tc.env, "DATABASE_URL": "postgres://u:p@127.0.0.1:5432/d"}
		c, err := parseServeConfig(tc.args, func(k string) string { return env[k] }, io.Discard)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("env %q args %q: err %v; want %q", tc.env, tc.args, err, tc.err)
			}
		case err != nil:
			t.Errorf("env %q args %q: %v", tc.env, tc.args, err)
		case c.NoMigrate != tc.want:
			t.Errorf("env %q args %q: NoMigrate %v; want %v", tc.env, tc.args, c.NoMigrate, tc.want)
		}
	}
}
