package supabase

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/supabase/internal/signing"
)

const memberSecret = "a-project-jwt-secret-of-at-least-32-characters"

// jwksProject is a project's Auth as far as its JWKS goes: the keys, the
// endpoint serving them with a max-age, and how often it was fetched.
type jwksProject struct {
	url     string
	keys    *signing.Keys
	fetches atomic.Int32
	mu      sync.Mutex
	maxAge  string
	down    bool
}

func newJWKSProject(t *testing.T) *jwksProject {
	t.Helper()
	p := &jwksProject{keys: signing.New([]byte(memberSecret)), maxAge: "600"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/auth/v1/.well-known/jwks.json" {
			http.NotFound(w, r)
			return
		}
		p.fetches.Add(1)
		p.mu.Lock()
		age, down := p.maxAge, p.down
		p.mu.Unlock()
		if down {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age="+age)
		w.Write(p.keys.JWKS())
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

// clock is a settable time for the verifier.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newVerifier(p *jwksProject, a MemberAuth) (*MemberTokens, *clock) {
	a.ProjectURL = p.url
	v := NewMemberTokens(a)
	c := &clock{t: time.Now()}
	v.now = c.now
	return v, c
}

func memberClaims(p *jwksProject, now time.Time, sub string) map[string]any {
	return map[string]any{"iss": p.url + "/auth/v1", "sub": sub, "aud": "authenticated", "role": "authenticated",
		"exp": now.Unix() + 3600, "iat": now.Unix(), "session_id": uuid.NewString(), "is_anonymous": false, "aal": "aal1"}
}

func with(c map[string]any, k string, val any) map[string]any {
	out := map[string]any{}
	for k, v := range c {
		out[k] = v
	}
	if val == nil {
		delete(out, k)
	} else {
		out[k] = val
	}
	return out
}

// TestMemberTokens: members' access tokens as Supabase Auth signs them
// today (ES256 or RS256, kid in the header, the key in the project's JWKS)
// and on the legacy path (HS256 under the JWT secret) are accepted; every
// other token is refused with the code the member endpoints answer.
func TestMemberTokens(t *testing.T) {
	p := newJWKSProject(t)
	rsKid := p.keys.Add("RS256") // a standby key: published, verifying
	esKid := p.keys.Current()
	v, clk := newVerifier(p, MemberAuth{JWTSecret: memberSecret})
	now := clk.now()
	ctx := context.Background()
	uid := uuid.NewString()
	member := memberClaims(p, now, uid)

	for name, tok := range map[string]string{
		"ES256 by kid":   p.keys.SignWith(esKid, member),
		"RS256 by kid":   p.keys.SignWith(rsKid, member),
		"legacy HS256":   p.keys.SignHS256(member),
		"aud as a array": p.keys.Sign(with(member, "aud", []string{"authenticated"})),
	} {
		if got, err := v.UserID(ctx, tok); err != nil || got != uid {
			t.Errorf("%s: %q, %v; want %s", name, got, err, uid)
		}
	}

	// Forgeries and tokens that are not a member's.
	parts := strings.Split(p.keys.Sign(member), ".")
	enc := base64.RawURLEncoding.EncodeToString
	none := enc([]byte(`{"alg":"none","typ":"JWT","kid":"`+esKid+`"}`)) + "." + parts[1] + "."
	pubDER, _ := x509.MarshalPKIXPublicKey(p.keys.PublicKey(esKid))
	hsWithPublic := signing.SignKey("HS256", esKid, pubDER, member)
	foreign, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rsHeaderOnES := enc([]byte(`{"alg":"RS256","typ":"JWT","kid":"`+esKid+`"}`)) + "." + parts[1] + "." + parts[2]
	for name, c := range map[string]struct {
		token string
		code  string
	}{
		"expired":                   {p.keys.Sign(with(member, "exp", now.Unix()-1)), office.EUNAUTHORIZED},
		"expiring now":              {p.keys.Sign(with(member, "exp", now.Unix())), office.EUNAUTHORIZED},
		"no exp":                    {p.keys.Sign(with(member, "exp", nil)), office.EUNAUTHORIZED},
		"exp not a number":          {p.keys.Sign(with(member, "exp", "soon")), office.EUNAUTHORIZED},
		"not yet valid (nbf)":       {p.keys.Sign(with(member, "nbf", now.Unix()+600)), office.EUNAUTHORIZED},
		"another issuer":            {p.keys.Sign(with(member, "iss", "https://other.supabase.co/auth/v1")), office.EUNAUTHORIZED},
		"no issuer":                 {p.keys.Sign(with(member, "iss", nil)), office.EUNAUTHORIZED},
		"another audience":          {p.keys.Sign(with(member, "aud", "service")), office.EUNAUTHORIZED},
		"no audience":               {p.keys.Sign(with(member, "aud", nil)), office.EUNAUTHORIZED},
		"anon key":                  {p.keys.Sign(with(member, "role", "anon")), office.EUNAUTHORIZED},
		"no role":                   {p.keys.Sign(with(member, "role", nil)), office.EUNAUTHORIZED},
		"service role":              {p.keys.Sign(with(member, "role", "service_role")), office.EFORBIDDEN},
		"sub not a uuid":            {p.keys.Sign(with(member, "sub", "admin")), office.EUNAUTHORIZED},
		"anonymous user":            {p.keys.Sign(with(member, "is_anonymous", true)), office.EFORBIDDEN},
		"alg none":                  {none, office.EUNAUTHORIZED},
		"HS256 with the public key": {hsWithPublic, office.EUNAUTHORIZED},
		"RS256 header on an EC key": {rsHeaderOnES, office.EUNAUTHORIZED},
		"unknown kid":               {signing.SignKey("ES256", "not-a-kid", foreign, member), office.EUNAUTHORIZED},
		"project's kid, other key":  {signing.SignKey("ES256", esKid, foreign, member), office.EUNAUTHORIZED},
		"no kid":                    {signing.SignKey("ES256", "", foreign, member), office.EUNAUTHORIZED},
		"another secret":            {signing.SignKey("HS256", "", []byte("another-secret-of-at-least-32-characters!"), member), office.EUNAUTHORIZED},
		"not a JWT":                 {"sb_publishable_abc", office.EUNAUTHORIZED},
	} {
		if got, err := v.UserID(ctx, c.token); office.ErrorCode(err) != c.code || got != "" {
			t.Errorf("%s: %q, %v; want %s", name, got, err, c.code)
		}
	}

	// Without the legacy secret, HS256 is refused outright.
	noSecret, _ := newVerifier(p, MemberAuth{})
	if _, err := noSecret.UserID(ctx, p.keys.SignHS256(member)); office.ErrorCode(err) != office.EUNAUTHORIZED {
		t.Errorf("HS256 without a legacy secret: %v; want refused", err)
	}
	// An office that allows anonymous sign-ins takes them.
	anonOK, _ := newVerifier(p, MemberAuth{AllowAnonymous: true})
	if got, err := anonOK.UserID(ctx, p.keys.Sign(with(member, "is_anonymous", true))); err != nil || got != uid {
		t.Errorf("anonymous user where allowed: %q, %v", got, err)
	}
	if NewMemberTokens(MemberAuth{}) != nil {
		t.Error("a verifier with neither a project nor a secret")
	}
}

// TestMemberTokensRotation: a key rotated in is used at once (an unknown
// kid fetches the JWKS again); a revoked key stops verifying once the JWKS
// copy is older than its max-age, and never later than JWKSMaxAge; made-up
// kids do not make a fetch each; an unreachable JWKS is EUNAVAILABLE, not
// a stale yes.
func TestMemberTokensRotation(t *testing.T) {
	p := newJWKSProject(t)
	v, clk := newVerifier(p, MemberAuth{})
	ctx := context.Background()
	uid := uuid.NewString()
	old := p.keys.Current()
	oldTok := p.keys.Sign(memberClaims(p, clk.now(), uid))
	if _, err := v.UserID(ctx, oldTok); err != nil {
		t.Fatal(err)
	}
	newKid := p.keys.Rotate("ES256")
	if got, err := v.UserID(ctx, p.keys.Sign(memberClaims(p, clk.now(), uid))); err != nil || got != uid {
		t.Fatalf("token of the rotated-in key %s: %q, %v", newKid, got, err)
	}
	if _, err := v.UserID(ctx, oldTok); err != nil {
		t.Fatalf("token of the previously used key: %v; want accepted until revoked", err)
	}

	p.keys.Revoke(old)
	clk.add(JWKSMaxAge - time.Second)
	if _, err := v.UserID(ctx, oldTok); err != nil {
		t.Fatalf("revoked key within the cached JWKS's max-age: %v; want still accepted (cached)", err)
	}
	clk.add(time.Second)
	if _, err := v.UserID(ctx, oldTok); office.ErrorCode(err) != office.EUNAUTHORIZED {
		t.Fatalf("revoked key after %v: %v; want refused", JWKSMaxAge, err)
	}

	// A shorter max-age is honoured.
	p.mu.Lock()
	p.maxAge = "5"
	p.mu.Unlock()
	clk.add(JWKSMaxAge)
	newer := p.keys.Rotate("RS256")
	tok := p.keys.Sign(memberClaims(p, clk.now(), uid))
	if _, err := v.UserID(ctx, tok); err != nil {
		t.Fatal(err)
	}
	p.keys.Revoke(newer)
	clk.add(5 * time.Second)
	if _, err := v.UserID(ctx, tok); office.ErrorCode(err) != office.EUNAUTHORIZED {
		t.Fatalf("revoked key after the JWKS's max-age of 5 s: %v; want refused", err)
	}

	// Made-up kids: a burst of refetches, then at most one per 10 s.
	foreign, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	before := p.fetches.Load()
	for i := range 50 {
		v.UserID(ctx, signing.SignKey("ES256", "made-up-"+uuid.NewString(), foreign, memberClaims(p, clk.now(), uid)))
		if i == 25 {
			clk.add(time.Second)
		}
	}
	if n := p.fetches.Load() - before; n > 4 {
		t.Errorf("50 made-up kids fetched the JWKS %d times; want at most 4", n)
	}

	// The JWKS down when the copy is stale: refused as unavailable.
	p.keys.Rotate("ES256")
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	clk.add(JWKSMaxAge)
	if _, err := v.UserID(ctx, p.keys.Sign(memberClaims(p, clk.now(), uid))); office.ErrorCode(err) != office.EUNAVAILABLE {
		t.Errorf("JWKS unreachable: %v; want %s", err, office.EUNAVAILABLE)
	}
}

// BenchmarkMemberTokens: the cost of verifying one member's token with the
// JWKS cached (ES256 and RS256) and on the legacy path (HS256).
func BenchmarkMemberTokens(b *testing.B) {
	keys := signing.New([]byte(memberSecret))
	rs := keys.Add("RS256")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(keys.JWKS()) }))
	defer srv.Close()
	v := NewMemberTokens(MemberAuth{ProjectURL: srv.URL, JWTSecret: memberSecret})
	now := time.Now()
	claims := map[string]any{"iss": srv.URL + "/auth/v1", "sub": uuid.NewString(), "aud": "authenticated",
		"role": "authenticated", "exp": now.Unix() + 3600, "iat": now.Unix()}
	for _, c := range []struct{ name, token string }{
		{"ES256", keys.Sign(claims)}, {"RS256", keys.SignWith(rs, claims)}, {"HS256", keys.SignHS256(claims)},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := v.UserID(context.Background(), c.token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
