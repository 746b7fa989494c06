package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

// racers is how many goroutines race for one transition.
const racers = 32

// race runs fn from racers goroutines released at once and returns how many
// got ok=true; any error fails the test.
func race(t *testing.T, what string, fn func(i int) (bool, error)) int {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		wins  int
		errs  []error
		start = make(chan struct{})
	)
	for i := range racers {
		wg.Go(func() {
			<-start
			ok, err := fn(i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if ok {
				wins++
			}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		t.Errorf("%s: a racer failed: %v", what, err)
	}
	return wins
}

func wantOneWinner(t *testing.T, what string, wins int) {
	t.Helper()
	if wins != 1 {
		t.Errorf("%s: %d of %d racing callers got ok=true; want exactly 1", what, wins, racers)
	}
}

func testRaceAnswerQuestion(t *testing.T, fx *fixture) {
	q := fx.question(t)
	var mu sync.Mutex
	winner := ""
	wins := race(t, "AnswerQuestion", func(i int) (bool, error) {
		resp := fmt.Sprintf("answer %d", i)
		got, ok, err := fx.s.AnswerQuestion(fx.ctx, q.ID, resp, "")
		if ok {
			mu.Lock()
			winner = resp
			mu.Unlock()
			if got.Response != resp {
				return ok, fmt.Errorf("winner %d got back response %q", i, got.Response)
			}
		}
		return ok, err
	})
	wantOneWinner(t, "AnswerQuestion", wins)
	got, err := fx.s.GetQuestion(fx.ctx, q.ID)
	if err != nil {
		t.Fatalf("GetQuestion: %v", err)
	}
	if got.Status != office.QuestionAnswered || got.Response != winner {
		t.Errorf("after the race the question is %q with %q; want answered with the winner's %q", got.Status, got.Response, winner)
	}
}

func testRaceMarkQuestionDelivered(t *testing.T, fx *fixture) {
	for n := range 3 { // a few rounds: one lucky pass proves little
		q := fx.answered(t)
		wins := race(t, "MarkQuestionDelivered", func(int) (bool, error) {
			return fx.s.MarkQuestionDelivered(fx.ctx, q.ID)
		})
		wantOneWinner(t, fmt.Sprintf("MarkQuestionDelivered round %d", n), wins)
	}
}

func testRaceTransitionInvocation(t *testing.T, fx *fixture) {
	inv, err := fx.s.CreateInvocation(fx.ctx, office.Invocation{OfficeID: fx.office.ID, CallerAgentID: fx.a.ID, CalleeAgentID: fx.b.ID, Reason: "race"})
	if err != nil {
		t.Fatalf("CreateInvocation: %v", err)
	}
	wins := race(t, "TransitionInvocation pending → in_progress", func(int) (bool, error) {
		_, ok, err := fx.s.TransitionInvocation(fx.ctx, inv.ID, []string{office.InvocationPending}, office.InvocationInProgress, office.InvocationPatch{})
		return ok, err
	})
	wantOneWinner(t, "TransitionInvocation pending → in_progress", wins)
	// Completion races against failure: one outcome only.
	wins = race(t, "TransitionInvocation in_progress → completed|failed", func(i int) (bool, error) {
		to := office.InvocationCompleted
		if i%2 == 1 {
			to = office.InvocationFailed
		}
		_, ok, err := fx.s.TransitionInvocation(fx.ctx, inv.ID, []string{office.InvocationPending, office.InvocationInProgress}, to, office.InvocationPatch{Error: fmt.Sprint(i)})
		return ok, err
	})
	wantOneWinner(t, "TransitionInvocation in_progress → completed|failed", wins)
}

func testRaceDependency(t *testing.T, fx *fixture) {
	d := fx.dependency(t)
	wins := race(t, "ProvideDependency|RejectDependency", func(i int) (bool, error) {
		if i%2 == 0 {
			_, ok, err := fx.s.ProvideDependency(fx.ctx, d.ID, []byte{byte(i)})
			return ok, err
		}
		_, ok, err := fx.s.RejectDependency(fx.ctx, d.ID, fmt.Sprint(i))
		return ok, err
	})
	wantOneWinner(t, "ProvideDependency|RejectDependency", wins)
	wins = race(t, "MarkDependencyDelivered", func(int) (bool, error) {
		return fx.s.MarkDependencyDelivered(fx.ctx, d.ID)
	})
	wantOneWinner(t, "MarkDependencyDelivered", wins)
	m, err := fx.s.CreateUserMessage(fx.ctx, office.UserMessage{OfficeID: fx.office.ID, AgentID: fx.a.ID, Content: "hi"})
	if err != nil {
		t.Fatalf("CreateUserMessage: %v", err)
	}
	wins = race(t, "MarkUserMessageDelivered", func(int) (bool, error) {
		return fx.s.MarkUserMessageDelivered(fx.ctx, m.ID)
	})
	wantOneWinner(t, "MarkUserMessageDelivered", wins)
	r, err := fx.s.CreateResult(fx.ctx, office.Result{OfficeID: fx.office.ID, FromAgentID: fx.a.ID, ToAgentID: fx.b.ID, ResultType: "message", ContentType: "text/plain", Content: "x"})
	if err != nil {
		t.Fatalf("CreateResult: %v", err)
	}
	wins = race(t, "MarkResultDelivered", func(int) (bool, error) {
		return fx.s.MarkResultDelivered(fx.ctx, r.ID)
	})
	wantOneWinner(t, "MarkResultDelivered", wins)
}

func testRaceAppendEventDedupe(t *testing.T, fx *fixture) {
	wins := race(t, "AppendEvent with one dedupe key", func(i int) (bool, error) {
		_, inserted, err := fx.s.AppendEvent(fx.ctx, office.Event{OfficeID: fx.office.ID, Kind: "ask_user", DedupeKey: "entry-1", Raw: fmt.Sprint(i)})
		return inserted, err
	})
	wantOneWinner(t, "AppendEvent with one dedupe key", wins)
	list, err := fx.s.ListEvents(fx.ctx, office.EventFilter{OfficeID: fx.office.ID})
	if err != nil {
		t.Fatalf("ListEvents: %v", err)
	}
	if len(list) != 1 {
		t.Errorf("after 32 appends with one dedupe key, %d events stored; want 1", len(list))
	}
}

// testRaceExpireQuestions: expiry run by several servers at once reports each
// expired row to exactly one of them.
func testRaceExpireQuestions(t *testing.T, fx *fixture) {
	const n = 20
	want := map[string]bool{}
	for range n {
		q := fx.question(t, func(q *office.Question) { q.ExpiresAt = now().Add(-time.Minute) })
		want[q.ID] = true
	}
	var mu sync.Mutex
	seen := map[string]int{}
	race(t, "ExpireQuestions", func(int) (bool, error) {
		got, err := fx.s.ExpireQuestions(fx.ctx, now(), nil)
		mu.Lock()
		defer mu.Unlock()
		for _, q := range got {
			seen[q.ID]++
		}
		return len(got) > 0, err
	})
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("question %s was returned by %d concurrent ExpireQuestions calls; want exactly 1", id, seen[id])
		}
	}
	for id := range seen {
		if !want[id] {
			t.Errorf("ExpireQuestions returned %s, which was not due", id)
		}
	}
}

