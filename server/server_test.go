package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

func TestAPIAuth(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name, method, path, token string
		want                      int
	}{
		{"no token", "GET", "/api/offices", "", 401},
		{"wrong token", "GET", "/api/offices", "nope", 401},
		{"token prefix", "GET", "/api/offices", testToken[:10], 401},
		{"right token", "GET", "/api/offices", testToken, 200},
		{"ws no token", "GET", "/ws/offices/o1/agents/po", "", 401},
		{"page no token", "GET", "/", "", 401},
		{"health is open", "GET", "/healthz", "", 200},
		{"metrics are open", "GET", "/metrics", "", 200},
		{"profiles need the token", "GET", "/debug/pprof/goroutine?debug=1", "", 401},
		{"profiles with the token", "GET", "/debug/pprof/goroutine?debug=1", testToken, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, body := f.do(t, tt.method, tt.path, tt.token, "")
			if got != tt.want {
				t.Fatalf("%s %s = %d (%s), want %d", tt.method, tt.path, got, body, tt.want)
			}
			if got == 401 && strings.HasPrefix(tt.path, "/api") && errCode(t, body) != office.EUNAUTHORIZED {
				t.Errorf("code = %q, want unauthorized", errCode(t, body))
			}
		})
	}
}

func TestAPIErrors(t *testing.T) {
	f := newFixture(t, nil)
	big := `{"response":"` + strings.Repeat("x", maxBody) + `"}`
	tests := []struct {
		name, method, path, body string
		status                   int
		code, msg                string
	}{
		{"unknown office", "GET", "/api/offices/nope/agents", "", 404, "not_found", `no office "nope"`},
		{"unknown agent", "POST", "/api/offices/o1/agents/ghost/start", "", 404, "not_found", `no agent "ghost"`},
		{"bad json", "POST", "/api/questions/q1/answer", `{"response":`, 400, "invalid", "bad JSON"},
		{"unknown field", "POST", "/api/questions/q1/answer", `{"answer":"A"}`, 400, "invalid", `unknown field "answer"`},
		{"wrong type", "POST", "/api/questions/q1/answer", `{"response":1}`, 400, "invalid", `field "response"`},
		{"trailing", "POST", "/api/questions/q1/answer", `{"response":"A"} {}`, 400, "invalid", "trailing data"},
		{"empty answer", "POST", "/api/questions/q1/answer", `{"response":" "}`, 400, "invalid", "response is required"},
		{"too large", "POST", "/api/questions/q1/answer", big, 413, codeTooLarge, "over"},
		{"no question", "POST", "/api/questions/q9/answer", `{"response":"A"}`, 404, "not_found", "no question"},
		{"bad limit", "GET", "/api/offices/o1/questions?limit=x", "", 400, "invalid", "limit"},
		{"bad after_id", "GET", "/api/offices/o1/events?after_id=-1", "", 400, "invalid", "after_id"},
		{"unavailable", "POST", "/api/offices/o1/agents/dev/input", `{"text":"hi"}`, 503, "unavailable", "no running session"},
		{"no endpoint", "GET", "/api/nothing", "", 404, "not_found", "no such endpoint"},
		{"ws no session", "GET", "/ws/offices/o1/agents/dev", "", 404, "not_found", "no running session"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, body := f.do(t, tt.method, tt.path, testToken, tt.body)
			if got != tt.status {
				t.Fatalf("status = %d (%s), want %d", got, body, tt.status)
			}
			var e errorBody
			if err := json.Unmarshal([]byte(body), &e); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if e.Error.Code != tt.code || !strings.Contains(e.Error.Message, tt.msg) {
				t.Errorf("error = %+v, want code %q and a message with %q", e.Error, tt.code, tt.msg)
			}
		})
	}
}

func TestAnswerQuestion(t *testing.T) {
	f := newFixture(t, nil)
	st, body := f.do(t, "GET", "/api/offices/Demo/questions?status=pending", testToken, "")
	if st != 200 || !strings.Contains(body, `"id":"q1"`) {
		t.Fatalf("list pending = %d %s", st, body)
	}
	if st, body := f.do(t, "POST", "/api/questions/q1/answer", testToken, `{"response":"B"}`); st != 200 {
		t.Fatalf("answer = %d %s", st, body)
	}
	if st, body := f.do(t, "POST", "/api/questions/q1/answer", testToken, `{"response":"A"}`); st != 409 || errCode(t, body) != office.ECONFLICT {
		t.Fatalf("second answer = %d %s, want 409 conflict", st, body)
	}
	if got := f.off.answers; len(got) != 1 || got[0] != "B" {
		t.Fatalf("answers = %q, want [B]", got)
	}
	if st, body := f.do(t, "POST", "/api/offices/o1/messages", testToken, `{"agent":"dev","content":"hello"}`); st != 201 {
		t.Fatalf("message = %d %s", st, body)
	}
	if m := f.off.messages; len(m) != 1 || m[0].AgentID != "a2" || m[0].OfficeID != "o1" || m[0].Content != "hello" {
		t.Fatalf("messages = %+v", m)
	}
}

