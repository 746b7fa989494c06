package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/supabase/supabasetest"
)

// TestServeSupabaseKeys runs the built binary in Supabase mode as a person
// with a project created today runs it (SUPABASE_URL and
// SUPABASE_SECRET_KEY, no JWT secret), and as one with a legacy project
// (SUPABASE_SERVICE_ROLE_KEY and SUPABASE_JWT_SECRET), against the
// stand-in project behind its gateway, on the demo office: po asks, a
// member answers with supabase-js's requests (the frontend's key and their
// own token), po invokes dev, dev delivers. With the secret key the
// gateway's JWT behind the Realtime socket lives 4 s, so the socket is shut
// and reopened during the round; no request carries the key as a bearer
// token, and no log line carries the key.
func TestServeSupabaseKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildServer(t)
	for _, tc := range []struct {
		name   string
		legacy bool
	}{{"secret key", false}, {"legacy keys", true}} {
		t.Run(tc.name, func(t *testing.T) {
			p := supabasetest.New(t)
			env := []string{"SUPABASE_URL=" + p.URL, "OFFICE_SECRETS_KEY=" + testSecretsKey, "OFFICE_ADMIN_TOKEN=keys-test-token",
				"SUPABASE_SECRET_KEY=", "SUPABASE_SERVICE_ROLE_KEY=", "SUPABASE_JWT_SECRET=", "OFFICE_ALLOW_ANONYMOUS_MEMBERS="}
			frontendKey, serverKey := p.PublishableKey, p.SecretKey
			if tc.legacy {
				frontendKey, serverKey = p.AnonKey, p.Key
				env = append(env, "SUPABASE_SERVICE_ROLE_KEY="+p.Key, "SUPABASE_JWT_SECRET="+string(supabasetest.JWTSecret))
			} else {
				p.SetGatewayTokenTTL(4 * time.Second)
				env = append(env, "SUPABASE_SECRET_KEY="+p.SecretKey)
			}
			srv := launchServer(t, bin, env, "--office", "examples/demo-office.yaml", "--data-dir", t.TempDir())
			srv.waitHealthy(t)
			api := func(path string, v any) { t.Helper(); adminGet(t, srv, "keys-test-token", path, v) }
			var offices []struct{ ID string }
			api("/api/offices", &offices)
			if len(offices) != 1 {
				t.Fatalf("offices %+v", offices)
			}
			oid := offices[0].ID
			member := p.MemberOf(t, oid, "member@example.com")
			if tc.legacy {
				member.Token = supabasetest.Sign(p.MemberClaims(member.ID, "member@example.com", false))
			}

			var q office.Question
			waitFor(t, srv, "po's question", func() bool {
				var qs []office.Question
				api("/api/offices/"+oid+"/questions?status=pending", &qs)
				if len(qs) > 0 {
					q = qs[0]
				}
				return len(qs) > 0
			})
			answerWithKey(t, p, frontendKey, member.Token, q.ID, "Dark mode")
			waitFor(t, srv, "dev's completed invocation carrying the answer", func() bool {
				var invs []office.Invocation
				api("/api/offices/"+oid+"/invocations?status=completed", &invs)
				return hasReason(invs, "Dark mode")
			})
			var got office.Question
			api("/api/questions/"+q.ID, &got)
			if got.Status != office.QuestionDelivered || got.AnsweredBy != member.ID {
				t.Errorf("question after the round: %q answered by %q; want delivered, by %s", got.Status, got.AnsweredBy, member.ID)
			}
			if !tc.legacy {
				waitFor(t, srv, "the Realtime socket reopened after the gateway's JWT expired", func() bool {
					return strings.Contains(srv.stderr.String(), "gateway token expired; reconnecting") && p.Realtime.Joins() >= 2
				})
				if seen := p.GatewayRequests(); seen["sb_secret"] == 0 || seen["bearer sb_"] != 0 || seen["legacy"] != 0 {
					t.Errorf("gateway saw %v; want the secret key in apikey only", seen)
				}
			}
			logs := srv.stdout.String() + srv.stderr.String()
			if strings.Contains(logs, serverKey) || strings.Contains(logs, member.Token) {
				t.Error("a key or a member's token appears in the logs")
			}
			if want := map[bool]string{false: "API key from SUPABASE_SECRET_KEY", true: "API key from SUPABASE_SERVICE_ROLE_KEY"}[tc.legacy]; !strings.Contains(logs, want) {
				t.Errorf("logs do not say %q", want)
			}
			srv.stop(t)
		})
	}
}

// answerWithKey answers a question as the web frontend does with
// supabase-js (rpc answer_question) under the frontend's key, signed in.
func answerWithKey(t *testing.T, p *supabasetest.Project, key, token, id, response string) {
	t.Helper()
	answer := map[string]any{"question_id": id, "response": response}
	if st, b := restAPI(t, p, key, token).text(http.MethodPost, "/rest/v1/rpc/answer_question", answer); st != http.StatusOK {
		t.Fatalf("member's answer: %d %s", st, b)
	}
}

