// Package storetest is the conformance suite every office.Store and
// office.ChangeFeed implementation passes (store/sqlite, store/postgres,
// supabase). It checks the contract written in the doc comments of
// office/store.go: every lifecycle, ENOTFOUND and ECONFLICT, conditional
// transitions that exactly one of many racing callers wins, and a change feed
// that loses nothing across a catch-up and a dropped connection.
//
// Use it from an implementation's tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			New: func(t *testing.T) (office.Store, office.ChangeFeed) { ... },
//		})
//	}
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
)

// Harness gives the suite the implementation under test.
type Harness struct {
	// New returns a fresh, empty store and its change feed for one subtest.
	// It registers its own cleanup (t.Cleanup) that closes them; the suite
	// never calls Close. The feed may be nil only if the implementation has
	// none, in which case the feed subtests fail.
	New func(t *testing.T) (office.Store, office.ChangeFeed)

	// KillFeed, when set, drops the connection of feed f (returned by New
	// together with s) while it is watching — for Postgres,
	// pg_terminate_backend on the LISTEN connection — so that the feed must
	// reconnect and catch up. It returns once the connection is gone. Nil
	// when the feed has no connection to kill (the subtest is skipped).
	KillFeed func(t *testing.T, s office.Store, f office.ChangeFeed)

	// FeedTimeout bounds how long a change may take to arrive, and how long
	// the feed may take to connect or reconnect. Zero means 15 seconds.
	FeedTimeout time.Duration

	// TimeTolerance is how far a timestamp the store sets (now) may be from
	// the test's clock. Zero means 5 seconds.
	TimeTolerance time.Duration
}

// Run runs the whole suite, each subtest on a store of its own from h.New.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("storetest.Harness.New is nil")
	}
	if h.FeedTimeout == 0 {
		h.FeedTimeout = 15 * time.Second
	}
	if h.TimeTolerance == 0 {
		h.TimeTolerance = 5 * time.Second
	}
	tests := []struct {
		name string
		fn   func(*testing.T, *fixture)
	}{
		{"Offices", testOffices},
		{"Agents", testAgents},
		{"Sessions", testSessions},
		{"SessionDetail", testSessionDetail},
		{"SetSessionStatus", testSetSessionStatus},
		{"SessionConversation", testSessionConversation},
		{"ListDue", testListDue},
		{"ListDueTyping", testListDueTyping},
		{"MarkDelivered", testMarkDelivered},
		{"AskQuestion", testAskQuestion},
		{"DeliverResult", testDeliverResult},
		{"Invoke", testInvoke},
		{"MessageEvents", testMessageEvents},
		{"ListOpenWork", testListOpenWork},
		{"Notices", testNotices},
		{"NotFound", testNotFound},
		{"QuestionLifecycle", testQuestionLifecycle},
		{"QuestionCancel", testQuestionCancel},
		{"QuestionExpiry", testQuestionExpiry},
		{"QuestionFilters", testQuestionFilters},
		{"UserMessages", testUserMessages},
		{"Invocations", testInvocations},
		{"InvocationFilters", testInvocationFilters},
		{"Results", testResults},
		{"Dependencies", testDependencies},
		{"DependencyExpiry", testDependencyExpiry},
		{"ProxyWork", testProxyWork},
		{"PermissionGrants", testPermissionGrants},
		{"Events", testEvents},
		{"AppendEvents", testAppendEvents},
		{"EventsDefaultLimit", testEventsDefaultLimit},
		{"RaceAnswerQuestion", testRaceAnswerQuestion},
		{"RaceMarkQuestionDelivered", testRaceMarkQuestionDelivered},
		{"RaceTransitionInvocation", testRaceTransitionInvocation},
		{"RaceDependency", testRaceDependency},
		{"RaceAppendEventDedupe", testRaceAppendEventDedupe},
		{"RaceExpireQuestions", testRaceExpireQuestions},
		{"RaceSessionStatus", testRaceSessionStatus},
		{"RaceSessionConversation", testRaceSessionConversation},
		{"RaceAddNotices", testRaceAddNotices},
		{"FeedAnswer", testFeedAnswer},
		{"FeedUserMessage", testFeedUserMessage},
		{"FeedDependency", testFeedDependency},
		{"FeedManyAnswers", testFeedManyAnswers},
		{"FeedCatchUp", testFeedCatchUp},
		{"FeedOfficeFilter", testFeedOfficeFilter},
		{"FeedStopsOnCancel", testFeedStopsOnCancel},
		{"FeedReconnectAfterKill", testFeedReconnectAfterKill},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newFixture(t, h))
		})
	}
}

