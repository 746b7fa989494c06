package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

// recorder keeps every change a feed reports, in order.
type recorder struct {
	mu      sync.Mutex
	changes []office.Change
	wake    chan struct{} // closed and replaced on every change
}

func newRecorder() *recorder { return &recorder{wake: make(chan struct{})} }

func (r *recorder) add(c office.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, c)
	close(r.wake)
	r.wake = make(chan struct{})
}

func (r *recorder) snapshot() ([]office.Change, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]office.Change(nil), r.changes...), r.wake
}

// watcher is one running Watch.
type watcher struct {
	rec    *recorder
	cancel context.CancelFunc
	done   chan error
	fx     *fixture
	// atConnect is what had arrived when Connected first reported true.
	atConnect []office.Change
}

// watch starts f.Watch(offices) and waits until the feed says it is
// connected (and so caught up). Cleanup stops it and checks that it returns.
func (fx *fixture) watch(t *testing.T, offices []string) *watcher {
	t.Helper()
	if fx.f == nil {
		t.Fatal("Harness.New returned a nil ChangeFeed")
	}
	ctx, cancel := context.WithCancel(fx.ctx)
	w := &watcher{rec: newRecorder(), cancel: cancel, done: make(chan error, 1), fx: fx}
	go func() { w.done <- fx.f.Watch(ctx, offices, w.rec.add) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-w.done:
		case <-time.After(fx.h.FeedTimeout):
			t.Errorf("Watch did not return within %v after its context ended", fx.h.FeedTimeout)
		}
	})
	w.waitConnected(t, "after Watch started")
	w.atConnect, _ = w.rec.snapshot()
	return w
}

