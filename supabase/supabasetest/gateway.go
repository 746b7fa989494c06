package supabasetest

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/office-server/office-server/supabase/internal/signing"
)

// gateway is Supabase's API gateway as it treats the API keys of a project
// created today, in front of the REST and Realtime stand-ins:
//
//   - The apikey (header, or the URL's apikey parameter) may be a legacy
//     key (a JWT, passed on as it is) or an sb_ key. The secret key stands
//     for role service_role, the publishable key for anon; any other sb_
//     value is refused 401 "Invalid API key". The Supabase CLI's gateway
//     config says the same in Kong's words (supabase/cli
//     apps/cli-go/internal/start/start.go, BearerToken and QueryToken):
//     apikey == secret key → "Bearer <service_role JWT>", == publishable
//     key → "Bearer <anon JWT>", anything else passed on.
//   - For REST, an Authorization header that is not "Bearer sb_…" is the
//     caller's own JWT and passes; when it is absent, or is "Bearer " and
//     the same sb_ key as the apikey (what supabase-js sends before anyone
//     signs in), the gateway puts the key's role JWT there. Another
//     "Bearer sb_…" reaches PostgREST as it is, which refuses it as a
//     token that is not a JWT: 401 PGRST301 "Expected 3 parts in JWT; got
//     1" (PostgREST src/library/PostgREST/Auth/Jwt.hs hasThreeParts).
//   - For Realtime, the URL's apikey=sb_… is replaced by the role JWT (the
//     CLI's request-transformer on the realtime-v1-ws route; the hosted
//     gateway hands it over as x-api-key, which Realtime's UserSocket reads
//     first: lib/realtime_web/channels/user_socket.ex access_token/2). The
//     JWT the hosted gateway makes is short-lived (tokenTTL here), so a
//     socket outlives it and Realtime shuts its channel when it expires.
//   - A secret key sent by a browser is refused 401 ("Secret API keys can
//     only be used in a protected environment", Supabase's API keys guide,
//     https://supabase.com/docs/guides/api/api-keys): the gateway judges by
//     the User-Agent, here one that starts with "Mozilla/" as every
//     browser's does.
//   - /auth/v1/.well-known/jwks.json is Auth's JWKS, public, with
//     Cache-Control "public, max-age=600" (supabase/auth
//     internal/api/jwks.go WellKnownJwks).
//
// The role JWTs are signed with the project's signing key in use, as the
// CLI signs its role keys when the project has signing keys
// (apps/cli-go/pkg/config/apikeys.go generateJWT).
type gateway struct {
	keys                      *signing.Keys
	secretKey, publishableKey string

	mu         sync.Mutex
	tokenTTL   time.Duration
	jwksMaxAge int
	seen       map[string]int
}

func (g *gateway) setTokenTTL(d time.Duration) { g.mu.Lock(); g.tokenTTL = d; g.mu.Unlock() }
func (g *gateway) setJWKSMaxAge(s int)         { g.mu.Lock(); g.jwksMaxAge = s; g.mu.Unlock() }

func (g *gateway) count(kind string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == nil {
		g.seen = map[string]int{}
	}
	g.seen[kind]++
}

func (g *gateway) counts() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.seen
	g.seen = map[string]int{}
	return c
}

// roleJWT returns the role JWT the gateway makes of an sb_ key; ok is false
// for an sb_ value that is none of the project's keys.
func (g *gateway) roleJWT(key string) (jwt string, ok bool) {
	var role string
	switch key {
	case g.secretKey:
		role = "service_role"
	case g.publishableKey:
		role = "anon"
	default:
		return "", false
	}
	g.mu.Lock()
	ttl := g.tokenTTL
	g.mu.Unlock()
	now := time.Now()
	return g.keys.Sign(map[string]any{"iss": "supabase", "ref": "standin", "role": role,
		"iat": now.Unix(), "exp": now.Add(ttl).Unix()}), true
}

func isBrowser(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("User-Agent"), "Mozilla/")
}

// gatewayError writes the gateway's own refusals (a JSON message, as Kong's
// key-auth plugin and Supabase's gateway answer).
func gatewayError(w http.ResponseWriter, message, hint string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	w.Write([]byte(`{"message":` + strconv.Quote(message) + `,"hint":` + strconv.Quote(hint) + `}`))
}

// admit checks an sb_ key and returns its role JWT; false when it answered
// the request itself.
func (g *gateway) admit(w http.ResponseWriter, r *http.Request, key string) (string, bool) {
	jwt, ok := g.roleJWT(key)
	if !ok {
		g.count("invalid")
		gatewayError(w, "Invalid API key", "Double check your Supabase `anon` or `service_role` API key.")
		return "", false
	}
	if key == g.secretKey && isBrowser(r) {
		g.count("browser secret")
		gatewayError(w, "Forbidden use of secret API key in browser",
			"Secret API keys can only be used in a protected environment and should never be used in a browser. Use a publishable key instead.")
		return "", false
	}
	if key == g.secretKey {
		g.count("sb_secret")
	} else {
		g.count("sb_publishable")
	}
	return jwt, true
}

// rest is the gateway's rest-v1 route.
func (g *gateway) rest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("apikey")
		if key == "" {
			key = r.URL.Query().Get("apikey")
		}
		if !strings.HasPrefix(key, "sb_") {
			if key != "" {
				g.count("legacy")
			}
			next.ServeHTTP(w, r)
			return
		}
		if strings.HasPrefix(r.Header.Get("Authorization"), "Bearer sb_") {
			g.count("bearer sb_")
		}
		jwt, ok := g.admit(w, r, key)
		if !ok {
			return
		}
		r = r.Clone(r.Context())
		r.Header.Set("apikey", jwt)
		if a := r.Header.Get("Authorization"); a == "" || a == "Bearer "+key {
			r.Header.Set("Authorization", "Bearer "+jwt)
		}
		next.ServeHTTP(w, r)
	})
}

// realtime is the gateway's realtime-v1-ws route.
func (g *gateway) realtime(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		key := q.Get("apikey")
		if !strings.HasPrefix(key, "sb_") {
			if key != "" {
				g.count("legacy")
			}
			next.ServeHTTP(w, r)
			return
		}
		jwt, ok := g.admit(w, r, key)
		if !ok {
			return
		}
		q.Set("apikey", jwt)
		r = r.Clone(r.Context())
		r.URL.RawQuery = q.Encode()
		next.ServeHTTP(w, r)
	})
}

// jwks serves Auth's /.well-known/jwks.json.
func (g *gateway) jwks(w http.ResponseWriter, _ *http.Request) {
	g.mu.Lock()
	age := g.jwksMaxAge
	g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age="+strconv.Itoa(age))
	w.Write(g.keys.JWKS())
}
