package storetest

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

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
	// Kept: what the change does not name (node, conversation).
	if _, err := s.UpsertSession(ctx, office.SessionRecord{ID: rec.ID, OfficeID: fx.office.ID, AgentID: fx.a.ID, Node: "node-1",
		Status: office.SessionBusy, AgentSessionID: "conv-1"}); err != nil {
		t.Fatal(err)
	}
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
	// The session layer's own word stays.
	set(office.SessionStatus{Status: office.SessionCrashed, Process: true, ExitCode: ptr(2), Detail: "boom"})
	_, ev, ok = set(office.SessionStatus{Status: office.SessionBusy, EventKind: "question.delivered"})
	if ok || ev.ID == 0 || ev.Kind != "question.delivered" {
		t.Errorf("office busy over crashed = ok %v, event %+v; want the row kept and the event appended", ok, ev)
	}
	got, err := s.GetSessionByAgent(ctx, fx.a.ID)
	if err != nil || got.Status != office.SessionCrashed || got.Detail != "boom" || got.ExitCode == nil || *got.ExitCode != 2 {
		t.Errorf("row after office busy over crashed = %+v, %v; want crashed, boom, exit 2", got, err)
	}
	// So does hibernated (an idle agent whose process was stopped).
	set(office.SessionStatus{Status: office.SessionHibernated, Process: true, Detail: "idle since then"})
	if _, _, ok = set(office.SessionStatus{Status: office.SessionWaiting}); ok {
		t.Error("office waiting over hibernated: written, want the row kept")
	}
	if got, err = s.GetSessionByAgent(ctx, fx.a.ID); err != nil || got.Status != office.SessionHibernated || got.Detail != "idle since then" {
		t.Errorf("row after office waiting over hibernated = %+v, %v; want hibernated, its detail", got, err)
	}
	_, _, _, err = s.SetSessionStatus(ctx, office.SessionStatus{OfficeID: fx.office.ID, AgentID: fx.a.ID})
	wantCode(t, "SetSessionStatus without a status", err, office.EINVALID)
}
