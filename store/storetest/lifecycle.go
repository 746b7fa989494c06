package storetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
)

func testOffices(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	o, err := s.UpsertOffice(ctx, office.Office{Name: "Alpha", QuestionTTL: 10 * time.Minute})
	if err != nil {
		t.Fatalf("UpsertOffice(new by name): %v", err)
	}
	fx.checkStamps(t, "UpsertOffice(new)", o.ID, o.CreatedAt, o.UpdatedAt)
	if o.Name != "Alpha" || o.QuestionTTL != 10*time.Minute {
		t.Errorf("UpsertOffice(new) = name %q ttl %v; want Alpha 10m", o.Name, o.QuestionTTL)
	}
	got, err := s.GetOffice(ctx, o.ID)
	if err != nil {
		t.Fatalf("GetOffice: %v", err)
	}
	if d := diff(got, o, fx.opts()); d != "" {
		t.Errorf("GetOffice differs from what UpsertOffice returned (-got +want):\n%s", d)
	}

	// By name, without ID: the same row, updated.
	o2, err := s.UpsertOffice(ctx, office.Office{Name: "Alpha", QuestionTTL: 20 * time.Minute})
	if err != nil {
		t.Fatalf("UpsertOffice(existing by name): %v", err)
	}
	if o2.ID != o.ID {
		t.Errorf("UpsertOffice by an existing name made a new office %s; want the existing %s", o2.ID, o.ID)
	}
	if o2.QuestionTTL != 20*time.Minute {
		t.Errorf("UpsertOffice by name: QuestionTTL = %v; want it updated to 20m", o2.QuestionTTL)
	}
	fx.near(t, "UpsertOffice(update) CreatedAt kept", o2.CreatedAt, o.CreatedAt)

	// By ID: the caller's ID is kept, and a second upsert renames.
	id := uuid.NewString()
	b, err := s.UpsertOffice(ctx, office.Office{ID: id, Name: "Beta"})
	if err != nil {
		t.Fatalf("UpsertOffice(new with ID): %v", err)
	}
	if b.ID != id {
		t.Errorf("UpsertOffice with ID %s stored ID %s; want the given ID", id, b.ID)
	}
	b2, err := s.UpsertOffice(ctx, office.Office{ID: id, Name: "Beta renamed"})
	if err != nil {
		t.Fatalf("UpsertOffice(existing by ID): %v", err)
	}
	if b2.ID != id || b2.Name != "Beta renamed" {
		t.Errorf("UpsertOffice by ID = (%s, %q); want (%s, %q)", b2.ID, b2.Name, id, "Beta renamed")
	}

	list, err := s.ListOffices(ctx)
	if err != nil {
		t.Fatalf("ListOffices: %v", err)
	}
	want := sorted([]string{fx.office.ID, o.ID, id})
	if d := cmp.Diff(sorted(ids(list, oid)), want); d != "" {
		t.Errorf("ListOffices IDs (-got +want):\n%s", d)
	}
}

func testAgents(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	in := office.Agent{
		OfficeID:       fx.office.ID,
		Name:           "Architect",
		Role:           "designs systems",
		Capabilities:   []string{"design", "review"},
		Priority:       7,
		Expertise:      []string{"go", "postgres"},
		AllowedActions: []string{"INVOKE", "ASK_USER"},
		MaxLoad:        3,
		Launch: office.LaunchSpec{
			Kind: "command", Command: "/bin/sh", Args: []string{"-c", "echo hi"},
			Env: map[string]string{"A": "1", "B": "two"}, Dir: "/tmp/x", PromptPattern: `\$ $`,
			Model: "m", PermissionMode: "plan", Script: "s",
		},
	}
	a, err := s.UpsertAgent(ctx, in)
	if err != nil {
		t.Fatalf("UpsertAgent(new): %v", err)
	}
	fx.checkStamps(t, "UpsertAgent(new)", a.ID, a.CreatedAt, a.UpdatedAt)
	want := in
	want.Status = office.AgentIdle
	if d := diff(a, want, fx.opts(ignore(office.Agent{}))); d != "" {
		t.Errorf("UpsertAgent(new) returned (-got +want; Status defaults to idle):\n%s", d)
	}
	got, err := s.GetAgent(ctx, a.ID)
	if err != nil {
		t.Fatalf("GetAgent: %v", err)
	}
	if d := diff(got, a, fx.opts()); d != "" {
		t.Errorf("GetAgent differs from UpsertAgent's return (-got +want):\n%s", d)
	}

	// Same name in another case: the same agent, updated.
	up := in
	up.Name = "ARCHITECT"
	up.Role = "designs everything"
	up.Status = office.AgentActive
	a2, err := s.UpsertAgent(ctx, up)
	if err != nil {
		t.Fatalf("UpsertAgent(existing name, other case): %v", err)
	}
	if a2.ID != a.ID {
		t.Errorf("UpsertAgent with the name in another case made agent %s; want the existing %s (names are unique case-insensitively)", a2.ID, a.ID)
	}
	if a2.Role != "designs everything" || a2.Status != office.AgentActive {
		t.Errorf("UpsertAgent(update) = role %q status %q; want updated", a2.Role, a2.Status)
	}

	testAgentNameConflicts(t, fx)
	testAgentNameWildcards(t, fx)
	testAgentListStatusDelete(t, fx, a)
}

