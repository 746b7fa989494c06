package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

// memStore is a hand fake of the store methods the server reads. Methods
// the server never calls panic through the nil embedded interface.
type memStore struct {
	office.Store
	mu        sync.Mutex
	offices   []office.Office
	agents    []office.Agent
	questions []office.Question
	invs      []office.Invocation
	events    []office.Event
	pingErr   error
}

func (m *memStore) Ping(context.Context) error { return m.pingErr }
func (m *memStore) ListOffices(context.Context) ([]office.Office, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]office.Office(nil), m.offices...), nil
}
func (m *memStore) GetOffice(_ context.Context, id string) (office.Office, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.offices {
		if o.ID == id {
			return o, nil
		}
	}
	return office.Office{}, office.Errorf(office.ENOTFOUND, "no office %s", id)
}
func (m *memStore) ListAgents(_ context.Context, officeID string) ([]office.Agent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []office.Agent
	for _, a := range m.agents {
		if a.OfficeID == officeID {
			out = append(out, a)
		}
	}
	return out, nil
}
func (m *memStore) ListSessions(context.Context, string) ([]office.SessionRecord, error) {
	return nil, nil
}
func (m *memStore) ListQuestions(_ context.Context, f office.QuestionFilter) ([]office.Question, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []office.Question
	for _, q := range m.questions {
		if q.OfficeID == f.OfficeID && (len(f.Status) == 0 || q.Status == f.Status[0]) {
			out = append(out, q)
		}
	}
	return out, nil
}
func (m *memStore) GetQuestion(_ context.Context, id string) (office.Question, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, q := range m.questions {
		if q.ID == id {
			return q, nil
		}
	}
	return office.Question{}, office.Errorf(office.ENOTFOUND, "no question")
}
func (m *memStore) ListInvocations(context.Context, office.InvocationFilter) ([]office.Invocation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]office.Invocation(nil), m.invs...), nil
}
func (m *memStore) GetInvocation(_ context.Context, id string) (office.Invocation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, inv := range m.invs {
		if inv.ID == id {
			return inv, nil
		}
	}
	return office.Invocation{}, office.Errorf(office.ENOTFOUND, "no invocation %s", id)
}
func (m *memStore) ListResults(context.Context, office.ResultFilter) ([]office.Result, error) {
	return nil, nil
}
func (m *memStore) GetResult(_ context.Context, id string) (office.Result, error) {
	return office.Result{}, office.Errorf(office.ENOTFOUND, "no result %s", id)
}
func (m *memStore) ListDependencies(context.Context, office.DependencyFilter) ([]office.DependencyRequest, error) {
	return nil, nil
}
func (m *memStore) ListEvents(_ context.Context, f office.EventFilter) ([]office.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []office.Event
	for _, e := range m.events {
		if e.ID > f.AfterID && (f.OfficeID == "" || e.OfficeID == f.OfficeID) {
			out = append(out, e)
		}
	}
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}
func (m *memStore) appendEvent(e office.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e.ID = int64(len(m.events) + 1)
	e.CreatedAt = time.Now()
	m.events = append(m.events, e)
}

// fakeOffice records the actions the API asks for.
type fakeOffice struct {
	store    *memStore
	mu       sync.Mutex
	answers  []string
	messages []office.UserMessage
	saved    []office.Agent // SaveAgent's arguments
}

func (f *fakeOffice) AnswerQuestion(_ context.Context, id, response, by string) (office.Question, error) {
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	for i, q := range f.store.questions {
		if q.ID == id {
			if q.Status != office.QuestionPending {
				return q, office.Errorf(office.ECONFLICT, "question is %s", q.Status)
			}
			f.store.questions[i].Status, f.store.questions[i].Response = office.QuestionAnswered, response
			f.mu.Lock()
			f.answers = append(f.answers, response)
			f.mu.Unlock()
			return f.store.questions[i], nil
		}
	}
	return office.Question{}, office.Errorf(office.ENOTFOUND, "no question %s", id)
}
func (f *fakeOffice) SendUserMessage(_ context.Context, m office.UserMessage) (office.UserMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m.ID, m.Status = "m1", office.MessagePending
	f.messages = append(f.messages, m)
	return m, nil
}
func (f *fakeOffice) ProvideDependency(context.Context, string, string) (office.DependencyRequest, error) {
	return office.DependencyRequest{}, office.Errorf(office.ENOTFOUND, "no dependency")
}
func (f *fakeOffice) RejectDependency(context.Context, string, string) (office.DependencyRequest, error) {
	return office.DependencyRequest{}, office.Errorf(office.ENOTFOUND, "no dependency")
}
func (f *fakeOffice) StartAgent(context.Context, string, string) error   { return nil }
func (f *fakeOffice) StopAgent(context.Context, string, string) error    { return nil }
func (f *fakeOffice) RestartAgent(context.Context, string, string) error { return nil }
func (f *fakeOffice) SendInput(context.Context, string, string, string) error {
	return office.Errorf(office.EUNAVAILABLE, "agent has no running session")
}
func (f *fakeOffice) CallGraph(context.Context, string) (any, error) { return map[string]any{}, nil }
func (f *fakeOffice) SaveOffice(_ context.Context, o office.Office) (office.Office, error) {
	return o, nil
}
func (f *fakeOffice) SaveAgent(_ context.Context, a office.Agent) (office.Agent, error) {
	f.mu.Lock()
	f.saved = append(f.saved, a)
	f.mu.Unlock()
	return a, nil
}
func (f *fakeOffice) DeleteAgent(context.Context, string, string) error { return nil }

