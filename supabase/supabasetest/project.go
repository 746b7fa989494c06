// Package supabasetest runs a stand-in Supabase project for tests and the
// load driver (cmd/office-load): the REST API (PostgREST's, by
// supabase/internal/pgrest over a real PostgreSQL, under the request's
// role) and Realtime (a Phoenix-protocol server that reads the database's
// WAL through wal2json and sends each change to the subscribers whose role
// may see it), on one httptest server. Point the server or a
// supabase.Store at Project.URL with Project.Key.
package supabasetest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/migrations"
	standins "github.com/office-server/office-server/migrations/supabasetest"
	"github.com/office-server/office-server/supabase/internal/hs256"
	"github.com/office-server/office-server/supabase/internal/pgrest"
)

// JWTSecret is the stand-in project's JWT secret.
var JWTSecret = []byte("stand-in-project-jwt-secret-at-least-32-characters")

// Sign returns a project JWT with claims, as Supabase Auth or the
// dashboard signs them.
func Sign(claims map[string]any) string { return hs256.Sign(JWTSecret, claims) }

// keyExpiry is when the stand-in's API keys expire: far off, as Supabase's
// legacy keys (issued for ten years).
var keyExpiry = time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC).Unix()

// Key and AnonKey are the project's service-role and anon keys, JWTs as
// Supabase issues them (iss supabase, role, iat, exp).
var (
	Key     = Sign(map[string]any{"iss": "supabase", "ref": "standin", "role": "service_role", "iat": 1767225600, "exp": keyExpiry})
	AnonKey = Sign(map[string]any{"iss": "supabase", "ref": "standin", "role": "anon", "iat": 1767225600, "exp": keyExpiry})
)

// Project is a running stand-in project.
type Project struct {
	URL         string // as SUPABASE_URL
	Key         string // as SUPABASE_SERVICE_ROLE_KEY
	AnonKey     string // the frontend's key
	DatabaseURL string
	Realtime    *Phoenix
	REST        *pgrest.Server
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
	rest, err := pgrest.New(context.Background(), databaseURL, JWTSecret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rest.Close)
	phx := NewPhoenix(t, JWTSecret, databaseURL)
	mux := http.NewServeMux()
	mux.Handle("/rest/v1/", rest)
	mux.Handle("/realtime/v1/websocket", phx)
	srv := httptest.NewServer(cors(mux))
	t.Cleanup(srv.Close)
	t.Cleanup(phx.Close) // runs before srv.Close: hijacked sockets first
	return &Project{URL: srv.URL, Key: Key, AnonKey: AnonKey, DatabaseURL: databaseURL, Realtime: phx, REST: rest}
}

// Member is a signed-in user of the project: a row in auth.users and the
// access token Supabase Auth would give them (role authenticated).
type Member struct {
	ID    string
	Token string
}

// NewMember creates a user and returns their token, valid for an hour.
func (p *Project) NewMember(t testing.TB, email string) Member {
	t.Helper()
	id := uuid.NewString()
	conn, err := pgxConnect(p.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `insert into auth.users (id, email, aud, role) values ($1, $2, 'authenticated', 'authenticated')`, id, email); err != nil {
		t.Fatalf("create user: %v", err)
	}
	now := time.Now().Unix()
	tok := Sign(map[string]any{"iss": "supabase", "sub": id, "aud": "authenticated", "role": "authenticated",
		"email": email, "iat": now, "exp": now + 3600, "session_id": uuid.NewString()})
	return Member{ID: id, Token: tok}
}

// MemberOf creates a user who is a member of the office and returns them.
func (p *Project) MemberOf(t testing.TB, officeID, email string) Member {
	t.Helper()
	m := p.NewMember(t, email)
	conn, err := pgxConnect(p.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `insert into public.office_members (office_id, user_id) values ($1, $2)`, officeID, m.ID); err != nil {
		t.Fatalf("add member: %v", err)
	}
	return m
}

// cors is the API gateway's CORS plugin as a Supabase project configures
// it (supabase/supabase docker/volumes/api/kong.yml: "- name: cors" with no
// config on the rest-v1 and realtime-v1 routes, ahead of key-auth), so that
// a page served from another origin can call the project, as browsers
// call hosted projects. It follows Kong's kong/plugins/cors/handler.lua
// with that default config: a preflight (OPTIONS with Origin and
// Access-Control-Request-Method) is answered 200 by the gateway itself
// with Access-Control-Allow-Origin "*", Access-Control-Allow-Headers
// echoing Access-Control-Request-Headers and Access-Control-Allow-Methods
// "GET,HEAD,PUT,PATCH,POST,DELETE,OPTIONS,TRACE,CONNECT" (CorsHandler:access);
// every other answer gets Access-Control-Allow-Origin "*"
// (CorsHandler:header_filter, configure_origin with no origins).
func cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != "" {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", "*")
			if acrh := r.Header.Get("Access-Control-Request-Headers"); acrh != "" {
				h.Set("Access-Control-Allow-Headers", acrh)
			}
			h.Set("Access-Control-Allow-Methods", "GET,HEAD,PUT,PATCH,POST,DELETE,OPTIONS,TRACE,CONNECT")
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Access-Control-Allow-Origin", "*")
		next.ServeHTTP(w, r)
	})
}
