// Package metered measures a store's requests: each office.Store method
// that can fail reports its name, how long it took and its error to an
// observer (the server's office_store_* metrics, docs/metrics.md).
//
// The methods below are one per office.Store method; a method added to
// the interface and not here still works (the embedded store answers it)
// but is not measured: TestEveryMethodMeasured fails until it is added.
package metered

import (
	"context"
	"time"

	"github.com/office-server/office-server/office"
)

// Observer is told of every request: the method's name, its duration, and
// its error (nil on success).
type Observer func(op string, d time.Duration, err error)

// Store is an office.Store whose requests are observed.
type Store struct {
	office.Store
	obs Observer
}

// New returns s with its requests reported to obs.
func New(s office.Store, obs Observer) *Store { return &Store{Store: s, obs: obs} }

func (s *Store) observe(op string, start time.Time, err *error) {
	s.obs(op, time.Since(start), *err)
}

func (s *Store) AddPermissionGrant(ctx context.Context, a1 office.PermissionGrant) (err error) {
	defer s.observe("AddPermissionGrant", time.Now(), &err)
	return s.Store.AddPermissionGrant(ctx, a1)
}

func (s *Store) AnswerQuestion(ctx context.Context, a1 string, a2 string, a3 string) (r0 office.Question, r1 bool, err error) {
	defer s.observe("AnswerQuestion", time.Now(), &err)
	return s.Store.AnswerQuestion(ctx, a1, a2, a3)
}

func (s *Store) AppendEvent(ctx context.Context, a1 office.Event) (r0 office.Event, r1 bool, err error) {
	defer s.observe("AppendEvent", time.Now(), &err)
	return s.Store.AppendEvent(ctx, a1)
}

func (s *Store) CancelPendingQuestion(ctx context.Context, a1 string) (r0 bool, err error) {
	defer s.observe("CancelPendingQuestion", time.Now(), &err)
	return s.Store.CancelPendingQuestion(ctx, a1)
}

func (s *Store) CancelQuestion(ctx context.Context, a1 string) (r0 bool, err error) {
	defer s.observe("CancelQuestion", time.Now(), &err)
	return s.Store.CancelQuestion(ctx, a1)
}

func (s *Store) CreateDependency(ctx context.Context, a1 office.DependencyRequest) (r0 office.DependencyRequest, err error) {
	defer s.observe("CreateDependency", time.Now(), &err)
	return s.Store.CreateDependency(ctx, a1)
}

func (s *Store) CreateInvocation(ctx context.Context, a1 office.Invocation) (r0 office.Invocation, err error) {
	defer s.observe("CreateInvocation", time.Now(), &err)
	return s.Store.CreateInvocation(ctx, a1)
}

func (s *Store) CreateProxyRequest(ctx context.Context, a1 office.ProxyRequest) (r0 office.ProxyRequest, err error) {
	defer s.observe("CreateProxyRequest", time.Now(), &err)
	return s.Store.CreateProxyRequest(ctx, a1)
}

func (s *Store) CreateQuestion(ctx context.Context, a1 office.Question) (r0 office.Question, err error) {
	defer s.observe("CreateQuestion", time.Now(), &err)
	return s.Store.CreateQuestion(ctx, a1)
}

func (s *Store) CreateResult(ctx context.Context, a1 office.Result) (r0 office.Result, err error) {
	defer s.observe("CreateResult", time.Now(), &err)
	return s.Store.CreateResult(ctx, a1)
}

func (s *Store) CreateUserMessage(ctx context.Context, a1 office.UserMessage) (r0 office.UserMessage, err error) {
	defer s.observe("CreateUserMessage", time.Now(), &err)
	return s.Store.CreateUserMessage(ctx, a1)
}

func (s *Store) DeleteAgent(ctx context.Context, a1 string) (err error) {
	defer s.observe("DeleteAgent", time.Now(), &err)
	return s.Store.DeleteAgent(ctx, a1)
}

func (s *Store) EndPermissionGrants(ctx context.Context, a1 string) (r0 int, err error) {
	defer s.observe("EndPermissionGrants", time.Now(), &err)
	return s.Store.EndPermissionGrants(ctx, a1)
}

