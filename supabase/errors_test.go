package supabase

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
)

// PostgREST's error answers, status and body as PostgREST sends them
// (docs.postgrest.org "Errors"; bodies {code,details,hint,message} with null
// for absent fields).
// storeErrID is the id the store's calls in storeErrors name.
var storeErrID = uuid.NewString()

// storeErrors are PostgREST's error answers: the status and body sent,
// the store call made, the office error code and *APIError it must give.
var storeErrors = []struct {
	name    string
	status  int
	ctype   string
	body    string
	call    func(s *Store) error
	code    string
	wantAPI *APIError
}{
	{
		name: "unique violation", status: 409,
		body: `{"code":"23505","details":"Key (id)=(` + storeErrID + `) already exists.","hint":null,"message":"duplicate key value violates unique constraint \"user_questions_pkey\""}`,
		call: func(s *Store) error {
			_, err := s.CreateQuestion(context.Background(), office.Question{ID: storeErrID, OfficeID: storeErrID, AgentID: storeErrID, Question: "q?"})
			return err
		},
		code: office.ECONFLICT,
		wantAPI: &APIError{Status: 409, Code: "23505", Message: `duplicate key value violates unique constraint "user_questions_pkey"`,
			Details: "Key (id)=(" + storeErrID + ") already exists."},
	},
	{
		name: "single row not found", status: 406,
		body: `{"code":"PGRST116","details":"The result contains 0 rows","hint":null,"message":"Cannot coerce the result to a single JSON object"}`,
		call: func(s *Store) error { _, err := s.GetQuestion(context.Background(), storeErrID); return err },
		code: office.ENOTFOUND,
		wantAPI: &APIError{Status: 406, Code: "PGRST116", Message: "Cannot coerce the result to a single JSON object",
			Details: "The result contains 0 rows"},
	},
	{
		name: "expired JWT", status: 401,
		body:    `{"code":"PGRST301","details":null,"hint":null,"message":"JWT expired"}`,
		call:    func(s *Store) error { _, err := s.ListOffices(context.Background()); return err },
		code:    office.EUNAUTHORIZED,
		wantAPI: &APIError{Status: 401, Code: "PGRST301", Message: "JWT expired"},
	},
	{
		name: "anonymous denied by grants", status: 401,
		body:    `{"code":"42501","details":null,"hint":null,"message":"permission denied for table offices"}`,
		call:    func(s *Store) error { _, err := s.ListOffices(context.Background()); return err },
		code:    office.EUNAUTHORIZED,
		wantAPI: &APIError{Status: 401, Code: "42501", Message: "permission denied for table offices"},
	},
	{
		name: "row-level security", status: 403,
		body: `{"code":"42501","details":null,"hint":null,"message":"new row violates row-level security policy for table \"user_messages\""}`,
		call: func(s *Store) error {
			_, err := s.CreateUserMessage(context.Background(), office.UserMessage{OfficeID: storeErrID, AgentID: storeErrID, Content: "hi"})
			return err
		},
		code:    office.EFORBIDDEN,
		wantAPI: &APIError{Status: 403, Code: "42501", Message: `new row violates row-level security policy for table "user_messages"`},
	},
	{
		name: "bad input", status: 400,
		body: `{"code":"23514","details":"Failing row contains (...).","hint":null,"message":"new row for relation \"user_questions\" violates check constraint \"user_questions_question_check\""}`,
		call: func(s *Store) error {
			_, err := s.CreateQuestion(context.Background(), office.Question{OfficeID: storeErrID, AgentID: storeErrID})
			return err
		},
		code: office.EINVALID,
		wantAPI: &APIError{Status: 400, Code: "23514", Message: `new row for relation "user_questions" violates check constraint "user_questions_question_check"`,
			Details: "Failing row contains (...)."},
	},
	{
		name: "database down", status: 503,
		body: `{"code":"PGRST000","details":"connection to server at \"db\" failed","hint":null,"message":"Database client error. Retrying the connection."}`,
		call: func(s *Store) error { return s.Ping(context.Background()) },
		code: office.EUNAVAILABLE,
		wantAPI: &APIError{Status: 503, Code: "PGRST000", Message: "Database client error. Retrying the connection.",
			Details: `connection to server at "db" failed`},
	},
	{
		name: "gateway HTML", status: 502, ctype: "text/html",
		body:    "<html><body>502 Bad Gateway</body></html>",
		call:    func(s *Store) error { return s.Ping(context.Background()) },
		code:    office.EUNAVAILABLE,
		wantAPI: &APIError{Status: 502, Message: "<html><body>502 Bad Gateway</body></html>"},
	},
}

