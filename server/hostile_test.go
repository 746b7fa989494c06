package server

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestAgentNamesOverAPI: POST and PUT refuse names that are paths, "..",
// NUL or newlines (400); POST of a name the office has in another case is a
// 409 and saves nothing; PUT on an agent's own ID replaces it.
func TestAgentNamesOverAPI(t *testing.T) {
	f := newFixture(t, nil)
	body := func(name string) string {
		b, _ := json.Marshal(map[string]string{"name": name, "role": "impostor"})
		return string(b)
	}
	for _, name := range []string{"../../../../tmp/x", "..", "a\x00b", "dev\nnew line", "a b"} {
		for _, req := range [][2]string{{"POST", "/api/offices/o1/agents"}, {"PUT", "/api/offices/o1/agents/a2"}} {
			if st, b := f.do(t, req[0], req[1], testToken, body(name)); st != 400 || errCode(t, b) != "invalid" {
				t.Errorf("%s %s name %q = %d %s, want 400 invalid", req[0], req[1], name, st, b)
			}
		}
	}
	for _, name := range []string{"PO", "po", "Dev"} {
		if st, b := f.do(t, "POST", "/api/offices/o1/agents", testToken, body(name)); st != 409 || errCode(t, b) != "conflict" {
			t.Errorf("POST existing name %q = %d %s, want 409 conflict", name, st, b)
		}
	}
	if st, b := f.do(t, "POST", "/api/offices/o1/agents", testToken, `{"id":"a1","name":"other"}`); st != 409 {
		t.Errorf("POST with an existing agent's id = %d %s, want 409", st, b)
	}
	f.off.mu.Lock()
	saved := len(f.off.saved)
	f.off.mu.Unlock()
	if saved != 0 {
		t.Fatalf("refused requests saved %d agents: %+v", saved, f.off.saved)
	}

	if st, b := f.do(t, "POST", "/api/offices/o1/agents", testToken, body("reviewer")); st != 200 {
		t.Fatalf("POST new agent = %d %s", st, b)
	}
	if st, b := f.do(t, "PUT", "/api/offices/o1/agents/a2", testToken, body("dev")); st != 200 {
		t.Fatalf("PUT own id = %d %s", st, b)
	}
	f.off.mu.Lock()
	defer f.off.mu.Unlock()
	if len(f.off.saved) != 2 {
		t.Fatalf("saved %+v, want the POST and the PUT", f.off.saved)
	}
	if created := f.off.saved[0]; created.ID == "" || created.ID == "a1" || created.ID == "a2" || created.OfficeID != "o1" {
		t.Errorf("POST saved %+v: want a new ID in office o1 (so the store refuses a racing duplicate)", created)
	}
	if replaced := f.off.saved[1]; replaced.ID != "a2" || replaced.Role != "impostor" {
		t.Errorf("PUT saved %+v: want agent a2 replaced", replaced)
	}
}

// TestHostCheck: against DNS rebinding, every endpoint but /healthz
// refuses a Host that is not one of the server's names: an IP address,
// localhost, or the host of an allowed origin.
func TestHostCheck(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Origins = []string{"https://office.example.com"} })
	_, port, _ := net.SplitHostPort(f.ts.Listener.Addr().String())
	get := func(path, host string) int {
		req, _ := http.NewRequest("GET", f.ts.URL+path, nil)
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+testToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, path := range []string{"/metrics", "/readyz", "/api/offices", "/", "/static/app.js", "/ws/offices/o1/agents/po"} {
		for _, host := range []string{"rebind.attacker.example:" + port, "rebind.attacker.example", "localhost.attacker.example:" + port, "office.example.com:" + port} {
			if st := get(path, host); st != http.StatusForbidden {
				t.Errorf("GET %s with Host %s = %d, want 403", path, host, st)
			}
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port, "192.0.2.7:" + port, "office.example.com", "office.example.com:443", "OFFICE.example.com"} {
		if st := get("/readyz", host); st != http.StatusOK {
			t.Errorf("GET /readyz with Host %s = %d, want 200", host, st)
		}
	}
	if st := get("/healthz", "rebind.attacker.example:"+port); st != http.StatusOK {
		t.Errorf("GET /healthz with a foreign Host = %d, want 200 (it stays open)", st)
	}
}

// TestCookieSecure: the console's token cookie is Secure when the browser
// came over HTTPS: TLS, or X-Forwarded-Proto: https from a proxy on
// loopback (not from anyone else).
func TestCookieSecure(t *testing.T) {
	f := newFixture(t, nil)
	h := f.srv.Handler()
	for _, tt := range []struct {
		name   string
		tls    bool
		remote string
		proto  string
		secure bool
	}{
		{"plain http", false, "127.0.0.1:5000", "", false},
		{"tls", true, "192.0.2.1:5000", "", true},
		{"proxy on loopback", false, "127.0.0.1:5000", "https", true},
		{"proxy on loopback v6", false, "[::1]:5000", "https", true},
		{"header from elsewhere", false, "192.0.2.1:5000", "https", false},
	} {
		req := httptest.NewRequest("GET", "/?token="+testToken, nil)
		req.Host, req.RemoteAddr = "127.0.0.1:8080", tt.remote
		if tt.tls {
			req.TLS = &tls.ConnectionState{}
		}
		if tt.proto != "" {
			req.Header.Set("X-Forwarded-Proto", tt.proto)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		cookies := w.Result().Cookies()
		if len(cookies) != 1 || cookies[0].Secure != tt.secure || !cookies[0].HttpOnly {
			t.Errorf("%s: cookies %+v, want one HttpOnly with Secure=%v", tt.name, cookies, tt.secure)
		}
	}
}
