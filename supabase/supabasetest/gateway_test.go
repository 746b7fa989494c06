package supabasetest_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/supabase/supabasetest"
)

// restAs reads the offices a request with these headers sees: the status,
// the number of rows and the body.
func restAs(t *testing.T, p *supabasetest.Project, h map[string]string) (int, int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, p.URL+"/rest/v1/offices?select=id", nil)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var rows []any
	json.Unmarshal(b, &rows)
	return res.StatusCode, len(rows), string(b)
}

// TestGatewayKeys: the stand-in's gateway treats the API keys as
// Supabase's does (gateway.go): the secret key is service_role and the
// publishable key anon, in apikey alone or with the same key as bearer; a
// different "Bearer sb_…" reaches PostgREST and is refused PGRST301; an
// sb_ value that is not the project's is refused, and so is the secret key
// from a browser; legacy JWT keys pass as before; members' tokens are
// verified by kid against the published keys, and a revoked key, an
// unknown kid or alg none is refused as PostgREST refuses it.
func TestGatewayKeys(t *testing.T) {
	p := supabasetest.New(t)
	officeID := uuid.NewString()
	conn, err := pgx.Connect(context.Background(), p.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), `insert into public.offices (id, name) values ($1, 'gateway')`, officeID); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())
	member := p.MemberOf(t, officeID, "gw@example.com")
	legacy := p.MemberOf(t, officeID, "legacy@example.com")
	legacy.Token = supabasetest.Sign(p.MemberClaims(legacy.ID, "legacy@example.com", false))
	firefox := "Mozilla/5.0 (X11; Linux x86_64; rv:140.0) Gecko/20100101 Firefox/140.0"
	foreign, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	claims := p.MemberClaims(member.ID, "gw@example.com", false)
	parts := strings.Split(member.Token, ".")
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT","kid":"`+p.CurrentKey()+`"}`)) + "." + parts[1] + "."

	tests := []struct {
		name    string
		h       map[string]string
		status  int
		rows    int
		message string // in the body of a refusal
	}{
		{"secret key in apikey", map[string]string{"apikey": p.SecretKey}, 200, 1, ""},
		{"secret key as apikey and bearer", map[string]string{"apikey": p.SecretKey, "Authorization": "Bearer " + p.SecretKey}, 200, 1, ""},
		// anon may not read offices: PostgREST's 401 42501 says the role was anon.
		{"publishable key", map[string]string{"apikey": p.PublishableKey}, 401, 0, "42501"},
		{"publishable key as apikey and bearer", map[string]string{"apikey": p.PublishableKey, "Authorization": "Bearer " + p.PublishableKey}, 401, 0, "42501"},
		{"another sb_ key as bearer", map[string]string{"apikey": p.PublishableKey, "Authorization": "Bearer " + p.SecretKey}, 401, 0, "Expected 3 parts in JWT; got 1"},
		{"secret key as bearer with the legacy anon key", map[string]string{"apikey": p.AnonKey, "Authorization": "Bearer " + p.SecretKey}, 401, 0, "PGRST301"},
		{"not the project's sb_ key", map[string]string{"apikey": "sb_secret_NotThisProjectsKey"}, 401, 0, "Invalid API key"},
		{"secret key from a browser", map[string]string{"apikey": p.SecretKey, "User-Agent": firefox}, 401, 0, "Forbidden use of secret API key in browser"},
		{"publishable key from a browser", map[string]string{"apikey": p.PublishableKey, "User-Agent": firefox}, 401, 0, "42501"},
		{"legacy service-role key", map[string]string{"apikey": p.Key, "Authorization": "Bearer " + p.Key}, 200, 1, ""},
		{"member (ES256) with the publishable key", map[string]string{"apikey": p.PublishableKey, "Authorization": "Bearer " + member.Token}, 200, 1, ""},
		{"legacy member (HS256)", map[string]string{"apikey": p.PublishableKey, "Authorization": "Bearer " + legacy.Token}, 200, 1, ""},
		{"unknown kid", map[string]string{"apikey": p.PublishableKey, "Authorization": "Bearer " + signKey(foreign, "not-a-kid", claims)}, 401, 0, "No suitable key or wrong key type"},
		{"the project's kid, another key", map[string]string{"apikey": p.PublishableKey, "Authorization": "Bearer " + signKey(foreign, p.CurrentKey(), claims)}, 401, 0, "JWT cryptographic operation failed"},
		{"alg none", map[string]string{"apikey": p.PublishableKey, "Authorization": "Bearer " + none}, 401, 0, "Wrong or unsupported encoding algorithm"},
		{"no apikey", map[string]string{"Authorization": "Bearer " + member.Token}, 401, 0, "No API key found"},
	}
	for _, tc := range tests {
		status, rows, body := restAs(t, p, tc.h)
		if status != tc.status || rows != tc.rows || !strings.Contains(body, tc.message) {
			t.Errorf("%s: %d, %d rows, %s; want %d, %d rows, %q", tc.name, status, rows, body, tc.status, tc.rows, tc.message)
		}
	}

	// Rotation and revocation: the old key verifies until revoked.
	old := p.CurrentKey()
	p.RotateKey("RS256")
	rsMember := p.SignMember(claims)
	for name, tok := range map[string]string{"RS256 after rotation": rsMember, "ES256 of the previous key": member.Token} {
		if status, rows, body := restAs(t, p, map[string]string{"apikey": p.PublishableKey, "Authorization": "Bearer " + tok}); status != 200 || rows != 1 {
			t.Errorf("%s: %d, %d rows, %s", name, status, rows, body)
		}
	}
	p.RevokeKey(old)
	if status, _, body := restAs(t, p, map[string]string{"apikey": p.PublishableKey, "Authorization": "Bearer " + member.Token}); status != 401 || !strings.Contains(body, "No suitable key") {
		t.Errorf("token of a revoked key: %d %s; want 401 PGRST301", status, body)
	}
	if got := p.GatewayRequests(); got["sb_secret"] < 2 || got["browser secret"] != 1 || got["invalid"] != 1 {
		t.Errorf("gateway saw %v", got)
	}
}