func TestPageSetsCookieAndRedirects(t *testing.T) {
	f := newFixture(t, nil)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(f.ts.URL + "/?token=" + testToken)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
		t.Fatalf("status %d location %q, want 303 to /", res.StatusCode, res.Header.Get("Location"))
	}
	ck := res.Cookies()
	if len(ck) != 1 || ck[0].Name != tokenCookie || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookies = %+v, want one HttpOnly SameSite=Strict %s", ck, tokenCookie)
	}
	req, _ := http.NewRequest("GET", f.ts.URL+"/", nil)
	req.AddCookie(ck[0])
	res, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("page with cookie = %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	// A cookie-authenticated write from a foreign origin is refused.
	req, _ = http.NewRequest("POST", f.ts.URL+"/api/questions/q1/answer", strings.NewReader(`{"response":"A"}`))
	req.AddCookie(ck[0])
	req.Header.Set("Origin", "http://evil.example")
	res, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin cookie write = %d, want 403", res.StatusCode)
	}
	if len(f.off.answers) != 0 {
		t.Fatalf("a refused write reached the office: %q", f.off.answers)
	}
	if res, _ := c.Get(f.ts.URL + "/?token=wrong"); res.StatusCode != 401 {
		t.Fatalf("wrong token page = %d, want 401", res.StatusCode)
	}
}

// TestTokenNotLogged: the token, sent in the query string, a header and a
// cookie, never appears in the logs.
func TestTokenNotLogged(t *testing.T) {
	f := newFixture(t, nil)
	http.Get(f.ts.URL + "/?token=" + testToken)
	http.Get(f.ts.URL + "/?token=" + testToken + "x")
	f.do(t, "GET", "/api/offices?token="+testToken, testToken, "")
	f.do(t, "GET", "/api/offices", testToken+"bad", "")
	ws, _, err := dialWS(f, "/ws/offices/o1/agents/po?token="+testToken, f.ts.URL)
	if err == nil {
		ws.Close()
	}
	dialWS(f, "/ws/offices/o1/agents/po", "http://evil.example")
	time.Sleep(50 * time.Millisecond)
	logs := f.logs.String()
	if !strings.Contains(logs, "path=/api/offices") {
		t.Fatalf("access log missing; logs:\n%s", logs)
	}
	if strings.Contains(logs, testToken) || strings.Contains(logs, testToken[:12]) {
		t.Fatalf("token in logs:\n%s", logs)
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	f := newFixture(t, nil)
	if st, _ := f.do(t, "GET", "/readyz", "", ""); st != 200 {
		t.Fatalf("readyz = %d", st)
	}
	f.store.mu.Lock()
	f.store.pingErr = office.Errorf(office.EUNAVAILABLE, "down")
	f.store.mu.Unlock()
	if st, body := f.do(t, "GET", "/readyz", "", ""); st != 503 || !strings.Contains(body, "unreachable") {
		t.Fatalf("readyz with store down = %d %s", st, body)
	}
	f.store.appendEvent(office.Event{OfficeID: "o1", Kind: "ask_user"})
	deadline := time.Now().Add(3 * time.Second)
	for {
		_, body := f.do(t, "GET", "/metrics", "", "")
		if strings.Contains(body, `office_events_total{kind="ask_user"} 1`) &&
			strings.Contains(body, `office_sessions{status="ready"} 1`) &&
			strings.Contains(body, `office_sessions{status="stopped"} 1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics missing the event or sessions:\n%s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The office's audit failures (events the store refused) are a counter in
// /metrics, read from the office at scrape time.
func TestMetricsAuditFailures(t *testing.T) {
	var n atomic.Uint64
	f := newFixture(t, func(c *Config) { c.AuditFailures = n.Load })
	n.Store(3)
	_, body := f.do(t, "GET", "/metrics", "", "")
	if !strings.Contains(body, "office_audit_failures_total 3") {
		t.Fatalf("metrics without office_audit_failures_total 3:\n%s", body)
	}
}

func TestEventStream(t *testing.T) {
	f := newFixture(t, nil)
	f.store.appendEvent(office.Event{OfficeID: "o1", Kind: "old"})
	req, _ := http.NewRequest("GET", f.ts.URL+"/api/offices/o1/events/stream?after_id=0", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		f.store.appendEvent(office.Event{OfficeID: "other", Kind: "elsewhere"})
		f.store.appendEvent(office.Event{OfficeID: "o1", Kind: "new"})
	}()
	sc := bufio.NewScanner(res.Body)
	var ids []string
	for sc.Scan() && len(ids) < 2 {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			ids = append(ids, id)
		}
		if strings.Contains(sc.Text(), "elsewhere") {
			t.Fatal("stream carried another office's event")
		}
	}
	if strings.Join(ids, ",") != "1,3" {
		t.Fatalf("event ids = %v, want [1 3] (catch-up, then live)", ids)
	}
}
