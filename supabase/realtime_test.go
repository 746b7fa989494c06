package supabase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/supabase/internal/signing"
	"github.com/office-server/office-server/supabase/supabasetest"
)

// fakeCatchUp is a CatchUp of function fields (nil: nothing awaits).
type fakeCatchUp struct {
	questions func() ([]office.Question, error)
}

func (f fakeCatchUp) ListAnsweredUndelivered(context.Context, office.Due) ([]office.Question, error) {
	if f.questions == nil {
		return nil, nil
	}
	return f.questions()
}
func (fakeCatchUp) ListPendingUserMessages(context.Context, office.Due) ([]office.UserMessage, error) {
	return nil, nil
}
func (fakeCatchUp) ListUndeliveredDependencies(context.Context, office.Due) ([]office.DependencyRequest, error) {
	return nil, nil
}

// quietLogger keeps the feed's reconnect warnings out of test output unless -v.
func quietLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// phoenixOnly serves the Phoenix stand-in alone, for feed tests that need no
// database.
func phoenixOnly(t *testing.T) (*supabasetest.Phoenix, string) {
	phx := supabasetest.NewPhoenix(t, signing.New(supabasetest.JWTSecret), "")
	mux := http.NewServeMux()
	mux.Handle("/realtime/v1/websocket", phx)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(phx.Close)
	return phx, srv.URL
}

// running is one Watch in a goroutine, recording what it reports.
type running struct {
	f       *Realtime
	mu      sync.Mutex
	changes []office.Change
	cancel  context.CancelFunc
	done    chan error
}

func startWatch(t *testing.T, f *Realtime, offices []string, also func(office.Change)) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &running{f: f, cancel: cancel, done: make(chan error, 1)}
	go func() {
		w.done <- f.Watch(ctx, offices, func(c office.Change) {
			w.mu.Lock()
			w.changes = append(w.changes, c)
			w.mu.Unlock()
			if also != nil {
				also(c)
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-w.done:
			if err != nil {
				t.Errorf("Watch returned %v after cancel; want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Watch did not return after cancel")
		}
		if f.Connected() {
			t.Errorf("Connected() after Watch returned")
		}
	})
	return w
}

func (w *running) seen() []office.Change {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]office.Change(nil), w.changes...)
}

