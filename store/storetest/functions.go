package storetest

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
)

// testListDue: ListDue returns what the five List methods return for one
// agent (the delivery's read), and nothing of another agent or office.
func testListDue(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	empty, err := s.ListDue(ctx, fx.office.ID, fx.a.ID)
	if err != nil {
		t.Fatalf("ListDue(nothing due): %v", err)
	}
	if n := len(empty.Dependencies) + len(empty.Answers) + len(empty.Results) + len(empty.Messages) + len(empty.Tasks); n != 0 {
		t.Errorf("ListDue with nothing due = %d rows; want none", n)
	}
	// For a: an answer, a provided dependency (opaque bytes), a result, a
	// message, two tasks (one in progress); and rows that are not a's due.
	q1 := fx.answered(t)
	fx.answered(t, func(q *office.Question) { q.AgentID = fx.b.ID })
	fx.question(t)
	d := fx.dependency(t)
	value := []byte{0x00, 0xff, 'k', '\\', 'x'}
	if _, ok, err := s.ProvideDependency(ctx, d.ID, value); err != nil || !ok {
		t.Fatalf("ProvideDependency: %v %v", ok, err)
	}
	fx.dependency(t) // pending: not due
	t1, err := s.CreateInvocation(ctx, office.Invocation{OfficeID: fx.office.ID, CallerAgentID: fx.b.ID, CalleeAgentID: fx.a.ID, Reason: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.TransitionInvocation(ctx, t1.ID, []string{office.InvocationPending}, office.InvocationInProgress, office.InvocationPatch{}); err != nil || !ok {
		t.Fatalf("TransitionInvocation: %v %v", ok, err)
	}
	if _, err := s.CreateInvocation(ctx, office.Invocation{OfficeID: fx.office.ID, CallerAgentID: fx.b.ID, CalleeAgentID: fx.a.ID, Reason: "second"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateInvocation(ctx, office.Invocation{OfficeID: fx.office.ID, CallerAgentID: fx.a.ID, CalleeAgentID: fx.b.ID, Reason: "b's"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateResult(ctx, office.Result{OfficeID: fx.office.ID, FromAgentID: fx.b.ID, ToAgentID: fx.a.ID, ResultType: "message", ContentType: "text/plain", Content: "fyi"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateUserMessage(ctx, office.UserMessage{OfficeID: fx.office.ID, AgentID: fx.a.ID, Content: "hello"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListDue(ctx, fx.office.ID, fx.a.ID)
	if err != nil {
		t.Fatalf("ListDue: %v", err)
	}
	mine := office.Due{OfficeIDs: []string{fx.office.ID}, AgentID: fx.a.ID}
	var want office.DueWork
	want.Dependencies, _ = s.ListUndeliveredDependencies(ctx, mine)
	want.Answers, _ = s.ListAnsweredUndelivered(ctx, mine)
	want.Results, _ = s.ListResults(ctx, office.ResultFilter{OfficeID: fx.office.ID, ToAgentID: fx.a.ID, Status: []string{office.ResultPending}})
	want.Messages, _ = s.ListPendingUserMessages(ctx, mine)
	want.Tasks, _ = s.ListInvocations(ctx, office.InvocationFilter{OfficeID: fx.office.ID, CalleeAgentID: fx.a.ID, Status: []string{office.InvocationPending, office.InvocationInProgress}})
	if len(want.Dependencies) != 1 || len(want.Answers) != 1 || len(want.Results) != 1 || len(want.Messages) != 1 || len(want.Tasks) != 2 {
		t.Fatalf("the List methods found %d dependencies, %d answers, %d results, %d messages, %d tasks; want 1, 1, 1, 1, 2",
			len(want.Dependencies), len(want.Answers), len(want.Results), len(want.Messages), len(want.Tasks))
	}
	if d := diff(got, want, fx.opts()); d != "" {
		t.Errorf("ListDue differs from the List methods (-got +want):\n%s", d)
	}
	if len(got.Dependencies) == 1 && !bytes.Equal(got.Dependencies[0].Value, value) {
		t.Errorf("ListDue dependency value %x; want %x", got.Dependencies[0].Value, value)
	}
	if len(got.Answers) == 1 && got.Answers[0].ID != q1.ID {
		t.Errorf("ListDue answer %s; want %s", got.Answers[0].ID, q1.ID)
	}
	if len(got.Tasks) == 2 && (got.Tasks[0].ID != t1.ID || got.Tasks[0].Status != office.InvocationInProgress) {
		t.Errorf("ListDue tasks[0] = %s %s; want %s in_progress, oldest first", got.Tasks[0].ID, got.Tasks[0].Status, t1.ID)
	}
	other, err := s.ListDue(ctx, fx.mkOffice(t, "Other").ID, fx.a.ID)
	if err != nil || len(other.Answers)+len(other.Tasks)+len(other.Dependencies)+len(other.Messages)+len(other.Results) != 0 {
		t.Errorf("ListDue(another office, a) = %+v, %v; want nothing", other, err)
	}
}

// testSetSessionStatus: one change of a session row in one write, with
// its event; the session layer's report keeps a row waiting while the
// agent waits for a person; the office's view does not overwrite the
// session layer's own word; what the change does not name is kept.
func testSetSessionStatus(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	set := func(c office.SessionStatus) (office.SessionRecord, office.Event, bool) {
		t.Helper()
		c.OfficeID, c.AgentID = fx.office.ID, fx.a.ID
		rec, ev, ok, err := s.SetSessionStatus(ctx, c)
		if err != nil {
			t.Fatalf("SetSessionStatus(%+v): %v", c, err)
		}
		return rec, ev, ok
	}
	// The office's view on an agent without a row: the row is made.
	rec, ev, ok := set(office.SessionStatus{Status: office.SessionBusy})
	if !ok || rec.Status != office.SessionBusy || rec.AgentID != fx.a.ID || rec.ID == "" || ev.ID != 0 {
		t.Fatalf("office busy, no row = %+v, event %+v, ok %v; want a busy row and no event", rec, ev, ok)
	}
	// A conversation alone: the status is kept, the first one holds.
	if rec, _, ok = set(office.SessionStatus{AgentSessionID: "conv-1", Node: "node-1"}); !ok || rec.Status != office.SessionBusy ||
		rec.AgentSessionID != "conv-1" || rec.Node != "node-1" {
		t.Errorf("conversation conv-1 on node-1 = %+v, ok %v; want busy kept, conv-1, node-1", rec, ok)
	}
	if rec, _, ok = set(office.SessionStatus{AgentSessionID: "conv-2"}); !ok || rec.AgentSessionID != "conv-1" || rec.Node != "node-1" {
		t.Errorf("conversation conv-2 after conv-1 = %+v, ok %v; want conv-1 kept (the first holds), node kept", rec, ok)
	}
	// Kept: what the change does not name (node, conversation).
	started := now().Add(-time.Second)
	payload := []byte(`{"pid": 41, "exit_code": null}`)
	rec, ev, ok = set(office.SessionStatus{Status: office.SessionStarting, Process: true, PID: 41, StartedAt: &started,
		EventKind: "session.starting", EventPayload: payload})
	if !ok || rec.Status != office.SessionStarting || rec.PID != 41 || rec.StartedAt == nil || !rec.StartedAt.Equal(started) ||
		rec.Node != "node-1" || rec.AgentSessionID != "conv-1" {
		t.Errorf("process starting = %+v, ok %v; want starting, pid 41, started_at %v, node and conversation kept", rec, ok, started)
	}
	if ev.ID == 0 || ev.Kind != "session.starting" || ev.AgentID != fx.a.ID || ev.OfficeID != fx.office.ID {
		t.Errorf("event with the change = %+v; want session.starting of the agent", ev)
	}
	var p, wantP any
	_ = json.Unmarshal(ev.Payload, &p)
	_ = json.Unmarshal(payload, &wantP)
	if d := diff(p, wantP, nil); d != "" {
		t.Errorf("event payload (-got +want):\n%s", d)
	}
	evs, err := s.ListEvents(ctx, office.EventFilter{OfficeID: fx.office.ID, AgentID: fx.a.ID})
	if err != nil || len(evs) != 1 || evs[0].ID != ev.ID {
		t.Errorf("ListEvents after the change = %+v, %v; want the one event %d", evs, err, ev.ID)
	}
	// Waiting for a person: ready and busy from the process keep it
	// waiting (with the new pid and detail) until the question is answered.
	q := fx.question(t)
	if rec, _, ok = set(office.SessionStatus{Status: office.SessionWaiting}); !ok || rec.Status != office.SessionWaiting {
		t.Fatalf("office waiting = %+v, ok %v", rec, ok)
	}
	rec, _, _ = set(office.SessionStatus{Status: office.SessionReady, Process: true, PID: 42, Detail: "d"})
	if rec.Status != office.SessionWaiting || rec.PID != 42 || rec.Detail != "d" || rec.StartedAt == nil || !rec.StartedAt.Equal(started) {
		t.Errorf("process ready while a question is pending = %+v; want waiting, pid 42, detail d, started_at kept", rec)
	}
	if _, ok, err := s.AnswerQuestion(ctx, q.ID, "Postgres", ""); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if rec, _, _ = set(office.SessionStatus{Status: office.SessionReady, Process: true, PID: 42}); rec.Status != office.SessionReady || rec.Detail != "" {
		t.Errorf("process ready after the answer = %+v; want ready, detail cleared", rec)
	}
	checkStickyStatuses(t, fx, set)
	_, _, _, err = s.SetSessionStatus(ctx, office.SessionStatus{OfficeID: fx.office.ID, AgentID: fx.a.ID})
	wantCode(t, "SetSessionStatus without a status", err, office.EINVALID)
}

// checkStickyStatuses: the session layer's own word (crashed, hibernated)
// stays against the office's view of the work, whose event is appended.
func checkStickyStatuses(t *testing.T, fx *fixture, set func(office.SessionStatus) (office.SessionRecord, office.Event, bool)) {
	t.Helper()
	// The session layer's own word stays.
	set(office.SessionStatus{Status: office.SessionCrashed, Process: true, ExitCode: ptr(2), Detail: "boom"})
	_, ev, ok := set(office.SessionStatus{Status: office.SessionBusy, EventKind: "question.delivered"})
	if ok || ev.ID == 0 || ev.Kind != "question.delivered" {
		t.Errorf("office busy over crashed = ok %v, event %+v; want the row kept and the event appended", ok, ev)
	}
	got, err := fx.s.GetSessionByAgent(fx.ctx, fx.a.ID)
	if err != nil || got.Status != office.SessionCrashed || got.Detail != "boom" || got.ExitCode == nil || *got.ExitCode != 2 {
		t.Errorf("row after office busy over crashed = %+v, %v; want crashed, boom, exit 2", got, err)
	}
	// So does hibernated (an idle agent whose process was stopped).
	set(office.SessionStatus{Status: office.SessionHibernated, Process: true, Detail: "idle since then"})
	if _, _, ok = set(office.SessionStatus{Status: office.SessionWaiting}); ok {
		t.Error("office waiting over hibernated: written, want the row kept")
	}
	if got, err = fx.s.GetSessionByAgent(fx.ctx, fx.a.ID); err != nil || got.Status != office.SessionHibernated || got.Detail != "idle since then" {
		t.Errorf("row after office waiting over hibernated = %+v, %v; want hibernated, its detail", got, err)
	}
}

// testSessionConversation: a new agent's first conversation makes its row,
// starting, on the node named; a process report needs a status.
func testSessionConversation(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	c := office.SessionStatus{OfficeID: fx.office.ID, AgentID: fx.b.ID, AgentSessionID: "conv-b", Node: "node-2"}
	if rec, _, ok, err := s.SetSessionStatus(ctx, c); err != nil || !ok || rec.Status != office.SessionStarting ||
		rec.AgentSessionID != "conv-b" || rec.Node != "node-2" {
		t.Errorf("first conversation of b = %+v, ok %v, %v; want a starting row with conv-b on node-2", rec, ok, err)
	}
	_, _, _, err := s.SetSessionStatus(ctx, office.SessionStatus{OfficeID: fx.office.ID, AgentID: fx.b.ID, Process: true, AgentSessionID: "conv-3"})
	wantCode(t, "SetSessionStatus of a process without a status", err, office.EINVALID)
}

// testMarkDelivered: a typed row marked delivered with its event and the
// office's busy in one write, as the separate transitions mark it; once
// (racing callers: one wins, one event); only the agent's own row; the
// office's busy not over the session layer's own word.
func testMarkDelivered(t *testing.T, fx *fixture) {
	m := marker{t: t, fx: fx}
	q := testMarkAnswer(t, fx, m)
	testMarkResultAndTask(t, fx, m)
	_, _, _, err := fx.s.MarkDelivered(fx.ctx, office.Delivered{OfficeID: fx.office.ID, AgentID: fx.a.ID, Kind: "message", ID: q.ID})
	wantCode(t, "MarkDelivered of an unknown kind", err, office.EINVALID)
}

// marker marks rows delivered for testMarkDelivered, and counts events.
type marker struct {
	t  *testing.T
	fx *fixture
}

func (m marker) events(kind string) int {
	m.t.Helper()
	evs, err := m.fx.s.ListEvents(m.fx.ctx, office.EventFilter{OfficeID: m.fx.office.ID, Limit: 1000})
	if err != nil {
		m.t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func (m marker) mark(d office.Delivered) (time.Time, office.Event, bool) {
	m.t.Helper()
	if d.OfficeID == "" {
		d.OfficeID, d.AgentID = m.fx.office.ID, m.fx.a.ID
	}
	at, ev, ok, err := m.fx.s.MarkDelivered(m.fx.ctx, d)
	if err != nil {
		m.t.Fatalf("MarkDelivered(%+v): %v", d, err)
	}
	return at, ev, ok
}

// testMarkAnswer: an answer marked delivered with its event and the
// office's busy, once, by one of racing callers, not over crashed.
func testMarkAnswer(t *testing.T, fx *fixture, m marker) office.Question {
	s, ctx := fx.s, fx.ctx
	// An answer: delivered, its event, the office's busy.
	q := fx.answered(t)
	payload := []byte(`{"question_id": "` + q.ID + `"}`)
	if _, _, ok := m.mark(office.Delivered{AgentID: fx.b.ID, OfficeID: fx.office.ID, Kind: office.DeliveredQuestion, ID: q.ID, EventKind: "question.delivered"}); ok {
		t.Errorf("MarkDelivered of a's question typed into b = ok; want not marked")
	}
	at, ev, ok := m.mark(office.Delivered{Kind: office.DeliveredQuestion, ID: q.ID, EventKind: "question.delivered", EventPayload: payload, Busy: true})
	if !ok || ev.ID == 0 || ev.Kind != "question.delivered" || ev.AgentID != fx.a.ID {
		t.Fatalf("MarkDelivered(answer) = ok %v, event %+v; want marked with question.delivered", ok, ev)
	}
	var p, wantP any
	_ = json.Unmarshal(ev.Payload, &p)
	_ = json.Unmarshal(payload, &wantP)
	if d := diff(p, wantP, nil); d != "" {
		t.Errorf("event payload (-got +want):\n%s", d)
	}
	fx.near(t, "MarkDelivered(answer) at", at, now())
	got, err := s.GetQuestion(ctx, q.ID)
	if err != nil || got.Status != office.QuestionDelivered || got.DeliveredAt == nil || !got.DeliveredAt.Equal(at) {
		t.Errorf("question after MarkDelivered = %+v, %v; want delivered at %v", got, err, at)
	}
	if rec, err := s.GetSessionByAgent(ctx, fx.a.ID); err != nil || rec.Status != office.SessionBusy {
		t.Errorf("session after MarkDelivered with Busy = %+v, %v; want busy", rec, err)
	}
	if _, _, ok := m.mark(office.Delivered{Kind: office.DeliveredQuestion, ID: q.ID, EventKind: "question.delivered", Busy: true}); ok || m.events("question.delivered") != 1 {
		t.Errorf("MarkDelivered(answer) again = ok %v, %d events; want not marked, one event", ok, m.events("question.delivered"))
	}
	// Racing callers: one wins, one event.
	q2 := fx.answered(t)
	wins := race(t, "MarkDelivered(answer)", func(int) (bool, error) {
		_, _, ok, err := s.MarkDelivered(ctx, office.Delivered{OfficeID: fx.office.ID, AgentID: fx.a.ID, Kind: office.DeliveredQuestion, ID: q2.ID, EventKind: "question.delivered", Busy: true})
		return ok, err
	})
	wantOneWinner(t, "MarkDelivered(answer)", wins)
	if n := m.events("question.delivered"); n != 2 {
		t.Errorf("%d question.delivered events after the race; want 2 (one per question)", n)
	}
	// The office's busy does not overwrite the session layer's own word.
	if _, _, _, err := s.SetSessionStatus(ctx, office.SessionStatus{OfficeID: fx.office.ID, AgentID: fx.a.ID, Status: office.SessionCrashed, Process: true}); err != nil {
		t.Fatal(err)
	}
	q3 := fx.answered(t)
	if _, _, ok := m.mark(office.Delivered{Kind: office.DeliveredQuestion, ID: q3.ID, EventKind: "question.delivered", Busy: true}); !ok {
		t.Errorf("MarkDelivered(answer) to a crashed session = not marked; want marked")
	}
	if rec, err := s.GetSessionByAgent(ctx, fx.a.ID); err != nil || rec.Status != office.SessionCrashed {
		t.Errorf("session after the office's busy over crashed = %+v, %v; want crashed", rec, err)
	}

	return q
}

// testMarkResultAndTask: a result delivered and a task started, each with
// its event, once, only the agent's own.
func testMarkResultAndTask(t *testing.T, fx *fixture, m marker) {
	s, ctx := fx.s, fx.ctx
	// A result: delivered, its event, no session change.
	r, err := s.CreateResult(ctx, office.Result{OfficeID: fx.office.ID, FromAgentID: fx.b.ID, ToAgentID: fx.a.ID, ResultType: "message", ContentType: "text/plain", Content: "done"})
	if err != nil {
		t.Fatal(err)
	}
	at, ev, ok := m.mark(office.Delivered{Kind: office.DeliveredResult, ID: r.ID, EventKind: "result.delivered"})
	if !ok || ev.Kind != "result.delivered" || ev.Payload != nil {
		t.Errorf("MarkDelivered(result) = ok %v, event %+v; want marked with result.delivered, no payload", ok, ev)
	}
	if rs, err := s.ListResults(ctx, office.ResultFilter{OfficeID: fx.office.ID, ToAgentID: fx.a.ID}); err != nil || len(rs) != 1 ||
		rs[0].Status != office.ResultDelivered || rs[0].DeliveredAt == nil || !rs[0].DeliveredAt.Equal(at) {
		t.Errorf("results after MarkDelivered = %+v, %v; want the one delivered at %v", rs, err, at)
	}
	if _, _, ok := m.mark(office.Delivered{Kind: office.DeliveredResult, ID: r.ID, EventKind: "result.delivered"}); ok || m.events("result.delivered") != 1 {
		t.Errorf("MarkDelivered(result) again = ok %v; want not marked, one event", ok)
	}

	// A task: pending → in_progress, started_at, its event; b's task is
	// not a's to start.
	inv, err := s.CreateInvocation(ctx, office.Invocation{OfficeID: fx.office.ID, CallerAgentID: fx.b.ID, CalleeAgentID: fx.a.ID, Reason: "task"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := m.mark(office.Delivered{AgentID: fx.b.ID, OfficeID: fx.office.ID, Kind: office.DeliveredTask, ID: inv.ID}); ok {
		t.Errorf("MarkDelivered of a's task typed into b = ok; want not marked")
	}
	at, ev, ok = m.mark(office.Delivered{Kind: office.DeliveredTask, ID: inv.ID, EventKind: "invocation.in_progress"})
	if !ok || ev.Kind != "invocation.in_progress" {
		t.Errorf("MarkDelivered(task) = ok %v, event %+v; want started with invocation.in_progress", ok, ev)
	}
	if got, err := s.GetInvocation(ctx, inv.ID); err != nil || got.Status != office.InvocationInProgress || got.StartedAt == nil || !got.StartedAt.Equal(at) {
		t.Errorf("task after MarkDelivered = %+v, %v; want in_progress, started at %v", got, err, at)
	}
	if _, _, ok := m.mark(office.Delivered{Kind: office.DeliveredTask, ID: inv.ID, EventKind: "invocation.in_progress"}); ok || m.events("invocation.in_progress") != 1 {
		t.Errorf("MarkDelivered(task) again = ok %v; want not marked, one event", ok)
	}
}

// testAskQuestion: a question asked in one write with its session row's
// id, its office's TTL (or the one given), the office's waiting and its
// event; asked again (the same id), nothing is written and the stored one
// comes back; the agent's other pending questions come with it.
func testAskQuestion(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	rec, _, _, err := s.SetSessionStatus(ctx, office.SessionStatus{OfficeID: fx.office.ID, AgentID: fx.a.ID, Status: office.SessionReady, Process: true, PID: 7})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(id, text string, ttl time.Duration) (office.Question, []office.Question, office.Event, bool) {
		t.Helper()
		q, pending, evs, created, err := s.AskQuestion(ctx, office.Ask{
			Question: office.Question{ID: id, OfficeID: fx.office.ID, AgentID: fx.a.ID, QuestionType: office.QuestionSelection,
				Category: "scope", Question: text, Options: []string{"A", "B"}, Context: "ctx", Required: true},
			TTL: ttl, EventKind: "question.created", EventDedupeKey: "ask:" + id})
		if err != nil {
			t.Fatalf("AskQuestion(%s): %v", text, err)
		}
		if len(evs) > 1 {
			t.Fatalf("AskQuestion(%s) without a message appended %d events; want at most question.created", text, len(evs))
		}
		var ev office.Event
		if len(evs) == 1 {
			ev = evs[0]
		}
		return q, pending, ev, created
	}
	id1 := uuid.NewString()
	q1, pending, ev, created := ask(id1, "Which?", time.Hour) // the office's 5 minutes stand
	if !created || q1.ID != id1 || q1.Status != office.QuestionPending || q1.SessionID != rec.ID || q1.Question != "Which?" ||
		q1.QuestionType != office.QuestionSelection || q1.Category != "scope" || q1.Context != "ctx" || !q1.Required ||
		len(q1.Options) != 2 || q1.Options[1] != "B" || len(pending) != 0 {
		t.Fatalf("AskQuestion = %+v, pending %v, created %v; want a pending question with the session's id %s, none pending before", q1, pending, created, rec.ID)
	}
	fx.near(t, "AskQuestion expires_at", q1.ExpiresAt, now().Add(5*time.Minute))
	if got, err := s.GetQuestion(ctx, id1); err != nil || !got.ExpiresAt.Equal(q1.ExpiresAt) || got.SessionID != rec.ID {
		t.Errorf("stored question = %+v, %v; want it as returned", got, err)
	}
	checkAskEvent(t, ev, q1, fx.a.ID)
	if got, err := s.GetSessionByAgent(ctx, fx.a.ID); err != nil || got.Status != office.SessionWaiting || got.PID != 7 {
		t.Errorf("session after AskQuestion = %+v, %v; want waiting, pid kept", got, err)
	}
	// A second question: the first is pending before it.
	id2 := uuid.NewString()
	_, pending, _, created = ask(id2, "And?", time.Hour)
	if !created || len(pending) != 1 || pending[0].ID != id1 {
		t.Errorf("second AskQuestion pending = %+v, created %v; want the first", pending, created)
	}
	// Asked again: nothing written, the stored question back.
	again, pending, ev, created := ask(id1, "Which, again?", time.Hour)
	if created || again.ID != id1 || again.Question != "Which?" || !again.CreatedAt.Equal(q1.CreatedAt) || ev.ID != 0 || len(pending) != 1 || pending[0].ID != id2 {
		t.Errorf("AskQuestion again = %+v, pending %+v, event %+v, created %v; want the stored one, the other pending, no event", again, pending, ev, created)
	}
	evs, err := s.ListEvents(ctx, office.EventFilter{OfficeID: fx.office.ID, Limit: 1000})
	if err != nil || len(evs) != 2 {
		t.Errorf("events after three asks = %d, %v; want 2", len(evs), err)
	}
	// The office's waiting is not written over the session layer's word;
	// an office without a TTL takes the one given.
	if _, _, _, err := s.SetSessionStatus(ctx, office.SessionStatus{OfficeID: fx.office.ID, AgentID: fx.a.ID, Status: office.SessionCrashed, Process: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertOffice(ctx, office.Office{ID: fx.office.ID, Name: fx.office.Name}); err != nil {
		t.Fatal(err)
	}
	q3, _, _, _ := ask(uuid.NewString(), "Now?", 2*time.Hour)
	fx.near(t, "AskQuestion expires_at without the office's TTL", q3.ExpiresAt, now().Add(2*time.Hour))
	if got, err := s.GetSessionByAgent(ctx, fx.a.ID); err != nil || got.Status != office.SessionCrashed {
		t.Errorf("session after AskQuestion over crashed = %+v, %v; want crashed", got, err)
	}
	// Asked at a time of the office's clock: it expires by that clock.
	at := now().Add(time.Hour)
	q4, _, _, _, err := s.AskQuestion(ctx, office.Ask{Question: office.Question{ID: uuid.NewString(), OfficeID: fx.office.ID, AgentID: fx.a.ID,
		Question: "Later?"}, TTL: time.Minute, At: at})
	if err != nil || !q4.ExpiresAt.Equal(at.Add(time.Minute)) || q4.QuestionType != office.QuestionText {
		t.Errorf("AskQuestion at %v = %+v, %v; want a text question expiring at %v", at, q4, err, at.Add(time.Minute))
	}
	_, _, _, _, err = s.AskQuestion(ctx, office.Ask{Question: office.Question{ID: uuid.NewString(), OfficeID: fx.office.ID, AgentID: fx.a.ID}, TTL: time.Hour})
	wantCode(t, "AskQuestion without its text", err, office.EINVALID)
}

// checkAskEvent: the question.created event of question q (asked as
// "Which?", a selection of two options) with its dedupe key and payload.
func checkAskEvent(t *testing.T, ev office.Event, q office.Question, agentID string) {
	t.Helper()
	if ev.ID == 0 || ev.Kind != "question.created" || ev.DedupeKey != "ask:"+q.ID || ev.AgentID != agentID {
		t.Errorf("AskQuestion event = %+v; want question.created with its dedupe key", ev)
	}
	var p struct {
		QuestionID string    `json:"question_id"`
		Question   string    `json:"question"`
		Type       string    `json:"type"`
		Options    []string  `json:"options"`
		ExpiresAt  time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal(ev.Payload, &p); err != nil || p.QuestionID != q.ID || p.Question != "Which?" || p.Type != office.QuestionSelection ||
		len(p.Options) != 2 || !p.ExpiresAt.Equal(q.ExpiresAt) {
		t.Errorf("AskQuestion event payload %s (%v); want the question's id, text, type, options and expiry", ev.Payload, err)
	}
}

// testDeliverResult: a result delivered in one write with the task it
// answers (the oldest open one from its recipient to its sender)
// completed, their events, and whether the sender has a task waiting; a
// result stored before (a message handled again) is not written twice,
// but its task is completed and its events appended if they were not.
func testDeliverResult(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	task := func(caller, callee office.Agent, reason string) office.Invocation {
		t.Helper()
		inv, err := s.CreateInvocation(ctx, office.Invocation{OfficeID: fx.office.ID, CallerAgentID: caller.ID, CalleeAgentID: callee.ID, Reason: reason})
		if err != nil {
			t.Fatal(err)
		}
		return inv
	}
	deliver := func(id string, from, to office.Agent, content string) office.ResultStored {
		t.Helper()
		out, err := s.DeliverResult(ctx, office.ResultDelivery{
			Result: office.Result{ID: id, OfficeID: fx.office.ID, FromAgentID: from.ID, ToAgentID: to.ID, ResultType: "markdown", ContentType: "text/markdown", Content: content},
			ToName: to.Name, EventKind: "result.created", EventDedupeKey: "res:" + id, CompletedEventKind: "invocation.completed", CompletedDedupeKey: "done:" + id})
		if err != nil {
			t.Fatalf("DeliverResult(%s): %v", content, err)
		}
		return out
	}
	payload := func(ev office.Event) map[string]string {
		var m map[string]string
		_ = json.Unmarshal(ev.Payload, &m)
		return m
	}
	first := task(fx.b, fx.a, "first")
	if _, ok, err := s.TransitionInvocation(ctx, first.ID, []string{office.InvocationPending}, office.InvocationInProgress, office.InvocationPatch{}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	second := task(fx.b, fx.a, "second")
	id := uuid.NewString()
	out := deliver(id, fx.a, fx.b, "done")
	r := out.Result
	if !out.Created || !out.Completed || !out.NextTask || r.ID != id || r.InvocationID != first.ID || r.Status != office.ResultPending ||
		r.ResultType != "markdown" || r.ContentType != "text/markdown" || r.Content != "done" || r.FromAgentID != fx.a.ID || r.ToAgentID != fx.b.ID {
		t.Fatalf("DeliverResult = %+v; want a pending result for the first task, completed, the second waiting", out)
	}
	if len(out.Events) != 2 || out.Events[0].Kind != "invocation.completed" || out.Events[1].Kind != "result.created" ||
		out.Events[0].DedupeKey != "done:"+id || out.Events[1].DedupeKey != "res:"+id || out.Events[0].AgentID != fx.a.ID {
		t.Fatalf("DeliverResult events = %+v; want invocation.completed then result.created, the sender's, with their keys", out.Events)
	}
	if p := payload(out.Events[0]); p["invocation_id"] != first.ID || p["result_id"] != id {
		t.Errorf("invocation.completed payload %s", out.Events[0].Payload)
	}
	if p := payload(out.Events[1]); p["result_id"] != id || p["to"] != fx.b.Name || p["invocation_id"] != first.ID || p["type"] != "markdown" {
		t.Errorf("result.created payload %s", out.Events[1].Payload)
	}
	if inv, err := s.GetInvocation(ctx, first.ID); err != nil || inv.Status != office.InvocationCompleted || inv.ResultID != id || inv.CompletedAt == nil {
		t.Errorf("first task after DeliverResult = %+v, %v; want completed with the result", inv, err)
	}
	// Handled again: nothing twice.
	again := deliver(id, fx.a, fx.b, "done, again")
	if again.Created || again.Completed || len(again.Events) != 0 || again.Result.Content != "done" || !again.Result.CreatedAt.Equal(r.CreatedAt) {
		t.Errorf("DeliverResult again = %+v; want the stored result, nothing completed or appended", again)
	}
	// Stored before its task was completed (a stop in between): completed now.
	id2 := uuid.NewString()
	if _, err := s.CreateResult(ctx, office.Result{ID: id2, OfficeID: fx.office.ID, InvocationID: second.ID, FromAgentID: fx.a.ID, ToAgentID: fx.b.ID,
		ResultType: "message", ContentType: "text/plain", Content: "second"}); err != nil {
		t.Fatal(err)
	}
	out = deliver(id2, fx.a, fx.b, "second")
	if out.Created || !out.Completed || out.NextTask || len(out.Events) != 2 || out.Result.InvocationID != second.ID {
		t.Errorf("DeliverResult of a result stored before = %+v; want its task completed and both events, nothing waiting", out)
	}
	// No task from the recipient: no invocation.
	out = deliver(uuid.NewString(), fx.b, fx.a, "fyi")
	if !out.Created || out.Completed || out.Result.InvocationID != "" || len(out.Events) != 1 || payload(out.Events[0])["invocation_id"] != "" {
		t.Errorf("DeliverResult without a task = %+v; want a result of no invocation, one event", out)
	}
	_, err := s.DeliverResult(ctx, office.ResultDelivery{Result: office.Result{ID: uuid.NewString(), OfficeID: fx.office.ID, FromAgentID: fx.a.ID}})
	wantCode(t, "DeliverResult without a recipient", err, office.EINVALID)
}

// testInvoke: a task stored with its event in one write; given again (the
// same id), nothing is written and the stored one comes back.
func testInvoke(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	parent, err := s.CreateInvocation(ctx, office.Invocation{OfficeID: fx.office.ID, CallerAgentID: fx.b.ID, CalleeAgentID: fx.a.ID, Reason: "parent"})
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	give := func(reason string) (office.Invocation, office.Event, bool) {
		t.Helper()
		inv, evs, created, err := s.Invoke(ctx, office.Invoke{
			Invocation: office.Invocation{ID: id, OfficeID: fx.office.ID, CallerAgentID: fx.a.ID, CalleeAgentID: fx.b.ID,
				ParentInvocationID: parent.ID, Depth: 2, Reason: reason, Context: "ctx"},
			EventKind: "invocation.created", EventPayload: []byte(`{"invocation_id": "` + id + `", "depth": 2}`), EventDedupeKey: "inv:" + id})
		if err != nil {
			t.Fatalf("Invoke(%s): %v", reason, err)
		}
		if len(evs) > 1 {
			t.Fatalf("Invoke(%s) without a message appended %d events; want at most invocation.created", reason, len(evs))
		}
		var ev office.Event
		if len(evs) == 1 {
			ev = evs[0]
		}
		return inv, ev, created
	}
	inv, ev, created := give("build it")
	if !created || inv.ID != id || inv.Status != office.InvocationPending || inv.CallerAgentID != fx.a.ID || inv.CalleeAgentID != fx.b.ID ||
		inv.ParentInvocationID != parent.ID || inv.Depth != 2 || inv.Reason != "build it" || inv.Context != "ctx" || inv.StartedAt != nil {
		t.Fatalf("Invoke = %+v, created %v; want a pending task as given", inv, created)
	}
	if got, err := s.GetInvocation(ctx, id); err != nil || got.Reason != "build it" || !got.CreatedAt.Equal(inv.CreatedAt) {
		t.Errorf("stored task = %+v, %v; want it as returned", got, err)
	}
	var p map[string]any
	if ev.ID == 0 || ev.Kind != "invocation.created" || ev.AgentID != fx.a.ID || ev.DedupeKey != "inv:"+id ||
		json.Unmarshal(ev.Payload, &p) != nil || p["invocation_id"] != id {
		t.Errorf("Invoke event = %+v; want invocation.created, the caller's, with its key and payload", ev)
	}
	again, ev, created := give("build it again")
	if created || again.Reason != "build it" || ev.ID != 0 {
		t.Errorf("Invoke again = %+v, event %+v, created %v; want the stored task, no event", again, ev, created)
	}
	if evs, err := s.ListEvents(ctx, office.EventFilter{OfficeID: fx.office.ID}); err != nil || len(evs) != 1 {
		t.Errorf("events after two Invokes = %d, %v; want 1", len(evs), err)
	}
	_, _, _, err = s.Invoke(ctx, office.Invoke{Invocation: office.Invocation{ID: uuid.NewString(), OfficeID: fx.office.ID, CallerAgentID: fx.a.ID, CalleeAgentID: fx.b.ID}})
	wantCode(t, "Invoke without a reason", err, office.EINVALID)
}

// testMessageEvents: AskQuestion, Invoke and DeliverResult append the
// agent's message that makes them (Message: its payload, raw text and
// dedupe key, as the sender's event) first, in the same write, whether
// or not the row is new; a message stored before is kept, and the rows
// are written as without it; a message handled again appends nothing.
func testMessageEvents(t *testing.T, fx *fixture) {
	stored := messageEventsAsk(t, fx)
	messageEventsWork(t, fx)
	// Each message once in the log, and the one stored before as it was.
	all, err := fx.s.ListEvents(fx.ctx, office.EventFilter{OfficeID: fx.office.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, ev := range all {
		n[ev.DedupeKey]++
		if ev.ID == stored.ID && ev.Raw != "" {
			t.Errorf("the message stored before was changed: %+v", ev)
		}
	}
	for _, key := range []string{"entry-1#0", "entry-2#0", "entry-3#0", "entry-4#0"} {
		if n[key] != 1 {
			t.Errorf("%d events with key %s; want 1", n[key], key)
		}
	}
	_, _, _, _, err = fx.s.AskQuestion(fx.ctx, office.Ask{Question: office.Question{ID: uuid.NewString(), OfficeID: fx.office.ID, AgentID: fx.a.ID,
		Question: "Bad?"}, TTL: time.Hour, Message: office.Event{Kind: "message.ask_user", Payload: []byte("{not json")}})
	wantCode(t, "AskQuestion with a message whose payload is not JSON", err, office.EINVALID)
}

// messageEvent is the message event of a block of kind, with its key.
func messageEvent(kind, key string) office.Event {
	return office.Event{Kind: kind, Payload: []byte(`{"kind": "` + kind + `", "line": 3}`), Raw: "[" + kind + "]\nraw text", DedupeKey: key}
}

// checkEventKinds fails unless evs are of kinds, in order, each stored
// (an id) and the agent's.
func checkEventKinds(t *testing.T, what string, evs []office.Event, agentID string, kinds ...string) {
	t.Helper()
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Kind)
	}
	if len(got) != len(kinds) {
		t.Fatalf("%s appended %v; want %v", what, got, kinds)
	}
	for i := range kinds {
		if got[i] != kinds[i] || evs[i].ID == 0 || evs[i].AgentID != agentID {
			t.Fatalf("%s appended %+v; want %v, the sender's", what, evs, kinds)
		}
	}
}

// checkMessageEvent fails unless ev, as returned and as stored, is want.
func checkMessageEvent(t *testing.T, fx *fixture, what string, ev office.Event, want office.Event) {
	t.Helper()
	if ev.Kind != want.Kind || ev.DedupeKey != want.DedupeKey || ev.Raw != want.Raw || !jsonEqual(ev.Payload, want.Payload) || ev.OfficeID != fx.office.ID {
		t.Errorf("%s message event = %+v; want kind, payload, raw and key as given: %+v", what, ev, want)
	}
	stored, err := fx.s.ListEvents(fx.ctx, office.EventFilter{OfficeID: fx.office.ID, AfterID: ev.ID - 1, Limit: 1})
	if err != nil || len(stored) != 1 || stored[0].Raw != want.Raw || stored[0].DedupeKey != want.DedupeKey {
		t.Errorf("%s message event as stored = %+v, %v; want its raw text and key", what, stored, err)
	}
}

// messageEventsAsk: a question with its message event, once; a message
// stored before is kept and the row written. It returns that message.
func messageEventsAsk(t *testing.T, fx *fixture) office.Event {
	s, ctx := fx.s, fx.ctx
	qm := messageEvent("message.ask_user", "entry-1#0")
	qid := uuid.NewString()
	askWith := func(m office.Event) (office.Question, []office.Event, bool) {
		t.Helper()
		q, _, evs, created, err := s.AskQuestion(ctx, office.Ask{Question: office.Question{ID: qid, OfficeID: fx.office.ID, AgentID: fx.a.ID,
			Question: "Which?"}, TTL: time.Hour, EventKind: "question.created", EventDedupeKey: "entry-1#0#question/", Message: m})
		if err != nil {
			t.Fatalf("AskQuestion with its message: %v", err)
		}
		return q, evs, created
	}
	q, evs, created := askWith(qm)
	if !created || q.ID != qid {
		t.Fatalf("AskQuestion with its message = %+v, created %v; want the question", q, created)
	}
	checkEventKinds(t, "AskQuestion", evs, fx.a.ID, "message.ask_user", "question.created")
	checkMessageEvent(t, fx, "AskQuestion", evs[0], qm)
	if evs[0].ID >= evs[1].ID {
		t.Errorf("AskQuestion events %d, %d; want the message's first", evs[0].ID, evs[1].ID)
	}
	if _, evs, created = askWith(qm); created || len(evs) != 0 {
		t.Errorf("AskQuestion with its message again = created %v, %d events; want neither", created, len(evs))
	}
	stored, _, err := s.AppendEvent(ctx, office.Event{OfficeID: fx.office.ID, AgentID: fx.a.ID, Kind: "message.ask_user", DedupeKey: "entry-2#0"})
	if err != nil {
		t.Fatal(err)
	}
	qid = uuid.NewString()
	if q, evs, created = askWith(messageEvent("message.ask_user", "entry-2#0")); !created || len(evs) != 0 || q.ID != qid {
		// the question.created key of askWith is the first question's: appended before too
		t.Errorf("AskQuestion with a message stored before = %+v, %d events, created %v; want the question, no event", q, len(evs), created)
	}
	return stored
}

// messageEventsWork: a task and its result, each with its message event,
// once.
func messageEventsWork(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	im := messageEvent("message.invoke", "entry-3#0")
	iid := uuid.NewString()
	invokeWith := func(m office.Event) ([]office.Event, bool) {
		t.Helper()
		_, evs, created, err := s.Invoke(ctx, office.Invoke{Invocation: office.Invocation{ID: iid, OfficeID: fx.office.ID, CallerAgentID: fx.a.ID,
			CalleeAgentID: fx.b.ID, Reason: "build it"}, EventKind: "invocation.created", EventPayload: []byte(`{}`), EventDedupeKey: "entry-3#0#invocation", Message: m})
		if err != nil {
			t.Fatalf("Invoke with its message: %v", err)
		}
		return evs, created
	}
	evs, created := invokeWith(im)
	if !created {
		t.Fatal("Invoke with its message created nothing")
	}
	checkEventKinds(t, "Invoke", evs, fx.a.ID, "message.invoke", "invocation.created")
	checkMessageEvent(t, fx, "Invoke", evs[0], im)
	if evs, created = invokeWith(im); created || len(evs) != 0 {
		t.Errorf("Invoke with its message again = created %v, %d events; want neither", created, len(evs))
	}
	// A result for that task: the message, the task completed, the result.
	rm := messageEvent("message.deliver_result", "entry-4#0")
	rid := uuid.NewString()
	deliverWith := func(m office.Event) office.ResultStored {
		t.Helper()
		out, err := s.DeliverResult(ctx, office.ResultDelivery{Result: office.Result{ID: rid, OfficeID: fx.office.ID, FromAgentID: fx.b.ID,
			ToAgentID: fx.a.ID, Content: "done"}, ToName: fx.a.Name, EventKind: "result.created", EventDedupeKey: "entry-4#0#result",
			CompletedEventKind: "invocation.completed", CompletedDedupeKey: "entry-4#0#completed", Message: m})
		if err != nil {
			t.Fatalf("DeliverResult with its message: %v", err)
		}
		return out
	}
	out := deliverWith(rm)
	if !out.Created || !out.Completed || out.Result.InvocationID != iid {
		t.Fatalf("DeliverResult with its message = %+v; want the result, its task completed", out)
	}
	checkEventKinds(t, "DeliverResult", out.Events, fx.b.ID, "message.deliver_result", "invocation.completed", "result.created")
	checkMessageEvent(t, fx, "DeliverResult", out.Events[0], rm)
	if out = deliverWith(rm); out.Created || len(out.Events) != 0 {
		t.Errorf("DeliverResult with its message again = %+v; want nothing appended", out)
	}
}

// testListDueTyping: ListDueTyping reads as ListDue and appends the typing
// marker of the row a delivery round types first (office.TypingFirst),
// once: a second read finds the marker stored first; ListDue appends
// nothing.
// typingReads calls ListDueTyping as of at and checks the typing marker
// it writes: each row's first typing stands (firstAt).
type typingReads struct {
	t       *testing.T
	fx      *fixture
	at      time.Time
	firstAt map[string]time.Time
}

// read checks that ListDueTyping marks want (none: "") and whether it
// inserted the marker now.
func (tr *typingReads) read(what, want string, inserted bool) office.DueWork {
	t, fx, at := tr.t, tr.fx, tr.at
	t.Helper()
	w, err := fx.s.ListDueTyping(fx.ctx, fx.office.ID, fx.a.ID, at)
	if err != nil {
		t.Fatalf("ListDueTyping (%s): %v", what, err)
	}
	if w.Typing.Row != want || (want != "" && w.Typing.Inserted != inserted) {
		t.Fatalf("ListDueTyping (%s) marked %q (inserted %v); want %q (inserted %v)", what, w.Typing.Row, w.Typing.Inserted, want, inserted)
	}
	if want == "" {
		return w
	}
	ev := w.Typing.Event
	var p struct {
		Row string    `json:"row"`
		At  time.Time `json:"at"`
	}
	if ev.ID == 0 || ev.Kind != office.EventTyping || ev.DedupeKey != office.TypingKey(want) || ev.AgentID != fx.a.ID ||
		json.Unmarshal(ev.Payload, &p) != nil || p.Row != want {
		t.Fatalf("ListDueTyping (%s) marker = %+v; want %s of %s with its key and row", what, ev, office.EventTyping, want)
	}
	if inserted {
		tr.firstAt[want] = at
	}
	if !p.At.Equal(tr.firstAt[want]) {
		t.Errorf("ListDueTyping (%s) marker at %v; want %v (the first typing's)", what, p.At, tr.firstAt[want])
	}
	return w
}

func testListDueTyping(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	tr := &typingReads{t: t, fx: fx, at: now().Add(-time.Minute), firstAt: map[string]time.Time{}}
	read := tr.read
	read("nothing due", "", false)
	// Tasks: the oldest pending one, unless one is in progress.
	t1, err := s.CreateInvocation(ctx, office.Invocation{OfficeID: fx.office.ID, CallerAgentID: fx.b.ID, CalleeAgentID: fx.a.ID, Reason: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateInvocation(ctx, office.Invocation{OfficeID: fx.office.ID, CallerAgentID: fx.b.ID, CalleeAgentID: fx.a.ID, Reason: "second"}); err != nil {
		t.Fatal(err)
	}
	w := read("two tasks", office.TypingRow("task", t1.ID), true)
	first := w.Typing.Event
	tr.at = tr.at.Add(time.Second) // a later typing of the same row: the first one's marker stands
	if w = read("two tasks again", office.TypingRow("task", t1.ID), false); w.Typing.Event.ID != first.ID {
		t.Errorf("ListDueTyping again returned marker %d; want the first, %d", w.Typing.Event.ID, first.ID)
	}
	if _, ok, err := s.TransitionInvocation(ctx, t1.ID, []string{office.InvocationPending}, office.InvocationInProgress, office.InvocationPatch{}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	read("a task in progress", "", false)
	// A person's message comes before the tasks, a result before it, an answer first.
	m, err := s.CreateUserMessage(ctx, office.UserMessage{OfficeID: fx.office.ID, AgentID: fx.a.ID, Content: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	read("a message", office.TypingRow("message", m.ID), true)
	r, err := s.CreateResult(ctx, office.Result{OfficeID: fx.office.ID, FromAgentID: fx.b.ID, ToAgentID: fx.a.ID, ResultType: "message", ContentType: "text/plain", Content: "fyi"})
	if err != nil {
		t.Fatal(err)
	}
	read("a result", office.TypingRow("result", r.ID), true)
	perm := fx.answered(t, func(q *office.Question) { q.Category = office.QuestionPermission })
	read("a permission answer first", "", false)
	if ok, err := s.MarkQuestionDelivered(ctx, perm.ID); err != nil || !ok {
		t.Fatal(ok, err)
	}
	q := fx.answered(t)
	read("an answer", office.TypingRow("question", q.ID), true)
	d := fx.dependency(t)
	if _, ok, err := s.RejectDependency(ctx, d.ID, "no"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	read("a dependency", "", false)
	listDueReadsOnly(t, fx, tr.at)
}

// listDueReadsOnly: ListDue appends nothing; a disabled agent is given no
// task (and no marker) by ListDueTyping.
func listDueReadsOnly(t *testing.T, fx *fixture, at time.Time) {
	s, ctx := fx.s, fx.ctx
	before, err := s.ListEvents(ctx, office.EventFilter{OfficeID: fx.office.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if w, err := s.ListDue(ctx, fx.office.ID, fx.a.ID); err != nil || w.Typing.Row != "" {
		t.Errorf("ListDue = typing %+v, %v; want none", w.Typing, err)
	}
	if after, err := s.ListEvents(ctx, office.EventFilter{OfficeID: fx.office.ID, Limit: 1000}); err != nil || len(after) != len(before) {
		t.Errorf("ListDue appended %d events (%v); want none", len(after)-len(before), err)
	}
	if _, err := s.CreateInvocation(ctx, office.Invocation{OfficeID: fx.office.ID, CallerAgentID: fx.a.ID, CalleeAgentID: fx.b.ID, Reason: "for b"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAgentStatus(ctx, fx.b.ID, office.AgentDisabled); err != nil {
		t.Fatal(err)
	}
	if w, err := s.ListDueTyping(ctx, fx.office.ID, fx.b.ID, at); err != nil || w.Typing.Row != "" || len(w.Tasks) != 1 {
		t.Errorf("ListDueTyping(a disabled agent) = typing %+v, %d tasks, %v; want no marker, its task", w.Typing, len(w.Tasks), err)
	}
}

// testListOpenWork: ListOpenWork returns what ListInvocations and
// ListProxyTasks return for the office's open work, and nothing of
// another office.
func testListOpenWork(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	empty, err := s.ListOpenWork(ctx, fx.office.ID)
	if err != nil || len(empty.Invocations)+len(empty.ProxyTasks) != 0 {
		t.Fatalf("ListOpenWork(nothing open) = %+v, %v; want nothing", empty, err)
	}
	var invs []office.Invocation
	for _, reason := range []string{"pending", "in progress", "completed"} {
		inv, err := s.CreateInvocation(ctx, office.Invocation{OfficeID: fx.office.ID, CallerAgentID: fx.a.ID, CalleeAgentID: fx.b.ID, Reason: reason})
		if err != nil {
			t.Fatal(err)
		}
		invs = append(invs, inv)
	}
	if _, ok, err := s.TransitionInvocation(ctx, invs[1].ID, []string{office.InvocationPending}, office.InvocationInProgress, office.InvocationPatch{}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, ok, err := s.TransitionInvocation(ctx, invs[2].ID, []string{office.InvocationPending}, office.InvocationCompleted, office.InvocationPatch{}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	r, err := s.CreateProxyRequest(ctx, office.ProxyRequest{OfficeID: fx.office.ID, RequesterAgentID: fx.a.ID, ProxyAgentID: fx.b.ID,
		Action: "create_plan", Payload: json.RawMessage(`{}`), ExpiresAt: now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.TransitionProxyRequest(ctx, r.ID, []string{office.ProxyParked}, office.ProxyAssigned, office.ProxyRequestPatch{ProxyAgentID: fx.b.ID,
		Tasks: []office.ProxyTask{{ID: "d-open1", ProxyAgentID: fx.b.ID, Content: "one"}, {ID: "d-done2", ProxyAgentID: fx.b.ID, Content: "two"}}}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, ok, err := s.SetProxyTaskStatus(ctx, fx.office.ID, "d-done2", office.ProxyTaskCompleted); err != nil || !ok {
		t.Fatal(ok, err)
	}
	got, err := s.ListOpenWork(ctx, fx.office.ID)
	if err != nil {
		t.Fatalf("ListOpenWork: %v", err)
	}
	var want office.OpenWork
	want.Invocations, _ = s.ListInvocations(ctx, office.InvocationFilter{OfficeID: fx.office.ID, Status: []string{office.InvocationPending, office.InvocationInProgress}})
	want.ProxyTasks, _ = s.ListProxyTasks(ctx, office.ProxyTaskFilter{OfficeID: fx.office.ID, Status: office.ProxyTaskOpen})
	if len(want.Invocations) != 2 || len(want.ProxyTasks) != 1 {
		t.Fatalf("the List methods found %d invocations, %d proxy tasks; want 2, 1", len(want.Invocations), len(want.ProxyTasks))
	}
	if d := diff(got, want, fx.opts()); d != "" {
		t.Errorf("ListOpenWork differs from the List methods (-got +want):\n%s", d)
	}
	other, err := s.ListOpenWork(ctx, fx.mkOffice(t, "Other").ID)
	if err != nil || len(other.Invocations)+len(other.ProxyTasks) != 0 {
		t.Errorf("ListOpenWork(another office) = %+v, %v; want nothing", other, err)
	}
}

// testAppendEvents: events appended in order in one write, each as
// AppendEvent appends it: one whose dedupe key is stored already is kept
// (inserted false, the stored one returned); payload, raw and the agent
// kept; none at all is nothing.
func testAppendEvents(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	if stored, inserted, err := s.AppendEvents(ctx, nil); err != nil || len(stored)+len(inserted) != 0 {
		t.Errorf("AppendEvents(none) = %v, %v, %v; want nothing", stored, inserted, err)
	}
	first, _, err := s.AppendEvent(ctx, office.Event{OfficeID: fx.office.ID, AgentID: fx.a.ID, Kind: "message.step", DedupeKey: "chunk-1#1", Payload: []byte(`{"current": 2}`)})
	if err != nil {
		t.Fatal(err)
	}
	in := []office.Event{
		{OfficeID: fx.office.ID, AgentID: fx.a.ID, Kind: "message.step", DedupeKey: "chunk-1#0", Payload: []byte(`{"current": 1}`), Raw: "Step 1/3: a"},
		{OfficeID: fx.office.ID, AgentID: fx.a.ID, Kind: "message.step", DedupeKey: "chunk-1#1", Payload: []byte(`{"current": 2, "again": true}`), Raw: "Step 2/3: b"},
		{OfficeID: fx.office.ID, AgentID: fx.a.ID, Kind: "message.phase_complete", DedupeKey: "chunk-1#2", Raw: "=== PHASE 1 COMPLETE ==="},
		{OfficeID: fx.office.ID, Kind: "output.lost", Payload: []byte(`{"lines": 3}`)},
	}
	stored, inserted, err := s.AppendEvents(ctx, in)
	if err != nil {
		t.Fatalf("AppendEvents: %v", err)
	}
	if len(stored) != 4 || len(inserted) != 4 || !inserted[0] || inserted[1] || !inserted[2] || !inserted[3] {
		t.Fatalf("AppendEvents = %d events, inserted %v; want 4, the second stored before", len(stored), inserted)
	}
	if stored[1].ID != first.ID || !jsonEqual(stored[1].Payload, first.Payload) {
		t.Errorf("AppendEvents returned %+v for a key stored before; want the one stored first %+v", stored[1], first)
	}
	if !(stored[0].ID < stored[2].ID && stored[2].ID < stored[3].ID) {
		t.Errorf("AppendEvents ids %d, %d, %d; want increasing in the order given", stored[0].ID, stored[2].ID, stored[3].ID)
	}
	for _, i := range []int{0, 2, 3} {
		got, want := stored[i], in[i]
		if got.Kind != want.Kind || got.DedupeKey != want.DedupeKey || got.Raw != want.Raw || got.AgentID != want.AgentID ||
			got.OfficeID != fx.office.ID || !jsonEqual(got.Payload, want.Payload) || (len(want.Payload) == 0 && len(got.Payload) != 0) {
			t.Errorf("AppendEvents[%d] = %+v; want %+v as given", i, got, want)
		}
		fx.near(t, "AppendEvents created_at", got.CreatedAt, now())
	}
	all, err := s.ListEvents(ctx, office.EventFilter{OfficeID: fx.office.ID, Limit: 100})
	if err != nil || len(all) != 4 {
		t.Errorf("events after AppendEvents = %d, %v; want 4", len(all), err)
	}
	_, _, err = s.AppendEvents(ctx, []office.Event{{OfficeID: fx.office.ID, Kind: "x", Payload: []byte("{no")}})
	wantCode(t, "AppendEvents with a payload that is not JSON", err, office.EINVALID)
}
