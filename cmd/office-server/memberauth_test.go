package main

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/supabase/supabasetest"
)

// TestSupabaseURLWithDatabase: what the serve command makes of SUPABASE_URL
// beside DATABASE_URL and the API keys. With DATABASE_URL the store is
// PostgreSQL and SUPABASE_URL names the project whose Auth signs members'
// tokens, without a key; a key as well, or a URL that is not a project's,
// stops the server with a message saying what to set, never the key.
func TestSupabaseURLWithDatabase(t *testing.T) {
	const pg, project = "postgres://office@db.example.com:5432/postgres", "https://abcdefghij.supabase.co"
	parse := func(args []string, env map[string]string) (serveConfig, error) {
		return parseServeConfig(args, func(k string) string { return env[k] }, io.Discard)
	}
	c, err := parse(nil, map[string]string{"DATABASE_URL": pg, "SUPABASE_URL": project, "SUPABASE_JWT_SECRET": "legacy"})
	if err != nil {
		t.Fatalf("DATABASE_URL and SUPABASE_URL: %v", err)
	}
	if c.storeKind() != "postgres" || c.SupabaseURL != project || c.SupabaseKey != "" || c.JWTSecret != "legacy" {
		t.Errorf("DATABASE_URL and SUPABASE_URL: store %s, project %q, key %q, secret %q; want postgres, the project, no key, the secret",
			c.storeKind(), c.SupabaseURL, c.SupabaseKey, c.JWTSecret)
	}
	if c, err := parse([]string{"--database-url", pg, "--supabase-url", project}, nil); err != nil || c.storeKind() != "postgres" {
		t.Errorf("--database-url and --supabase-url: %v, store %s", err, c.storeKind())
	}
	if c, err := parse(nil, map[string]string{"SUPABASE_URL": project + "/", "SUPABASE_SECRET_KEY": "sb_secret_abc"}); err != nil || c.storeKind() != "supabase" || c.SupabaseKeyFrom != "SUPABASE_SECRET_KEY" {
		t.Errorf("SUPABASE_URL and SUPABASE_SECRET_KEY: %v, store %s; want the Supabase store", err, c.storeKind())
	}

	for _, bad := range []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"a secret key too", nil, map[string]string{"DATABASE_URL": pg, "SUPABASE_URL": project, "SUPABASE_SECRET_KEY": "sb_secret_abc"},
			[]string{"SUPABASE_SECRET_KEY are all set", "unset SUPABASE_SECRET_KEY", "unset DATABASE_URL", "needs no API key"}},
		{"a legacy key too", nil, map[string]string{"DATABASE_URL": pg, "SUPABASE_URL": project, "SUPABASE_SERVICE_ROLE_KEY": "ey.x.y"},
			[]string{"unset SUPABASE_SERVICE_ROLE_KEY", "unset DATABASE_URL"}},
		{"flags and a key", []string{"--database-url", pg, "--supabase-url", project}, map[string]string{"SUPABASE_SECRET_KEY": "sb_secret_abc"},
			[]string{"unset SUPABASE_SECRET_KEY"}},
		{"the Auth URL", nil, map[string]string{"DATABASE_URL": pg, "SUPABASE_URL": project + "/auth/v1"},
			[]string{`path "/auth/v1"`, "https://<project-ref>.supabase.co"}},
		{"the REST URL on Supabase", nil, map[string]string{"SUPABASE_URL": project + "/rest/v1/", "SUPABASE_SECRET_KEY": "sb_secret_abc"},
			[]string{`path "/rest/v1/"`}},
		{"no scheme", nil, map[string]string{"DATABASE_URL": pg, "SUPABASE_URL": "abcdefghij.supabase.co"},
			[]string{"SUPABASE_URL is not a project URL", "https://<project-ref>.supabase.co"}},
		{"a postgres URL", nil, map[string]string{"DATABASE_URL": pg, "SUPABASE_URL": pg},
			[]string{"SUPABASE_URL is not a project URL"}},
	} {
		_, err := parse(bad.args, bad.env)
		if err == nil {
			t.Errorf("%s: accepted; want an error", bad.name)
			continue
		}
		for _, w := range bad.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", bad.name, err, w)
			}
		}
		if strings.Contains(err.Error(), "sb_secret_abc") || strings.Contains(err.Error(), "ey.x.y") {
			t.Errorf("%s: the error %q carries the key", bad.name, err)
		}
	}
}