func eventually(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (w *running) waitFor(t *testing.T, want office.Change) {
	t.Helper()
	eventually(t, fmt.Sprintf("change %+v (seen %+v)", want, w.seen()), 10*time.Second, func() bool {
		for _, c := range w.seen() {
			if c == want {
				return true
			}
		}
		return false
	})
}

// TestRealtimeDelivery: normal delivery through the stand-ins over a real
// PostgreSQL: a catch-up first, then live answers, messages and
// dependencies of the watched office only.
func TestRealtimeDelivery(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	s := e.store
	o, _ := s.UpsertOffice(ctx, office.Office{Name: "Watched"})
	other, _ := s.UpsertOffice(ctx, office.Office{Name: "Other"})
	a, err := s.UpsertAgent(ctx, office.Agent{OfficeID: o.ID, Name: "Dev"})
	if err != nil {
		t.Fatal(err)
	}
	oa, _ := s.UpsertAgent(ctx, office.Agent{OfficeID: other.ID, Name: "Dev"})
	ask := func(officeID, agentID string) office.Question {
		q, err := s.CreateQuestion(ctx, office.Question{OfficeID: officeID, AgentID: agentID, Question: "Which?", ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	early := ask(o.ID, a.ID)
	if _, ok, err := s.AnswerQuestion(ctx, early.ID, "before", ""); !ok || err != nil {
		t.Fatal(ok, err)
	}

	o2 := fastOptions()
	o2.Logger = quietLogger()
	f := e.feed(t, o2)
	w := startWatch(t, f, []string{o.ID}, nil)
	eventually(t, "Connected", 10*time.Second, f.Connected)
	if got := w.seen(); len(got) != 1 || got[0] != (office.Change{Table: office.TableQuestions, Op: office.OpCatchUp, ID: early.ID,
		OfficeID: o.ID, AgentID: a.ID, Status: office.QuestionAnswered}) {
		t.Errorf("at Connected the feed had reported %+v; want exactly the catch-up of %s", got, early.ID)
	}

	qo := ask(other.ID, oa.ID)
	s.AnswerQuestion(ctx, qo.ID, "not mine", "")
	q := ask(o.ID, a.ID)
	if _, ok, err := s.AnswerQuestion(ctx, q.ID, "live", ""); !ok || err != nil {
		t.Fatal(ok, err)
	}
	w.waitFor(t, office.Change{Table: office.TableQuestions, Op: office.OpUpdate, ID: q.ID, OfficeID: o.ID, AgentID: a.ID, Status: office.QuestionAnswered})

	m, err := s.CreateUserMessage(ctx, office.UserMessage{OfficeID: o.ID, AgentID: a.ID, Content: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, office.Change{Table: office.TableMessages, Op: office.OpInsert, ID: m.ID, OfficeID: o.ID, AgentID: a.ID, Status: office.MessagePending})

	d, err := s.CreateDependency(ctx, office.DependencyRequest{OfficeID: o.ID, AgentID: a.ID, Type: "api_key", Name: "K", ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.ProvideDependency(ctx, d.ID, []byte("secret")); !ok || err != nil {
		t.Fatal(ok, err)
	}
	w.waitFor(t, office.Change{Table: office.TableDependencies, Op: office.OpUpdate, ID: d.ID, OfficeID: o.ID, AgentID: a.ID, Status: office.DependencyProvided})
	// Marking it delivered is an UPDATE too, but not one the office acts on.
	s.MarkDependencyDelivered(ctx, d.ID)
	m2, _ := s.CreateUserMessage(ctx, office.UserMessage{OfficeID: o.ID, AgentID: a.ID, Content: "sentinel"})
	w.waitFor(t, office.Change{Table: office.TableMessages, Op: office.OpInsert, ID: m2.ID, OfficeID: o.ID, AgentID: a.ID, Status: office.MessagePending})

	for _, c := range w.seen() {
		if c.OfficeID != o.ID {
			t.Errorf("change of another office reported: %+v", c)
		}
		if c.Table == office.TableDependencies && c.Status != office.DependencyProvided && !(c.Op == office.OpInsert && c.Status == office.DependencyPending) {
			t.Errorf("dependency change the office does not act on reported: %+v", c)
		}
		// A new pending row is reported with its deadline, for the
		// engine's timers.
		if c.ID == d.ID && c.Op == office.OpInsert && (c.ExpiresAt == nil || !c.ExpiresAt.Equal(d.ExpiresAt)) {
			t.Errorf("new dependency request reported with expires_at %v, want %v", c.ExpiresAt, d.ExpiresAt)
		}
	}
	if d := cmp.Diff(e.phx.Tokens(), []string{testKey}); d != "" {
		t.Errorf("access tokens joined with (-got +want):\n%s", d)
	}
}

// rejoined waits until the feed has joined again after a drop that left
// the stand-in with joinsBefore joins, and is caught up. Connected alone
// is not enough: it is what the client believes, and the client learns of
// a drop only when its read fails.
func rejoined(t *testing.T, phx *supabasetest.Phoenix, f *Realtime, joinsBefore int) {
	t.Helper()
	eventually(t, "a rejoin, caught up", 20*time.Second, func() bool { return phx.Joins() > joinsBefore && f.Connected() })
}

// drop drops the feed's socket, which must be joined, and returns the
// stand-in's join count at the drop.
func drop(t *testing.T, phx *supabasetest.Phoenix) int {
	t.Helper()
	joins := phx.Joins()
	if conns, joined := phx.Drop(); conns != 1 || joined != 1 {
		t.Fatalf("dropped %d connections, %d joined; want the feed's one joined socket", conns, joined)
	}
	return joins
}

// TestRealtimeDropWhileAnswering: the socket is dropped again and again
// while answers are written; every answer reaches the office (live or by a
// catch-up), and an office acting through MarkQuestionDelivered delivers
// each exactly once. A change may be reported more than once (live and by
// a catch-up, or by two catch-ups): office.ChangeFeed allows it, and the
// conditional transition is what makes delivery exactly-once.
func TestRealtimeDropWhileAnswering(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	s := e.store
	const n = 40
	o, qs := officeWithQuestions(t, s, "Drops", n)
	var mu sync.Mutex
	delivered := map[string]int{}
	reported := map[string]int{}
	byOp := map[string]int{}
	var markErrs atomic.Int32
	opts := fastOptions()
	opts.Logger = quietLogger()
	f := e.feed(t, opts)
	startWatch(t, f, []string{o.ID}, func(c office.Change) {
		if c.Table != office.TableQuestions {
			return
		}
		ok, err := s.MarkQuestionDelivered(ctx, c.ID)
		if err != nil {
			markErrs.Add(1)
		}
		mu.Lock()
		reported[c.ID]++
		byOp[c.Op]++
		if ok {
			delivered[c.ID]++
		}
		mu.Unlock()
	})
	eventually(t, "Connected", 20*time.Second, f.Connected)
	drops, lastDrop := 0, -1
	for i, q := range qs {
		if i%8 == 3 {
			// Each drop hits a socket joined after the previous drop: a
			// drop before the client noticed the last one would find no
			// socket to close.
			if lastDrop >= 0 {
				rejoined(t, e.phx, f, lastDrop)
			}
			lastDrop = drop(t, e.phx)
			drops++
		}
		if _, ok, err := s.AnswerQuestion(ctx, q.ID, fmt.Sprint("answer ", i), ""); !ok || err != nil {
			t.Fatalf("AnswerQuestion: %v %v", ok, err)
		}
	}
	eventually(t, "every answer delivered", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered) == n
	})
	mu.Lock()
	defer mu.Unlock()
	twice := 0
	for _, q := range qs {
		if delivered[q.ID] != 1 {
			t.Errorf("question %s delivered %d times; want 1", q.ID, delivered[q.ID])
		}
		if reported[q.ID] > 1 {
			twice++
		}
	}
	if markErrs.Load() > 0 {
		t.Errorf("%d MarkQuestionDelivered errors", markErrs.Load())
	}
	// The last answers were written after the last drop: delivering them
	// took a rejoin after each drop.
	if joins := e.phx.Joins(); joins < 1+drops {
		t.Errorf("%d joins; want a rejoin after each of the %d drops", joins, drops)
	}
	got, err := s.ListQuestions(ctx, office.QuestionFilter{OfficeID: o.ID, Status: []string{office.QuestionDelivered}})
	if err != nil || len(got) != n {
		t.Errorf("%d questions delivered in the database (%v); want %d", len(got), err, n)
	}
	t.Logf("%d answers, %d joins, %d reported more than once; reports by op %v", n, e.phx.Joins(), twice, byOp)
}

// officeWithQuestions creates an office named name with an agent Dev and
// n pending questions of Dev's.
func officeWithQuestions(t *testing.T, s *Store, name string, n int) (office.Office, []office.Question) {
	ctx := context.Background()
	o, _ := s.UpsertOffice(ctx, office.Office{Name: name})
	a, _ := s.UpsertAgent(ctx, office.Agent{OfficeID: o.ID, Name: "Dev"})
	var qs []office.Question
	for range n {
		q, err := s.CreateQuestion(ctx, office.Question{OfficeID: o.ID, AgentID: a.ID, Question: "Which?", ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, q)
	}
	return o, qs
}

// TestRealtimeMissedHeartbeat: a server that stops answering heartbeats is
// left, and the feed reconnects.
func TestRealtimeMissedHeartbeat(t *testing.T) {
	phx, url := phoenixOnly(t)
	o := fastOptions()
	o.Heartbeat = 50 * time.Millisecond
	o.Logger = quietLogger()
	f, err := NewRealtime(url, testKey, fakeCatchUp{}, o)
	if err != nil {
		t.Fatal(err)
	}
	startWatch(t, f, nil, nil)
	eventually(t, "Connected", 20*time.Second, f.Connected)
	joins := phx.Joins()
	phx.SilentHeartbeats(true)
	eventually(t, "a reconnect after missed heartbeats", 20*time.Second, func() bool { return phx.Joins() > joins })
	// Every session from now on ends for a missed heartbeat (the read
	// deadline is 5 s longer), so the last error is one.
	if err := f.Err(); err == nil || !strings.Contains(err.Error(), "heartbeat") {
		t.Errorf("Err() = %v; want a heartbeat timeout", err)
	}
	phx.SilentHeartbeats(false)
	eventually(t, "Connected again", 20*time.Second, f.Connected)
}

// TestRealtimeExpiredToken: an expired token shuts the channel (system
// error "Token has expired …", then phx_close) or is refused at join
// (InvalidJWTToken); the feed asks for a fresh token and rejoins. A token
// that changes is pushed to the joined channel (access_token).
func TestRealtimeExpiredToken(t *testing.T) {
	phx, url := phoenixOnly(t)
	var n atomic.Int32
	o := fastOptions()
	o.Logger = quietLogger()
	o.TokenRefresh = 30 * time.Millisecond
	// Distinct project JWTs: Realtime wants role and exp.
	tok := func(i int32) string {
		return supabasetest.Sign(map[string]any{"role": "service_role", "exp": 4102444800, "jti": fmt.Sprintf("tok-%d", i)})
	}
	o.AccessToken = func(context.Context) (string, error) { return tok(n.Add(1)), nil }
	phx.ExpireTokens(tok(1)) // refused at the first join
	f, err := NewRealtime(url, testKey, fakeCatchUp{}, o)
	if err != nil {
		t.Fatal(err)
	}
	startWatch(t, f, nil, nil)
	eventually(t, "Connected", 20*time.Second, f.Connected)
	var se *ServerError
	if err := f.Err(); !errors.As(err, &se) || !isTokenError(err) {
		t.Errorf("Err() = %v; want the join refused for the expired token", err)
	}
	// Refreshed tokens are pushed while joined.
	eventually(t, "access_token pushes", 20*time.Second, func() bool { return len(phx.Tokens()) >= 4 })
	// Every token issued so far expires: the channel is shut down.
	joins := phx.Joins()
	for i := range n.Load() + 1 {
		phx.ExpireTokens(tok(i))
	}
	phx.ShutdownAll("Token has expired 2 seconds ago")
	rejoined(t, phx, f, joins)
	fresh := ""
	for _, tk := range phx.JoinTokens()[joins:] {
		if !phx.Expired(tk) {
			fresh = tk
		}
	}
	if fresh == "" {
		t.Errorf("no rejoin with a token that had not expired; join tokens %v", phx.JoinTokens())
	}
}

// TestRealtimeJoinError: a refused join, and a join reply whose
// subscriptions do not match those asked, are retried until they succeed.
func TestRealtimeJoinError(t *testing.T) {
	phx, url := phoenixOnly(t)
	phx.FailJoins("UnknownErrorOnChannel: Unknown Error on Channel", "RealtimeRestarting: Realtime is restarting, please standby")
	phx.MismatchIDs(true)
	o := fastOptions()
	o.Logger = quietLogger()
	f, err := NewRealtime(url, testKey, fakeCatchUp{}, o)
	if err != nil {
		t.Fatal(err)
	}
	startWatch(t, f, []string{"9a1f0f5e-6c1a-4b59-9d0e-3d2b8d4c1e7a"}, nil)
	eventually(t, "a join reply with the wrong subscriptions", 20*time.Second, func() bool {
		err := f.Err()
		return err != nil && strings.Contains(err.Error(), "lacks the subscription")
	})
	if f.Connected() {
		t.Errorf("Connected() with subscriptions that do not match")
	}
	phx.MismatchIDs(false)
	eventually(t, "Connected", 20*time.Second, f.Connected)
	if j := phx.Joins(); j < 4 {
		t.Errorf("%d joins; want 2 refused, at least 1 mismatched, 1 accepted", j)
	}
}

// TestRealtimeRateLimit: after a rate-limit refusal the feed waits at least
// RateLimitBackoff before it joins again (a plain error waits MinBackoff).
func TestRealtimeRateLimit(t *testing.T) {
	phx, url := phoenixOnly(t)
	phx.FailJoins("ClientJoinRateLimitReached: Too many joins per second")
	o := fastOptions()
	o.Logger = quietLogger()
	f, err := NewRealtime(url, testKey, fakeCatchUp{}, o)
	if err != nil {
		t.Fatal(err)
	}
	startWatch(t, f, nil, nil)
	eventually(t, "Connected", 20*time.Second, f.Connected)
	gap := func(i int) time.Duration {
		ts := phx.JoinTimes()
		return ts[i+1].Sub(ts[i])
	}
	if g := gap(0); g < o.RateLimitBackoff {
		t.Errorf("rejoined %v after a join rate limit; want at least %v", g, o.RateLimitBackoff)
	}
	// A channel shut down for too many messages.
	joins := phx.Joins()
	phx.ShutdownAll("Too many messages per second")
	rejoined(t, phx, f, joins)
	if g := gap(joins - 1); g < o.RateLimitBackoff {
		t.Errorf("rejoined %v after a message rate limit; want at least %v", g, o.RateLimitBackoff)
	}
	if !isRateLimit(f.Err()) {
		t.Errorf("Err() = %v; want a rate limit", f.Err())
	}
}

// TestRealtimeCatchUpFailure: a catch-up that fails is not trusted: the feed
// stays not Connected and tries again on a new connection.
func TestRealtimeCatchUpFailure(t *testing.T) {
	phx, url := phoenixOnly(t)
	var calls atomic.Int32
	src := fakeCatchUp{questions: func() ([]office.Question, error) {
		if calls.Add(1) == 1 {
			return nil, &office.Error{Code: office.EUNAVAILABLE, Message: "database down"}
		}
		return []office.Question{{ID: "q1", OfficeID: "o", AgentID: "a", Status: office.QuestionAnswered}}, nil
	}}
	o := fastOptions()
	o.Logger = quietLogger()
	f, err := NewRealtime(url, testKey, src, o)
	if err != nil {
		t.Fatal(err)
	}
	w := startWatch(t, f, nil, nil)
	eventually(t, "Connected", 20*time.Second, f.Connected)
	if phx.Joins() < 2 {
		t.Errorf("%d joins; want a second after the failed catch-up", phx.Joins())
	}
	if d := cmp.Diff(w.seen(), []office.Change{{Table: office.TableQuestions, Op: office.OpCatchUp, ID: "q1", OfficeID: "o", AgentID: "a", Status: office.QuestionAnswered}}); d != "" {
		t.Errorf("reported (-got +want):\n%s", d)
	}
}

// TestDeliverFrame decodes postgres_changes frames of the real shape.
func TestDeliverFrame(t *testing.T) {
	routes := map[int64]binding{
		38606455: {Event: "UPDATE", Schema: "public", Table: "user_questions"},
		11:       {Event: "INSERT", Schema: "public", Table: "user_messages"},
		12:       {Event: "UPDATE", Schema: "public", Table: "dependency_requests"},
	}
	frame := func(table, typ, record string, ids string) json.RawMessage {
		return json.RawMessage(`{"data":{"columns":[{"name":"id","type":"uuid"},{"name":"status","type":"text"}],` +
			`"commit_timestamp":"2026-11-22T02:31:09.123Z","errors":null,"old_record":{"id":"x"},` +
			`"record":` + record + `,"schema":"public","table":"` + table + `","type":"` + typ + `"},"ids":` + ids + `}`)
	}
	tests := []struct {
		name    string
		payload json.RawMessage
		want    []office.Change
	}{
		{"answered", frame("user_questions", "UPDATE", `{"id":"q","office_id":"o","agent_id":"a","status":"answered","response":"yes"}`, `[38606455]`),
			[]office.Change{{Table: "user_questions", Op: "UPDATE", ID: "q", OfficeID: "o", AgentID: "a", Status: "answered"}}},
		{"delivered is not acted on", frame("user_questions", "UPDATE", `{"id":"q","office_id":"o","agent_id":"a","status":"delivered"}`, `[38606455]`), nil},
		{"unknown subscription id", frame("user_questions", "UPDATE", `{"id":"q","status":"answered"}`, `[5]`), nil},
		{"message", frame("user_messages", "INSERT", `{"id":"m","office_id":"o","agent_id":"a","status":"pending"}`, `[11]`),
			[]office.Change{{Table: "user_messages", Op: "INSERT", ID: "m", OfficeID: "o", AgentID: "a", Status: "pending"}}},
		{"dependency delivered already", frame("dependency_requests", "UPDATE", `{"id":"d","status":"provided","delivered_at":"2026-11-22T02:31:09Z"}`, `[12]`), nil},
		{"dependency rejected", frame("dependency_requests", "UPDATE", `{"id":"d","office_id":"o","agent_id":"a","status":"rejected","delivered_at":null}`, `[12]`),
			[]office.Change{{Table: "dependency_requests", Op: "UPDATE", ID: "d", OfficeID: "o", AgentID: "a", Status: "rejected"}}},
		{"table differs from the subscription", frame("user_messages", "UPDATE", `{"id":"q","status":"answered"}`, `[38606455]`), nil},
		{"not JSON", json.RawMessage(`{"data":`), nil},
	}
	r := &Realtime{log: quietLogger()}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []office.Change
			r.deliver(tc.payload, routes, func(c office.Change) { got = append(got, c) })
			if d := cmp.Diff(got, tc.want); d != "" {
				t.Errorf("(-got +want):\n%s", d)
			}
		})
	}
}

func FuzzDeliver(f *testing.F) {
	f.Add([]byte(`{"data":{"type":"UPDATE","table":"user_questions","record":{"id":"q","status":"answered"}},"ids":[1]}`))
	f.Add([]byte(`{"ids":[1],"data":{"record":null}}`))
	routes := map[int64]binding{1: {Event: "UPDATE", Schema: "public", Table: "user_questions"}}
	r := &Realtime{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	f.Fuzz(func(t *testing.T, b []byte) {
		r.deliver(b, routes, func(c office.Change) {
			if c.ID == "" || c.Table != "user_questions" {
				t.Errorf("delivered %+v", c)
			}
		})
	})
}
