package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/office-server/office-server/office"

	"github.com/google/uuid"
)

// memStore is an in-memory Store for fast unit tests. It keeps the
// contract's conditional transitions; the real stores are exercised by the
// integration tests.
type memStore struct {
	mu        sync.Mutex
	now       func() time.Time
	offices   map[string]office.Office
	agents    map[string]office.Agent
	sessions  map[string]office.SessionRecord // by agent
	questions map[string]office.Question
	messages  map[string]office.UserMessage
	invs      map[string]office.Invocation
	results   map[string]office.Result
	deps      map[string]office.DependencyRequest
	events    []office.Event
	seq       int
	proxy     memProxy // proxy requests and tasks (proxywork_internal_test.go)
}

func newMemStore(now func() time.Time) *memStore {
	return &memStore{now: now, offices: map[string]office.Office{}, agents: map[string]office.Agent{}, sessions: map[string]office.SessionRecord{},
		questions: map[string]office.Question{}, messages: map[string]office.UserMessage{}, invs: map[string]office.Invocation{},
		results: map[string]office.Result{}, deps: map[string]office.DependencyRequest{}}
}

func (s *memStore) tick() time.Time {
	s.seq++
	return s.now().Add(time.Duration(s.seq) * time.Microsecond)
}

func notFound(what, id string) error {
	return office.Errorf(office.ENOTFOUND, "%s %s not found", what, id)
}

func (s *memStore) Ping(context.Context) error { return nil }
func (s *memStore) Close() error               { return nil }

