// Package supabasetest runs a stand-in Supabase project for tests and the
// load driver (cmd/office-load): the REST API (PostgREST's, by
// supabase/internal/pgrest over a real PostgreSQL, under the request's
// role), Realtime (a Phoenix-protocol server that reads the database's
// WAL through wal2json and sends each change to the subscribers whose role
// may see it), Auth's JWKS, and in front of them the API gateway that
// turns the sb_ API keys into role JWTs (gateway.go), on one httptest
// server. Point the server or a supabase.Store at Project.URL with
// Project.SecretKey (or the legacy Project.Key).
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
	"github.com/office-server/office-server/supabase/internal/pgrest"
	"github.com/office-server/office-server/supabase/internal/signing"
)

// JWTSecret is the stand-in project's legacy JWT secret.
var JWTSecret = []byte("stand-in-project-jwt-secret-at-least-32-characters")

// Sign returns a project JWT with claims signed with the legacy secret
// (HS256), as the legacy keys and a legacy project's sessions are.
func Sign(claims map[string]any) string {
	return signing.SignKey("HS256", "", JWTSecret, claims)
}

// SecretKey and PublishableKey are the project's API keys as Supabase
// issues them today: opaque strings the gateway maps to the service_role
// and anon roles (the Supabase CLI's own defaults have the same shape:
// supabase/cli apps/cli-go/pkg/config/apikeys.go).
const (
	SecretKey      = "sb_secret_StandInProjectSecretKey_0a1b2c3"
	PublishableKey = "sb_publishable_StandInProjectPublicKey_4d5e6f"
)

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
	URL            string // as SUPABASE_URL
	SecretKey      string // as SUPABASE_SECRET_KEY (sb_secret_…)
	PublishableKey string // the frontend's key (sb_publishable_…)
	Key            string // as SUPABASE_SERVICE_ROLE_KEY: the legacy service-role JWT
	AnonKey        string // the legacy anon JWT
	DatabaseURL    string
	Realtime       *Phoenix
	REST           *pgrest.Server
	gw             *gateway
	keys           *signing.Keys
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
	keys := signing.New(JWTSecret)
	rest, err := pgrest.New(context.Background(), databaseURL, keys)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rest.Close)
	phx := NewPhoenix(t, keys, databaseURL)
	gw := &gateway{keys: keys, secretKey: SecretKey, publishableKey: PublishableKey, tokenTTL: time.Hour, jwksMaxAge: 600}
	mux := http.NewServeMux()
	mux.Handle("/rest/v1/", gw.rest(rest))
	mux.Handle("/realtime/v1/websocket", gw.realtime(phx))
	mux.HandleFunc("GET /auth/v1/.well-known/jwks.json", gw.jwks)
	srv := httptest.NewServer(cors(mux))
	t.Cleanup(srv.Close)
	t.Cleanup(phx.Close) // runs before srv.Close: hijacked sockets first
	return &Project{URL: srv.URL, SecretKey: SecretKey, PublishableKey: PublishableKey, Key: Key, AnonKey: AnonKey,
		DatabaseURL: databaseURL, Realtime: phx, REST: rest, gw: gw, keys: keys}
}

// Member is a signed-in user of the project: a row in auth.users and the
// access token Supabase Auth would give them (role authenticated).
type Member struct {
	ID    string
	Token string
}

// NewMember creates a user and returns their access token, valid for an
// hour, as Supabase Auth signs it today: with the project's signing key in
// use (ES256, its kid in the header) and the claims of
// supabase/auth internal/tokens/service.go (AccessTokenClaims: iss
// <URL>/auth/v1, sub, aud authenticated, exp, iat, email, phone,
// app_metadata, user_metadata, role, aal, amr, session_id, is_anonymous).
func (p *Project) NewMember(t testing.TB, email string) Member {
	t.Helper()
	m := p.newUser(t, email)
	m.Token = p.keys.Sign(p.MemberClaims(m.ID, email, false))
	return m
}