func TestStoreErrors(t *testing.T) {
	for _, tc := range storeErrors {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ct := tc.ctype
				if ct == "" {
					ct = "application/json; charset=utf-8"
				}
				w.Header().Set("Content-Type", ct)
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			s, err := New(srv.URL, testKey)
			if err != nil {
				t.Fatal(err)
			}
			err = tc.call(s)
			if got := office.ErrorCode(err); got != tc.code {
				t.Errorf("error code = %q (%v); want %q", got, err, tc.code)
			}
			var api *APIError
			if !errors.As(err, &api) {
				t.Fatalf("error %v carries no *APIError", err)
			}
			if d := cmp.Diff(api, tc.wantAPI); d != "" {
				t.Errorf("APIError (-got +want):\n%s", d)
			}
		})
	}
}

func TestStoreUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	s, err := New(u, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(context.Background()); office.ErrorCode(err) != office.EUNAVAILABLE {
		t.Errorf("Ping on a closed server = %v (code %q); want unavailable", err, office.ErrorCode(err))
	}
}

// recorded is one request the store sent.
type recorded struct {
	Method, Path, Prefer, Accept, APIKey, Auth string
	Query                                      url.Values
	Body                                       string
}

// TestStoreRequests checks the requests behind the once-only transitions
// and the event dedupe: what the store asks PostgREST for, and how it reads
// PostgREST's answers (an empty representation: another process won, or the
// duplicate was ignored).
func TestStoreRequests(t *testing.T) {
	var mu sync.Mutex
	var reqs []recorded
	answers := map[string]string{} // method+path → body
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		reqs = append(reqs, recorded{Method: r.Method, Path: r.URL.Path, Prefer: r.Header.Get("Prefer"), Accept: r.Header.Get("Accept"),
			APIKey: r.Header.Get("apikey"), Auth: r.Header.Get("Authorization"), Query: r.URL.Query(), Body: string(b)})
		body := answers[r.Method+" "+r.URL.Path]
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
		}
		io.WriteString(w, body)
	}))
	defer srv.Close()
	s, err := New(srv.URL, testKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := uuid.NewString()
	last := func() recorded {
		mu.Lock()
		defer mu.Unlock()
		return reqs[len(reqs)-1]
	}

	// A conditional transition that finds no row in the expected state.
	answers["PATCH /rest/v1/user_questions"] = `[]`
	q, ok, err := s.AnswerQuestion(ctx, id, "yes", "")
	if ok || err != nil || q.ID != "" {
		t.Errorf("AnswerQuestion with an empty representation = %+v, %v, %v; want ok=false, no error", q, ok, err)
	}
	r := last()
	if r.Method != "PATCH" || r.Query.Get("id") != "eq."+id || r.Query.Get("status") != "eq.pending" || r.Prefer != "return=representation" {
		t.Errorf("AnswerQuestion sent %+v; want PATCH ?id=eq.<id>&status=eq.pending with Prefer return=representation", r)
	}
	if r.APIKey != testKey || r.Auth != "Bearer "+testKey {
		t.Errorf("headers apikey %q Authorization %q; want the key in both", r.APIKey, r.Auth)
	}
	var body map[string]any
	json.Unmarshal([]byte(r.Body), &body)
	if body["status"] != "answered" || body["response"] != "yes" || body["answered_by"] != nil || body["answered_at"] == nil {
		t.Errorf("AnswerQuestion body = %s", r.Body)
	}

	checkDependencyRequests(t, s, answers, last, id)
	checkEventDedupe(t, s, answers, &mu, &reqs, id)
}

