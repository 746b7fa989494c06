package office

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// memStore is an in-memory Store for fast unit tests. It keeps the
// contract's conditional transitions; the real stores are exercised by the
// integration tests.
type memStore struct {
	mu        sync.Mutex
	now       func() time.Time
	offices   map[string]Office
	agents    map[string]Agent
	sessions  map[string]SessionRecord // by agent
	questions map[string]Question
	messages  map[string]UserMessage
	invs      map[string]Invocation
	results   map[string]Result
	deps      map[string]DependencyRequest
	events    []Event
	seq       int
	onChange  func(Change)
}

func newMemStore(now func() time.Time) *memStore {
	return &memStore{now: now, offices: map[string]Office{}, agents: map[string]Agent{}, sessions: map[string]SessionRecord{},
		questions: map[string]Question{}, messages: map[string]UserMessage{}, invs: map[string]Invocation{},
		results: map[string]Result{}, deps: map[string]DependencyRequest{}}
}

func (s *memStore) tick() time.Time {
	s.seq++
	return s.now().Add(time.Duration(s.seq) * time.Microsecond)
}

func notFound(what, id string) error { return Errorf(ENOTFOUND, "%s %s not found", what, id) }

func (s *memStore) Ping(context.Context) error { return nil }
func (s *memStore) Close() error               { return nil }