func waitFor(t *testing.T, srv *serverProc, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 60s; logs:\n%s", what, srv.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestServeMemberTokens: the built binary on a project created today
// verifies members' tokens against the project's JWKS while it runs: ES256
// and RS256 by kid, a key rotated in while it runs, a revoked key refused
// once the JWKS's max-age has passed, and expired, other-issuer,
// other-audience, alg none, HS256 "signed" with the public key, and
// anonymous tokens refused; anonymous users are members only where the
// server allows them.
func TestServeMemberTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildServer(t)
	p := supabasetest.New(t)
	p.SetJWKSMaxAge(1) // a revocation is seen within a second
	start := func(extra ...string) *serverProc {
		env := append([]string{"SUPABASE_URL=" + p.URL, "SUPABASE_SECRET_KEY=" + p.SecretKey, "SUPABASE_SERVICE_ROLE_KEY=",
			"SUPABASE_JWT_SECRET=", "OFFICE_ALLOW_ANONYMOUS_MEMBERS=", "OFFICE_SECRETS_KEY=" + testSecretsKey}, extra...)
		srv := launchServer(t, bin, env, "--office", "examples/demo-office.yaml", "--data-dir", t.TempDir(), "--no-autostart")
		srv.waitHealthy(t)
		return srv
	}
	srv := start()
	// The member endpoint answers 404 for a request id the member cannot
	// see: the token was accepted; 401/403 when it was not.
	call := func(token string) int { t.Helper(); return memberReject(t, srv, token) }
	m := p.NewMember(t, "m@example.com")
	claims := p.MemberClaims(m.ID, "m@example.com", false)
	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for key, val := range claims {
			c[key] = val
		}
		c[k] = v
		return c
	}
	esKid := p.CurrentKey()
	parts := strings.Split(m.Token, ".")
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT","kid":"`+esKid+`"}`)) + "." + parts[1] + "."
	pub := p.PublicKey(esKid).(*ecdsa.PublicKey)
	pubBytes, _ := pub.Bytes() // the raw point, as an attacker would use it as an HMAC secret
	foreign, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	anon := p.NewAnonymousMember(t)

	check := func(name, token string, want int) {
		t.Helper()
		if got := call(token); got != want {
			t.Errorf("%s: %d; want %d", name, got, want)
		}
	}
	check("ES256 by kid", m.Token, 404)
	check("expired", p.SignMember(with("exp", time.Now().Add(-time.Minute).Unix())), 401)
	check("another issuer", p.SignMember(with("iss", "https://other.supabase.co/auth/v1")), 401)
	check("another audience", p.SignMember(with("aud", "service")), 401)
	check("alg none", none, 401)
	check("HS256 with the public key", supabasetest.SignWithKey("HS256", esKid, pubBytes, claims), 401)
	check("legacy HS256 without the legacy secret", supabasetest.Sign(claims), 401)
	check("unknown kid", supabasetest.SignWithKey("ES256", "made-up", foreign, claims), 401)
	check("anonymous user", anon.Token, 403)
	check("service role", p.SignMember(with("role", "service_role")), 403)

	// Rotation while the server runs: the new RS256 key verifies at once.
	rsKid := p.RotateKey("RS256")
	check("RS256 by kid, rotated in", p.SignMember(claims), 404)
	check("ES256 of the previously used key", m.Token, 404)
	// Revocation: refused once the cached JWKS is older than its max-age.
	p.RevokeKey(esKid)
	deadline := time.Now().Add(10 * time.Second)
	for call(m.Token) != 401 {
		if time.Now().After(deadline) {
			t.Fatal("a token of the revoked key still accepted 10 s after the revocation")
		}
		time.Sleep(200 * time.Millisecond)
	}
	check("RS256 after the ES256 key's revocation", p.SignMemberWith(rsKid, claims), 404)
	srv.stop(t)

	// A server that allows anonymous sign-ins.
	srv = start("OFFICE_ALLOW_ANONYMOUS_MEMBERS=1")
	// (signed anew: its key was revoked above)
	check("anonymous user where allowed", p.SignMember(p.MemberClaims(anon.ID, "", true)), 404)
	srv.stop(t)
}

// memberReject asks srv's member endpoint to reject a request id nobody
// can see, with token: 404 when the token was accepted, 401/403 when it
// was not.
func memberReject(t *testing.T, srv *serverProc, token string) int {
	t.Helper()
	return apiClient{t: t, base: srv.base, token: token}.do(http.MethodPost, "/api/member/dependencies/"+uuid.NewString()+"/reject", `{"reason":"no"}`, nil)
}
