package pgrest

import (
	"bytes"
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
	"github.com/office-server/office-server/supabase/internal/signing"
)

var (
	keys       = signing.New([]byte("a-test-secret-of-at-least-32-characters"))
	serviceKey = keys.SignHS256(map[string]any{"role": "service_role", "exp": 4102444800})
)

// newStandIn serves the stand-in on a new database with the stand-ins'
// schema and the migrations applied; both end with the test.
func newStandIn(t *testing.T) (*Server, *httptest.Server) {
	dbURL := testenv.NewDatabase(t)
	ctx := context.Background()
	if err := standins.Apply(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.ApplyURL(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, dbURL, keys)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

// TestAnswers checks the stand-in's answers against PostgREST's documented
// ones (docs.postgrest.org "Errors", "Singular or plural"), on the real
// schema.
func TestAnswers(t *testing.T) {
	_, srv := newStandIn(t)

	do := func(method, path, body string, hdr ...string) (int, map[string]any, string) {
		return serviceDo(t, srv.URL, method, path, body, hdr...)
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

// serviceDo sends a request with the service key and hdr (name, value
// pairs); it returns the status, the body as an object and as text.
func serviceDo(t *testing.T, base, method, path, body string, hdr ...string) (int, map[string]any, string) {
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
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

// TestRPC checks POST /rpc/<function> against PostgREST's call plan
// (Query/QueryBuilder.hs callPlanToQuery, Query/SqlFragment.hs asJsonF):
// a scalar's value, a row as an object, a set as an array, defaults,
// PTnnn statuses, PGRST202 for unknown names or arguments, and EXECUTE
// grants (401 for anon).
func TestRPC(t *testing.T) {
	ctx := context.Background()
	s, srv := newStandIn(t)
	if _, err := s.pool.Exec(ctx, `
		create function public.t_add(a int, b int default 10) returns int language sql as 'select a + b';
		create function public.t_row(n text) returns public.offices language sql
		  as $$ select gen_random_uuid(), n, interval '0', now(), now() $$;
		create function public.t_table(n int) returns table (i int, sq int) language sql
		  as 'select g, g * g from generate_series(1, n) g';
		create function public.t_ids(n int) returns setof int language sql as 'select generate_series(1, n)';
		create function public.t_null() returns text language sql as 'select null::text';
		create function public.t_raise(code text) returns int language plpgsql
		  as $$ begin raise exception 'raised %', code using errcode = code; end $$;
		-- As on a project created today, new functions are granted to nobody:
		-- the service role gets them explicitly, anon does not.
		grant execute on function public.t_add(int, int), public.t_row(text), public.t_table(int),
		  public.t_ids(int), public.t_null(), public.t_raise(text) to service_role;
		revoke execute on function public.t_add(int, int) from public, anon;`); err != nil {
		t.Fatal(err)
	}
	anonKey := keys.SignHS256(map[string]any{"role": "anon", "exp": 4102444800})
	call := func(key, fn, body string) (int, string) { return rpcCall(t, srv.URL, key, fn, body) }
	tests := []struct {
		name, key, fn, body string
		status              int
		want                string // the body, or for errors the code
	}{
		{"scalar", serviceKey, "t_add", `{"a":1,"b":2}`, 200, `3`},
		{"default", serviceKey, "t_add", `{"a":1}`, 200, `11`},
		{"null scalar", serviceKey, "t_null", ``, 200, `null`},
		{"set of scalars", serviceKey, "t_ids", `{"n":3}`, 200, `[1, 2, 3]`},
		{"empty set", serviceKey, "t_ids", `{"n":0}`, 200, `[]`},
		{"table", serviceKey, "t_table", `{"n":2}`, 200, `[{"i":1,"sq":1}, {"i":2,"sq":4}]`},
		{"unknown argument", serviceKey, "t_add", `{"a":1,"c":2}`, 404, "PGRST202"},
		{"missing argument", serviceKey, "t_add", `{"b":2}`, 404, "PGRST202"},
		{"unknown function", serviceKey, "nope", `{}`, 404, "PGRST202"},
		{"PT409", serviceKey, "t_raise", `{"code":"PT409"}`, 409, "PT409"},
		{"PT410", serviceKey, "t_raise", `{"code":"PT410"}`, 410, "PT410"},
		{"PT not a status", serviceKey, "t_raise", `{"code":"PTX01"}`, 500, "PTX01"},
		{"22023", serviceKey, "t_raise", `{"code":"22023"}`, 400, "22023"},
		{"anon without EXECUTE", anonKey, "t_add", `{"a":1}`, 401, "42501"},
		{"bad body", serviceKey, "t_add", `[1]`, 400, "PGRST102"},
	}
	for _, tc := range tests {
		status, body := call(tc.key, tc.fn, tc.body)
		if status != tc.status {
			t.Errorf("%s: %d %s; want %d", tc.name, status, body, tc.status)
			continue
		}
		if status == 200 {
			var got, want bytes.Buffer
			json.Compact(&got, []byte(body))
			json.Compact(&want, []byte(tc.want))
			if got.String() != want.String() {
				t.Errorf("%s: body %s; want %s", tc.name, body, tc.want)
			}
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(body), &e); err != nil || e["code"] != tc.want {
			t.Errorf("%s: body %s; want code %s", tc.name, body, tc.want)
		}
	}
	// A composite: an object with the row's columns.
	status, body := call(serviceKey, "t_row", `{"n":"X"}`)
	var row map[string]any
	if err := json.Unmarshal([]byte(body), &row); status != 200 || err != nil || row["name"] != "X" || row["question_ttl"] != "00:00:00" {
		t.Errorf("row: %d %s; want an object with name X", status, body)
	}
}

// rpcCall POSTs body to the function fn with key as the apikey.
func rpcCall(t *testing.T, base, key, fn, body string) (int, string) {
	req, _ := http.NewRequest("POST", base+"/rest/v1/rpc/"+fn, strings.NewReader(body))
	req.Header.Set("apikey", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestContentRange checks Content-Range and the statuses of ranges and
// counts against PostgREST's RangeQuery.hs (rangeStatusHeader,
// contentRangeH): lower-upper/total, total * without count=exact, */total
// when no row is in range, 206 for a partial range, 416 past the end.
func TestContentRange(t *testing.T) {
	_, srv := newStandIn(t)
	get := func(method, query, prefer string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+"/rest/v1/offices?select=id&order=name"+query, nil)
		req.Header.Set("apikey", serviceKey)
		req.Header.Set("Authorization", "Bearer "+serviceKey)
		if prefer != "" {
			req.Header.Set("Prefer", prefer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Content-Range")
	}
	for _, name := range []string{"A", "B", "C"} {
		req, _ := http.NewRequest("POST", srv.URL+"/rest/v1/offices", strings.NewReader(`{"name":"`+name+`"}`))
		req.Header.Set("apikey", serviceKey)
		req.Header.Set("Authorization", "Bearer "+serviceKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 201 {
			t.Fatalf("POST office %s: %v %v", name, resp, err)
		}
		resp.Body.Close()
	}
	tests := []struct {
		method, query, prefer string
		status                int
		contentRange          string
	}{
		{"GET", "", "", 200, "0-2/*"},
		{"GET", "", "count=exact", 200, "0-2/3"},
		{"HEAD", "", "count=exact", 200, "0-2/3"}, // supabase-js count with head: true
		{"GET", "&limit=1", "count=exact", 206, "0-0/3"},
		{"GET", "&limit=1&offset=1", "count=exact", 206, "1-1/3"},
		{"GET", "&limit=1&offset=1", "", 200, "1-1/*"},
		{"GET", "&name=eq.none", "count=exact", 200, "*/0"},
		{"GET", "&offset=5", "count=exact", 416, "*/3"},
	}
	for _, tc := range tests {
		status, cr := get(tc.method, tc.query, tc.prefer)
		if status != tc.status || cr != tc.contentRange {
			t.Errorf("%s %q Prefer %q: %d Content-Range %q; want %d %q", tc.method, tc.query, tc.prefer, status, cr, tc.status, tc.contentRange)
		}
	}
}