// TestMemberAuthSettings: the verifier each setting gives and what the
// server says of it at start; on PostgreSQL without SUPABASE_URL it says
// what to set.
func TestMemberAuthSettings(t *testing.T) {
	const pg, project = "postgres://db/office", "https://abcdefghij.supabase.co/"
	for _, tc := range []struct {
		name       string
		env        map[string]string
		projectURL string
		log        string
	}{
		{"PostgreSQL and the project", map[string]string{"DATABASE_URL": pg, "SUPABASE_URL": project}, project,
			"members' tokens: verified with the project's signing keys\" jwks=https://abcdefghij.supabase.co/auth/v1/.well-known/jwks.json iss=https://abcdefghij.supabase.co/auth/v1 legacy_hs256=false"},
		{"Supabase store", map[string]string{"SUPABASE_URL": project, "SUPABASE_SECRET_KEY": "sb_secret_abc", "SUPABASE_JWT_SECRET": "s"}, project,
			"iss=https://abcdefghij.supabase.co/auth/v1 legacy_hs256=true"},
		{"PostgreSQL and the legacy secret", map[string]string{"DATABASE_URL": pg, "SUPABASE_JWT_SECRET": "s"}, "",
			"level=WARN msg=\"members' tokens: only HS256 with SUPABASE_JWT_SECRET (the legacy path), and their issuer is not checked: set SUPABASE_URL"},
		{"PostgreSQL alone", map[string]string{"DATABASE_URL": pg}, "",
			"member endpoints off: set SUPABASE_URL to the Supabase project whose Auth signs members' tokens"},
	} {
		c, err := parseServeConfig(nil, func(k string) string { return tc.env[k] }, io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var buf bytes.Buffer
		a := memberAuth(c, slog.New(slog.NewTextHandler(&buf, nil)))
		if a.ProjectURL != tc.projectURL || a.JWTSecret != tc.env["SUPABASE_JWT_SECRET"] {
			t.Errorf("%s: project %q, secret %q; want %q, %q", tc.name, a.ProjectURL, a.JWTSecret, tc.projectURL, tc.env["SUPABASE_JWT_SECRET"])
		}
		if !strings.Contains(buf.String(), tc.log) {
			t.Errorf("%s: logs %q; want %q", tc.name, buf.String(), tc.log)
		}
	}
}

// TestServePostgresMemberTokens runs the built binary as the servers of a
// Supabase project created today run when there are several of them:
// DATABASE_URL on the project's database (real PostgreSQL) and SUPABASE_URL
// naming the project (the stand-in, whose Auth JWKS serves ES256 keys), no
// API key, no JWT secret, two servers. On the demo office with scout, a
// member signed in with an ES256 token answers po's question as the
// frontend does (the project's REST API) and gives scout its package
// through the server's member API, after tokens of another issuer or
// none, of the legacy secret, of another audience and of an anonymous user
// were refused and left the request pending; a key rotated in while the
// servers run verifies at once on both, a revoked one stops verifying. A
// third server with SUPABASE_JWT_SECRET as well takes legacy HS256 tokens
// of the project's issuer only, and with OFFICE_ALLOW_ANONYMOUS_MEMBERS=1
// anonymous users.
func TestServePostgresMemberTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildServer(t)
	p := supabasetest.New(t)
	p.SetJWKSMaxAge(1) // a revocation is seen within a second
	const token = "pgauth-test-admin-token"
	env := []string{"DATABASE_URL=" + p.DatabaseURL, "SUPABASE_URL=" + p.URL, "OFFICE_ADMIN_TOKEN=" + token, "OFFICE_SECRETS_KEY=" + testSecretsKey,
		"SUPABASE_SECRET_KEY=", "SUPABASE_SERVICE_ROLE_KEY=", "SUPABASE_JWT_SECRET=", "OFFICE_ALLOW_ANONYMOUS_MEMBERS="}
	a := launchServer(t, bin, append(env, "HOME="+t.TempDir()), "--office", demoOfficeWithScout(t, "pgauth-deploy-token"), "--data-dir", t.TempDir())
	a.waitHealthy(t)
	b := launchServer(t, bin, append(env, "HOME="+t.TempDir()), "--data-dir", t.TempDir())
	b.waitHealthy(t)
	defer func() {
		if t.Failed() {
			t.Logf("server A log:\n%s\nserver B log:\n%s", a.stderr.String(), b.stderr.String())
		}
	}()
	for _, s := range []*serverProc{a, b} {
		waitFor(t, s, "the log line on members' tokens", func() bool {
			return strings.Contains(s.stderr.String(), "members' tokens: verified with the project's signing keys") &&
				strings.Contains(s.stderr.String(), "iss="+p.URL+"/auth/v1")
		})
	}
	var offices []struct{ ID string }
	adminGet(t, a, token, "/api/offices", &offices)
	if len(offices) != 1 {
		t.Fatalf("offices %+v", offices)
	}
	oid := offices[0].ID
	m := p.MemberOf(t, oid, "member@example.com")
	r := &tokenRun{t: t, p: p, a: a, b: b, token: token, m: m, claims: p.MemberClaims(m.ID, "member@example.com", false), anon: p.NewAnonymousMember(t)}

	// po's question, answered by the member as the frontend does.
	var q office.Question
	waitFor(t, a, "po's question", func() bool {
		var qs []office.Question
		adminGet(t, a, token, "/api/offices/"+oid+"/questions?status=pending", &qs)
		if len(qs) > 0 {
			q = qs[0]
		}
		return len(qs) > 0
	})
	answerAsMember(t, p, m, q.ID, "Dark mode")
	waitFor(t, a, "dev's completed invocation carrying the answer", func() bool {
		var invs []office.Invocation
		adminGet(t, a, token, "/api/offices/"+oid+"/invocations?status=completed", &invs)
		return hasReason(invs, "Dark mode")
	})

	// scout's request for a package, through the member API.
	var dep office.DependencyRequest
	waitFor(t, a, "scout's dependency request", func() bool {
		var ds []office.DependencyRequest
		adminGet(t, a, token, "/api/offices/"+oid+"/dependencies?status=pending", &ds)
		for _, d := range ds {
			if d.Name == "left-pad" {
				dep = d
			}
		}
		return dep.ID != ""
	})
	r.refused(dep.ID)
	rotated := r.rotateAndProvide(dep.ID)
	r.revoke(rotated)
	a.stop(t)
	b.stop(t)
	r.legacy(bin, env, rotated)
}

