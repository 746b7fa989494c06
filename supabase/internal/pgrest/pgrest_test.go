package pgrest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/migrations"
	standins "github.com/office-server/office-server/migrations/supabasetest"
	"github.com/office-server/office-server/supabase/internal/hs256"
)

var (
	secret     = []byte("a-test-secret-of-at-least-32-characters")
	serviceKey = hs256.Sign(secret, map[string]any{"role": "service_role", "exp": 4102444800})
)

// TestAnswers checks the stand-in's answers against PostgREST's documented
// ones (docs.postgrest.org "Errors", "Singular or plural"), on the real
// schema.
func TestAnswers(t *testing.T) {
	dbURL := testenv.NewDatabase(t)
	ctx := context.Background()
	if err := standins.Apply(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.ApplyURL(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, dbURL, secret)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := httptest.NewServer(s)
	defer srv.Close()

	do := func(method, path, body string, hdr ...string) (int, map[string]any, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("apikey", serviceKey)
		req.Header.Set("Authorization", "Bearer "+serviceKey)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var obj map[string]any
		json.Unmarshal(b, &obj)
		return resp.StatusCode, obj, string(b)
	}
	const id = "6f1d3e0a-8a51-4d2c-9d5e-1b2c3d4e5f60"
	code, _, body := do("POST", "/rest/v1/offices", `{"id":"`+id+`","name":"A"}`, "Prefer", "return=representation")
	if code != 201 || !strings.Contains(body, `"question_ttl":"00:00:00"`) {
		t.Fatalf("POST = %d %s", code, body)
	}
	tests := []struct {
		name         string
		method, path string
		body         string
		hdr          []string
		status       int
		code         string
	}{
		{"unique violation", "POST", "/rest/v1/offices", `{"name":"A"}`, []string{"Prefer", "return=representation"}, 409, "23505"},
		{"single with 0 rows", "GET", "/rest/v1/offices?id=eq.00000000-0000-0000-0000-000000000000", "", []string{"Accept", "application/vnd.pgrst.object+json"}, 406, "PGRST116"},
		{"bad uuid", "GET", "/rest/v1/offices?id=eq.nope", "", nil, 400, "22P02"},
		{"unknown column", "GET", "/rest/v1/offices?nope=eq.1", "", nil, 400, "42703"},
		{"unknown table", "GET", "/rest/v1/nope", "", nil, 404, "PGRST205"},
		{"check violation", "POST", "/rest/v1/offices", `{"name":""}`, nil, 400, "23514"},
		{"foreign key", "POST", "/rest/v1/office_agents", `{"office_id":"00000000-0000-0000-0000-000000000000","name":"x"}`, nil, 409, "23503"},
		{"on_conflict on a partial index", "POST", "/rest/v1/office_events?on_conflict=office_id,dedupe_key", `{"office_id":"` + id + `","kind":"k","dedupe_key":"d"}`,
			[]string{"Prefer", "resolution=ignore-duplicates,return=representation"}, 400, "42P10"},
	}
	for _, tc := range tests {
		code, obj, body := do(tc.method, tc.path, tc.body, tc.hdr...)
		if code != tc.status || obj["code"] != tc.code {
			t.Errorf("%s: %d %s; want %d with code %s", tc.name, code, body, tc.status, tc.code)
		}
		for _, k := range []string{"code", "message", "details", "hint"} {
			if _, ok := obj[k]; !ok {
				t.Errorf("%s: error body lacks %q: %s", tc.name, k, body)
			}
		}
	}

	// A conditional PATCH: the second finds nothing and changes nothing.
	path := "/rest/v1/offices?id=eq." + id + "&name=eq.A"
	if code, _, body := do("PATCH", path, `{"name":"B"}`, "Prefer", "return=representation"); code != 200 || !strings.Contains(body, `"name":"B"`) {
		t.Errorf("PATCH = %d %s", code, body)
	}
	if code, _, body := do("PATCH", path, `{"name":"C"}`, "Prefer", "return=representation"); code != 200 || body != "[]" {
		t.Errorf("second PATCH = %d %s; want 200 []", code, body)
	}
	if code, _, body := do("PATCH", "/rest/v1/offices?id=eq."+id, `{"name":"D"}`); code != 204 || body != "" {
		t.Errorf("PATCH return=minimal = %d %q; want 204", code, body)
	}
}

func FuzzParseList(f *testing.F) {
	for _, s := range []string{`(a,b)`, `("a,b",c)`, `()`, `("x\"y")`, `(`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		list, err := parseList(s)
		if err != nil {
			return
		}
		if !strings.HasPrefix(s, "(") || !strings.HasSuffix(s, ")") {
			t.Errorf("parseList(%q) = %q without parentheses", s, list)
		}
		if len(list) > len(s) {
			t.Errorf("parseList(%q) = %d items", s, len(list))
		}
	})
}
