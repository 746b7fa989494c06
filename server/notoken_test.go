package server

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// memberRoutes take a member's Supabase access token instead of the
// admin token: without one they refuse.
var memberRoutes = regexp.MustCompile(`^(POST|OPTIONS) /api/member/`)

var routePattern = regexp.MustCompile(`"((?:GET|POST|PUT|PATCH|DELETE|OPTIONS) /[^"]*)"`)

// TestNoTokenEndpoints checks every route the server registers (read from
// this package's source, so a new route is covered as soon as it is
// written) against docs/api.md's table: the open ones answer without a
// token; the member endpoints refuse a request without a member's token;
// every other route answers 401 without the admin token.
func TestNoTokenEndpoints(t *testing.T) {
	f := newFixture(t, nil)
	routes := registeredRoutes(t)
	if len(routes) < 30 {
		t.Fatalf("found only %d routes in the package's source", len(routes))
	}
	// The open ones, as docs/api.md ("Who may call what") says.
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/static/app.css", "/static/vendor/xterm.js", "/static/vendor/xterm.css"} {
		if st, body := f.do(t, "GET", path, "", ""); st != 200 {
			t.Errorf("GET %s without a token = %d (%.80s), want 200: docs/api.md says it needs none", path, st, body)
		}
	}
	for _, r := range routes {
		method, pattern, _ := strings.Cut(r, " ")
		path := fillPattern(pattern)
		switch {
		case r == "GET /healthz" || r == "GET /readyz" || r == "GET /metrics" || strings.HasPrefix(pattern, "/static/"):
			continue // checked above
		case memberRoutes.MatchString(r):
			if method == "OPTIONS" {
				continue // the CORS preflight: no token by design
			}
			if st, _ := f.do(t, method, path, "", ""); st < 400 {
				t.Errorf("%s %s without a member's token = %d, want a refusal", method, path, st)
			}
			if st, _ := f.do(t, method, path, testToken, ""); st < 400 {
				t.Errorf("%s %s with the admin token = %d, want a refusal: it takes a member's token", method, path, st)
			}
		default:
			if st, body := f.do(t, method, path, "", ""); st != 401 {
				t.Errorf("%s %s without a token = %d (%.80s), want 401: docs/api.md lists it as needing the admin token", method, path, st, body)
			}
		}
	}
}

// registeredRoutes reads "METHOD /path" patterns from the package's
// non-test Go files.
func registeredRoutes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var routes []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range routePattern.FindAllStringSubmatch(string(b), -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				routes = append(routes, m[1])
			}
		}
	}
	return routes
}

// fillPattern turns a mux pattern into a path: {name} → x, {$} → "".
func fillPattern(p string) string {
	p = strings.ReplaceAll(p, "{$}", "")
	return regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(p, "x")
}