// testRaceSessionStatus: the office's busy races the session layer's
// crashed, many times over. Whatever the order, the row ends crashed:
// the office's view never overwrites the session layer's word. A
// read-then-write (read ready, the crash lands, write busy) would lose the
// crash.
func testRaceSessionStatus(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	for round := range 20 {
		if _, _, _, err := s.SetSessionStatus(ctx, office.SessionStatus{OfficeID: fx.office.ID, AgentID: fx.a.ID, Status: office.SessionReady, Process: true, PID: 1}); err != nil {
			t.Fatal(err)
		}
		race(t, "SetSessionStatus", func(i int) (bool, error) {
			c := office.SessionStatus{OfficeID: fx.office.ID, AgentID: fx.a.ID, Status: office.SessionBusy}
			if i == racers/2 {
				c = office.SessionStatus{OfficeID: fx.office.ID, AgentID: fx.a.ID, Status: office.SessionCrashed, Process: true}
			}
			_, _, ok, err := s.SetSessionStatus(ctx, c)
			return ok, err
		})
		got, err := s.GetSessionByAgent(ctx, fx.a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != office.SessionCrashed {
			t.Fatalf("round %d: the session is %s after the office's busy raced the crash; want crashed", round, got.Status)
		}
	}
}

// testRaceSessionConversation: a new agent's start records its
// conversation while its process reports; many starts race one crash.
// The crash stays (a read-then-write of the whole row, read before the
// crash and written after, would lose it), and every start gets back the
// one conversation the row keeps.
func testRaceSessionConversation(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	for round := range 10 {
		a := fx.mkAgent(t, fx.office.ID, fmt.Sprintf("conv-racer-%d", round))
		if _, _, _, err := s.SetSessionStatus(ctx, office.SessionStatus{OfficeID: fx.office.ID, AgentID: a.ID, Status: office.SessionReady, Process: true, PID: 1}); err != nil {
			t.Fatal(err)
		}
		var (
			mu   sync.Mutex
			kept = map[string]bool{}
		)
		race(t, "SetSessionStatus conversation", func(i int) (bool, error) {
			c := office.SessionStatus{OfficeID: fx.office.ID, AgentID: a.ID, AgentSessionID: fmt.Sprintf("conv-%d", i)}
			if i == racers/2 {
				c = office.SessionStatus{OfficeID: fx.office.ID, AgentID: a.ID, Status: office.SessionCrashed, Process: true}
			}
			rec, _, ok, err := s.SetSessionStatus(ctx, c)
			if err == nil && c.AgentSessionID != "" {
				mu.Lock()
				kept[rec.AgentSessionID] = true
				mu.Unlock()
			}
			return ok, err
		})
		got, err := s.GetSessionByAgent(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != office.SessionCrashed {
			t.Errorf("round %d: the session is %s after starts raced the crash; want crashed", round, got.Status)
		}
		if len(kept) != 1 || !kept[got.AgentSessionID] {
			t.Errorf("round %d: racing starts were given conversations %v; want each the one the row keeps, %q", round, kept, got.AgentSessionID)
		}
	}
}