func (w *watcher) waitConnected(t *testing.T, when string) {
	t.Helper()
	deadline := time.Now().Add(w.fx.h.FeedTimeout)
	for !w.fx.f.Connected() {
		select {
		case err := <-w.done:
			t.Fatalf("Watch returned %v before it connected (%s)", err, when)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("feed not Connected() within %v %s", w.fx.h.FeedTimeout, when)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitFor waits until pred holds for the changes seen so far.
func (w *watcher) waitFor(t *testing.T, what string, pred func([]office.Change) bool) []office.Change {
	t.Helper()
	timeout := time.After(w.fx.h.FeedTimeout)
	for {
		seen, wake := w.rec.snapshot()
		if pred(seen) {
			return seen
		}
		select {
		case <-wake:
		case err := <-w.done:
			t.Fatalf("Watch returned %v while waiting for %s; seen:\n%s", err, what, dump(seen))
		case <-timeout:
			t.Fatalf("no %s within %v; the feed reported:\n%s", what, w.fx.h.FeedTimeout, dump(seen))
		}
	}
}

// waitChange waits for a change of row id in table with status, and returns it.
func (w *watcher) waitChange(t *testing.T, table, id, status string) office.Change {
	t.Helper()
	var found office.Change
	w.waitFor(t, fmt.Sprintf("change %s %s → %s", table, id, status), func(cs []office.Change) bool {
		for _, c := range cs {
			if c.Table == table && c.ID == id && c.Status == status {
				found = c
				return true
			}
		}
		return false
	})
	return found
}

func dump(cs []office.Change) string {
	if len(cs) == 0 {
		return "  (nothing)"
	}
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "  %+v\n", c)
	}
	return b.String()
}

func wantChange(t *testing.T, got, want office.Change) {
	t.Helper()
	if got != want {
		t.Errorf("change = %+v; want %+v", got, want)
	}
}

func testFeedAnswer(t *testing.T, fx *fixture) {
	q := fx.question(t)
	w := fx.watch(t, nil)
	if _, ok, err := fx.s.AnswerQuestion(fx.ctx, q.ID, "yes", ""); !ok || err != nil {
		t.Fatalf("AnswerQuestion: %v %v", ok, err)
	}
	c := w.waitChange(t, office.TableQuestions, q.ID, office.QuestionAnswered)
	wantChange(t, c, office.Change{Table: office.TableQuestions, Op: office.OpUpdate, ID: q.ID, OfficeID: fx.office.ID, AgentID: fx.a.ID, Status: office.QuestionAnswered})
}

func testFeedUserMessage(t *testing.T, fx *fixture) {
	w := fx.watch(t, []string{fx.office.ID})
	m, err := fx.s.CreateUserMessage(fx.ctx, office.UserMessage{OfficeID: fx.office.ID, AgentID: fx.b.ID, Content: "hello"})
	if err != nil {
		t.Fatalf("CreateUserMessage: %v", err)
	}
	c := w.waitChange(t, office.TableMessages, m.ID, office.MessagePending)
	wantChange(t, c, office.Change{Table: office.TableMessages, Op: office.OpInsert, ID: m.ID, OfficeID: fx.office.ID, AgentID: fx.b.ID, Status: office.MessagePending})
}

func testFeedDependency(t *testing.T, fx *fixture) {
	d1 := fx.dependency(t)
	d2 := fx.dependency(t, func(d *office.DependencyRequest) { d.AgentID = fx.b.ID })
	w := fx.watch(t, nil)
	if _, ok, err := fx.s.ProvideDependency(fx.ctx, d1.ID, []byte("secret")); !ok || err != nil {
		t.Fatalf("ProvideDependency: %v %v", ok, err)
	}
	if _, ok, err := fx.s.RejectDependency(fx.ctx, d2.ID, "no"); !ok || err != nil {
		t.Fatalf("RejectDependency: %v %v", ok, err)
	}
	c := w.waitChange(t, office.TableDependencies, d1.ID, office.DependencyProvided)
	wantChange(t, c, office.Change{Table: office.TableDependencies, Op: office.OpUpdate, ID: d1.ID, OfficeID: fx.office.ID, AgentID: fx.a.ID, Status: office.DependencyProvided})
	c = w.waitChange(t, office.TableDependencies, d2.ID, office.DependencyRejected)
	wantChange(t, c, office.Change{Table: office.TableDependencies, Op: office.OpUpdate, ID: d2.ID, OfficeID: fx.office.ID, AgentID: fx.b.ID, Status: office.DependencyRejected})
	seen, _ := w.rec.snapshot()
	for _, c := range seen {
		if strings.Contains(fmt.Sprint(c), "secret") {
			t.Errorf("a change carries the provided value: %+v", c)
		}
	}
}

// answeredAll reports whether every id has an answered change.
func answeredAll(ids map[string]bool) func([]office.Change) bool {
	return func(cs []office.Change) bool {
		seen := map[string]bool{}
		for _, c := range cs {
			if c.Table == office.TableQuestions && c.Status == office.QuestionAnswered && ids[c.ID] {
				seen[c.ID] = true
			}
		}
		return len(seen) == len(ids)
	}
}

func testFeedManyAnswers(t *testing.T, fx *fixture) {
	const n = 40
	qs := make([]office.Question, n)
	want := map[string]bool{}
	for i := range qs {
		qs[i] = fx.question(t)
		want[qs[i].ID] = true
	}
	w := fx.watch(t, nil)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < n; i += 4 {
				if _, ok, err := fx.s.AnswerQuestion(fx.ctx, qs[i].ID, "a", ""); !ok || err != nil {
					t.Errorf("AnswerQuestion: %v %v", ok, err)
				}
			}
		})
	}
	wg.Wait()
	w.waitFor(t, fmt.Sprintf("answered changes for all %d questions answered by 4 goroutines", n), answeredAll(want))
}