func (s *Store) ExpireDependencies(ctx context.Context, a1 time.Time) (r0 []office.DependencyRequest, err error) {
	defer s.observe("ExpireDependencies", time.Now(), &err)
	return s.Store.ExpireDependencies(ctx, a1)
}

func (s *Store) ExpireQuestions(ctx context.Context, a1 time.Time, a2 []string) (r0 []office.Question, err error) {
	defer s.observe("ExpireQuestions", time.Now(), &err)
	return s.Store.ExpireQuestions(ctx, a1, a2)
}

func (s *Store) GetAgent(ctx context.Context, a1 string) (r0 office.Agent, err error) {
	defer s.observe("GetAgent", time.Now(), &err)
	return s.Store.GetAgent(ctx, a1)
}

func (s *Store) GetDependency(ctx context.Context, a1 string) (r0 office.DependencyRequest, err error) {
	defer s.observe("GetDependency", time.Now(), &err)
	return s.Store.GetDependency(ctx, a1)
}

func (s *Store) GetInvocation(ctx context.Context, a1 string) (r0 office.Invocation, err error) {
	defer s.observe("GetInvocation", time.Now(), &err)
	return s.Store.GetInvocation(ctx, a1)
}

func (s *Store) GetOffice(ctx context.Context, a1 string) (r0 office.Office, err error) {
	defer s.observe("GetOffice", time.Now(), &err)
	return s.Store.GetOffice(ctx, a1)
}

func (s *Store) GetProxyRequest(ctx context.Context, a1 string) (r0 office.ProxyRequest, err error) {
	defer s.observe("GetProxyRequest", time.Now(), &err)
	return s.Store.GetProxyRequest(ctx, a1)
}

func (s *Store) GetQuestion(ctx context.Context, a1 string) (r0 office.Question, err error) {
	defer s.observe("GetQuestion", time.Now(), &err)
	return s.Store.GetQuestion(ctx, a1)
}

func (s *Store) GetResult(ctx context.Context, a1 string) (r0 office.Result, err error) {
	defer s.observe("GetResult", time.Now(), &err)
	return s.Store.GetResult(ctx, a1)
}

func (s *Store) GetSessionByAgent(ctx context.Context, a1 string) (r0 office.SessionRecord, err error) {
	defer s.observe("GetSessionByAgent", time.Now(), &err)
	return s.Store.GetSessionByAgent(ctx, a1)
}

func (s *Store) ListAgents(ctx context.Context, a1 string) (r0 []office.Agent, err error) {
	defer s.observe("ListAgents", time.Now(), &err)
	return s.Store.ListAgents(ctx, a1)
}

func (s *Store) ListAnsweredUndelivered(ctx context.Context, a1 office.Due) (r0 []office.Question, err error) {
	defer s.observe("ListAnsweredUndelivered", time.Now(), &err)
	return s.Store.ListAnsweredUndelivered(ctx, a1)
}

func (s *Store) ListDependencies(ctx context.Context, a1 office.DependencyFilter) (r0 []office.DependencyRequest, err error) {
	defer s.observe("ListDependencies", time.Now(), &err)
	return s.Store.ListDependencies(ctx, a1)
}

func (s *Store) ListEvents(ctx context.Context, a1 office.EventFilter) (r0 []office.Event, err error) {
	defer s.observe("ListEvents", time.Now(), &err)
	return s.Store.ListEvents(ctx, a1)
}

func (s *Store) ListInvocations(ctx context.Context, a1 office.InvocationFilter) (r0 []office.Invocation, err error) {
	defer s.observe("ListInvocations", time.Now(), &err)
	return s.Store.ListInvocations(ctx, a1)
}

func (s *Store) ListOffices(ctx context.Context) (r0 []office.Office, err error) {
	defer s.observe("ListOffices", time.Now(), &err)
	return s.Store.ListOffices(ctx)
}

func (s *Store) ListPendingUserMessages(ctx context.Context, a1 office.Due) (r0 []office.UserMessage, err error) {
	defer s.observe("ListPendingUserMessages", time.Now(), &err)
	return s.Store.ListPendingUserMessages(ctx, a1)
}