// testAgentNameWildcards: a name holding '_' (LIKE's one-character
// wildcard) finds only the agent of that name: "qa_1" beside "qaX1" is a
// new agent, and "QA_1" is "qa_1".
func testAgentNameWildcards(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	x, err := s.UpsertAgent(ctx, office.Agent{OfficeID: fx.office.ID, Name: "qaX1", Role: "x"})
	if err != nil {
		t.Fatal(err)
	}
	u, err := s.UpsertAgent(ctx, office.Agent{OfficeID: fx.office.ID, Name: "qa_1", Role: "underscore"})
	if err != nil || u.ID == x.ID {
		t.Fatalf("UpsertAgent(qa_1) beside qaX1 = %+v, %v; want a new agent", u, err)
	}
	again, err := s.UpsertAgent(ctx, office.Agent{OfficeID: fx.office.ID, Name: "QA_1", Role: "again"})
	if err != nil || again.ID != u.ID {
		t.Fatalf("UpsertAgent(QA_1) = %+v, %v; want agent %s (qa_1)", again, err, u.ID)
	}
	if got, err := s.GetAgent(ctx, x.ID); err != nil || got.Role != "x" {
		t.Errorf("qaX1 after the upserts of qa_1 = %+v, %v; want untouched", got, err)
	}
	for _, id := range []string{x.ID, u.ID} {
		if err := s.DeleteAgent(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

// testAgentNameConflicts: renaming or creating an agent with a name another
// agent holds in another case is ECONFLICT and leaves both agents as they
// were; names that are not plain words are EINVALID.
func testAgentNameConflicts(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	// The name of another agent (other case) on this agent's ID: ECONFLICT.
	_, err := s.UpsertAgent(ctx, office.Agent{ID: fx.b.ID, OfficeID: fx.office.ID, Name: strings.ToLower(fx.a.Name)})
	wantCode(t, "UpsertAgent renaming Reviewer to another agent's name in another case", err, office.ECONFLICT)
	if got, err := s.GetAgent(ctx, fx.b.ID); err != nil || got.Name != fx.b.Name {
		t.Errorf("after the conflicting rename, agent %s = %q, %v; want unchanged %q", fx.b.ID, got.Name, err, fx.b.Name)
	}
	if got, err := s.GetAgent(ctx, fx.a.ID); err != nil || got.Name != fx.a.Name {
		t.Errorf("after the conflicting rename, agent %s = %q, %v; want unchanged %q", fx.a.ID, got.Name, err, fx.a.Name)
	}

	// A new ID with a name taken in another case: ECONFLICT, the existing
	// agent untouched (the admin API's POST creates this way).
	_, err = s.UpsertAgent(ctx, office.Agent{ID: uuid.NewString(), OfficeID: fx.office.ID, Name: strings.ToUpper(fx.a.Name), Role: "impostor"})
	wantCode(t, "UpsertAgent with a new ID and a taken name in another case", err, office.ECONFLICT)
	if got, err := s.GetAgent(ctx, fx.a.ID); err != nil || got.Name != fx.a.Name || got.Role != fx.a.Role {
		t.Errorf("after the conflicting create, agent %s = %+v, %v; want unchanged", fx.a.ID, got, err)
	}

	// Names that are not plain words are refused (office.ValidateAgentName):
	// a name becomes a directory, a word in system prompts and a target.
	for _, bad := range []string{"", "..", "../../../../tmp/x", "a/b", "a\x00b", "a\nb", " po", "a..b", strings.Repeat("x", 64)} {
		_, err := s.UpsertAgent(ctx, office.Agent{OfficeID: fx.office.ID, Name: bad})
		wantCode(t, fmt.Sprintf("UpsertAgent(name %q)", bad), err, office.EINVALID)
		_, err = s.UpsertAgent(ctx, office.Agent{ID: fx.b.ID, OfficeID: fx.office.ID, Name: bad})
		wantCode(t, fmt.Sprintf("UpsertAgent(rename to %q)", bad), err, office.EINVALID)
	}

}

// testAgentListStatusDelete: a caller-chosen ID is kept, names are unique per
// office only, ListAgents lists the office's agents (a is the one
// testAgents made), and SetAgentStatus and DeleteAgent change one agent and
// report ENOTFOUND for a missing one.
func testAgentListStatusDelete(t *testing.T, fx *fixture, a office.Agent) {
	s, ctx := fx.s, fx.ctx
	// A caller-chosen ID is kept.
	id := uuid.NewString()
	c, err := s.UpsertAgent(ctx, office.Agent{ID: id, OfficeID: fx.office.ID, Name: "Tester"})
	if err != nil {
		t.Fatalf("UpsertAgent(new with ID): %v", err)
	}
	if c.ID != id {
		t.Errorf("UpsertAgent with ID %s stored %s; want the given ID", id, c.ID)
	}

	// The same name in another office is another agent.
	other := fx.mkOffice(t, "Other office")
	oa := fx.mkAgent(t, other.ID, "dev")
	if oa.ID == fx.a.ID {
		t.Errorf("agent %q in another office got the ID of %q in the first; names are unique per office only", "dev", "Dev")
	}

	list, err := s.ListAgents(ctx, fx.office.ID)
	if err != nil {
		t.Fatalf("ListAgents: %v", err)
	}
	if d := cmp.Diff(sorted(ids(list, aid)), sorted([]string{fx.a.ID, fx.b.ID, a.ID, c.ID})); d != "" {
		t.Errorf("ListAgents(office) IDs (-got +want):\n%s", d)
	}

	before := now()
	if err := s.SetAgentStatus(ctx, fx.a.ID, office.AgentDisabled); err != nil {
		t.Fatalf("SetAgentStatus: %v", err)
	}
	got, err := s.GetAgent(ctx, fx.a.ID)
	if err != nil {
		t.Fatalf("GetAgent: %v", err)
	}
	if got.Status != office.AgentDisabled {
		t.Errorf("after SetAgentStatus(disabled), status = %q", got.Status)
	}
	fx.near(t, "UpdatedAt after SetAgentStatus", got.UpdatedAt, before)
	wantCode(t, "SetAgentStatus(missing agent)", s.SetAgentStatus(ctx, uuid.NewString(), office.AgentActive), office.ENOTFOUND)

	if err := s.DeleteAgent(ctx, c.ID); err != nil {
		t.Fatalf("DeleteAgent: %v", err)
	}
	_, err = s.GetAgent(ctx, c.ID)
	wantCode(t, "GetAgent after DeleteAgent", err, office.ENOTFOUND)
	wantCode(t, "DeleteAgent(missing agent)", s.DeleteAgent(ctx, uuid.NewString()), office.ENOTFOUND)
}

func testSessions(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	_, err := s.GetSessionByAgent(ctx, fx.a.ID)
	wantCode(t, "GetSessionByAgent before any session", err, office.ENOTFOUND)

	t0 := now().Add(-time.Minute)
	set := func(what string, c office.SessionStatus) office.SessionRecord {
		t.Helper()
		rec, _, ok, err := s.SetSessionStatus(ctx, c)
		if err != nil || !ok {
			t.Fatalf("SetSessionStatus(%s) = ok %v, %v", what, ok, err)
		}
		return rec
	}
	first := set("new", office.SessionStatus{OfficeID: fx.office.ID, AgentID: fx.a.ID, Node: "node-1", PID: 1234, Process: true,
		Status: office.SessionStarting, AgentSessionID: "conv-1", StartedAt: &t0})
	fx.checkStamps(t, "SetSessionStatus(new)", first.ID, first.CreatedAt, first.UpdatedAt)
	want := office.SessionRecord{OfficeID: fx.office.ID, AgentID: fx.a.ID, Node: "node-1", PID: 1234,
		Status: office.SessionStarting, AgentSessionID: "conv-1", StartedAt: &t0}
	if d := diff(first, want, fx.opts(ignore(office.SessionRecord{}))); d != "" {
		t.Errorf("SetSessionStatus(new) returned (-got +want):\n%s", d)
	}

	second := set("existing agent", office.SessionStatus{OfficeID: fx.office.ID, AgentID: fx.a.ID, Node: "node-2", PID: 5678, Process: true,
		Status: office.SessionExited, ExitCode: ptr(3)})
	if second.ID != first.ID {
		t.Errorf("SetSessionStatus for the same agent made row %s; want the row %s updated in place", second.ID, first.ID)
	}
	got, err := s.GetSessionByAgent(ctx, fx.a.ID)
	if err != nil {
		t.Fatalf("GetSessionByAgent: %v", err)
	}
	want.Node, want.PID, want.Status, want.ExitCode = "node-2", 5678, office.SessionExited, ptr(3)
	if d := diff(got, want, fx.opts(ignore(office.SessionRecord{}))); d != "" {
		t.Errorf("GetSessionByAgent after update (-got +want):\n%s", d)
	}

	bs := set("b", office.SessionStatus{OfficeID: fx.office.ID, AgentID: fx.b.ID, Status: office.SessionReady, Process: true, ExitCode: ptr(0)})
	if bs.ExitCode == nil || *bs.ExitCode != 0 {
		t.Errorf("ExitCode 0 stored as %v; want a pointer to 0 (0 is not nil)", bs.ExitCode)
	}
	if bs.StartedAt != nil {
		t.Errorf("StartedAt not given, stored as %v; want nil", bs.StartedAt)
	}
	list, err := s.ListSessions(ctx, fx.office.ID)
	if err != nil {
		t.Fatalf("ListSessions: %v", err)
	}
	if d := cmp.Diff(sorted(ids(list, sid)), sorted([]string{first.ID, bs.ID})); d != "" {
		t.Errorf("ListSessions IDs (-got +want):\n%s", d)
	}
	other := fx.mkOffice(t, "Other")
	list, err = s.ListSessions(ctx, other.ID)
	if err != nil || len(list) != 0 {
		t.Errorf("ListSessions(office without sessions) = %d rows, %v; want none", len(list), err)
	}
}

// testSessionDetail: Detail (the dialog of a session that needs attention, or
// why an agent exited) is stored as given, multi-line and in any script;
// every status change rewrites it, so an empty Detail clears it; one over
// office.MaxSessionDetail is stored cut on a rune boundary, not refused.
func testSessionDetail(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	const dialog = "Do you trust the files in this folder?\n\n" +
		" /home/dev/프로젝트/결제-서비스\n\n" +
		" Claude Code may read, write or execute files here.\n\n" +
		" ❯ 1. Yes, proceed\n" +
		"   2. No, exit\n\n" +
		" Enter 키로 확인 · Esc to cancel"
	// Exactly at the cap: kept whole (1333 three-byte runes and one byte).
	atCap := strings.Repeat("가", office.MaxSessionDetail/3) + "!"
	if len(atCap) != office.MaxSessionDetail {
		t.Fatalf("test detail is %d bytes; want %d", len(atCap), office.MaxSessionDetail)
	}
	// Over the cap, with a rune across it: "마" takes bytes cap-1 to cap+1,
	// so the stored detail ends just before it, one byte under the cap.
	head := "exit code 137\n"
	over := head + strings.Repeat("x", office.MaxSessionDetail-len(head)-2) + "\n마지막 화면 줄 last screen line\n"
	var first office.SessionRecord
	for i, tc := range []struct {
		what, status, detail, want string
	}{
		{"while it needs attention", office.SessionNeedsAttention, dialog, dialog},
		{"once ready (no detail)", office.SessionReady, "", ""},
		{"a detail of exactly the cap", office.SessionCrashed, atCap, atCap},
		{"a detail over the cap", office.SessionExited, over, over[:office.MaxSessionDetail-1]},
	} {
		got, _, ok, err := s.SetSessionStatus(ctx, office.SessionStatus{OfficeID: fx.office.ID, AgentID: fx.a.ID, Process: true, PID: 4321,
			Status: tc.status, Detail: tc.detail})
		if err != nil || !ok {
			t.Fatalf("SetSessionStatus(%s) = ok %v, %v; want it stored (cut), not refused", tc.what, ok, err)
		}
		if i == 0 {
			first = got
		}
		if got.ID != first.ID || got.Status != tc.status || got.Detail != tc.want {
			t.Errorf("SetSessionStatus(%s) = row %s status %q, %d bytes of detail ending %q; want row %s %q, %d bytes ending %q",
				tc.what, got.ID, got.Status, len(got.Detail), got.Detail[max(0, len(got.Detail)-8):],
				first.ID, tc.status, len(tc.want), tc.want[max(0, len(tc.want)-8):])
		}
		read, err := s.GetSessionByAgent(ctx, fx.a.ID)
		if err != nil || read.Status != tc.status || read.Detail != tc.want {
			t.Errorf("GetSessionByAgent %s: status %q detail of %d bytes, %v; want %q, %d bytes", tc.what, read.Status, len(read.Detail), err, tc.status, len(tc.want))
		}
		list, err := s.ListSessions(ctx, fx.office.ID)
		if err != nil || len(list) != 1 || list[0].ID != first.ID || list[0].Status != tc.status || list[0].Detail != tc.want {
			t.Errorf("ListSessions %s: %d rows, %v; want the one row %s with status %q and the detail", tc.what, len(list), err, first.ID, tc.status)
		}
	}
}

func testNotFound(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	missing := uuid.NewString()
	gets := map[string]func() error{
		"GetOffice":         func() error { _, err := s.GetOffice(ctx, missing); return err },
		"GetAgent":          func() error { _, err := s.GetAgent(ctx, missing); return err },
		"GetSessionByAgent": func() error { _, err := s.GetSessionByAgent(ctx, missing); return err },
		"GetQuestion":       func() error { _, err := s.GetQuestion(ctx, missing); return err },
		"GetInvocation":     func() error { _, err := s.GetInvocation(ctx, missing); return err },
		"GetResult":         func() error { _, err := s.GetResult(ctx, missing); return err },
		"GetDependency":     func() error { _, err := s.GetDependency(ctx, missing); return err },
		"FindOpenInvocation": func() error {
			_, err := s.FindOpenInvocation(ctx, fx.office.ID, fx.a.ID, fx.b.ID)
			return err
		},
	}
	for name, get := range gets {
		wantCode(t, name+"(missing)", get(), office.ENOTFOUND)
	}
	_, ok, err := s.AnswerQuestion(ctx, missing, "x", "")
	wantNotOKMissing(t, "AnswerQuestion", ok, err)
	ok, err = s.MarkQuestionDelivered(ctx, missing)
	wantNotOKMissing(t, "MarkQuestionDelivered", ok, err)
	ok, err = s.CancelQuestion(ctx, missing)
	wantNotOKMissing(t, "CancelQuestion", ok, err)
	ok, err = s.CancelPendingQuestion(ctx, missing)
	wantNotOKMissing(t, "CancelPendingQuestion", ok, err)
	ok, err = s.MarkUserMessageDelivered(ctx, missing)
	wantNotOKMissing(t, "MarkUserMessageDelivered", ok, err)
	_, ok, err = s.TransitionInvocation(ctx, missing, []string{office.InvocationPending}, office.InvocationInProgress, office.InvocationPatch{})
	wantNotOKMissing(t, "TransitionInvocation", ok, err)
	ok, err = s.MarkResultDelivered(ctx, missing)
	wantNotOKMissing(t, "MarkResultDelivered", ok, err)
	_, ok, err = s.ProvideDependency(ctx, missing, []byte("v"))
	wantNotOKMissing(t, "ProvideDependency", ok, err)
	_, ok, err = s.RejectDependency(ctx, missing, "no")
	wantNotOKMissing(t, "RejectDependency", ok, err)
	ok, err = s.MarkDependencyDelivered(ctx, missing)
	wantNotOKMissing(t, "MarkDependencyDelivered", ok, err)
}

func testQuestionLifecycle(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	sess, _, _, err := s.SetSessionStatus(ctx, office.SessionStatus{OfficeID: fx.office.ID, AgentID: fx.a.ID, Status: office.SessionReady, Process: true})
	if err != nil {
		t.Fatalf("SetSessionStatus: %v", err)
	}
	exp := now().Add(5 * time.Minute)
	in := office.Question{
		OfficeID: fx.office.ID, AgentID: fx.a.ID, SessionID: sess.ID,
		QuestionType: office.QuestionSelection, Category: "tech",
		Question: "Which database?\nPick one.", Options: []string{"Postgres", "SQLite", "한국어 옵션"},
		DefaultAnswer: "SQLite", Context: "we need one", Required: true, ExpiresAt: exp,
	}
	q, err := s.CreateQuestion(ctx, in)
	if err != nil {
		t.Fatalf("CreateQuestion: %v", err)
	}
	fx.checkStamps(t, "CreateQuestion", q.ID, q.CreatedAt, q.UpdatedAt)
	want := in
	want.Status = office.QuestionPending
	if d := diff(q, want, fx.opts(ignore(office.Question{}))); d != "" {
		t.Errorf("CreateQuestion returned (-got +want; status defaults to pending):\n%s", d)
	}
	got, err := s.GetQuestion(ctx, q.ID)
	if err != nil {
		t.Fatalf("GetQuestion: %v", err)
	}
	if d := diff(got, q, fx.opts()); d != "" {
		t.Errorf("GetQuestion differs from CreateQuestion's return (-got +want):\n%s", d)
	}
	if !got.ExpiresAt.Equal(exp) {
		t.Errorf("ExpiresAt = %v; want exactly %v (microsecond precision)", got.ExpiresAt, exp)
	}

	testQuestionAnswer(t, fx, q)
	testQuestionDelivery(t, fx, q)
	testAnsweredOldestFirst(t, fx)
}

// testQuestionAnswer: the pending question q cannot be marked delivered; its
// first answer is stored with the time, and a second answer is refused and
// changes nothing.
func testQuestionAnswer(t *testing.T, fx *fixture, q office.Question) {
	s, ctx := fx.s, fx.ctx
	ok, err := s.MarkQuestionDelivered(ctx, q.ID)
	wantNotOK(t, "MarkQuestionDelivered(pending)", ok, err)

	ans, ok, err := s.AnswerQuestion(ctx, q.ID, "Postgres", "")
	wantOK(t, "AnswerQuestion(pending)", ok, err)
	if ans.ID != q.ID || ans.Status != office.QuestionAnswered || ans.Response != "Postgres" || ans.AnsweredBy != "" {
		t.Errorf("AnswerQuestion returned id %s status %q response %q by %q; want %s answered Postgres by \"\"", ans.ID, ans.Status, ans.Response, ans.AnsweredBy, q.ID)
	}
	fx.nearPtr(t, "AnsweredAt", ans.AnsweredAt, now())
	if ans.DeliveredAt != nil {
		t.Errorf("DeliveredAt after answer = %v; want nil", ans.DeliveredAt)
	}
	_, ok, err = s.AnswerQuestion(ctx, q.ID, "SQLite", "")
	wantNotOK(t, "AnswerQuestion(answered)", ok, err)
	got, err := s.GetQuestion(ctx, q.ID)
	if err != nil {
		t.Fatalf("GetQuestion: %v", err)
	}
	if got.Response != "Postgres" || got.Status != office.QuestionAnswered {
		t.Errorf("after a second answer, question = %q/%q; want the first answer kept (answered/Postgres)", got.Status, got.Response)
	}
}

// testQuestionDelivery: the answered question q is listed as due for its
// office and agent only; once marked delivered (exactly once) it is no
// longer listed and cannot be answered again.
func testQuestionDelivery(t *testing.T, fx *fixture, q office.Question) {
	s, ctx := fx.s, fx.ctx
	for _, tc := range []struct {
		due  office.Due
		want bool
	}{
		{office.Due{}, true},
		{office.Due{OfficeIDs: []string{fx.office.ID}}, true},
		{office.Due{OfficeIDs: []string{uuid.NewString()}}, false},
		{office.Due{OfficeIDs: []string{fx.office.ID}, AgentID: q.AgentID}, true},
		{office.Due{AgentID: uuid.NewString()}, false},
		{office.Due{AgentID: "not-a-uuid"}, false},
	} {
		list, err := s.ListAnsweredUndelivered(ctx, tc.due)
		if err != nil {
			t.Fatalf("ListAnsweredUndelivered(%+v): %v", tc.due, err)
		}
		if has := contains(ids(list, qid), q.ID); has != tc.want {
			t.Errorf("ListAnsweredUndelivered(%+v) contains the answered question: %v; want %v", tc.due, has, tc.want)
		}
	}

	ok, err := s.MarkQuestionDelivered(ctx, q.ID)
	wantOK(t, "MarkQuestionDelivered(answered)", ok, err)
	ok, err = s.MarkQuestionDelivered(ctx, q.ID)
	wantNotOK(t, "MarkQuestionDelivered(delivered)", ok, err)
	got, err := s.GetQuestion(ctx, q.ID)
	if err != nil {
		t.Fatalf("GetQuestion: %v", err)
	}
	if got.Status != office.QuestionDelivered {
		t.Errorf("status after MarkQuestionDelivered = %q; want delivered", got.Status)
	}
	fx.nearPtr(t, "DeliveredAt", got.DeliveredAt, now())
	list, err := s.ListAnsweredUndelivered(ctx, office.Due{})
	if err != nil {
		t.Fatalf("ListAnsweredUndelivered: %v", err)
	}
	if contains(ids(list, qid), q.ID) {
		t.Errorf("ListAnsweredUndelivered still lists the delivered question")
	}
	_, ok, err = s.AnswerQuestion(ctx, q.ID, "again", "")
	wantNotOK(t, "AnswerQuestion(delivered)", ok, err)
}

// testAnsweredOldestFirst: questions created with CreatedAt set keep it, and
// ListAnsweredUndelivered lists answered ones oldest first.
func testAnsweredOldestFirst(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	base := now().Add(-time.Hour)
	var order []string
	for i := range 3 {
		q := fx.question(t, func(q *office.Question) { q.CreatedAt = base.Add(time.Duration(i) * time.Minute) })
		if !q.CreatedAt.Equal(base.Add(time.Duration(i) * time.Minute)) {
			t.Errorf("CreateQuestion with CreatedAt set stored %v; want the given %v", q.CreatedAt, base.Add(time.Duration(i)*time.Minute))
		}
		if _, ok, err := s.AnswerQuestion(ctx, q.ID, fmt.Sprint(i), ""); !ok || err != nil {
			t.Fatalf("AnswerQuestion: ok %v err %v", ok, err)
		}
		order = append(order, q.ID)
	}
	list, err := s.ListAnsweredUndelivered(ctx, office.Due{OfficeIDs: []string{fx.office.ID}})
	if err != nil {
		t.Fatalf("ListAnsweredUndelivered: %v", err)
	}
	if d := cmp.Diff(ids(list, qid), order); d != "" {
		t.Errorf("ListAnsweredUndelivered order (-got +want oldest first):\n%s", d)
	}
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func testQuestionCancel(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	p := fx.question(t)
	ok, err := s.CancelQuestion(ctx, p.ID)
	wantOK(t, "CancelQuestion(pending)", ok, err)
	if got, _ := s.GetQuestion(ctx, p.ID); got.Status != office.QuestionCancelled {
		t.Errorf("status after cancel = %q; want cancelled", got.Status)
	}
	_, ok, err = s.AnswerQuestion(ctx, p.ID, "late", "")
	wantNotOK(t, "AnswerQuestion(cancelled)", ok, err)
	ok, err = s.CancelQuestion(ctx, p.ID)
	wantNotOK(t, "CancelQuestion(cancelled)", ok, err)

	a := fx.answered(t)
	ok, err = s.CancelQuestion(ctx, a.ID)
	wantOK(t, "CancelQuestion(answered)", ok, err)
	ok, err = s.MarkQuestionDelivered(ctx, a.ID)
	wantNotOK(t, "MarkQuestionDelivered(cancelled)", ok, err)

	d := fx.answered(t)
	if ok, err := s.MarkQuestionDelivered(ctx, d.ID); !ok || err != nil {
		t.Fatalf("MarkQuestionDelivered: %v %v", ok, err)
	}
	ok, err = s.CancelQuestion(ctx, d.ID)
	wantNotOK(t, "CancelQuestion(delivered)", ok, err)

	e := fx.question(t, func(q *office.Question) { q.ExpiresAt = now().Add(-time.Second) })
	if _, err := s.ExpireQuestions(ctx, now(), nil); err != nil {
		t.Fatalf("ExpireQuestions: %v", err)
	}
	ok, err = s.CancelQuestion(ctx, e.ID)
	wantNotOK(t, "CancelQuestion(expired)", ok, err)
	_, ok, err = s.AnswerQuestion(ctx, e.ID, "late", "")
	wantNotOK(t, "AnswerQuestion(expired)", ok, err)

	// Pending only: an answer given first is kept.
	p2 := fx.question(t)
	ok, err = s.CancelPendingQuestion(ctx, p2.ID)
	wantOK(t, "CancelPendingQuestion(pending)", ok, err)
	if got, _ := s.GetQuestion(ctx, p2.ID); got.Status != office.QuestionCancelled {
		t.Errorf("status after CancelPendingQuestion = %q; want cancelled", got.Status)
	}
	ok, err = s.CancelPendingQuestion(ctx, p2.ID)
	wantNotOK(t, "CancelPendingQuestion(cancelled)", ok, err)
	a2 := fx.answered(t)
	ok, err = s.CancelPendingQuestion(ctx, a2.ID)
	wantNotOK(t, "CancelPendingQuestion(answered)", ok, err)
	if got, _ := s.GetQuestion(ctx, a2.ID); got.Status != office.QuestionAnswered || got.Response == "" {
		t.Errorf("answered question after CancelPendingQuestion: status %q, response %q; want answered, kept", got.Status, got.Response)
	}
	ok, err = s.CancelPendingQuestion(ctx, e.ID)
	wantNotOK(t, "CancelPendingQuestion(expired)", ok, err)
}

func testQuestionExpiry(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	t0 := now()
	past := fx.question(t, func(q *office.Question) { q.ExpiresAt = t0.Add(-time.Minute) })
	edge := fx.question(t, func(q *office.Question) { q.ExpiresAt = t0 }) // expires_at <= now
	future := fx.question(t, func(q *office.Question) { q.ExpiresAt = t0.Add(time.Hour) })
	answered := fx.answered(t, func(q *office.Question) { q.ExpiresAt = t0.Add(-time.Minute) })
	other := fx.mkOffice(t, "Other")
	oa := fx.mkAgent(t, other.ID, "X")
	otherQ := fx.question(t, func(q *office.Question) { q.OfficeID = other.ID; q.AgentID = oa.ID; q.ExpiresAt = t0.Add(-time.Minute) })

	// A server running some offices of a shared database names them.
	got, err := s.ExpireQuestions(ctx, t0, []string{other.ID})
	if err != nil {
		t.Fatalf("ExpireQuestions(other office): %v", err)
	}
	if d := cmp.Diff(ids(got, qid), []string{otherQ.ID}); d != "" {
		t.Errorf("ExpireQuestions(now, the other office) changed (-got +want: only that office's):\n%s", d)
	}
	if q, err := s.GetQuestion(ctx, past.ID); err != nil || q.Status != office.QuestionPending {
		t.Errorf("a due question of an office not named: status %q err %v; want pending", q.Status, err)
	}
	more := fx.question(t, func(q *office.Question) { q.OfficeID = other.ID; q.AgentID = oa.ID; q.ExpiresAt = t0.Add(-time.Minute) })
	got, err = s.ExpireQuestions(ctx, t0, nil)
	if err != nil {
		t.Fatalf("ExpireQuestions: %v", err)
	}
	if d := cmp.Diff(sorted(ids(got, qid)), sorted([]string{past.ID, edge.ID, more.ID})); d != "" {
		t.Errorf("ExpireQuestions(now, every office) changed (-got +want: pending with expires_at <= now, every office):\n%s", d)
	}
	for _, q := range got {
		if q.Status != office.QuestionExpired {
			t.Errorf("ExpireQuestions returned question %s with status %q; want expired", q.ID, q.Status)
		}
		if q.ID == past.ID && (q.Question != past.Question || q.AgentID != past.AgentID || q.OfficeID != past.OfficeID) {
			t.Errorf("ExpireQuestions returned an incomplete row: %+v", q)
		}
	}
	again, err := s.ExpireQuestions(ctx, t0, nil)
	if err != nil {
		t.Fatalf("ExpireQuestions(again): %v", err)
	}
	if len(again) != 0 {
		t.Errorf("a second ExpireQuestions returned %v; want nothing (each row is expired once)", ids(again, qid))
	}
	for id, want := range map[string]string{past.ID: office.QuestionExpired, future.ID: office.QuestionPending, answered.ID: office.QuestionAnswered} {
		q, err := s.GetQuestion(ctx, id)
		if err != nil || q.Status != want {
			t.Errorf("question %s after expiry: status %q err %v; want %q", id, q.Status, err, want)
		}
	}
	later, err := s.ExpireQuestions(ctx, t0.Add(2*time.Hour), nil)
	if err != nil {
		t.Fatalf("ExpireQuestions(later): %v", err)
	}
	if d := cmp.Diff(ids(later, qid), []string{future.ID}); d != "" {
		t.Errorf("ExpireQuestions two hours later (-got +want):\n%s", d)
	}
}

func testQuestionFilters(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	a1 := fx.question(t)
	a2 := fx.answered(t)
	b1 := fx.question(t, func(q *office.Question) { q.AgentID = fx.b.ID })
	other := fx.mkOffice(t, "Other")
	oa := fx.mkAgent(t, other.ID, "X")
	o1 := fx.question(t, func(q *office.Question) { q.OfficeID = other.ID; q.AgentID = oa.ID })
	for _, tc := range []struct {
		name string
		f    office.QuestionFilter
		want []string
	}{
		{"all", office.QuestionFilter{}, []string{a1.ID, a2.ID, b1.ID, o1.ID}},
		{"office", office.QuestionFilter{OfficeID: fx.office.ID}, []string{a1.ID, a2.ID, b1.ID}},
		{"agent", office.QuestionFilter{AgentID: fx.a.ID}, []string{a1.ID, a2.ID}},
		{"pending", office.QuestionFilter{OfficeID: fx.office.ID, Status: []string{office.QuestionPending}}, []string{a1.ID, b1.ID}},
		{"pending or answered of a", office.QuestionFilter{AgentID: fx.a.ID, Status: []string{office.QuestionPending, office.QuestionAnswered}}, []string{a1.ID, a2.ID}},
		{"none", office.QuestionFilter{Status: []string{office.QuestionExpired}}, nil},
	} {
		got, err := s.ListQuestions(ctx, tc.f)
		if err != nil {
			t.Errorf("ListQuestions(%s): %v", tc.name, err)
			continue
		}
		if d := cmp.Diff(sorted(ids(got, qid)), sorted(tc.want), fx.opts()); d != "" {
			t.Errorf("ListQuestions(%s %+v) (-got +want):\n%s", tc.name, tc.f, d)
		}
	}
	got, err := s.ListQuestions(ctx, office.QuestionFilter{OfficeID: fx.office.ID, Limit: 2})
	if err != nil || len(got) != 2 {
		t.Errorf("ListQuestions(Limit 2) = %d rows, %v; want 2", len(got), err)
	}
}

func testUserMessages(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	base := now().Add(-time.Hour)
	in := office.UserMessage{OfficeID: fx.office.ID, AgentID: fx.a.ID, Content: "please also add tests\n두 번째 줄", CreatedAt: base}
	m, err := s.CreateUserMessage(ctx, in)
	if err != nil {
		t.Fatalf("CreateUserMessage: %v", err)
	}
	if m.ID == "" || m.Status != office.MessagePending {
		t.Errorf("CreateUserMessage = id %q status %q; want an ID and pending", m.ID, m.Status)
	}
	want := in
	want.Status = office.MessagePending
	if d := diff(m, want, fx.opts(ignore(office.UserMessage{}, "ID", "UpdatedAt"))); d != "" {
		t.Errorf("CreateUserMessage returned (-got +want):\n%s", d)
	}
	mine, err := s.ListPendingUserMessages(ctx, office.Due{AgentID: fx.a.ID})
	if err != nil || len(mine) != 1 {
		t.Fatalf("ListPendingUserMessages(agent a) = %d rows, %v; want the one message", len(mine), err)
	}
	if d := diff(mine[0], m, fx.opts()); d != "" {
		t.Errorf("ListPendingUserMessages differs from CreateUserMessage's return (-got +want):\n%s", d)
	}
	m2, err := s.CreateUserMessage(ctx, office.UserMessage{OfficeID: fx.office.ID, AgentID: fx.b.ID, Content: "second", CreatedAt: base.Add(time.Minute)})
	if err != nil {
		t.Fatalf("CreateUserMessage: %v", err)
	}
	other := fx.mkOffice(t, "Other")
	oa := fx.mkAgent(t, other.ID, "X")
	m3, err := s.CreateUserMessage(ctx, office.UserMessage{OfficeID: other.ID, AgentID: oa.ID, Content: "third", CreatedAt: base.Add(2 * time.Minute)})
	if err != nil {
		t.Fatalf("CreateUserMessage: %v", err)
	}
	for _, tc := range []struct {
		due  office.Due
		want []string
	}{
		{office.Due{}, []string{m.ID, m2.ID, m3.ID}},
		{office.Due{OfficeIDs: []string{fx.office.ID}}, []string{m.ID, m2.ID}},
		{office.Due{OfficeIDs: []string{fx.office.ID, other.ID}}, []string{m.ID, m2.ID, m3.ID}},
		{office.Due{AgentID: fx.b.ID}, []string{m2.ID}},
		{office.Due{OfficeIDs: []string{fx.office.ID}, AgentID: oa.ID}, nil},
		{office.Due{AgentID: "not-a-uuid"}, nil},
	} {
		list, err := s.ListPendingUserMessages(ctx, tc.due)
		if err != nil {
			t.Fatalf("ListPendingUserMessages: %v", err)
		}
		if d := cmp.Diff(ids(list, mid), tc.want); d != "" {
			t.Errorf("ListPendingUserMessages(%+v) (-got +want, oldest first):\n%s", tc.due, d)
		}
	}
	ok, err := s.MarkUserMessageDelivered(ctx, m.ID)
	wantOK(t, "MarkUserMessageDelivered(pending)", ok, err)
	ok, err = s.MarkUserMessageDelivered(ctx, m.ID)
	wantNotOK(t, "MarkUserMessageDelivered(delivered)", ok, err)
	list, err := s.ListPendingUserMessages(ctx, office.Due{})
	if err != nil {
		t.Fatalf("ListPendingUserMessages: %v", err)
	}
	if d := cmp.Diff(ids(list, mid), []string{m2.ID, m3.ID}); d != "" {
		t.Errorf("ListPendingUserMessages after delivering one (-got +want):\n%s", d)
	}
}

func testInvocations(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	base := now().Add(-time.Hour)
	in := office.Invocation{
		OfficeID: fx.office.ID, CallerAgentID: fx.a.ID, CalleeAgentID: fx.b.ID,
		Reason: "review PR 12", Context: "branch x", CreatedAt: base,
	}
	inv1, err := s.CreateInvocation(ctx, in)
	if err != nil {
		t.Fatalf("CreateInvocation: %v", err)
	}
	want := in
	want.Status = office.InvocationPending
	if d := diff(inv1, want, fx.opts(ignore(office.Invocation{}, "ID", "UpdatedAt"))); d != "" {
		t.Errorf("CreateInvocation returned (-got +want; status defaults to pending):\n%s", d)
	}
	got, err := s.GetInvocation(ctx, inv1.ID)
	if err != nil {
		t.Fatalf("GetInvocation: %v", err)
	}
	if d := diff(got, inv1, fx.opts()); d != "" {
		t.Errorf("GetInvocation differs from CreateInvocation's return (-got +want):\n%s", d)
	}
	inv2, err := s.CreateInvocation(ctx, office.Invocation{OfficeID: fx.office.ID, CallerAgentID: fx.a.ID, CalleeAgentID: fx.b.ID, Reason: "second", CreatedAt: base.Add(time.Minute)})
	if err != nil {
		t.Fatalf("CreateInvocation: %v", err)
	}
	back, err := s.CreateInvocation(ctx, office.Invocation{OfficeID: fx.office.ID, CallerAgentID: fx.b.ID, CalleeAgentID: fx.a.ID, Reason: "back", CreatedAt: base.Add(-time.Minute)})
	if err != nil {
		t.Fatalf("CreateInvocation: %v", err)
	}
	child, err := s.CreateInvocation(ctx, office.Invocation{OfficeID: fx.office.ID, CallerAgentID: fx.b.ID, CalleeAgentID: fx.a.ID, ParentInvocationID: inv1.ID, Depth: 2, Reason: "child", CreatedAt: base.Add(2 * time.Minute)})
	if err != nil {
		t.Fatalf("CreateInvocation(child): %v", err)
	}
	if child.ParentInvocationID != inv1.ID || child.Depth != 2 {
		t.Errorf("child invocation = parent %q depth %d; want %q 2", child.ParentInvocationID, child.Depth, inv1.ID)
	}

	testInvocationProgress(t, fx, inv1, inv2, back)
	testInvocationEndings(t, fx, inv2)
}

// wantOpenInvocation checks that FindOpenInvocation from caller to callee
// finds want, the oldest open one, or ENOTFOUND when want is "".
func wantOpenInvocation(t *testing.T, fx *fixture, caller, callee, want string) {
	t.Helper()
	got, err := fx.s.FindOpenInvocation(fx.ctx, fx.office.ID, caller, callee)
	if want == "" {
		wantCode(t, "FindOpenInvocation with none open", err, office.ENOTFOUND)
		return
	}
	if err != nil {
		t.Fatalf("FindOpenInvocation: %v", err)
	}
	if got.ID != want {
		t.Errorf("FindOpenInvocation = %s (%q); want %s (the oldest open one from caller to callee)", got.ID, got.Reason, want)
	}
}

// testInvocationProgress: inv1 goes pending → in_progress (once) →
// completed with a result, keeping its times; while it is open it is the one
// FindOpenInvocation finds from a to b, then inv2 is; back is the open one
// from b to a.
func testInvocationProgress(t *testing.T, fx *fixture, inv1, inv2, back office.Invocation) {
	s, ctx := fx.s, fx.ctx
	find := func(caller, callee, want string) {
		t.Helper()
		wantOpenInvocation(t, fx, caller, callee, want)
	}
	find(fx.a.ID, fx.b.ID, inv1.ID)
	find(fx.b.ID, fx.a.ID, back.ID)

	started, ok, err := s.TransitionInvocation(ctx, inv1.ID, []string{office.InvocationPending}, office.InvocationInProgress, office.InvocationPatch{})
	wantOK(t, "TransitionInvocation(pending → in_progress)", ok, err)
	if started.Status != office.InvocationInProgress || started.ID != inv1.ID {
		t.Errorf("TransitionInvocation returned %s status %q; want %s in_progress", started.ID, started.Status, inv1.ID)
	}
	fx.nearPtr(t, "StartedAt", started.StartedAt, now())
	if started.CompletedAt != nil {
		t.Errorf("CompletedAt after in_progress = %v; want nil", started.CompletedAt)
	}
	_, ok, err = s.TransitionInvocation(ctx, inv1.ID, []string{office.InvocationPending}, office.InvocationInProgress, office.InvocationPatch{})
	wantNotOK(t, "TransitionInvocation(from pending, but in_progress)", ok, err)
	find(fx.a.ID, fx.b.ID, inv1.ID) // in_progress is open

	res, err := s.CreateResult(ctx, office.Result{OfficeID: fx.office.ID, InvocationID: inv1.ID, FromAgentID: fx.b.ID, ToAgentID: fx.a.ID, ResultType: "markdown", ContentType: "text/markdown", Content: "LGTM"})
	if err != nil {
		t.Fatalf("CreateResult: %v", err)
	}
	done, ok, err := s.TransitionInvocation(ctx, inv1.ID, []string{office.InvocationPending, office.InvocationInProgress}, office.InvocationCompleted, office.InvocationPatch{ResultID: res.ID})
	wantOK(t, "TransitionInvocation(in_progress → completed)", ok, err)
	if done.Status != office.InvocationCompleted || done.ResultID != res.ID {
		t.Errorf("completed invocation = status %q result %q; want completed %q", done.Status, done.ResultID, res.ID)
	}
	fx.nearPtr(t, "CompletedAt", done.CompletedAt, now())
	if done.StartedAt == nil {
		t.Errorf("StartedAt lost on completion")
	}
	find(fx.a.ID, fx.b.ID, inv2.ID)
}

// testInvocationEndings: an invocation may end failed, cancelled or rejected
// straight from pending; a rejected one may name no callee, a pending one
// must; once inv2 has failed no open one is left from a to b, and a later
// transition is refused and changes nothing.
func testInvocationEndings(t *testing.T, fx *fixture, inv2 office.Invocation) {
	s, ctx := fx.s, fx.ctx
	for _, to := range []string{office.InvocationFailed, office.InvocationCancelled, office.InvocationRejected} {
		inv, err := s.CreateInvocation(ctx, office.Invocation{OfficeID: fx.office.ID, CallerAgentID: fx.b.ID, CalleeAgentID: fx.b.ID, Reason: to})
		if err != nil {
			t.Fatalf("CreateInvocation: %v", err)
		}
		got, ok, err := s.TransitionInvocation(ctx, inv.ID, []string{office.InvocationPending}, to, office.InvocationPatch{Error: "because " + to})
		wantOK(t, "TransitionInvocation(pending → "+to+")", ok, err)
		if got.Status != to || got.Error != "because "+to {
			t.Errorf("→ %s: status %q error %q", to, got.Status, got.Error)
		}
		fx.nearPtr(t, "CompletedAt on "+to, got.CompletedAt, now())
		if got.StartedAt != nil {
			t.Errorf("→ %s straight from pending set StartedAt %v; want nil", to, got.StartedAt)
		}
	}
	// A rejected INVOKE that no agent could take names no callee; it is
	// stored with its reason all the same (the frontend shows why).
	rej, err := s.CreateInvocation(ctx, office.Invocation{OfficeID: fx.office.ID, CallerAgentID: fx.a.ID, Reason: "build it",
		Status: office.InvocationRejected, Error: "no agent named ghost"})
	if err != nil {
		t.Fatalf("CreateInvocation(rejected, no callee): %v", err)
	}
	if got, err := s.GetInvocation(ctx, rej.ID); err != nil || got.Status != office.InvocationRejected || got.CalleeAgentID != "" || got.Error != "no agent named ghost" {
		t.Errorf("rejected invocation read back: %+v, %v; want rejected, no callee, its reason", got, err)
	}
	if _, err := s.CreateInvocation(ctx, office.Invocation{OfficeID: fx.office.ID, CallerAgentID: fx.a.ID, Reason: "r"}); office.ErrorCode(err) != office.EINVALID {
		t.Errorf("CreateInvocation(pending, no callee) = %v; want EINVALID", err)
	}
	_, ok, err := s.TransitionInvocation(ctx, inv2.ID, []string{office.InvocationPending}, office.InvocationFailed, office.InvocationPatch{Error: "boom"})
	wantOK(t, "TransitionInvocation(inv2 → failed)", ok, err)
	wantOpenInvocation(t, fx, fx.a.ID, fx.b.ID, "")
	_, ok, err = s.TransitionInvocation(ctx, inv2.ID, []string{office.InvocationPending, office.InvocationInProgress}, office.InvocationCompleted, office.InvocationPatch{})
	wantNotOK(t, "TransitionInvocation(failed → completed)", ok, err)
	got, err := s.GetInvocation(ctx, inv2.ID)
	if err != nil || got.Status != office.InvocationFailed || got.Error != "boom" {
		t.Errorf("inv2 after a refused transition: %q %q %v; want failed boom", got.Status, got.Error, err)
	}
}

func testInvocationFilters(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	c := fx.mkAgent(t, fx.office.ID, "Third")
	mk := func(caller, callee string) office.Invocation {
		t.Helper()
		inv, err := s.CreateInvocation(ctx, office.Invocation{OfficeID: fx.office.ID, CallerAgentID: caller, CalleeAgentID: callee, Reason: "r"})
		if err != nil {
			t.Fatalf("CreateInvocation: %v", err)
		}
		return inv
	}
	ab := mk(fx.a.ID, fx.b.ID)
	ba := mk(fx.b.ID, fx.a.ID)
	bc := mk(fx.b.ID, c.ID)
	if _, ok, err := s.TransitionInvocation(ctx, bc.ID, []string{office.InvocationPending}, office.InvocationInProgress, office.InvocationPatch{}); !ok || err != nil {
		t.Fatalf("TransitionInvocation: %v %v", ok, err)
	}
	other := fx.mkOffice(t, "Other")
	x := fx.mkAgent(t, other.ID, "X")
	y := fx.mkAgent(t, other.ID, "Y")
	xy, err := s.CreateInvocation(ctx, office.Invocation{OfficeID: other.ID, CallerAgentID: x.ID, CalleeAgentID: y.ID, Reason: "r"})
	if err != nil {
		t.Fatalf("CreateInvocation: %v", err)
	}
	for _, tc := range []struct {
		name string
		f    office.InvocationFilter
		want []string
	}{
		{"all", office.InvocationFilter{}, []string{ab.ID, ba.ID, bc.ID, xy.ID}},
		{"office", office.InvocationFilter{OfficeID: fx.office.ID}, []string{ab.ID, ba.ID, bc.ID}},
		{"agent a as caller or callee", office.InvocationFilter{AgentID: fx.a.ID}, []string{ab.ID, ba.ID}},
		{"agent c as callee", office.InvocationFilter{AgentID: c.ID}, []string{bc.ID}},
		{"tasks of b (callee only)", office.InvocationFilter{CalleeAgentID: fx.b.ID}, []string{ab.ID}},
		{"tasks of a (callee only)", office.InvocationFilter{OfficeID: fx.office.ID, CalleeAgentID: fx.a.ID}, []string{ba.ID}},
		{"tasks of a non-UUID", office.InvocationFilter{CalleeAgentID: "not-a-uuid"}, nil},
		{"in_progress", office.InvocationFilter{Status: []string{office.InvocationInProgress}}, []string{bc.ID}},
		{"open of b", office.InvocationFilter{OfficeID: fx.office.ID, AgentID: fx.b.ID, Status: []string{office.InvocationPending, office.InvocationInProgress}}, []string{ab.ID, ba.ID, bc.ID}},
	} {
		got, err := s.ListInvocations(ctx, tc.f)
		if err != nil {
			t.Errorf("ListInvocations(%s): %v", tc.name, err)
			continue
		}
		if d := cmp.Diff(sorted(ids(got, iid)), sorted(tc.want)); d != "" {
			t.Errorf("ListInvocations(%s) (-got +want):\n%s", tc.name, d)
		}
	}
	got, err := s.ListInvocations(ctx, office.InvocationFilter{Limit: 1})
	if err != nil || len(got) != 1 {
		t.Errorf("ListInvocations(Limit 1) = %d rows, %v; want 1", len(got), err)
	}
}

func testResults(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	inv, err := s.CreateInvocation(ctx, office.Invocation{OfficeID: fx.office.ID, CallerAgentID: fx.a.ID, CalleeAgentID: fx.b.ID, Reason: "r"})
	if err != nil {
		t.Fatalf("CreateInvocation: %v", err)
	}
	in := office.Result{OfficeID: fx.office.ID, InvocationID: inv.ID, FromAgentID: fx.b.ID, ToAgentID: fx.a.ID,
		ResultType: "json", ContentType: "application/json", Content: `{"ok": true}`}
	r, err := s.CreateResult(ctx, in)
	if err != nil {
		t.Fatalf("CreateResult: %v", err)
	}
	fx.checkStamps(t, "CreateResult", r.ID, r.CreatedAt, r.UpdatedAt)
	want := in
	want.Status = office.ResultPending
	if d := diff(r, want, fx.opts(ignore(office.Result{}))); d != "" {
		t.Errorf("CreateResult returned (-got +want; status defaults to pending):\n%s", d)
	}
	got, err := s.GetResult(ctx, r.ID)
	if err != nil {
		t.Fatalf("GetResult: %v", err)
	}
	if d := diff(got, r, fx.opts()); d != "" {
		t.Errorf("GetResult differs from CreateResult's return (-got +want):\n%s", d)
	}
	// A result without an invocation (a plain DELIVER_RESULT).
	loose, err := s.CreateResult(ctx, office.Result{OfficeID: fx.office.ID, FromAgentID: fx.a.ID, ToAgentID: fx.b.ID, ResultType: "message", ContentType: "text/plain", Content: "fyi"})
	if err != nil {
		t.Fatalf("CreateResult(no invocation): %v", err)
	}
	if loose.InvocationID != "" {
		t.Errorf("result without invocation has InvocationID %q", loose.InvocationID)
	}
	ok, err := s.MarkResultDelivered(ctx, r.ID)
	wantOK(t, "MarkResultDelivered(pending)", ok, err)
	ok, err = s.MarkResultDelivered(ctx, r.ID)
	wantNotOK(t, "MarkResultDelivered(delivered)", ok, err)
	got, err = s.GetResult(ctx, r.ID)
	if err != nil {
		t.Fatalf("GetResult: %v", err)
	}
	if got.Status != office.ResultDelivered {
		t.Errorf("result status after delivery = %q", got.Status)
	}
	fx.nearPtr(t, "result DeliveredAt", got.DeliveredAt, now())
	for _, tc := range []struct {
		name string
		f    office.ResultFilter
		want []string
	}{
		{"all", office.ResultFilter{}, []string{r.ID, loose.ID}},
		{"office", office.ResultFilter{OfficeID: fx.office.ID}, []string{r.ID, loose.ID}},
		{"to a", office.ResultFilter{ToAgentID: fx.a.ID}, []string{r.ID}},
		{"invocation", office.ResultFilter{InvocationID: inv.ID}, []string{r.ID}},
		{"pending", office.ResultFilter{Status: []string{office.ResultPending}}, []string{loose.ID}},
		{"other office", office.ResultFilter{OfficeID: uuid.NewString()}, nil},
	} {
		got, err := s.ListResults(ctx, tc.f)
		if err != nil {
			t.Errorf("ListResults(%s): %v", tc.name, err)
			continue
		}
		if d := cmp.Diff(sorted(ids(got, rid)), sorted(tc.want), fx.opts()); d != "" {
			t.Errorf("ListResults(%s) (-got +want):\n%s", tc.name, d)
		}
	}
	got2, err := s.ListResults(ctx, office.ResultFilter{Limit: 1})
	if err != nil || len(got2) != 1 {
		t.Errorf("ListResults(Limit 1) = %d rows, %v; want 1", len(got2), err)
	}
}

func testDependencies(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	base := now().Add(-time.Hour)
	exp := now().Add(time.Hour)
	in := office.DependencyRequest{OfficeID: fx.office.ID, AgentID: fx.a.ID, Type: "api_key", Name: "OPENAI_API_KEY",
		Description: "for embeddings", Required: true, Default: "none", ExpiresAt: exp, CreatedAt: base}
	d1, err := s.CreateDependency(ctx, in)
	if err != nil {
		t.Fatalf("CreateDependency: %v", err)
	}
	want := in
	want.Status = office.DependencyPending
	if d := diff(d1, want, fx.opts(ignore(office.DependencyRequest{}, "ID", "UpdatedAt"))); d != "" {
		t.Errorf("CreateDependency returned (-got +want; status defaults to pending):\n%s", d)
	}
	got, err := s.GetDependency(ctx, d1.ID)
	if err != nil {
		t.Fatalf("GetDependency: %v", err)
	}
	if d := diff(got, d1, fx.opts()); d != "" {
		t.Errorf("GetDependency differs from CreateDependency's return (-got +want):\n%s", d)
	}
	ok, err := s.MarkDependencyDelivered(ctx, d1.ID)
	wantNotOK(t, "MarkDependencyDelivered(pending)", ok, err)

	testDependencyProvide(t, fx, d1)
	d2, d3, d4 := testDependencyRejectAndLarge(t, fx, base)
	testDependencyDelivery(t, fx, d1, d2, d3, d4)
	testDependencyFilters(t, fx, d1, d2, d3, d4)
}

// testDependencyProvide: the pending dependency d1 is provided with opaque
// bytes, stored exactly; a second provide or a reject is refused and
// changes nothing.
func testDependencyProvide(t *testing.T, fx *fixture, d1 office.DependencyRequest) {
	s, ctx := fx.s, fx.ctx
	// Opaque bytes: NULs, invalid UTF-8, high bytes, and a large value.
	value := []byte{0x00, 0xff, 0xfe, 'k', 0x00, 0x80, '\'', '"', '\\', 0x1b}
	prov, ok, err := s.ProvideDependency(ctx, d1.ID, value)
	wantOK(t, "ProvideDependency(pending)", ok, err)
	if prov.Status != office.DependencyProvided || !bytes.Equal(prov.Value, value) {
		t.Errorf("ProvideDependency returned status %q value %x; want provided %x", prov.Status, prov.Value, value)
	}
	fx.nearPtr(t, "ProvidedAt", prov.ProvidedAt, now())
	if prov.DeliveredAt != nil {
		t.Errorf("DeliveredAt set by ProvideDependency: %v", prov.DeliveredAt)
	}
	got, err := s.GetDependency(ctx, d1.ID)
	if err != nil {
		t.Fatalf("GetDependency: %v", err)
	}
	if !bytes.Equal(got.Value, value) {
		t.Errorf("stored value = %x; want the bytes given %x", got.Value, value)
	}
	_, ok, err = s.ProvideDependency(ctx, d1.ID, []byte("other"))
	wantNotOK(t, "ProvideDependency(provided)", ok, err)
	_, ok, err = s.RejectDependency(ctx, d1.ID, "too late")
	wantNotOK(t, "RejectDependency(provided)", ok, err)
	if got, _ := s.GetDependency(ctx, d1.ID); !bytes.Equal(got.Value, value) {
		t.Errorf("value changed by a refused transition: %x", got.Value)
	}
}

// testDependencyRejectAndLarge makes three more dependencies, created a
// minute apart after base: d2 rejected (once, and then not providable), d3
// provided with 64 KiB that round-trips, d4 left pending.
func testDependencyRejectAndLarge(t *testing.T, fx *fixture, base time.Time) (d2, d3, d4 office.DependencyRequest) {
	s, ctx := fx.s, fx.ctx
	d2 = fx.dependency(t, func(d *office.DependencyRequest) {
		d.CreatedAt = base.Add(time.Minute)
		d.Type = "env"
		d.Name = "REGION"
	})
	rej, ok, err := s.RejectDependency(ctx, d2.ID, "we do not have one")
	wantOK(t, "RejectDependency(pending)", ok, err)
	if rej.Status != office.DependencyRejected || rej.RejectionReason != "we do not have one" {
		t.Errorf("RejectDependency returned status %q reason %q", rej.Status, rej.RejectionReason)
	}
	_, ok, err = s.RejectDependency(ctx, d2.ID, "again")
	wantNotOK(t, "RejectDependency(rejected)", ok, err)
	_, ok, err = s.ProvideDependency(ctx, d2.ID, []byte("v"))
	wantNotOK(t, "ProvideDependency(rejected)", ok, err)

	big := make([]byte, 64<<10)
	for i := range big {
		big[i] = byte(i*7 + i>>8)
	}
	d3 = fx.dependency(t, func(d *office.DependencyRequest) {
		d.CreatedAt = base.Add(2 * time.Minute)
		d.Type = "file"
		d.Name = "cert.pem"
	})
	if _, ok, err := s.ProvideDependency(ctx, d3.ID, big); !ok || err != nil {
		t.Fatalf("ProvideDependency(64 KiB): %v %v", ok, err)
	}
	if got, err := s.GetDependency(ctx, d3.ID); err != nil || !bytes.Equal(got.Value, big) {
		t.Errorf("64 KiB value did not round-trip (len %d, err %v)", len(got.Value), err)
	}
	d4 = fx.dependency(t, func(d *office.DependencyRequest) { d.CreatedAt = base.Add(3 * time.Minute) }) // stays pending
	return d2, d3, d4
}

// testDependencyDelivery: provided, rejected (and expired) dependencies that
// are not yet delivered are listed oldest first for their office and agent;
// each is marked delivered once, a pending one not at all, and delivery
// keeps the status.
func testDependencyDelivery(t *testing.T, fx *fixture, d1, d2, d3, d4 office.DependencyRequest) {
	s, ctx := fx.s, fx.ctx
	undelivered := func(due office.Due, want []string) {
		t.Helper()
		list, err := s.ListUndeliveredDependencies(ctx, due)
		if err != nil {
			t.Fatalf("ListUndeliveredDependencies: %v", err)
		}
		if d := cmp.Diff(ids(list, did), want); d != "" {
			t.Errorf("ListUndeliveredDependencies(%+v) (-got +want; provided/rejected/expired, undelivered, oldest first):\n%s", due, d)
		}
	}
	undelivered(office.Due{}, []string{d1.ID, d2.ID, d3.ID})
	undelivered(office.Due{OfficeIDs: []string{uuid.NewString()}}, nil)
	undelivered(office.Due{OfficeIDs: []string{fx.office.ID}, AgentID: d1.AgentID}, []string{d1.ID, d2.ID, d3.ID})
	undelivered(office.Due{AgentID: uuid.NewString()}, nil)
	ok, err := s.MarkDependencyDelivered(ctx, d1.ID)
	wantOK(t, "MarkDependencyDelivered(provided)", ok, err)
	ok, err = s.MarkDependencyDelivered(ctx, d1.ID)
	wantNotOK(t, "MarkDependencyDelivered(delivered)", ok, err)
	ok, err = s.MarkDependencyDelivered(ctx, d2.ID)
	wantOK(t, "MarkDependencyDelivered(rejected)", ok, err)
	ok, err = s.MarkDependencyDelivered(ctx, d4.ID)
	wantNotOK(t, "MarkDependencyDelivered(pending)", ok, err)
	undelivered(office.Due{OfficeIDs: []string{fx.office.ID}}, []string{d3.ID})
	got, err := s.GetDependency(ctx, d1.ID)
	if err != nil {
		t.Fatalf("GetDependency: %v", err)
	}
	fx.nearPtr(t, "dependency DeliveredAt", got.DeliveredAt, now())
	if got.Status != office.DependencyProvided {
		t.Errorf("status after MarkDependencyDelivered = %q; want it to stay provided", got.Status)
	}
}

// testDependencyFilters: ListDependencies filters by office, status and
// agent, and honours Limit.
func testDependencyFilters(t *testing.T, fx *fixture, d1, d2, d3, d4 office.DependencyRequest) {
	s, ctx := fx.s, fx.ctx
	for _, tc := range []struct {
		name string
		f    office.DependencyFilter
		want []string
	}{
		{"all", office.DependencyFilter{}, []string{d1.ID, d2.ID, d3.ID, d4.ID}},
		{"office", office.DependencyFilter{OfficeID: fx.office.ID}, []string{d1.ID, d2.ID, d3.ID, d4.ID}},
		{"pending", office.DependencyFilter{Status: []string{office.DependencyPending}}, []string{d4.ID}},
		{"provided or rejected", office.DependencyFilter{Status: []string{office.DependencyProvided, office.DependencyRejected}}, []string{d1.ID, d2.ID, d3.ID}},
		{"agent b", office.DependencyFilter{AgentID: fx.b.ID}, nil},
	} {
		got, err := s.ListDependencies(ctx, tc.f)
		if err != nil {
			t.Errorf("ListDependencies(%s): %v", tc.name, err)
			continue
		}
		if d := cmp.Diff(sorted(ids(got, did)), sorted(tc.want), fx.opts()); d != "" {
			t.Errorf("ListDependencies(%s) (-got +want):\n%s", tc.name, d)
		}
	}
	if got, err := s.ListDependencies(ctx, office.DependencyFilter{Limit: 2}); err != nil || len(got) != 2 {
		t.Errorf("ListDependencies(Limit 2) = %d rows, %v; want 2", len(got), err)
	}
}

func testDependencyExpiry(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	t0 := now()
	past := fx.dependency(t, func(d *office.DependencyRequest) { d.ExpiresAt = t0.Add(-time.Minute) })
	future := fx.dependency(t, func(d *office.DependencyRequest) { d.ExpiresAt = t0.Add(time.Hour) })
	prov := fx.dependency(t, func(d *office.DependencyRequest) { d.ExpiresAt = t0.Add(-time.Minute) })
	if _, ok, err := s.ProvideDependency(ctx, prov.ID, []byte("k")); !ok || err != nil {
		t.Fatalf("ProvideDependency: %v %v", ok, err)
	}
	got, err := s.ExpireDependencies(ctx, t0)
	if err != nil {
		t.Fatalf("ExpireDependencies: %v", err)
	}
	if d := cmp.Diff(ids(got, did), []string{past.ID}); d != "" {
		t.Errorf("ExpireDependencies(now) changed (-got +want):\n%s", d)
	}
	for _, d := range got {
		if d.Status != office.DependencyExpired || d.Name != past.Name {
			t.Errorf("ExpireDependencies returned %s status %q name %q; want expired %q", d.ID, d.Status, d.Name, past.Name)
		}
	}
	again, err := s.ExpireDependencies(ctx, t0)
	if err != nil || len(again) != 0 {
		t.Errorf("second ExpireDependencies = %v, %v; want nothing", ids(again, did), err)
	}
	list, err := s.ListUndeliveredDependencies(ctx, office.Due{})
	if err != nil {
		t.Fatalf("ListUndeliveredDependencies: %v", err)
	}
	if d := cmp.Diff(sorted(ids(list, did)), sorted([]string{past.ID, prov.ID})); d != "" {
		t.Errorf("ListUndeliveredDependencies after expiry (-got +want; expired ones await delivery too):\n%s", d)
	}
	ok, err := s.MarkDependencyDelivered(ctx, past.ID)
	wantOK(t, "MarkDependencyDelivered(expired)", ok, err)
	_, ok, err = s.ProvideDependency(ctx, past.ID, []byte("late"))
	wantNotOK(t, "ProvideDependency(expired)", ok, err)
	if g, err := s.GetDependency(ctx, future.ID); err != nil || g.Status != office.DependencyPending {
		t.Errorf("future dependency after expiry: %q %v; want pending", g.Status, err)
	}
}

func testEvents(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	other := fx.mkOffice(t, "Other")
	in := office.Event{OfficeID: fx.office.ID, AgentID: fx.a.ID, Kind: "ask_user",
		Payload: json.RawMessage(`{"question":"Which?","options":["a","b"],"n":1}`), Raw: "[ASK_USER]\nquestion: Which?", DedupeKey: "transcript:uuid-1"}
	e1, inserted, err := s.AppendEvent(ctx, in)
	if err != nil || !inserted {
		t.Fatalf("AppendEvent(new) = inserted %v, %v; want inserted", inserted, err)
	}
	if e1.ID <= 0 {
		t.Errorf("AppendEvent assigned ID %d; want > 0", e1.ID)
	}
	fx.near(t, "event CreatedAt", e1.CreatedAt, now())
	want := in
	if d := diff(e1, want, fx.opts(ignore(office.Event{}, "ID", "CreatedAt"))); d != "" {
		t.Errorf("AppendEvent returned (-got +want):\n%s", d)
	}
	dup, inserted, err := s.AppendEvent(ctx, office.Event{OfficeID: fx.office.ID, Kind: "ask_user", Payload: json.RawMessage(`{"x":2}`), DedupeKey: in.DedupeKey})
	if err != nil {
		t.Errorf("AppendEvent(duplicate key): %v; want no error", err)
	}
	if inserted {
		t.Errorf("AppendEvent(duplicate key) inserted; want inserted=false")
	}
	// The one stored first stands and is returned (the engine reads when
	// a row was first typed from it: engine/once.go).
	if dup.ID != e1.ID || !sameJSON(dup.Payload, e1.Payload) {
		t.Errorf("AppendEvent(duplicate key) = id %d payload %s; want the first, id %d payload %s", dup.ID, dup.Payload, e1.ID, e1.Payload)
	}
	eo, inserted, err := s.AppendEvent(ctx, office.Event{OfficeID: other.ID, Kind: "ask_user", DedupeKey: in.DedupeKey})
	if err != nil || !inserted {
		t.Errorf("AppendEvent(same key, other office) = inserted %v, %v; want inserted (keys are unique per office)", inserted, err)
	}
	var mine []office.Event
	mine = append(mine, e1)
	for i := range 4 {
		agent := fx.a.ID
		if i%2 == 1 {
			agent = fx.b.ID
		}
		if i == 3 {
			agent = ""
		}
		e, inserted, err := s.AppendEvent(ctx, office.Event{OfficeID: fx.office.ID, AgentID: agent, Kind: "step", Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		if err != nil || !inserted {
			t.Fatalf("AppendEvent(no key #%d) = %v, %v", i, inserted, err)
		}
		if e.ID <= mine[len(mine)-1].ID {
			t.Errorf("event IDs not increasing: %d after %d", e.ID, mine[len(mine)-1].ID)
		}
		mine = append(mine, e)
	}
	list, err := s.ListEvents(ctx, office.EventFilter{OfficeID: fx.office.ID})
	if err != nil {
		t.Fatalf("ListEvents: %v", err)
	}
	if d := diff(list, mine, fx.opts()); d != "" {
		t.Errorf("ListEvents(office) (-got +want, oldest first):\n%s", d)
	}
	testEventListing(t, fx, mine, eo)
}

// testEventListing: the office's events mine page by AfterID and Limit in
// order, filter by agent, and with no office given ListEvents returns every
// office's, eo (another office's) among them.
func testEventListing(t *testing.T, fx *fixture, mine []office.Event, eo office.Event) {
	s, ctx := fx.s, fx.ctx
	// Paging.
	var paged []office.Event
	after := int64(0)
	for range 10 {
		page, err := s.ListEvents(ctx, office.EventFilter{OfficeID: fx.office.ID, AfterID: after, Limit: 2})
		if err != nil {
			t.Fatalf("ListEvents(page): %v", err)
		}
		if len(page) > 2 {
			t.Fatalf("ListEvents(Limit 2) returned %d", len(page))
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		after = page[len(page)-1].ID
	}
	if d := cmp.Diff(ids(paged, eid), ids(mine, eid)); d != "" {
		t.Errorf("ListEvents paged by AfterID (-got +want):\n%s", d)
	}
	byAgent, err := s.ListEvents(ctx, office.EventFilter{OfficeID: fx.office.ID, AgentID: fx.b.ID})
	if err != nil {
		t.Fatalf("ListEvents(agent): %v", err)
	}
	if d := cmp.Diff(ids(byAgent, eid), []string{eid(mine[2])}); d != "" {
		t.Errorf("ListEvents(agent b) (-got +want):\n%s", d)
	}
	all, err := s.ListEvents(ctx, office.EventFilter{})
	if err != nil {
		t.Fatalf("ListEvents(all): %v", err)
	}
	if len(all) != len(mine)+1 || !contains(ids(all, eid), eid(eo)) {
		t.Errorf("ListEvents(all offices) = %d events; want %d including the other office's", len(all), len(mine)+1)
	}
}

func testEventsDefaultLimit(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	for i := range 105 {
		if _, _, err := s.AppendEvent(ctx, office.Event{OfficeID: fx.office.ID, Kind: "step", Raw: fmt.Sprint(i)}); err != nil {
			t.Fatalf("AppendEvent: %v", err)
		}
	}
	list, err := s.ListEvents(ctx, office.EventFilter{OfficeID: fx.office.ID})
	if err != nil {
		t.Fatalf("ListEvents: %v", err)
	}
	if len(list) != 100 {
		t.Fatalf("ListEvents with Limit 0 returned %d events; want the default 100", len(list))
	}
	if list[0].Raw != "0" || list[99].Raw != "99" {
		t.Errorf("ListEvents default page = %q..%q; want the oldest 0..99", list[0].Raw, list[99].Raw)
	}
	rest, err := s.ListEvents(ctx, office.EventFilter{OfficeID: fx.office.ID, AfterID: list[99].ID})
	if err != nil || len(rest) != 5 {
		t.Errorf("ListEvents after the first page = %d events, %v; want 5", len(rest), err)
	}
}

// sameJSON reports whether a and b are the same JSON value (jsonb and
// SQLite store the same value with other spacing).
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return string(a) == string(b)
	}
	return reflect.DeepEqual(x, y)
}