func testFeedCatchUp(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	// Written before Watch: what awaits the office, and what does not.
	qa := fx.answered(t)
	qd := fx.answered(t)
	if ok, err := s.MarkQuestionDelivered(ctx, qd.ID); !ok || err != nil {
		t.Fatalf("MarkQuestionDelivered: %v %v", ok, err)
	}
	qp := fx.question(t)
	m, err := s.CreateUserMessage(ctx, office.UserMessage{OfficeID: fx.office.ID, AgentID: fx.a.ID, Content: "while you were away"})
	if err != nil {
		t.Fatalf("CreateUserMessage: %v", err)
	}
	md, err := s.CreateUserMessage(ctx, office.UserMessage{OfficeID: fx.office.ID, AgentID: fx.a.ID, Content: "old"})
	if err != nil {
		t.Fatalf("CreateUserMessage: %v", err)
	}
	if ok, err := s.MarkUserMessageDelivered(ctx, md.ID); !ok || err != nil {
		t.Fatalf("MarkUserMessageDelivered: %v %v", ok, err)
	}
	dp := fx.dependency(t)
	if _, ok, err := s.ProvideDependency(ctx, dp.ID, []byte("k")); !ok || err != nil {
		t.Fatalf("ProvideDependency: %v %v", ok, err)
	}
	dr := fx.dependency(t)
	if _, ok, err := s.RejectDependency(ctx, dr.ID, "no"); !ok || err != nil {
		t.Fatalf("RejectDependency: %v %v", ok, err)
	}
	dd := fx.dependency(t)
	if _, ok, err := s.ProvideDependency(ctx, dd.ID, []byte("k")); !ok || err != nil {
		t.Fatalf("ProvideDependency: %v %v", ok, err)
	}
	if ok, err := s.MarkDependencyDelivered(ctx, dd.ID); !ok || err != nil {
		t.Fatalf("MarkDependencyDelivered: %v %v", ok, err)
	}

	w := fx.watch(t, nil)
	wantCatchUp := []office.Change{
		{Table: office.TableQuestions, Op: office.OpCatchUp, ID: qa.ID, OfficeID: fx.office.ID, AgentID: fx.a.ID, Status: office.QuestionAnswered},
		{Table: office.TableMessages, Op: office.OpCatchUp, ID: m.ID, OfficeID: fx.office.ID, AgentID: fx.a.ID, Status: office.MessagePending},
		{Table: office.TableDependencies, Op: office.OpCatchUp, ID: dp.ID, OfficeID: fx.office.ID, AgentID: fx.a.ID, Status: office.DependencyProvided},
		{Table: office.TableDependencies, Op: office.OpCatchUp, ID: dr.ID, OfficeID: fx.office.ID, AgentID: fx.a.ID, Status: office.DependencyRejected},
	}
	has := func(cs []office.Change, want office.Change) bool {
		for _, c := range cs {
			if c == want {
				return true
			}
		}
		return false
	}
	for _, want := range wantCatchUp {
		if !has(w.atConnect, want) {
			t.Errorf("when Connected() first reported true, the catch-up change %+v had not been delivered; Connected means caught up. Delivered by then:\n%s", want, dump(w.atConnect))
		}
	}
	for _, id := range []string{qd.ID, qp.ID, md.ID, dd.ID} {
		for _, c := range w.atConnect {
			if c.ID == id && c.Op == office.OpCatchUp {
				t.Errorf("catch-up reported a row that awaits nothing (delivered or still pending): %+v", c)
			}
		}
	}
	// A live change after the catch-up.
	if _, ok, err := s.AnswerQuestion(ctx, qp.ID, "now", ""); !ok || err != nil {
		t.Fatalf("AnswerQuestion: %v %v", ok, err)
	}
	c := w.waitChange(t, office.TableQuestions, qp.ID, office.QuestionAnswered)
	if c.Op != office.OpUpdate {
		t.Errorf("live answer after catch-up arrived as %+v; want Op UPDATE", c)
	}
}

func testFeedOfficeFilter(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	other := fx.mkOffice(t, "Other")
	x := fx.mkAgent(t, other.ID, "X")
	inOther := func(q *office.Question) { q.OfficeID = other.ID; q.AgentID = x.ID }
	otherAnswered := fx.answered(t, inOther)
	mineAnswered := fx.answered(t)
	otherPending := fx.question(t, inOther)
	minePending := fx.question(t)

	w := fx.watch(t, []string{fx.office.ID})
	w.waitChange(t, office.TableQuestions, mineAnswered.ID, office.QuestionAnswered)
	if _, ok, err := s.AnswerQuestion(ctx, otherPending.ID, "x", ""); !ok || err != nil {
		t.Fatalf("AnswerQuestion: %v %v", ok, err)
	}
	if _, err := s.CreateUserMessage(ctx, office.UserMessage{OfficeID: other.ID, AgentID: x.ID, Content: "not for you"}); err != nil {
		t.Fatalf("CreateUserMessage: %v", err)
	}
	if _, ok, err := s.AnswerQuestion(ctx, minePending.ID, "y", ""); !ok || err != nil {
		t.Fatalf("AnswerQuestion: %v %v", ok, err)
	}
	w.waitChange(t, office.TableQuestions, minePending.ID, office.QuestionAnswered)
	time.Sleep(300 * time.Millisecond) // let a wrongly routed change arrive
	seen, _ := w.rec.snapshot()
	for _, c := range seen {
		if c.OfficeID != fx.office.ID || c.ID == otherAnswered.ID || c.ID == otherPending.ID {
			t.Errorf("Watch(office %s) reported a change of another office: %+v", fx.office.ID, c)
		}
	}
}