func (s *Store) ListPermissionGrants(ctx context.Context, a1 string, a2 string) (r0 []office.PermissionGrant, err error) {
	defer s.observe("ListPermissionGrants", time.Now(), &err)
	return s.Store.ListPermissionGrants(ctx, a1, a2)
}

func (s *Store) ListProxyRequests(ctx context.Context, a1 office.ProxyRequestFilter) (r0 []office.ProxyRequest, err error) {
	defer s.observe("ListProxyRequests", time.Now(), &err)
	return s.Store.ListProxyRequests(ctx, a1)
}

func (s *Store) ListProxyTasks(ctx context.Context, a1 office.ProxyTaskFilter) (r0 []office.ProxyTask, err error) {
	defer s.observe("ListProxyTasks", time.Now(), &err)
	return s.Store.ListProxyTasks(ctx, a1)
}

func (s *Store) ListQuestions(ctx context.Context, a1 office.QuestionFilter) (r0 []office.Question, err error) {
	defer s.observe("ListQuestions", time.Now(), &err)
	return s.Store.ListQuestions(ctx, a1)
}

func (s *Store) ListResults(ctx context.Context, a1 office.ResultFilter) (r0 []office.Result, err error) {
	defer s.observe("ListResults", time.Now(), &err)
	return s.Store.ListResults(ctx, a1)
}

func (s *Store) ListSessions(ctx context.Context, a1 string) (r0 []office.SessionRecord, err error) {
	defer s.observe("ListSessions", time.Now(), &err)
	return s.Store.ListSessions(ctx, a1)
}

func (s *Store) ListUndeliveredDependencies(ctx context.Context, a1 office.Due) (r0 []office.DependencyRequest, err error) {
	defer s.observe("ListUndeliveredDependencies", time.Now(), &err)
	return s.Store.ListUndeliveredDependencies(ctx, a1)
}

func (s *Store) MarkDependencyDelivered(ctx context.Context, a1 string) (r0 bool, err error) {
	defer s.observe("MarkDependencyDelivered", time.Now(), &err)
	return s.Store.MarkDependencyDelivered(ctx, a1)
}

func (s *Store) MarkQuestionDelivered(ctx context.Context, a1 string) (r0 bool, err error) {
	defer s.observe("MarkQuestionDelivered", time.Now(), &err)
	return s.Store.MarkQuestionDelivered(ctx, a1)
}

func (s *Store) MarkResultDelivered(ctx context.Context, a1 string) (r0 bool, err error) {
	defer s.observe("MarkResultDelivered", time.Now(), &err)
	return s.Store.MarkResultDelivered(ctx, a1)
}

func (s *Store) MarkUserMessageDelivered(ctx context.Context, a1 string) (r0 bool, err error) {
	defer s.observe("MarkUserMessageDelivered", time.Now(), &err)
	return s.Store.MarkUserMessageDelivered(ctx, a1)
}

func (s *Store) Ping(ctx context.Context) (err error) {
	defer s.observe("Ping", time.Now(), &err)
	return s.Store.Ping(ctx)
}

func (s *Store) ProvideDependency(ctx context.Context, a1 string, a2 []byte) (r0 office.DependencyRequest, r1 bool, err error) {
	defer s.observe("ProvideDependency", time.Now(), &err)
	return s.Store.ProvideDependency(ctx, a1, a2)
}

func (s *Store) RejectDependency(ctx context.Context, a1 string, a2 string) (r0 office.DependencyRequest, r1 bool, err error) {
	defer s.observe("RejectDependency", time.Now(), &err)
	return s.Store.RejectDependency(ctx, a1, a2)
}

func (s *Store) SetAgentStatus(ctx context.Context, a1 string, a2 string) (err error) {
	defer s.observe("SetAgentStatus", time.Now(), &err)
	return s.Store.SetAgentStatus(ctx, a1, a2)
}

func (s *Store) SetProxyTaskStatus(ctx context.Context, a1 string, a2 string, a3 string) (r0 office.ProxyTask, r1 bool, err error) {
	defer s.observe("SetProxyTaskStatus", time.Now(), &err)
	return s.Store.SetProxyTaskStatus(ctx, a1, a2, a3)
}