// NewAnonymousMember creates an anonymous user (Auth's signInAnonymously:
// role authenticated, is_anonymous true, no email) and returns their token.
func (p *Project) NewAnonymousMember(t testing.TB) Member {
	t.Helper()
	m := p.newUser(t, "")
	m.Token = p.keys.Sign(p.MemberClaims(m.ID, "", true))
	return m
}

func (p *Project) newUser(t testing.TB, email string) Member {
	t.Helper()
	id := uuid.NewString()
	conn, err := pgxConnect(p.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var em any
	if email != "" {
		em = email
	}
	if _, err := conn.Exec(context.Background(), `insert into auth.users (id, email, aud, role) values ($1, $2, 'authenticated', 'authenticated')`, id, em); err != nil {
		t.Fatalf("create user: %v", err)
	}
	return Member{ID: id}
}

// MemberClaims returns the claims of an access token Supabase Auth issues
// user id now, valid for an hour.
func (p *Project) MemberClaims(id, email string, anonymous bool) map[string]any {
	now := time.Now().Unix()
	amr := "password"
	if anonymous {
		amr = "anonymous"
	}
	return map[string]any{"iss": p.URL + "/auth/v1", "sub": id, "aud": "authenticated", "exp": now + 3600, "iat": now,
		"email": email, "phone": "", "app_metadata": map[string]any{"provider": "email", "providers": []string{"email"}},
		"user_metadata": map[string]any{}, "role": "authenticated", "aal": "aal1",
		"amr": []map[string]any{{"method": amr, "timestamp": now}}, "session_id": uuid.NewString(), "is_anonymous": anonymous}
}

// SignMember signs claims with the project's key in use.
func (p *Project) SignMember(claims map[string]any) string { return p.keys.Sign(claims) }

// SignMemberWith signs claims with the project's key kid, revoked or not.
func (p *Project) SignMemberWith(kid string, claims map[string]any) string {
	return p.keys.SignWith(kid, claims)
}

// CurrentKey returns the kid of the project's signing key in use.
func (p *Project) CurrentKey() string { return p.keys.Current() }

// PublicKey returns the public half of the project's key kid.
func (p *Project) PublicKey(kid string) any { return p.keys.PublicKey(kid) }

// RotateKey makes a new key of alg (ES256 or RS256) the one in use, as the
// dashboard's "Rotate keys" does; the old key stays published as
// previously used. It returns the new kid.
func (p *Project) RotateKey(alg string) string { return p.keys.Rotate(alg) }

// RevokeKey revokes the key kid: gone from the JWKS, verifying nothing.
func (p *Project) RevokeKey(kid string) { p.keys.Revoke(kid) }

// SetJWKSMaxAge sets the max-age the JWKS is served with (Auth's is 600
// seconds, internal/api/jwks.go), so a test sees a revocation soon.
func (p *Project) SetJWKSMaxAge(seconds int) { p.gw.setJWKSMaxAge(seconds) }

// SetGatewayTokenTTL sets how long the role JWTs the gateway makes of the
// sb_ keys live; a Realtime socket opened with one is shut down when it
// expires.
func (p *Project) SetGatewayTokenTTL(d time.Duration) { p.gw.setTokenTTL(d) }

// GatewayRequests returns how many requests the gateway has seen with each
// kind of credential ("sb_secret", "sb_publishable", "legacy", "browser
// secret", "invalid"; and "bearer sb_" for REST requests that carried an
// sb_ key as bearer token) and resets the counts.
func (p *Project) GatewayRequests() map[string]int { return p.gw.counts() }

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

// SignWithKey signs claims with any private key under alg (ES256, RS256),
// kid in the header: a token of a key the project does not have.
func SignWithKey(alg, kid string, key any, claims map[string]any) string {
	return signing.SignKey(alg, kid, key, claims)
}