func testFeedStopsOnCancel(t *testing.T, fx *fixture) {
	w := fx.watch(t, nil)
	w.cancel()
	select {
	case err := <-w.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Watch returned %v after its context was cancelled; want nil or context.Canceled", err)
		}
		w.done <- err // for the cleanup
	case <-time.After(fx.h.FeedTimeout):
		t.Fatalf("Watch did not return within %v after its context was cancelled", fx.h.FeedTimeout)
	}
	if fx.f.Connected() {
		t.Errorf("Connected() = true after Watch returned; want false")
	}
}

// testFeedReconnectAfterKill: answers (and a message, and a provided
// dependency) written while the feed's connection is down all arrive after it
// reconnects (by the catch-up), and an office acting
// through MarkQuestionDelivered delivers each exactly once even when a row
// is reported twice (a notification and a catch-up).
func testFeedReconnectAfterKill(t *testing.T, fx *fixture) {
	if fx.h.KillFeed == nil {
		t.Skip("Harness.KillFeed is nil: this feed has no connection to kill")
	}
	const n = 20
	qs := make([]office.Question, 2*n)
	for i := range qs {
		qs[i] = fx.question(t)
	}
	dep := fx.dependency(t)
	w := fx.watch(t, nil)
	fx.h.KillFeed(t, fx.s, fx.f)
	down := map[string]bool{}
	for _, q := range qs[:n] {
		if _, ok, err := fx.s.AnswerQuestion(fx.ctx, q.ID, "while down", ""); !ok || err != nil {
			t.Fatalf("AnswerQuestion: %v %v", ok, err)
		}
		down[q.ID] = true
	}
	m, err := fx.s.CreateUserMessage(fx.ctx, office.UserMessage{OfficeID: fx.office.ID, AgentID: fx.a.ID, Content: "while down"})
	if err != nil {
		t.Fatalf("CreateUserMessage: %v", err)
	}
	if _, ok, err := fx.s.ProvideDependency(fx.ctx, dep.ID, []byte("k")); !ok || err != nil {
		t.Fatalf("ProvideDependency: %v %v", ok, err)
	}
	w.waitFor(t, fmt.Sprintf("answered changes for all %d questions answered after the feed's connection was killed", n), answeredAll(down))
	w.waitChange(t, office.TableMessages, m.ID, office.MessagePending)
	w.waitChange(t, office.TableDependencies, dep.ID, office.DependencyProvided)
	w.waitConnected(t, "after the connection was killed")
	// The live path works again.
	after := map[string]bool{}
	for _, q := range qs[n:] {
		if _, ok, err := fx.s.AnswerQuestion(fx.ctx, q.ID, "after", ""); !ok || err != nil {
			t.Fatalf("AnswerQuestion: %v %v", ok, err)
		}
		after[q.ID] = true
	}
	w.waitFor(t, fmt.Sprintf("answered changes for %d questions answered after the reconnect", n), answeredAll(after))

	// Act on every reported change, duplicates included, from two "servers".
	seen, _ := w.rec.snapshot()
	var mu sync.Mutex
	delivered := map[string]int{}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for _, c := range seen {
				if c.Table != office.TableQuestions || c.Status != office.QuestionAnswered {
					continue
				}
				ok, err := fx.s.MarkQuestionDelivered(fx.ctx, c.ID)
				if err != nil {
					t.Errorf("MarkQuestionDelivered: %v", err)
				}
				if ok {
					mu.Lock()
					delivered[c.ID]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for _, q := range qs {
		if delivered[q.ID] != 1 {
			t.Errorf("question %s delivered %d times; want exactly once", q.ID, delivered[q.ID])
		}
	}
}