// fakeTerm is an in-memory terminal with the session layer's fan-out
// semantics: replay, then live chunks through a bounded queue; a full queue
// drops the viewer.
type fakeTerm struct {
	mu      sync.Mutex
	scroll  []byte
	viewers map[*fakeViewer]bool
	input   bytes.Buffer
	inputs  chan []byte
	cols    int
	rows    int
	writes  uint64 // the screen's version, less one
}

func newFakeTerm() *fakeTerm {
	return &fakeTerm{viewers: map[*fakeViewer]bool{}, inputs: make(chan []byte, 100)}
}

type fakeViewer struct {
	t       *fakeTerm
	c       chan []byte
	dropped bool
	closed  bool
}

func (v *fakeViewer) C() <-chan []byte { return v.c }
func (v *fakeViewer) Dropped() bool {
	v.t.mu.Lock()
	defer v.t.mu.Unlock()
	return v.dropped
}
func (v *fakeViewer) Close() {
	v.t.mu.Lock()
	defer v.t.mu.Unlock()
	if !v.closed {
		v.closed = true
		delete(v.t.viewers, v)
		close(v.c)
	}
}

func (t *fakeTerm) Attach(queue int) Viewer {
	t.mu.Lock()
	defer t.mu.Unlock()
	v := &fakeViewer{t: t, c: make(chan []byte, queue+1)}
	if len(t.scroll) > 0 {
		v.c <- append([]byte(nil), t.scroll...)
	}
	t.viewers[v] = true
	return v
}

func (t *fakeTerm) write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.scroll = append(t.scroll, p...)
	t.writes++
	if len(t.scroll) > 1<<20 {
		t.scroll = t.scroll[len(t.scroll)-1<<20:]
	}
	for v := range t.viewers {
		select {
		case v.c <- p:
		default:
			v.dropped, v.closed = true, true
			delete(t.viewers, v)
			close(v.c)
		}
	}
}

func (t *fakeTerm) Input(p []byte) error {
	t.mu.Lock()
	t.input.Write(p)
	t.mu.Unlock()
	t.inputs <- append([]byte(nil), p...)
	return nil
}
func (t *fakeTerm) Resize(cols, rows int) error {
	t.mu.Lock()
	t.cols, t.rows = cols, rows
	t.mu.Unlock()
	return nil
}
func (t *fakeTerm) Size() (cols, rows int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cols, t.rows
}
func (t *fakeTerm) Status() string { return "ready" }
func (t *fakeTerm) Detail() string { return "" }

// ScreenLines is the output written so far, a line a row (no terminal
// emulation: the tests write plain lines).
func (t *fakeTerm) ScreenLines(since uint64) ([]string, uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.writes+1 == since {
		return nil, since
	}
	return strings.Split(string(t.scroll), "\n"), t.writes + 1
}
func (t *fakeTerm) typed() string { t.mu.Lock(); defer t.mu.Unlock(); return t.input.String() }

type fakeTerminals struct {
	mu    sync.Mutex
	terms map[string]*fakeTerm // by agent id
}

func (f *fakeTerminals) Terminal(_, agentID string) (Terminal, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.terms[agentID]
	if !ok {
		return nil, false
	}
	return t, true
}

// syncBuf is a log sink safe for concurrent writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

const testToken = "s3cret-token-0123456789abcdef"

type fixture struct {
	srv   *Server
	ts    *httptest.Server
	store *memStore
	off   *fakeOffice
	term  *fakeTerm
	logs  *syncBuf
}

// newFixture serves a Server over fakes: office "o1" with agents po (a1,
// running) and dev (a2, no session), one pending question.
func newFixture(t testing.TB, tweak func(*Config)) *fixture {
	t.Helper()
	return newFixtureHTTP(t, tweak, nil)
}

// newFixtureHTTP is newFixture served by the http.Server the command uses
// (NewHTTPServer), changed by tweakHTTP if not nil.
func newFixtureHTTP(t testing.TB, tweak func(*Config), tweakHTTP func(*http.Server)) *fixture {
	t.Helper()
	st := &memStore{
		offices:   []office.Office{{ID: "o1", Name: "Demo"}},
		agents:    []office.Agent{{ID: "a1", OfficeID: "o1", Name: "po"}, {ID: "a2", OfficeID: "o1", Name: "dev"}},
		questions: []office.Question{{ID: "q1", OfficeID: "o1", AgentID: "a1", Question: "Which?", Options: []string{"A", "B"}, Status: office.QuestionPending, QuestionType: office.QuestionSelection}},
	}
	term := newFakeTerm()
	logs := &syncBuf{}
	cfg := Config{
		Store: st, Office: &fakeOffice{store: st}, Terminals: &fakeTerminals{terms: map[string]*fakeTerm{"a1": term}},
		Token: testToken, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		EventPoll: 10 * time.Millisecond,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	ts.Config = NewHTTPServer(s.Handler(), cfg.Logger)
	if tweakHTTP != nil {
		tweakHTTP(ts.Config)
	}
	ts.Start()
	s.SetOrigins(append([]string{ts.URL}, cfg.Origins...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	t.Cleanup(func() {
		s.Close()
		ts.Close()
		cancel()
		<-done
	})
	return &fixture{srv: s, ts: ts, store: st, off: cfg.Office.(*fakeOffice), term: term, logs: logs}
}

// do sends a request with the token (unless token is "") and returns the
// status and body.
func (f *fixture) do(t testing.TB, method, path, token, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, f.ts.URL+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func errCode(t testing.TB, body string) string {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", body, err)
	}
	return e.Error.Code
}