// tokenRun is TestServePostgresMemberTokens' project, its two servers
// and its member.
type tokenRun struct {
	t      *testing.T
	p      *supabasetest.Project
	a, b   *serverProc
	token  string
	m      supabasetest.Member
	claims map[string]any
	anon   supabasetest.Member
	oldKid string // the key the member's token was signed with
}

// adminGet GETs path from s with the admin token; it must answer 200,
// decoded into v.
func adminGet(t *testing.T, s *serverProc, token, path string, v any) {
	t.Helper()
	apiClient{t: t, base: s.base, token: token}.get(path, v)
}

// member POSTs a member's action on dependency request id to s with tok.
func (r *tokenRun) member(s *serverProc, action, id, tok, body string) (int, string) {
	t := r.t
	t.Helper()
	return apiClient{t: t, base: s.base, token: tok}.text(http.MethodPost, "/api/member/dependencies/"+id+"/"+action, body)
}

// with is the member's claims with k set to v, or left out when v is nil.
func (r *tokenRun) with(k string, v any) map[string]any {
	c := map[string]any{}
	for key, val := range r.claims {
		c[key] = val
	}
	if v == nil {
		delete(c, k)
	} else {
		c[k] = v
	}
	return c
}

// refused: tokens of another issuer or none, of the legacy secret, of
// another audience and of an anonymous user are refused by both servers
// and leave the request pending.
func (r *tokenRun) refused(depID string) {
	t, p := r.t, r.p
	for _, bad := range []struct {
		name, token string
		want        int
	}{
		{"another project's issuer", p.SignMember(r.with("iss", "https://otherproject.supabase.co/auth/v1")), 401},
		{"Auth's issuer without the project", p.SignMember(r.with("iss", "supabase")), 401},
		{"no issuer", p.SignMember(r.with("iss", nil)), 401},
		{"legacy HS256 without the legacy secret", supabasetest.Sign(r.claims), 401},
		{"another audience", p.SignMember(r.with("aud", "anon")), 401},
		{"anonymous user", r.anon.Token, 403},
	} {
		for _, s := range []*serverProc{r.a, r.b} {
			if st, body := r.member(s, "provide", depID, bad.token, `{"value":"evil-pad"}`); st != bad.want {
				t.Errorf("%s: %d %s; want %d", bad.name, st, body, bad.want)
			}
		}
	}
	var got office.DependencyRequest
	adminGet(t, r.a, r.token, "/api/dependencies/"+depID, &got)
	if got.Status != office.DependencyPending {
		t.Fatalf("scout's request after refused tokens: %s; want still pending", got.Status)
	}
}

