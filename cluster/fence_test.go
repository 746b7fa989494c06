package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/store/postgres"
)

// TestFenceEveryDelivery goes through the store (as serve opens it, naming
// its node) over every write that acts for an office: each is refused to a
// node that does not hold the office's lease, and made by the node that
// does. The writes any node makes for any office (answering, sending a
// message, providing a dependency, deleting an agent) are not refused.
func TestFenceEveryDelivery(t *testing.T) {
	pool, ids := database(t, 1)
	ctx := context.Background()
	officeID := ids[0]
	url := pool.Config().ConnString()
	open := func(node string) *postgres.Store {
		s, err := postgres.Open(ctx, url, postgres.Options{Node: node, MaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	holder, other, tool := open("a"), open("b"), open("")
	if _, err := pool.Exec(ctx, `insert into office_cluster.leases (office_id, node_id, expires_at) values ($1, 'a', now() + interval '1 hour')`, officeID); err != nil {
		t.Fatal(err)
	}
	agent := func(name string) office.Agent {
		a, err := tool.UpsertAgent(ctx, office.Agent{OfficeID: officeID, Name: name, Role: name})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	po, dev, gone := agent("po"), agent("dev"), agent("gone")

	q, inv, res, dep := ownerRows(t, holder, officeID, po, dev, gone)
	notice := ownerNotice(t, holder, officeID, po)
	msg := anyNodeWrites(t, other, officeID, q, dep, po, gone)

	acts := []struct {
		name string
		do   func(s *postgres.Store) (bool, error)
	}{
		{"session row", func(s *postgres.Store) (bool, error) {
			_, _, ok, err := s.SetSessionStatus(ctx, office.SessionStatus{OfficeID: officeID, AgentID: po.ID, Status: office.SessionStarting, Process: true})
			return ok, err
		}},
		{"question delivered", func(s *postgres.Store) (bool, error) { return s.MarkQuestionDelivered(ctx, q.ID) }},
		{"message delivered", func(s *postgres.Store) (bool, error) { return s.MarkUserMessageDelivered(ctx, msg.ID) }},
		{"result delivered", func(s *postgres.Store) (bool, error) { return s.MarkResultDelivered(ctx, res.ID) }},
		{"dependency delivered", func(s *postgres.Store) (bool, error) { return s.MarkDependencyDelivered(ctx, dep.ID) }},
		{"notice delivered", func(s *postgres.Store) (bool, error) {
			_, _, ok, err := s.MarkDelivered(ctx, office.Delivered{OfficeID: officeID, AgentID: po.ID, Kind: office.DeliveredNotice, ID: notice.ID})
			return ok, err
		}},
		{"task typed (pending → in_progress)", func(s *postgres.Store) (bool, error) {
			_, ok, err := s.TransitionInvocation(ctx, inv.ID, []string{office.InvocationPending}, office.InvocationInProgress, office.InvocationPatch{})
			return ok, err
		}},
		{"task requeued (in_progress → pending)", func(s *postgres.Store) (bool, error) {
			_, ok, err := s.TransitionInvocation(ctx, inv.ID, []string{office.InvocationInProgress}, office.InvocationPending, office.InvocationPatch{})
			return ok, err
		}},
	}
	for _, a := range acts {
		if ok, err := a.do(other); err == nil || !strings.Contains(err.Error(), "fenced") {
			t.Errorf("%s by a node without the lease: ok %v, err %v; want fenced", a.name, ok, err)
		}
		if ok, err := a.do(holder); err != nil || !ok {
			t.Errorf("%s by the lease holder: ok %v, err %v", a.name, ok, err)
		}
	}
	// Once the lease ran out, its holder is refused too.
	if _, err := pool.Exec(ctx, `update office_cluster.leases set expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := holder.TransitionInvocation(ctx, inv.ID, []string{office.InvocationPending}, office.InvocationInProgress, office.InvocationPatch{}); err == nil || !strings.Contains(err.Error(), "fenced") {
		t.Errorf("a task typed by the holder of an expired lease: ok %v, err %v; want fenced", ok, err)
	}
}

// ownerRows makes the rows as the owner's engine makes them (creating is
// not fenced: rows from an agent's words have ids derived from the
// words): a question, an invocation and its result, a dependency, and a
// child of an invocation gone's.
func ownerRows(t *testing.T, holder *postgres.Store, officeID string, po, dev, gone office.Agent) (office.Question, office.Invocation, office.Result, office.DependencyRequest) {
	ctx := context.Background()
	q, err := holder.CreateQuestion(ctx, office.Question{OfficeID: officeID, AgentID: po.ID, Question: "Which colour?", ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := holder.CreateInvocation(ctx, office.Invocation{OfficeID: officeID, CallerAgentID: po.ID, CalleeAgentID: dev.ID, Reason: "build it"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := holder.CreateResult(ctx, office.Result{OfficeID: officeID, FromAgentID: dev.ID, ToAgentID: po.ID, Content: "built"})
	if err != nil {
		t.Fatal(err)
	}
	dep, err := holder.CreateDependency(ctx, office.DependencyRequest{OfficeID: officeID, AgentID: dev.ID, Type: "text", Name: "region", ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	parent, err := holder.CreateInvocation(ctx, office.Invocation{OfficeID: officeID, CallerAgentID: gone.ID, CalleeAgentID: po.ID, Reason: "plan"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.CreateInvocation(ctx, office.Invocation{OfficeID: officeID, CallerAgentID: po.ID, CalleeAgentID: dev.ID, ParentInvocationID: parent.ID, Depth: 1, Reason: "sub-task"}); err != nil {
		t.Fatal(err)
	}

	return q, inv, res, dep
}

// anyNodeWrites: what any node does for any office: a person's answer,
// message and dependency, an agent deleted (its tasks' rows are updated
// by the cascade). It returns the message.
// ownerNotice stores a notice for po as the lease holder's engine does,
// and returns it as the delivery read gives it.
func ownerNotice(t *testing.T, holder *postgres.Store, officeID string, po office.Agent) office.Notice {
	t.Helper()
	ctx := context.Background()
	if n, err := holder.AddNotices(ctx, officeID, po.ID, []string{"[OFFICE] a notice"}, 20); err != nil || n != 1 {
		t.Fatalf("a notice stored by the lease holder: %d, %v", n, err)
	}
	due, err := holder.ListDue(ctx, officeID, po.ID)
	if err != nil || len(due.Notices) != 1 {
		t.Fatalf("notices due: %+v, %v", due.Notices, err)
	}
	return due.Notices[0]
}

func anyNodeWrites(t *testing.T, other *postgres.Store, officeID string, q office.Question, dep office.DependencyRequest, po, gone office.Agent) office.UserMessage {
	ctx := context.Background()
	if _, ok, err := other.AnswerQuestion(ctx, q.ID, "blue", ""); err != nil || !ok {
		t.Fatalf("an answer through a node without the lease: %v, %v", ok, err)
	}
	msg, err := other.CreateUserMessage(ctx, office.UserMessage{OfficeID: officeID, AgentID: po.ID, Content: "hello"})
	if err != nil {
		t.Fatalf("a message through a node without the lease: %v", err)
	}
	if _, ok, err := other.ProvideDependency(ctx, dep.ID, []byte("eu")); err != nil || !ok {
		t.Fatalf("a dependency provided through a node without the lease: %v, %v", ok, err)
	}
	if err := other.DeleteAgent(ctx, gone.ID); err != nil {
		t.Fatalf("an agent deleted through a node without the lease: %v", err)
	}

	return msg
}