func (s *memStore) UpsertOffice(_ context.Context, o office.Office) (office.Office, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o.ID == "" {
		for _, x := range s.offices {
			if x.Name == o.Name {
				o.ID = x.ID
			}
		}
	}
	if o.ID == "" {
		o.ID = uuid.NewString()
	}
	o.CreatedAt = s.tick()
	s.offices[o.ID] = o
	return o, nil
}
func (s *memStore) GetOffice(_ context.Context, id string) (office.Office, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.offices[id]
	if !ok {
		return o, notFound("office", id)
	}
	return o, nil
}
func (s *memStore) ListOffices(context.Context) ([]office.Office, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []office.Office
	for _, o := range s.offices {
		out = append(out, o)
	}
	return out, nil
}
func (s *memStore) UpsertAgent(_ context.Context, a office.Agent) (office.Agent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.agents {
		if x.OfficeID == a.OfficeID && strings.EqualFold(x.Name, a.Name) {
			a.ID = x.ID
		}
	}
	if a.ID == "" {
		a.ID = uuid.NewString()
	}
	if a.Status == "" {
		a.Status = office.AgentIdle
	}
	a.CreatedAt = s.tick()
	s.agents[a.ID] = a
	return a, nil
}
func (s *memStore) GetAgent(_ context.Context, id string) (office.Agent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.agents[id]
	if !ok {
		return a, notFound("agent", id)
	}
	return a, nil
}
func (s *memStore) ListAgents(_ context.Context, officeID string) ([]office.Agent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []office.Agent
	for _, a := range s.agents {
		if a.OfficeID == officeID {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b office.Agent) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
func (s *memStore) SetAgentStatus(_ context.Context, id, st string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.agents[id]
	if !ok {
		return notFound("agent", id)
	}
	a.Status = st
	s.agents[id] = a
	return nil
}
func (s *memStore) DeleteAgent(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.agents, id)
	return nil
}
func (s *memStore) UpsertSession(_ context.Context, r office.SessionRecord) (office.SessionRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.sessions[r.AgentID]; ok {
		r.ID = old.ID
	} else {
		r.ID = uuid.NewString()
	}
	s.sessions[r.AgentID] = r
	return r, nil
}
func (s *memStore) GetSessionByAgent(_ context.Context, agentID string) (office.SessionRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.sessions[agentID]
	if !ok {
		return r, notFound("session", agentID)
	}
	return r, nil
}
func (s *memStore) ListSessions(_ context.Context, officeID string) ([]office.SessionRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []office.SessionRecord
	for _, r := range s.sessions {
		if r.OfficeID == officeID {
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *memStore) CreateQuestion(_ context.Context, q office.Question) (office.Question, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q.ID == "" {
		q.ID = uuid.NewString()
	} else if _, dup := s.questions[q.ID]; dup {
		return q, office.Errorf(office.ECONFLICT, "duplicate id %s", q.ID)
	}
	q.CreatedAt = s.tick()
	if q.Status == "" {
		q.Status = office.QuestionPending
	}
	s.questions[q.ID] = q
	return q, nil
}
func (s *memStore) GetQuestion(_ context.Context, id string) (office.Question, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.questions[id]
	if !ok {
		return q, notFound("question", id)
	}
	return q, nil
}
func (s *memStore) ListQuestions(_ context.Context, f office.QuestionFilter) ([]office.Question, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []office.Question
	for _, q := range s.questions {
		if (f.OfficeID == "" || q.OfficeID == f.OfficeID) && (f.AgentID == "" || q.AgentID == f.AgentID) && (len(f.Status) == 0 || slices.Contains(f.Status, q.Status)) {
			out = append(out, q)
		}
	}
	slices.SortFunc(out, func(a, b office.Question) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}
func (s *memStore) AnswerQuestion(_ context.Context, id, resp, by string) (office.Question, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.questions[id]
	if !ok {
		return q, false, notFound("question", id)
	}
	if q.Status != office.QuestionPending {
		return q, false, nil
	}
	now := s.now()
	q.Status, q.Response, q.AnsweredBy, q.AnsweredAt = office.QuestionAnswered, resp, by, &now
	s.questions[id] = q
	return q, true, nil
}
func (s *memStore) MarkQuestionDelivered(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.questions[id]
	if q.Status != office.QuestionAnswered {
		return false, nil
	}
	now := s.now()
	q.Status, q.DeliveredAt = office.QuestionDelivered, &now
	s.questions[id] = q
	return true, nil
}
func (s *memStore) ExpireQuestions(_ context.Context, now time.Time) ([]office.Question, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []office.Question
	for id, q := range s.questions {
		if q.Status == office.QuestionPending && !q.ExpiresAt.After(now) {
			q.Status = office.QuestionExpired
			s.questions[id] = q
			out = append(out, q)
		}
	}
	return out, nil
}
func (s *memStore) CancelQuestion(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.questions[id]
	if q.Status != office.QuestionPending && q.Status != office.QuestionAnswered {
		return false, nil
	}
	q.Status = office.QuestionCancelled
	s.questions[id] = q
	return true, nil
}
func (s *memStore) ListAnsweredUndelivered(ctx context.Context, d office.Due) ([]office.Question, error) {
	qs, _ := s.ListQuestions(ctx, office.QuestionFilter{AgentID: d.AgentID, Status: []string{office.QuestionAnswered}})
	return slices.DeleteFunc(qs, func(q office.Question) bool { return !dueHas(d, q.OfficeID, q.AgentID) }), nil
}

// dueHas reports whether a row of officeID and agentID is due as d says.
func dueHas(d office.Due, officeID, agentID string) bool {
	return (len(d.OfficeIDs) == 0 || slices.Contains(d.OfficeIDs, officeID)) && (d.AgentID == "" || d.AgentID == agentID)
}

func (s *memStore) CreateUserMessage(_ context.Context, m office.UserMessage) (office.UserMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.ID == "" {
		m.ID = uuid.NewString()
	} else if _, dup := s.messages[m.ID]; dup {
		return m, office.Errorf(office.ECONFLICT, "duplicate id %s", m.ID)
	}
	m.CreatedAt = s.tick()
	if m.Status == "" {
		m.Status = office.MessagePending
	}
	s.messages[m.ID] = m
	return m, nil
}
func (s *memStore) MarkUserMessageDelivered(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.messages[id]
	if m.Status != office.MessagePending {
		return false, nil
	}
	m.Status = office.MessageDelivered
	s.messages[id] = m
	return true, nil
}
func (s *memStore) ListPendingUserMessages(_ context.Context, d office.Due) ([]office.UserMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []office.UserMessage
	for _, m := range s.messages {
		if m.Status == office.MessagePending && dueHas(d, m.OfficeID, m.AgentID) {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b office.UserMessage) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

func (s *memStore) CreateInvocation(_ context.Context, inv office.Invocation) (office.Invocation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if inv.ID == "" {
		inv.ID = uuid.NewString()
	} else if _, dup := s.invs[inv.ID]; dup {
		return inv, office.Errorf(office.ECONFLICT, "duplicate id %s", inv.ID)
	}
	inv.CreatedAt = s.tick()
	if inv.Status == "" {
		inv.Status = office.InvocationPending
	}
	s.invs[inv.ID] = inv
	return inv, nil
}
func (s *memStore) GetInvocation(_ context.Context, id string) (office.Invocation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.invs[id]
	if !ok {
		return i, notFound("invocation", id)
	}
	return i, nil
}
func (s *memStore) ListInvocations(_ context.Context, f office.InvocationFilter) ([]office.Invocation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []office.Invocation
	for _, i := range s.invs {
		if (f.OfficeID == "" || i.OfficeID == f.OfficeID) && (f.AgentID == "" || i.CallerAgentID == f.AgentID || i.CalleeAgentID == f.AgentID) && (f.CalleeAgentID == "" || i.CalleeAgentID == f.CalleeAgentID) && (len(f.Status) == 0 || slices.Contains(f.Status, i.Status)) {
			out = append(out, i)
		}
	}
	slices.SortFunc(out, func(a, b office.Invocation) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}
func (s *memStore) TransitionInvocation(_ context.Context, id string, from []string, to string, p office.InvocationPatch) (office.Invocation, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.invs[id]
	if !ok {
		return i, false, notFound("invocation", id)
	}
	if !slices.Contains(from, i.Status) {
		return i, false, nil
	}
	now := s.now()
	i.Status = to
	if p.ResultID != "" {
		i.ResultID = p.ResultID
	}
	if p.Error != "" {
		i.Error = p.Error
	}
	if to == office.InvocationInProgress {
		i.StartedAt = &now
	} else if to != office.InvocationPending {
		i.CompletedAt = &now
	}
	s.invs[id] = i
	return i, true, nil
}
func (s *memStore) FindOpenInvocation(ctx context.Context, officeID, caller, callee string) (office.Invocation, error) {
	invs, _ := s.ListInvocations(ctx, office.InvocationFilter{OfficeID: officeID, Status: []string{office.InvocationPending, office.InvocationInProgress}})
	for _, i := range invs {
		if i.CallerAgentID == caller && i.CalleeAgentID == callee {
			return i, nil
		}
	}
	return office.Invocation{}, notFound("invocation", caller+"→"+callee)
}

func (s *memStore) CreateResult(_ context.Context, r office.Result) (office.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.ID == "" {
		r.ID = uuid.NewString()
	} else if _, dup := s.results[r.ID]; dup {
		return r, office.Errorf(office.ECONFLICT, "duplicate id %s", r.ID)
	}
	r.CreatedAt = s.tick()
	if r.Status == "" {
		r.Status = office.ResultPending
	}
	s.results[r.ID] = r
	return r, nil
}
func (s *memStore) GetResult(_ context.Context, id string) (office.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.results[id]
	if !ok {
		return r, notFound("result", id)
	}
	return r, nil
}
func (s *memStore) ListResults(_ context.Context, f office.ResultFilter) ([]office.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []office.Result
	for _, r := range s.results {
		if (f.OfficeID == "" || r.OfficeID == f.OfficeID) && (f.ToAgentID == "" || r.ToAgentID == f.ToAgentID) && (f.InvocationID == "" || r.InvocationID == f.InvocationID) && (len(f.Status) == 0 || slices.Contains(f.Status, r.Status)) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b office.Result) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}
func (s *memStore) MarkResultDelivered(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.results[id]
	if r.Status != office.ResultPending {
		return false, nil
	}
	r.Status = office.ResultDelivered
	s.results[id] = r
	return true, nil
}

func (s *memStore) CreateDependency(_ context.Context, d office.DependencyRequest) (office.DependencyRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.ID == "" {
		d.ID = uuid.NewString()
	} else if _, dup := s.deps[d.ID]; dup {
		return d, office.Errorf(office.ECONFLICT, "duplicate id %s", d.ID)
	}
	d.CreatedAt = s.tick()
	if d.Status == "" {
		d.Status = office.DependencyPending
	}
	s.deps[d.ID] = d
	return d, nil
}
func (s *memStore) GetDependency(_ context.Context, id string) (office.DependencyRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.deps[id]
	if !ok {
		return d, notFound("dependency", id)
	}
	return d, nil
}
func (s *memStore) ListDependencies(_ context.Context, f office.DependencyFilter) ([]office.DependencyRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []office.DependencyRequest
	for _, d := range s.deps {
		if (f.OfficeID == "" || d.OfficeID == f.OfficeID) && (f.AgentID == "" || d.AgentID == f.AgentID) && (len(f.Status) == 0 || slices.Contains(f.Status, d.Status)) {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b office.DependencyRequest) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}
func (s *memStore) ProvideDependency(_ context.Context, id string, v []byte) (office.DependencyRequest, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.deps[id]
	if d.Status != office.DependencyPending {
		return d, false, nil
	}
	now := s.now()
	d.Status, d.Value, d.ProvidedAt = office.DependencyProvided, v, &now
	s.deps[id] = d
	return d, true, nil
}
func (s *memStore) RejectDependency(_ context.Context, id, reason string) (office.DependencyRequest, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.deps[id]
	if d.Status != office.DependencyPending {
		return d, false, nil
	}
	d.Status, d.RejectionReason = office.DependencyRejected, reason
	s.deps[id] = d
	return d, true, nil
}
func (s *memStore) ExpireDependencies(_ context.Context, now time.Time) ([]office.DependencyRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []office.DependencyRequest
	for id, d := range s.deps {
		if d.Status == office.DependencyPending && !d.ExpiresAt.After(now) {
			d.Status = office.DependencyExpired
			s.deps[id] = d
			out = append(out, d)
		}
	}
	return out, nil
}
func (s *memStore) MarkDependencyDelivered(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.deps[id]
	if d.DeliveredAt != nil || d.Status == office.DependencyPending {
		return false, nil
	}
	now := s.now()
	d.DeliveredAt = &now
	s.deps[id] = d
	return true, nil
}
func (s *memStore) ListUndeliveredDependencies(ctx context.Context, due office.Due) ([]office.DependencyRequest, error) {
	ds, _ := s.ListDependencies(ctx, office.DependencyFilter{AgentID: due.AgentID, Status: []string{office.DependencyProvided, office.DependencyRejected, office.DependencyExpired}})
	return slices.DeleteFunc(ds, func(d office.DependencyRequest) bool {
		return d.DeliveredAt != nil || !dueHas(due, d.OfficeID, d.AgentID)
	}), nil
}

func (s *memStore) AppendEvent(_ context.Context, e office.Event) (office.Event, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.DedupeKey != "" {
		for _, x := range s.events {
			if x.OfficeID == e.OfficeID && x.DedupeKey == e.DedupeKey {
				return x, false, nil
			}
		}
	}
	e.ID = int64(len(s.events) + 1)
	e.CreatedAt = s.now()
	s.events = append(s.events, e)
	return e, true, nil
}
func (s *memStore) ListEvents(_ context.Context, f office.EventFilter) ([]office.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []office.Event
	for _, e := range s.events {
		if (f.OfficeID == "" || e.OfficeID == f.OfficeID) && (f.AgentID == "" || e.AgentID == f.AgentID) && e.ID > f.AfterID {
			out = append(out, e)
		}
	}
	return out, nil
}

func (s *memStore) eventKinds() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.events {
		out = append(out, e.Kind)
	}
	return out
}

// fakeSessions records what is typed into each agent. Send fails for an
// agent without a running session, as the real layer does.
type fakeSessions struct {
	mu      sync.Mutex
	running map[string]bool
	starts  map[string][]SessionSpec
	typed   map[string][]string
	sent    chan sent // unused by the harness; kept for benchmarks
	// StartFn, when set, runs on Start (e.g. to refuse).
	StartFn func(SessionSpec) error
}

type sent struct{ agentID, text string }

func newFakeSessions() *fakeSessions {
	return &fakeSessions{running: map[string]bool{}, starts: map[string][]SessionSpec{}, typed: map[string][]string{}, sent: make(chan sent, 100)}
}

func (f *fakeSessions) Start(_ context.Context, spec SessionSpec) error {
	if f.StartFn != nil {
		if err := f.StartFn(spec); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running[spec.AgentID] = true
	f.starts[spec.AgentID] = append(f.starts[spec.AgentID], spec)
	return nil
}
func (f *fakeSessions) Restart(ctx context.Context, spec SessionSpec) error {
	return f.Start(ctx, spec)
}
func (f *fakeSessions) Stop(_ context.Context, _, agentID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running[agentID] = false
	return nil
}
func (f *fakeSessions) Send(_ context.Context, _, agentID, text string) error {
	f.mu.Lock()
	if !f.running[agentID] {
		f.mu.Unlock()
		return fmt.Errorf("no session for %s", agentID)
	}
	f.typed[agentID] = append(f.typed[agentID], text)
	f.mu.Unlock()
	select {
	case f.sent <- sent{agentID, text}:
	default:
	}
	return nil
}
func (f *fakeSessions) Running(_, agentID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running[agentID]
}
func (f *fakeSessions) setRunning(agentID string, on bool) {
	f.mu.Lock()
	f.running[agentID] = on
	f.mu.Unlock()
}