// fixture is one subtest's store with an office and two agents in it.
type fixture struct {
	h      Harness
	ctx    context.Context
	s      office.Store
	f      office.ChangeFeed
	office office.Office
	a, b   office.Agent // "Dev" and "Reviewer" in office
	start  time.Time    // UTC, microseconds, when the fixture was made
}

func newFixture(t *testing.T, h Harness) *fixture {
	t.Helper()
	s, f := h.New(t)
	if s == nil {
		t.Fatal("Harness.New returned a nil store")
	}
	fx := &fixture{h: h, ctx: t.Context(), s: s, f: f, start: now()}
	if err := s.Ping(fx.ctx); err != nil {
		t.Fatalf("Ping on a fresh store: %v", err)
	}
	fx.office = fx.mkOffice(t, "Office "+uuid.NewString()[:8])
	fx.a = fx.mkAgent(t, fx.office.ID, "Dev")
	fx.b = fx.mkAgent(t, fx.office.ID, "Reviewer")
	return fx
}

func (fx *fixture) mkOffice(t *testing.T, name string) office.Office {
	t.Helper()
	o, err := fx.s.UpsertOffice(fx.ctx, office.Office{Name: name, QuestionTTL: 5 * time.Minute})
	if err != nil {
		t.Fatalf("UpsertOffice(%q): %v", name, err)
	}
	if o.ID == "" {
		t.Fatalf("UpsertOffice(%q) returned no ID", name)
	}
	return o
}

func (fx *fixture) mkAgent(t *testing.T, officeID, name string) office.Agent {
	t.Helper()
	a, err := fx.s.UpsertAgent(fx.ctx, office.Agent{OfficeID: officeID, Name: name, Role: "role of " + name})
	if err != nil {
		t.Fatalf("UpsertAgent(%q): %v", name, err)
	}
	if a.ID == "" {
		t.Fatalf("UpsertAgent(%q) returned no ID", name)
	}
	return a
}

// question returns a pending question of agent a expiring in an hour.
func (fx *fixture) question(t *testing.T, mutate ...func(*office.Question)) office.Question {
	t.Helper()
	q := office.Question{
		OfficeID:     fx.office.ID,
		AgentID:      fx.a.ID,
		QuestionType: office.QuestionText,
		Question:     "Which database?",
		ExpiresAt:    now().Add(time.Hour),
	}
	for _, m := range mutate {
		m(&q)
	}
	got, err := fx.s.CreateQuestion(fx.ctx, q)
	if err != nil {
		t.Fatalf("CreateQuestion: %v", err)
	}
	if got.ID == "" || got.Status == "" {
		t.Fatalf("CreateQuestion returned ID=%q Status=%q; want both filled", got.ID, got.Status)
	}
	return got
}

func (fx *fixture) answered(t *testing.T, mutate ...func(*office.Question)) office.Question {
	t.Helper()
	q := fx.question(t, mutate...)
	got, ok, err := fx.s.AnswerQuestion(fx.ctx, q.ID, "Postgres", "")
	if err != nil || !ok {
		t.Fatalf("AnswerQuestion(pending %s) = ok %v, err %v; want ok", q.ID, ok, err)
	}
	return got
}

func (fx *fixture) dependency(t *testing.T, mutate ...func(*office.DependencyRequest)) office.DependencyRequest {
	t.Helper()
	d := office.DependencyRequest{
		OfficeID:  fx.office.ID,
		AgentID:   fx.a.ID,
		Type:      "api_key",
		Name:      "OPENAI_API_KEY",
		Required:  true,
		ExpiresAt: now().Add(time.Hour),
	}
	for _, m := range mutate {
		m(&d)
	}
	got, err := fx.s.CreateDependency(fx.ctx, d)
	if err != nil {
		t.Fatalf("CreateDependency: %v", err)
	}
	return got
}