func (s *memStore) UpsertOffice(_ context.Context, o Office) (Office, error) {
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
func (s *memStore) GetOffice(_ context.Context, id string) (Office, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.offices[id]
	if !ok {
		return o, notFound("office", id)
	}
	return o, nil
}
func (s *memStore) ListOffices(context.Context) ([]Office, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Office
	for _, o := range s.offices {
		out = append(out, o)
	}
	return out, nil
}
func (s *memStore) UpsertAgent(_ context.Context, a Agent) (Agent, error) {
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
		a.Status = AgentIdle
	}
	a.CreatedAt = s.tick()
	s.agents[a.ID] = a
	return a, nil
}
func (s *memStore) GetAgent(_ context.Context, id string) (Agent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.agents[id]
	if !ok {
		return a, notFound("agent", id)
	}
	return a, nil
}
func (s *memStore) ListAgents(_ context.Context, officeID string) ([]Agent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Agent
	for _, a := range s.agents {
		if a.OfficeID == officeID {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b Agent) int { return strings.Compare(a.Name, b.Name) })
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
func (s *memStore) UpsertSession(_ context.Context, r SessionRecord) (SessionRecord, error) {
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
func (s *memStore) GetSessionByAgent(_ context.Context, agentID string) (SessionRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.sessions[agentID]
	if !ok {
		return r, notFound("session", agentID)
	}
	return r, nil
}
func (s *memStore) ListSessions(_ context.Context, officeID string) ([]SessionRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []SessionRecord
	for _, r := range s.sessions {
		if r.OfficeID == officeID {
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *memStore) CreateQuestion(_ context.Context, q Question) (Question, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q.ID == "" {
		q.ID = uuid.NewString()
	} else if _, dup := s.questions[q.ID]; dup {
		return q, Errorf(ECONFLICT, "duplicate id %s", q.ID)
	}
	q.CreatedAt = s.tick()
	if q.Status == "" {
		q.Status = QuestionPending
	}
	s.questions[q.ID] = q
	return q, nil
}
func (s *memStore) GetQuestion(_ context.Context, id string) (Question, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.questions[id]
	if !ok {
		return q, notFound("question", id)
	}
	return q, nil
}
func (s *memStore) ListQuestions(_ context.Context, f QuestionFilter) ([]Question, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Question
	for _, q := range s.questions {
		if (f.OfficeID == "" || q.OfficeID == f.OfficeID) && (f.AgentID == "" || q.AgentID == f.AgentID) && (len(f.Status) == 0 || slices.Contains(f.Status, q.Status)) {
			out = append(out, q)
		}
	}
	slices.SortFunc(out, func(a, b Question) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}
func (s *memStore) AnswerQuestion(_ context.Context, id, resp, by string) (Question, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.questions[id]
	if !ok {
		return q, false, notFound("question", id)
	}
	if q.Status != QuestionPending {
		return q, false, nil
	}
	now := s.now()
	q.Status, q.Response, q.AnsweredBy, q.AnsweredAt = QuestionAnswered, resp, by, &now
	s.questions[id] = q
	return q, true, nil
}
func (s *memStore) MarkQuestionDelivered(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.questions[id]
	if q.Status != QuestionAnswered {
		return false, nil
	}
	now := s.now()
	q.Status, q.DeliveredAt = QuestionDelivered, &now
	s.questions[id] = q
	return true, nil
}
func (s *memStore) ExpireQuestions(_ context.Context, now time.Time) ([]Question, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Question
	for id, q := range s.questions {
		if q.Status == QuestionPending && !q.ExpiresAt.After(now) {
			q.Status = QuestionExpired
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
	if q.Status != QuestionPending && q.Status != QuestionAnswered {
		return false, nil
	}
	q.Status = QuestionCancelled
	s.questions[id] = q
	return true, nil
}
func (s *memStore) ListAnsweredUndelivered(ctx context.Context, d Due) ([]Question, error) {
	qs, _ := s.ListQuestions(ctx, QuestionFilter{AgentID: d.AgentID, Status: []string{QuestionAnswered}})
	return slices.DeleteFunc(qs, func(q Question) bool { return !d.has(q.OfficeID, q.AgentID) }), nil
}

// has reports whether a row of officeID and agentID is due as d says.
func (d Due) has(officeID, agentID string) bool {
	return (len(d.OfficeIDs) == 0 || slices.Contains(d.OfficeIDs, officeID)) && (d.AgentID == "" || d.AgentID == agentID)
}

func (s *memStore) CreateUserMessage(_ context.Context, m UserMessage) (UserMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.ID == "" {
		m.ID = uuid.NewString()
	} else if _, dup := s.messages[m.ID]; dup {
		return m, Errorf(ECONFLICT, "duplicate id %s", m.ID)
	}
	m.CreatedAt = s.tick()
	if m.Status == "" {
		m.Status = MessagePending
	}
	s.messages[m.ID] = m
	return m, nil
}
func (s *memStore) MarkUserMessageDelivered(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.messages[id]
	if m.Status != MessagePending {
		return false, nil
	}
	m.Status = MessageDelivered
	s.messages[id] = m
	return true, nil
}
func (s *memStore) ListPendingUserMessages(_ context.Context, d Due) ([]UserMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []UserMessage
	for _, m := range s.messages {
		if m.Status == MessagePending && d.has(m.OfficeID, m.AgentID) {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b UserMessage) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

func (s *memStore) CreateInvocation(_ context.Context, inv Invocation) (Invocation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if inv.ID == "" {
		inv.ID = uuid.NewString()
	} else if _, dup := s.invs[inv.ID]; dup {
		return inv, Errorf(ECONFLICT, "duplicate id %s", inv.ID)
	}
	inv.CreatedAt = s.tick()
	if inv.Status == "" {
		inv.Status = InvocationPending
	}
	s.invs[inv.ID] = inv
	return inv, nil
}
func (s *memStore) GetInvocation(_ context.Context, id string) (Invocation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.invs[id]
	if !ok {
		return i, notFound("invocation", id)
	}
	return i, nil
}
func (s *memStore) ListInvocations(_ context.Context, f InvocationFilter) ([]Invocation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Invocation
	for _, i := range s.invs {
		if (f.OfficeID == "" || i.OfficeID == f.OfficeID) && (f.AgentID == "" || i.CallerAgentID == f.AgentID || i.CalleeAgentID == f.AgentID) && (f.CalleeAgentID == "" || i.CalleeAgentID == f.CalleeAgentID) && (len(f.Status) == 0 || slices.Contains(f.Status, i.Status)) {
			out = append(out, i)
		}
	}
	slices.SortFunc(out, func(a, b Invocation) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}
func (s *memStore) TransitionInvocation(_ context.Context, id string, from []string, to string, p InvocationPatch) (Invocation, bool, error) {
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
	if to == InvocationInProgress {
		i.StartedAt = &now
	} else if to != InvocationPending {
		i.CompletedAt = &now
	}
	s.invs[id] = i
	return i, true, nil
}
func (s *memStore) FindOpenInvocation(ctx context.Context, officeID, caller, callee string) (Invocation, error) {
	invs, _ := s.ListInvocations(ctx, InvocationFilter{OfficeID: officeID, Status: []string{InvocationPending, InvocationInProgress}})
	for _, i := range invs {
		if i.CallerAgentID == caller && i.CalleeAgentID == callee {
			return i, nil
		}
	}
	return Invocation{}, notFound("invocation", caller+"→"+callee)
}

func (s *memStore) CreateResult(_ context.Context, r Result) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.ID == "" {
		r.ID = uuid.NewString()
	} else if _, dup := s.results[r.ID]; dup {
		return r, Errorf(ECONFLICT, "duplicate id %s", r.ID)
	}
	r.CreatedAt = s.tick()
	if r.Status == "" {
		r.Status = ResultPending
	}
	s.results[r.ID] = r
	return r, nil
}
func (s *memStore) GetResult(_ context.Context, id string) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.results[id]
	if !ok {
		return r, notFound("result", id)
	}
	return r, nil
}
func (s *memStore) ListResults(_ context.Context, f ResultFilter) ([]Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Result
	for _, r := range s.results {
		if (f.OfficeID == "" || r.OfficeID == f.OfficeID) && (f.ToAgentID == "" || r.ToAgentID == f.ToAgentID) && (f.InvocationID == "" || r.InvocationID == f.InvocationID) && (len(f.Status) == 0 || slices.Contains(f.Status, r.Status)) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Result) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}
func (s *memStore) MarkResultDelivered(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.results[id]
	if r.Status != ResultPending {
		return false, nil
	}
	r.Status = ResultDelivered
	s.results[id] = r
	return true, nil
}

func (s *memStore) CreateDependency(_ context.Context, d DependencyRequest) (DependencyRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.ID == "" {
		d.ID = uuid.NewString()
	} else if _, dup := s.deps[d.ID]; dup {
		return d, Errorf(ECONFLICT, "duplicate id %s", d.ID)
	}
	d.CreatedAt = s.tick()
	if d.Status == "" {
		d.Status = DependencyPending
	}
	s.deps[d.ID] = d
	return d, nil
}
func (s *memStore) GetDependency(_ context.Context, id string) (DependencyRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.deps[id]
	if !ok {
		return d, notFound("dependency", id)
	}
	return d, nil
}
func (s *memStore) ListDependencies(_ context.Context, f DependencyFilter) ([]DependencyRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []DependencyRequest
	for _, d := range s.deps {
		if (f.OfficeID == "" || d.OfficeID == f.OfficeID) && (f.AgentID == "" || d.AgentID == f.AgentID) && (len(f.Status) == 0 || slices.Contains(f.Status, d.Status)) {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b DependencyRequest) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}
func (s *memStore) ProvideDependency(_ context.Context, id string, v []byte) (DependencyRequest, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.deps[id]
	if d.Status != DependencyPending {
		return d, false, nil
	}
	now := s.now()
	d.Status, d.Value, d.ProvidedAt = DependencyProvided, v, &now
	s.deps[id] = d
	return d, true, nil
}
func (s *memStore) RejectDependency(_ context.Context, id, reason string) (DependencyRequest, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.deps[id]
	if d.Status != DependencyPending {
		return d, false, nil
	}
	d.Status, d.RejectionReason = DependencyRejected, reason
	s.deps[id] = d
	return d, true, nil
}
func (s *memStore) ExpireDependencies(_ context.Context, now time.Time) ([]DependencyRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []DependencyRequest
	for id, d := range s.deps {
		if d.Status == DependencyPending && !d.ExpiresAt.After(now) {
			d.Status = DependencyExpired
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
	if d.DeliveredAt != nil || d.Status == DependencyPending {
		return false, nil
	}
	now := s.now()
	d.DeliveredAt = &now
	s.deps[id] = d
	return true, nil
}
func (s *memStore) ListUndeliveredDependencies(ctx context.Context, due Due) ([]DependencyRequest, error) {
	ds, _ := s.ListDependencies(ctx, DependencyFilter{AgentID: due.AgentID, Status: []string{DependencyProvided, DependencyRejected, DependencyExpired}})
	return slices.DeleteFunc(ds, func(d DependencyRequest) bool {
		return d.DeliveredAt != nil || !due.has(d.OfficeID, d.AgentID)
	}), nil
}

func (s *memStore) AppendEvent(_ context.Context, e Event) (Event, bool, error) {
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
func (s *memStore) ListEvents(_ context.Context, f EventFilter) ([]Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Event
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