// rotateAndProvide: a key rotated in while the servers run verifies at
// once, on either; the member provides scout's package with it. It
// returns a token signed with the new key.
func (r *tokenRun) rotateAndProvide(depID string) string {
	t, p, a, b := r.t, r.p, r.a, r.b
	oldKid := p.CurrentKey()
	newKid := p.RotateKey("ES256")
	if newKid == oldKid {
		t.Fatal("rotation kept the key")
	}
	rotated := p.SignMember(r.claims)
	if st, body := r.member(b, "reject", uuid.NewString(), rotated, `{"reason":"no"}`); st != http.StatusNotFound {
		t.Errorf("rotated-in key on server B: %d %s; want 404 (accepted; no such request)", st, body)
	}
	if st, body := r.member(b, "provide", depID, rotated, `{"value":"left-pad"}`); st != http.StatusOK || !strings.Contains(body, `"status":"provided"`) {
		t.Fatalf("member provides scout's package with the rotated-in key: %d %s", st, body)
	}
	var got office.DependencyRequest
	waitFor(t, a, "the package delivered to scout", func() bool {
		adminGet(t, a, r.token, "/api/dependencies/"+depID, &got)
		return got.Status == office.DependencyProvided && got.DeliveredAt != nil
	})
	if st, body := r.member(a, "provide", depID, r.m.Token, `{"value":"again"}`); st != http.StatusConflict {
		t.Errorf("providing again with the previously used key: %d %s; want 409 (accepted, not pending)", st, body)
	}
	r.oldKid = oldKid
	return rotated
}

// revoke: the previously used key revoked is refused once the JWKS's
// max-age passed; the key in use still verifies; no token is logged.
func (r *tokenRun) revoke(rotated string) {
	t, a, b, m := r.t, r.a, r.b, r.m
	r.p.RevokeKey(r.oldKid)
	for _, s := range []*serverProc{a, b} {
		waitFor(t, s, "the revoked key refused", func() bool {
			st, _ := r.member(s, "reject", uuid.NewString(), m.Token, `{"reason":"no"}`)
			return st == http.StatusUnauthorized
		})
		if st, body := r.member(s, "reject", uuid.NewString(), rotated, `{"reason":"no"}`); st != http.StatusNotFound {
			t.Errorf("the key in use after the revocation: %d %s; want 404", st, body)
		}
	}
	logs := a.stdout.String() + a.stderr.String() + b.stdout.String() + b.stderr.String()
	if strings.Contains(logs, m.Token) || strings.Contains(logs, rotated) {
		t.Error("a member's token appears in the logs")
	}
}

// legacy: the legacy path beside the JWKS: HS256 under the project's JWT
// secret, its issuer checked too; and anonymous users allowed.
func (r *tokenRun) legacy(bin string, env []string, rotated string) {
	t, p := r.t, r.p
	c := launchServer(t, bin, append(env, "HOME="+t.TempDir(), "SUPABASE_JWT_SECRET="+string(supabasetest.JWTSecret), "OFFICE_ALLOW_ANONYMOUS_MEMBERS=1"), "--data-dir", t.TempDir())
	c.waitHealthy(t)
	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"legacy HS256 of the project", supabasetest.Sign(r.claims), http.StatusNotFound},
		{"legacy HS256 of another issuer", supabasetest.Sign(r.with("iss", "https://otherproject.supabase.co/auth/v1")), http.StatusUnauthorized},
		{"ES256 of the key in use", rotated, http.StatusNotFound},
		{"anonymous user where allowed", p.SignMember(p.MemberClaims(r.anon.ID, "", true)), http.StatusNotFound},
	} {
		if st, body := r.member(c, "reject", uuid.NewString(), tc.token, `{"reason":"no"}`); st != tc.want {
			t.Errorf("server with the legacy secret, %s: %d %s; want %d", tc.name, st, body, tc.want)
		}
	}
	if !strings.Contains(c.stderr.String(), "legacy_hs256=true") {
		t.Errorf("server with the legacy secret does not log it:\n%s", c.stderr.String())
	}
	c.stop(t)
}
