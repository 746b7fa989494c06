package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/office-server/office-server/migrations"
	standins "github.com/office-server/office-server/migrations/supabasetest"
	"github.com/office-server/office-server/store/postgres"
	"github.com/office-server/office-server/supabase/supabasetest"
)

// newSupabase runs the server in its Supabase mode (SUPABASE_URL, no
// DATABASE_URL: PostgREST for every read and write, Realtime for the
// changes) against the repository's stand-in project, served from this
// process over a database of its own on the PostgreSQL at baseURL. The
// stand-in's Realtime reads the database's WAL by polling a wal2json slot
// (every 100 ms while changes flow, 500 ms when idle), as supabase/realtime
// does: that poll is part of every commit → Enter measured here. Answers
// are committed straight into the database, as the frontend's
// answer_question would commit them.
func newSupabase(ctx context.Context, baseURL string) (*backend, error) {
	pg, err := newPostgres(ctx, baseURL)
	if err != nil {
		return nil, err
	}
	dbURL := pg.dbURL
	fail := func(err error) (*backend, error) {
		pg.drop()
		return nil, err
	}
	if err := standins.Apply(ctx, dbURL); err != nil {
		return fail(fmt.Errorf("supabase stand-in: %w", err))
	}
	if _, err := migrations.ApplyURL(ctx, dbURL); err != nil {
		return fail(fmt.Errorf("migrations: %w", err))
	}
	tb := &runTB{}
	var p *supabasetest.Project
	if err := tb.run(func() { p = supabasetest.Start(tb, dbURL) }); err != nil {
		tb.close()
		return fail(fmt.Errorf("supabase stand-in: %w", err))
	}
	return &backend{
		kind: "supabase",
		env:  []string{"DATABASE_URL=", "SUPABASE_URL=" + p.URL, "SUPABASE_SERVICE_ROLE_KEY=" + p.Key},
		open: func(ctx context.Context) (writer, error) {
			return postgres.Open(ctx, dbURL, postgres.Options{MaxConns: 8})
		},
		// The database's transactions at idle would count the stand-in's
		// own WAL polls: not measured.
		drop: func() { tb.close(); pg.drop() },
	}, nil
}

// runTB lets the stand-in project, written for tests, run in the driver:
// its cleanups run at close, a fatal error in its set-up is returned by
// run, and errors it reports later (its Realtime's WAL poll) go to
// stderr.
type runTB struct {
	testing.TB // nil: only the methods below are called

	mu       sync.Mutex
	cleanups []func()
}

type fatal struct{ msg string }

func (r *runTB) Helper() {}

func (r *runTB) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *runTB) Fatal(args ...any) { panic(fatal{fmt.Sprint(args...)}) }

func (r *runTB) Fatalf(format string, args ...any) { panic(fatal{fmt.Sprintf(format, args...)}) }

func (r *runTB) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "office-load: supabase stand-in: "+format+"\n", args...)
}

func (r *runTB) Logf(format string, args ...any) {}

// run calls f, turning a Fatal in it into an error.
func (r *runTB) run(f func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			ft, ok := v.(fatal)
			if !ok {
				panic(v)
			}
			err = fmt.Errorf("%s", ft.msg)
		}
	}()
	f()
	return nil
}

// close runs the cleanups, last registered first.
func (r *runTB) close() {
	r.mu.Lock()
	cs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}