// checkDependencyRequests: MarkDependencyDelivered asks for delivered_at
// IS NULL and a deliverable status; a dependency's value travels as bytea
// hex.
func checkDependencyRequests(t *testing.T, s *Store, answers map[string]string, last func() recorded, id string) {
	ctx := context.Background()
	// MarkDependencyDelivered: delivered_at IS NULL and a deliverable status.
	answers["PATCH /rest/v1/dependency_requests"] = `[{"id":"` + id + `","status":"provided","value":"\\x6869"}]`
	if ok, err := s.MarkDependencyDelivered(ctx, id); !ok || err != nil {
		t.Errorf("MarkDependencyDelivered = %v, %v; want ok", ok, err)
	}
	r := last()
	if r.Query.Get("delivered_at") != "is.null" || r.Query.Get("status") != "in.(provided,rejected,expired)" {
		t.Errorf("MarkDependencyDelivered query = %v", r.Query)
	}

	// The value of a dependency travels as bytea hex.
	answers["PATCH /rest/v1/dependency_requests"] = `[{"id":"` + id + `","status":"provided","value":"\\x00ff41"}]`
	d, ok, err := s.ProvideDependency(ctx, id, []byte{0, 0xff, 'A'})
	if !ok || err != nil || string(d.Value) != "\x00\xffA" {
		t.Errorf("ProvideDependency = %q, %v, %v", d.Value, ok, err)
	}
	if r := last(); !strings.Contains(r.Body, `"value":"\\x00ff41"`) {
		t.Errorf("ProvideDependency body = %s; want value \\x00ff41", r.Body)
	}

}

// checkEventDedupe: an event with a dedupe key is sent with on_conflict +
// ignore-duplicates; an empty representation means the key exists, and
// the existing event is read.
func checkEventDedupe(t *testing.T, s *Store, answers map[string]string, mu *sync.Mutex, reqs *[]recorded, id string) {
	ctx := context.Background()
	// An event with a dedupe key: on_conflict + ignore-duplicates; an empty
	// representation means the key exists, and the existing event is read.
	answers["POST /rest/v1/office_events"] = `[]`
	answers["GET /rest/v1/office_events"] = `{"id":7,"office_id":"` + id + `","kind":"ask_user","payload":null,"raw":null,"dedupe_key":"k1","agent_id":null,"session_id":null,"created_at":"2026-11-22T02:31:09.123456+00:00"}`
	ev, inserted, err := s.AppendEvent(ctx, office.Event{OfficeID: id, Kind: "ask_user", DedupeKey: "k1"})
	if inserted || err != nil || ev.ID != 7 || ev.DedupeKey != "k1" || ev.Payload != nil {
		t.Errorf("AppendEvent(duplicate) = %+v, %v, %v; want the existing event 7, inserted=false", ev, inserted, err)
	}
	mu.Lock()
	post, get := (*reqs)[len(*reqs)-2], (*reqs)[len(*reqs)-1]
	mu.Unlock()
	if post.Query.Get("on_conflict") != "office_id,dedupe_key" || post.Prefer != "resolution=ignore-duplicates,return=representation" {
		t.Errorf("AppendEvent sent on_conflict %q Prefer %q", post.Query.Get("on_conflict"), post.Prefer)
	}
	if get.Accept != "application/vnd.pgrst.object+json" || get.Query.Get("dedupe_key") != "eq.k1" {
		t.Errorf("AppendEvent read back with Accept %q query %v", get.Accept, get.Query)
	}
}