func (s *Store) TransitionInvocation(ctx context.Context, a1 string, a2 []string, a3 string, a4 office.InvocationPatch) (r0 office.Invocation, r1 bool, err error) {
	defer s.observe("TransitionInvocation", time.Now(), &err)
	return s.Store.TransitionInvocation(ctx, a1, a2, a3, a4)
}

func (s *Store) FindOpenInvocation(ctx context.Context, a1 string, a2 string, a3 string) (r0 office.Invocation, err error) {
	defer s.observe("FindOpenInvocation", time.Now(), &err)
	return s.Store.FindOpenInvocation(ctx, a1, a2, a3)
}

func (s *Store) TransitionProxyRequest(ctx context.Context, a1 string, a2 []string, a3 string, a4 office.ProxyRequestPatch) (r0 office.ProxyRequest, r1 bool, err error) {
	defer s.observe("TransitionProxyRequest", time.Now(), &err)
	return s.Store.TransitionProxyRequest(ctx, a1, a2, a3, a4)
}

func (s *Store) UpsertAgent(ctx context.Context, a1 office.Agent) (r0 office.Agent, err error) {
	defer s.observe("UpsertAgent", time.Now(), &err)
	return s.Store.UpsertAgent(ctx, a1)
}

func (s *Store) UpsertOffice(ctx context.Context, a1 office.Office) (r0 office.Office, err error) {
	defer s.observe("UpsertOffice", time.Now(), &err)
	return s.Store.UpsertOffice(ctx, a1)
}

func (s *Store) ListDue(ctx context.Context, a1, a2 string) (r0 office.DueWork, err error) {
	defer s.observe("ListDue", time.Now(), &err)
	return s.Store.ListDue(ctx, a1, a2)
}

func (s *Store) AppendEvents(ctx context.Context, a1 []office.Event) (r0 []office.Event, r1 []bool, err error) {
	defer s.observe("AppendEvents", time.Now(), &err)
	return s.Store.AppendEvents(ctx, a1)
}

func (s *Store) ListDueTyping(ctx context.Context, a1, a2 string, a3 time.Time) (r0 office.DueWork, err error) {
	defer s.observe("ListDueTyping", time.Now(), &err)
	return s.Store.ListDueTyping(ctx, a1, a2, a3)
}

func (s *Store) SetSessionStatus(ctx context.Context, a1 office.SessionStatus) (r0 office.SessionRecord, r1 office.Event, r2 bool, err error) {
	defer s.observe("SetSessionStatus", time.Now(), &err)
	return s.Store.SetSessionStatus(ctx, a1)
}

func (s *Store) AskQuestion(ctx context.Context, a1 office.Ask) (r0 office.Question, r1 []office.Question, r2 []office.Event, r3 bool, err error) {
	defer s.observe("AskQuestion", time.Now(), &err)
	return s.Store.AskQuestion(ctx, a1)
}

func (s *Store) DeliverResult(ctx context.Context, a1 office.ResultDelivery) (r0 office.ResultStored, err error) {
	defer s.observe("DeliverResult", time.Now(), &err)
	return s.Store.DeliverResult(ctx, a1)
}

func (s *Store) Invoke(ctx context.Context, a1 office.Invoke) (r0 office.Invocation, r1 []office.Event, r2 bool, err error) {
	defer s.observe("Invoke", time.Now(), &err)
	return s.Store.Invoke(ctx, a1)
}

func (s *Store) ListOpenWork(ctx context.Context, a1 string) (r0 office.OpenWork, err error) {
	defer s.observe("ListOpenWork", time.Now(), &err)
	return s.Store.ListOpenWork(ctx, a1)
}

func (s *Store) MarkDelivered(ctx context.Context, a1 office.Delivered) (r0 time.Time, r1 office.Event, r2 bool, err error) {
	defer s.observe("MarkDelivered", time.Now(), &err)
	return s.Store.MarkDelivered(ctx, a1)
}

func (s *Store) AddNotices(ctx context.Context, a1, a2 string, a3 []string, a4 int) (r0 int, err error) {
	defer s.observe("AddNotices", time.Now(), &err)
	return s.Store.AddNotices(ctx, a1, a2, a3, a4)
}
