package supabase

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/migrations"
	"github.com/office-server/office-server/migrations/supabasetest"
	"github.com/office-server/office-server/supabase/internal/pgrest"
)

const testKey = "service-role-key-for-tests"

// testEnv is a Supabase project made of test stand-ins: a real PostgreSQL
// database with the office's migrations (after Supabase's own objects),
// served through pgrest (PostgREST's API) and a Phoenix server that reports
// the changes pgrest commits, as Realtime reports the WAL.
type testEnv struct {
	url   string
	rest  *pgrest.Server
	phx   *phoenixServer
	store *Store
}

func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
	dbURL := testenv.NewDatabase(t)
	ctx := context.Background()
	if err := supabasetest.Apply(ctx, dbURL); err != nil {
		t.Fatalf("supabase stand-in: %v", err)
	}
	if _, err := migrations.ApplyURL(ctx, dbURL); err != nil {
		t.Fatalf("migrations: %v", err)
	}
	rest, err := pgrest.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rest.Close)
	phx := newPhoenixServer(t, testKey)
	rest.OnChange = phx.emit
	mux := http.NewServeMux()
	mux.Handle("/rest/v1/", rest)
	mux.Handle("/realtime/v1/websocket", phx)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(phx.close) // before srv.Close (cleanups run last-first)
	store, err := New(srv.URL, testKey)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return &testEnv{url: srv.URL, rest: rest, phx: phx, store: store}
}

// fastOptions are realtime options scaled down for tests.
func fastOptions() RealtimeOptions {
	return RealtimeOptions{
		Heartbeat:        200 * time.Millisecond,
		JoinTimeout:      2 * time.Second,
		MinBackoff:       10 * time.Millisecond,
		MaxBackoff:       200 * time.Millisecond,
		RateLimitBackoff: 300 * time.Millisecond,
	}
}

func (e *testEnv) feed(t testing.TB, o RealtimeOptions) *Realtime {
	t.Helper()
	f, err := NewRealtime(e.url, testKey, e.store, o)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
