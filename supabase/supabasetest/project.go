// Package supabasetest runs a stand-in Supabase project for tests: the REST
// API (PostgREST's, by supabase/internal/pgrest over a real PostgreSQL) and
// Realtime (a Phoenix-protocol server that reports what the REST API
// commits, with the frames the real service sends), on one httptest server.
// Point the server or a supabase.Store at Project.URL with Project.Key.
package supabasetest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/migrations"
	standins "github.com/office-server/office-server/migrations/supabasetest"
	"github.com/office-server/office-server/supabase/internal/pgrest"
)

// Key is the API key the stand-in project accepts (its "service-role key").
const Key = "service-role-key-for-tests"

// Project is a running stand-in project.
type Project struct {
	URL         string // as SUPABASE_URL
	Key         string // as SUPABASE_SERVICE_ROLE_KEY
	DatabaseURL string
	Realtime    *Phoenix
}

// New starts a project over a fresh database (testenv.NewDatabase: skipped
// without PostgreSQL, failed under OFFICE_REQUIRE_ALL=1) with Supabase's
// own objects and the office's migrations applied. t.Cleanup stops it.
func New(t testing.TB) *Project {
	t.Helper()
	dbURL := testenv.NewDatabase(t)
	ctx := context.Background()
	if err := standins.Apply(ctx, dbURL); err != nil {
		t.Fatalf("supabase stand-in: %v", err)
	}
	if _, err := migrations.ApplyURL(ctx, dbURL); err != nil {
		t.Fatalf("migrations: %v", err)
	}
	return Start(t, dbURL)
}

// Start serves a project over an already migrated database.
func Start(t testing.TB, databaseURL string) *Project {
	t.Helper()
	rest, err := pgrest.New(context.Background(), databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rest.Close)
	phx := NewPhoenix(t, Key)
	rest.OnChange = phx.Emit
	mux := http.NewServeMux()
	mux.Handle("/rest/v1/", rest)
	mux.Handle("/realtime/v1/websocket", phx)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(phx.Close) // runs before srv.Close: hijacked sockets first
	return &Project{URL: srv.URL, Key: Key, DatabaseURL: databaseURL, Realtime: phx}
}
