package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/store/postgres"
	"github.com/office-server/office-server/store/sqlite"
)

// writer is the driver's own connection to the office's database: the
// "other process" that answers questions, as a frontend's backend or a
// script would.
type writer interface {
	office.Roster
	office.Questions
	office.Invocations
	Close() error
}

// backend is one store the driver runs the server on.
type backend struct {
	kind    string   // sqlite, postgres, supabase
	dbURL   string   // the run's PostgreSQL database (postgres, supabase)
	env     []string // for the server
	open    func(ctx context.Context) (writer, error)
	txCount func(ctx context.Context) (int64, error) // transactions so far (postgres), or nil
	drop    func()                                   // removes what was made for the run
}

// newBackend prepares an empty store of kind for one run.
func newBackend(ctx context.Context, kind, dataDir, baseURL string) (*backend, error) {
	switch kind {
	case "sqlite":
		path := filepath.Join(dataDir, "office.db")
		return &backend{
			kind: kind,
			env:  []string{"DATABASE_URL=", "SUPABASE_URL="},
			open: func(ctx context.Context) (writer, error) { return sqlite.Open(ctx, path) },
			drop: func() {},
		}, nil
	case "postgres":
		return newPostgres(ctx, baseURL)
	case "supabase":
		return newSupabase(ctx, baseURL)
	}
	return nil, fmt.Errorf("unknown store %q (sqlite, postgres, supabase)", kind)
}

// newPostgres creates a database of its own on the server at baseURL.
func newPostgres(ctx context.Context, baseURL string) (*backend, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "office_load_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, baseURL)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "create database "+name); err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	u.Path = "/" + name
	dbURL := u.String()
	return &backend{
		kind:  "postgres",
		dbURL: dbURL,
		env:   []string{"DATABASE_URL=" + dbURL, "SUPABASE_URL="},
		open: func(ctx context.Context) (writer, error) {
			return postgres.Open(ctx, dbURL, postgres.Options{MaxConns: 8})
		},
		txCount: func(ctx context.Context) (int64, error) {
			c, err := pgx.Connect(ctx, baseURL)
			if err != nil {
				return 0, err
			}
			defer c.Close(ctx)
			var n int64
			err = c.QueryRow(ctx, `select xact_commit + xact_rollback from pg_stat_database where datname = $1`, name).Scan(&n)
			return n, err
		},
		drop: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := pgx.Connect(ctx, baseURL)
			if err != nil {
				return
			}
			defer c.Close(ctx)
			_, _ = c.Exec(ctx, "drop database if exists "+name+" with (force)")
		},
	}, nil
}

// sqliteTx counts the SQLite transactions pid makes in d by tracing its
// locks on the database's shared-memory index (each read transaction takes
// a read mark, each write the write lock): strace -f -y. It returns -1
// when strace is missing or fails.
func sqliteTx(ctx context.Context, pid int, d time.Duration) int64 {
	path, err := exec.LookPath("strace")
	if err != nil {
		return -1
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-f", "-y", "-qq", "-e", "trace=fcntl", "-p", fmt.Sprint(pid))
	out, _ := cmd.CombinedOutput()
	if ctx.Err() == nil {
		return -1
	}
	return countShmLocks(string(out))
}

// shmLock is a lock taken on a WAL index: a read mark (offsets 123–127)
// or the write lock (120), as SQLite's os_unix.c takes them.
var shmLock = regexp.MustCompile(`-shm>, F_SETLK.*l_type=F_(RD|WR)LCK.*l_start=(12[0-7])`)

func countShmLocks(trace string) int64 {
	var n int64
	for _, l := range strings.Split(trace, "\n") {
		if m := shmLock.FindStringSubmatch(l); m != nil && (m[2] != "120" || m[1] == "WR") {
			n++
		}
	}
	return n
}