func signKey(k *ecdsa.PrivateKey, kid string, claims map[string]any) string {
	return supabasetest.SignWithKey("ES256", kid, k, claims)
}

// TestGatewayJWKS: the JWKS is served as Supabase Auth serves it
// (internal/api/jwks.go): public, Cache-Control max-age=600, each key with
// kid, alg, use "sig" and key_ops ["verify"]; rotation adds a key,
// revocation removes it; the legacy secret is never in it.
func TestGatewayJWKS(t *testing.T) {
	p := supabasetest.New(t)
	get := func() (string, []map[string]any) {
		res, err := http.Get(p.URL + "/auth/v1/.well-known/jwks.json")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var set struct{ Keys []map[string]any }
		if err := json.NewDecoder(res.Body).Decode(&set); err != nil || res.StatusCode != 200 {
			t.Fatalf("JWKS: %s %v", res.Status, err)
		}
		return res.Header.Get("Cache-Control"), set.Keys
	}
	cc, keys := get()
	if cc != "public, max-age=600" || len(keys) != 1 {
		t.Fatalf("JWKS %q with %d keys; want max-age=600 and one key", cc, len(keys))
	}
	k := keys[0]
	if k["kid"] != p.CurrentKey() || k["alg"] != "ES256" || k["kty"] != "EC" || k["crv"] != "P-256" || k["use"] != "sig" || k["d"] != nil {
		t.Errorf("key %v", k)
	}
	if ops, _ := k["key_ops"].([]any); len(ops) != 1 || ops[0] != "verify" {
		t.Errorf("key_ops %v", k["key_ops"])
	}
	old := p.CurrentKey()
	rs := p.RotateKey("RS256")
	if _, keys = get(); len(keys) != 2 || keys[1]["kid"] != rs || keys[1]["kty"] != "RSA" || keys[1]["n"] == nil {
		t.Errorf("after rotation: %v", keys)
	}
	p.RevokeKey(old)
	p.SetJWKSMaxAge(1)
	if cc, keys = get(); len(keys) != 1 || keys[0]["kid"] != rs || cc != "public, max-age=1" {
		t.Errorf("after revocation: %q %v", cc, keys)
	}
	if b, _ := json.Marshal(keys); strings.Contains(string(b), base64.RawURLEncoding.EncodeToString(supabasetest.JWTSecret)) {
		t.Error("the legacy secret is published")
	}
}

// TestGatewayRealtime: Realtime takes an sb_ key in the socket URL (the
// gateway swaps it for a role JWT) and a join whose access_token is the
// same kind of key (realtime_channel.ex: "sb_" → the socket's token); the
// secret key from a browser and a key not the project's are refused at
// the handshake; when the gateway's JWT expires the channel is shut down
// with "Token has expired".
func TestGatewayRealtime(t *testing.T) {
	p := supabasetest.New(t)
	p.SetGatewayTokenTTL(2 * time.Second)
	dial := func(key string, h http.Header) (*websocket.Conn, *http.Response, error) {
		u := strings.Replace(p.URL, "http", "ws", 1) + "/realtime/v1/websocket?" + url.Values{"apikey": {key}, "vsn": {"1.0.0"}}.Encode()
		return websocket.DefaultDialer.Dial(u, h)
	}
	if _, res, err := dial("sb_secret_NotThisProjectsKey", nil); err == nil || res == nil || res.StatusCode != 401 {
		t.Errorf("a key not the project's: %v; want 401", err)
	}
	if _, res, err := dial(p.SecretKey, http.Header{"User-Agent": {"Mozilla/5.0 Chrome/140"}}); err == nil || res == nil || res.StatusCode != 401 {
		t.Errorf("secret key from a browser: %v; want 401", err)
	}
	ws, _, err := dial(p.SecretKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	join := map[string]any{"topic": "realtime:gw", "event": "phx_join", "ref": "1",
		"payload": map[string]any{"config": map[string]any{"postgres_changes": []any{map[string]any{"event": "*", "schema": "public", "table": "offices"}}},
			"access_token": p.SecretKey}}
	if err := ws.WriteJSON(join); err != nil {
		t.Fatal(err)
	}
	var events []string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ws.SetReadDeadline(deadline)
		var m struct {
			Event   string
			Payload json.RawMessage
		}
		if err := ws.ReadJSON(&m); err != nil {
			t.Fatalf("after %q: %v", events, err)
		}
		events = append(events, m.Event+" "+string(m.Payload))
		if m.Event == "phx_close" {
			break
		}
	}
	got := strings.Join(events, "\n")
	for _, want := range []string{`"status":"ok"`, "Subscribed to PostgreSQL", "Token has expired", "phx_close"} {
		if !strings.Contains(got, want) {
			t.Errorf("frames:\n%s\nwant %q", got, want)
		}
	}
}