// now is the test clock: UTC, microsecond precision (what Postgres keeps).
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// opts compares rows: store-set timestamps within tolerance, nil and empty
// slices and maps alike, JSON by value.
func (fx *fixture) opts(extra ...cmp.Option) cmp.Options {
	return append(cmp.Options{
		cmpopts.EquateApproxTime(fx.h.TimeTolerance),
		cmpopts.EquateEmpty(),
		// JSON by value; only on json.RawMessage (not on every []byte), and
		// not when both are empty (EquateEmpty has those).
		cmp.FilterPath(func(p cmp.Path) bool { return p.Last().Type() == reflect.TypeFor[json.RawMessage]() },
			cmp.FilterValues(func(a, b json.RawMessage) bool { return len(a) > 0 || len(b) > 0 }, cmp.Comparer(jsonEqual))),
	}, extra...)
}

// ignore ignores fields of typ; with no fields, the ones a store fills (ID,
// CreatedAt, UpdatedAt), which are checked separately.
func ignore(typ any, fields ...string) cmp.Option {
	if len(fields) == 0 {
		fields = []string{"ID", "CreatedAt", "UpdatedAt"}
	}
	return cmpopts.IgnoreFields(typ, fields...)
}

func jsonEqual(a, b json.RawMessage) bool {
	norm := func(m json.RawMessage) any {
		if len(bytes.TrimSpace(m)) == 0 {
			return nil
		}
		var v any
		if err := json.Unmarshal(m, &v); err != nil {
			return "invalid JSON: " + string(m)
		}
		return v
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// checkStamps checks the store-filled ID, CreatedAt and UpdatedAt.
func (fx *fixture) checkStamps(t *testing.T, what, id string, created, updated time.Time) {
	t.Helper()
	if id == "" {
		t.Errorf("%s: ID is empty; the store must fill it", what)
	} else if _, err := uuid.Parse(id); err != nil {
		t.Errorf("%s: ID %q is not a UUID", what, id)
	}
	fx.near(t, what+" CreatedAt", created, now())
	fx.near(t, what+" UpdatedAt", updated, now())
}

// near checks that got is within tolerance of want.
func (fx *fixture) near(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if got.IsZero() {
		t.Errorf("%s is zero; want about %v", what, want)
		return
	}
	if d := got.Sub(want); d > fx.h.TimeTolerance || d < -fx.h.TimeTolerance {
		t.Errorf("%s = %v; want within %v of %v (off by %v)", what, got.UTC(), fx.h.TimeTolerance, want, d)
	}
}

func (fx *fixture) nearPtr(t *testing.T, what string, got *time.Time, want time.Time) {
	t.Helper()
	if got == nil {
		t.Errorf("%s is nil; want about %v", what, want)
		return
	}
	fx.near(t, what, *got, want)
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := office.ErrorCode(err); got != code {
		t.Errorf("%s: error code %q (err %v); want %q", what, got, err, code)
	}
}

// wantNotOK checks a conditional transition that must not happen.
func wantNotOK(t *testing.T, what string, ok bool, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: err %v; want ok=false and no error (a transition from the wrong state is not an error)", what, err)
	}
	if ok {
		t.Errorf("%s: ok=true; want ok=false (the row is not in the expected state)", what)
	}
}

// wantNotOKMissing checks a transition of a row that does not exist: ok=false
// with no error, or ENOTFOUND.
func wantNotOKMissing(t *testing.T, what string, ok bool, err error) {
	t.Helper()
	if err != nil && !office.IsNotFound(err) {
		t.Errorf("%s on a missing row: err %v; want ok=false with no error or ENOTFOUND", what, err)
	}
	if ok {
		t.Errorf("%s on a missing row: ok=true; want false", what)
	}
}

func wantOK(t *testing.T, what string, ok bool, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !ok {
		t.Fatalf("%s: ok=false; want true (the row was in the expected state)", what)
	}
}

func ids[T any](rows []T, id func(T) string) []string {
	var out []string // nil when empty, so diffs against nil want match
	for _, r := range rows {
		out = append(out, id(r))
	}
	return out
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

func qid(q office.Question) string             { return q.ID }
func mid(m office.UserMessage) string          { return m.ID }
func iid(i office.Invocation) string           { return i.ID }
func rid(r office.Result) string               { return r.ID }
func did(d office.DependencyRequest) string    { return d.ID }
func aid(a office.Agent) string                { return a.ID }
func sid(s office.SessionRecord) string        { return s.ID }
func oid(o office.Office) string               { return o.ID }
func eid(e office.Event) string                { return fmt.Sprint(e.ID) }
func ptr[T any](v T) *T                        { return &v }
func diff(got, want any, o cmp.Options) string { return cmp.Diff(got, want, o...) }
