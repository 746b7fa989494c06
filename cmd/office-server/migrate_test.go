package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/migrations"
)

func TestMigrateTwiceOnEmptyDatabase(t *testing.T) {
	url := testenv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	names, err := fs.Glob(migrations.FS(), "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("embedded migrations: %v %v", names, err)
	}

	// First run, URL from the environment: applies every migration.
	t.Setenv("DATABASE_URL", url)
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"migrate"}, nil, &out, &errb); code != 0 {
		t.Fatalf("first migrate: exit %d, stderr %s", code, errb.String())
	}
	for _, n := range names {
		if !strings.Contains(out.String(), "applied "+n+"\n") {
			t.Errorf("first migrate output lacks %q:\n%s", "applied "+n, out.String())
		}
	}

	// Second run, URL from the flag: nothing to do, no error.
	t.Setenv("DATABASE_URL", "")
	out.Reset()
	errb.Reset()
	if code := run(ctx, []string{"migrate", "--database-url", url}, nil, &out, &errb); code != 0 {
		t.Fatalf("second migrate: exit %d, stderr %s", code, errb.String())
	}
	latest, _ := migrations.Latest()
	if want := fmt.Sprintf("database is up to date (version %d)\n", latest); out.String() != want {
		t.Errorf("second migrate printed %q; want %q", out.String(), want)
	}

	// The versions are recorded once each, and the schema is there.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "select count(*) from "+migrations.HistoryTable).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(names) {
		t.Errorf("%s has %d versions; want %d", migrations.HistoryTable, n, len(names))
	}
	if err := conn.QueryRow(ctx, "select count(*) from user_questions").Scan(&n); err != nil {
		t.Errorf("user_questions after migrate: %v", err)
	}
}

func TestMigrateErrors(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"migrate"}, 2, "no database: set DATABASE_URL or pass --database-url"},
		{[]string{"migrate", "extra"}, 2, "unexpected arguments"},
		{[]string{"migrate", "--database-url", "postgres://nobody:x@127.0.0.1:1/none?connect_timeout=2"}, 1, "office-server migrate:"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), tc.args, nil, &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("run(%q) = exit %d, stderr %q; want exit %d mentioning %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
}
