package office

import (
	"context"
	"time"
)

// Store is the persistence the office needs: the union of the role
// interfaces below, each a few methods that a part of the server uses on
// its own (the engine, the HTTP server, the commands). Implementations:
// store/postgres, store/sqlite, supabase. All of them pass store/storetest.
//
// Conventions every implementation keeps:
//   - Create* fills ID (a new UUID), CreatedAt and UpdatedAt when empty, and a
//     default Status, and returns the row as stored.
//   - Get* returns an *Error with ENOTFOUND when there is no row.
//   - A transition that must happen once is a single conditional update
//     (UPDATE ... WHERE id = $1 AND status = <expected>): it returns ok=false
//     and no error when the row is not in the expected state, so that of any
//     number of racing callers (goroutines or server processes) exactly one
//     gets ok=true.
//   - Unique violations are returned as ECONFLICT.
//   - The "due" lists (what waits to be typed into an agent) take a Due and
//     return rows oldest first, read through an index on the agent when
//     Due.AgentID is set.
type Store interface {
	Ping(ctx context.Context) error
	Close() error

	Roster
	SessionLog
	Questions
	Messages
	Invocations
	Results
	Dependencies
	Events
	ProxyWork
	PermissionGrants
}

// Roster is the offices and their agents.
type Roster interface {
	UpsertOffice(ctx context.Context, o Office) (Office, error) // by ID when set, else by Name
	GetOffice(ctx context.Context, id string) (Office, error)
	ListOffices(ctx context.Context) ([]Office, error)
	UpsertAgent(ctx context.Context, a Agent) (Agent, error) // by (OfficeID, lower(Name))
	GetAgent(ctx context.Context, id string) (Agent, error)
	ListAgents(ctx context.Context, officeID string) ([]Agent, error)
	SetAgentStatus(ctx context.Context, id, status string) error
	DeleteAgent(ctx context.Context, id string) error
}

// SessionLog is the agents' session rows (one per agent, updated in
// place) and what waits to be typed into the session, the engine's
// notices included (Notices).
type SessionLog interface {
	Notices
	// ListDue returns everything due to one agent, each list as its own
	// List* method returns it (oldest first), read at once.
	ListDue(ctx context.Context, officeID, agentID string) (DueWork, error)
	// ListDueTyping is ListDue for a delivery round about to type into
	// a running agent: with the read, in one write, it appends the
	// typing marker (EventTyping, dedupe key TypingKey(row), payload
	// {row, at}) of the row the round types first (TypingFirst), and
	// returns it in DueWork.Typing: inserted, or stored by an earlier
	// typing of the same row.
	ListDueTyping(ctx context.Context, officeID, agentID string, at time.Time) (DueWork, error)
	GetSessionByAgent(ctx context.Context, agentID string) (SessionRecord, error)
	ListSessions(ctx context.Context, officeID string) ([]SessionRecord, error)
	// SetSessionStatus records one change of an agent's session status
	// in one conditional write (the row is not read first, so no change
	// made in between is lost), and appends c.EventKind's event with it
	// when set. ok=false (the row not written; the event is) when c is
	// the office's view and the row holds the session layer's own word;
	// see SessionStatus.
	SetSessionStatus(ctx context.Context, c SessionStatus) (rec SessionRecord, ev Event, ok bool, err error)
	// MarkDelivered records that a row was typed into its agent, in one
	// conditional write with what goes with it: a question answered →
	// delivered, a result or a notice pending → delivered
	// (DeliveredQuestion, DeliveredResult, DeliveredNotice: delivered_at =
	// now), or a task (invocation)
	// pending → in_progress (DeliveredTask: started_at = now). The row
	// must be the agent's (the asker, the result's recipient, the
	// callee). Only when the row changed (ok), d.EventKind's event is
	// appended and, with d.Busy, the office's busy is set as
	// SetSessionStatus sets it (Process false). at is the row's new
	// delivered_at or started_at.
	MarkDelivered(ctx context.Context, d Delivered) (at time.Time, ev Event, ok bool, err error)
}

// Kinds of rows MarkDelivered marks.
const (
	DeliveredQuestion = "question"
	DeliveredResult   = "result"
	DeliveredTask     = "task"
	DeliveredNotice   = "notice"
)

// Delivered is one row typed into an agent, for MarkDelivered.
type Delivered struct {
	OfficeID, AgentID string // the agent it was typed into
	Kind              string // DeliveredQuestion, DeliveredResult, DeliveredTask or DeliveredNotice
	ID                string
	EventKind         string // appended when the row changed; "" none
	EventPayload      []byte // JSON
	Busy              bool   // set the office's busy when the row changed
}

// SessionStatus is one change of an agent's session status.
type SessionStatus struct {
	OfficeID, AgentID string
	Status            string
	Detail            string // replaces the row's (cut to MaxSessionDetail)
	// Process: the session layer reports its process (starting, ready,
	// busy, exited, ...). PID and ExitCode are written, StartedAt when
	// set, and a row that says waiting stays waiting through ready and
	// busy while the agent has a pending question or dependency request.
	// Otherwise the status is the office's view of the work (busy when an
	// answer was typed, waiting when it asked), written unless the row
	// says needs_attention, crashed, failed, stopped or exited.
	Process   bool
	PID       int
	ExitCode  *int
	StartedAt *time.Time
	// Node, with Process or AgentSessionID, is the node running the
	// session (agent_sessions.node); "" keeps the row's.
	Node string
	// AgentSessionID, when set, is the conversation the agent's process
	// runs (Claude Code's session id), written only when the row has none:
	// the first one recorded holds, and the row returned names it. With
	// Status empty (and not Process) it is all that is written: the row's
	// status is kept, a new row is starting.
	AgentSessionID string
	// EventKind, when set, is the event appended with the change (also
	// when the office's view is not written), with EventPayload (JSON) as
	// its payload.
	EventKind    string
	EventPayload []byte
}

// StickySessionStatus reports whether status is the session layer's own
// word, which the office's view of the work does not overwrite.
func StickySessionStatus(status string) bool {
	switch status {
	case SessionNeedsAttention, SessionCrashed, SessionFailed, SessionStopped, SessionExited, SessionHibernated:
		return true
	}
	return false
}

// DueWork is everything waiting for one agent.
type DueWork struct {
	Notices      []Notice            // pending, oldest first (typed first)
	Dependencies []DependencyRequest // provided, rejected or expired, not delivered
	Answers      []Question          // answered, not delivered
	Results      []Result            // pending, to the agent
	Messages     []UserMessage       // pending
	Tasks        []Invocation        // the agent's open invocations: pending or in_progress
	Typing       Typing              // ListDueTyping's marker (zero: none appended)
}

// EventTyping is the event kind of a typing marker: a row of the store is
// about to be typed into its agent (exactly once across stops,
// docs/notes/engine.md). Its dedupe key is TypingKey(row), its payload
// {"row": <row>, "at": <when it was first typed>}.
const EventTyping = "delivery.typing"

// TypingRow names a row typed into an agent in its typing marker:
// "<kind>:<id>", kind one of notice, question, result, message, task,
// dependency.
func TypingRow(kind, id string) string { return kind + ":" + id }

// TypingKey is the dedupe key of row's typing marker.
func TypingKey(row string) string { return "typed:" + row }

// Typing is the typing marker ListDueTyping appended, or found.
type Typing struct {
	Row      string // TypingRow of the row; "" when no marker was appended
	Event    Event  // the marker: appended now (Inserted), or as stored first
	Inserted bool
}

// TypingFirst returns the row (TypingRow) a delivery round types first of
// w, for an agent whose status (office_agents.status) is agentStatus,
// when the round's first typing is known from w alone: the oldest notice
// when one is due; else none ("") when a dependency is due (its delivery may restart the agent first) or when
// the first answer is a permission request's (decided, not typed, while
// its hook waits). Otherwise the first of: the oldest answer, the oldest
// result, the oldest message, the oldest pending task when none is in
// progress and the agent is neither disabled nor failed (the order of
// engine/deliver.go round).
func TypingFirst(w DueWork, agentStatus string) string {
	switch {
	case len(w.Notices) > 0:
		return TypingRow("notice", w.Notices[0].ID)
	case len(w.Dependencies) > 0:
		return ""
	case len(w.Answers) > 0:
		if w.Answers[0].Category == QuestionPermission {
			return ""
		}
		return TypingRow("question", w.Answers[0].ID)
	case len(w.Results) > 0:
		return TypingRow("result", w.Results[0].ID)
	case len(w.Messages) > 0:
		return TypingRow("message", w.Messages[0].ID)
	}
	if agentStatus == AgentDisabled || agentStatus == AgentFailed {
		return ""
	}
	for _, t := range w.Tasks {
		if t.Status == InvocationInProgress {
			return ""
		}
	}
	for _, t := range w.Tasks {
		if t.Status == InvocationPending {
			return TypingRow("task", t.ID)
		}
	}
	return ""
}

// Questions is the agents' questions to people.
type Questions interface {
	CreateQuestion(ctx context.Context, q Question) (Question, error)
	// AskQuestion stores a question an agent asks (pending, a.Question's
	// ID, office, agent and text) with what goes with it, in one write:
	// session_id is the agent's session row's, expires_at a.At (the
	// store's now when zero) plus the office's question_ttl (a.TTL when
	// it has none); the office's
	// waiting is set as SetSessionStatus sets it (Process false); and
	// a.EventKind's event is appended with a.EventDedupeKey and the
	// payload {question_id, question, type, options, expires_at}.
	// created=false when a question with its ID exists: then nothing is
	// written and q is the stored one. Before all this a.Message, when
	// its Kind is set, is appended (whether or not the question is new;
	// an event with its dedupe key stored before is kept). events are the
	// events appended, in order. pending is the agent's other pending
	// questions, oldest first: those q may supersede.
	AskQuestion(ctx context.Context, a Ask) (q Question, pending []Question, events []Event, created bool, err error)
	GetQuestion(ctx context.Context, id string) (Question, error)
	ListQuestions(ctx context.Context, f QuestionFilter) ([]Question, error)
	// AnswerQuestion: pending → answered, setting response, answered_by and
	// answered_at (now). ok=false when the question is not pending.
	AnswerQuestion(ctx context.Context, id, response, answeredBy string) (q Question, ok bool, err error)
	// MarkQuestionDelivered: answered → delivered, delivered_at = now.
	MarkQuestionDelivered(ctx context.Context, id string) (ok bool, err error)
	// ExpireQuestions: every pending question of the offices officeIDs (all
	// offices when empty) with expires_at <= now becomes expired; returns
	// exactly those it changed. A server that runs some offices of a shared
	// database names them: the notice of an expiry goes to the asker by the
	// server that expired it.
	ExpireQuestions(ctx context.Context, now time.Time, officeIDs []string) ([]Question, error)
	// CancelQuestion: pending or answered → cancelled.
	CancelQuestion(ctx context.Context, id string) (ok bool, err error)
	// CancelPendingQuestion: pending → cancelled; an answered question
	// keeps its answer (ok=false).
	CancelPendingQuestion(ctx context.Context, id string) (ok bool, err error)
	// ListAnsweredUndelivered: status answered, due as d says.
	ListAnsweredUndelivered(ctx context.Context, d Due) ([]Question, error)
}

// Ask is a question an agent asks, for AskQuestion.
type Ask struct {
	Question       Question
	TTL            time.Duration // how long it waits when its office has no question_ttl
	At             time.Time     // when it was asked, by the office's clock (zero: the store's now)
	EventKind      string
	EventDedupeKey string
	Message        Event // the agent's message that asked it (Kind, Payload, Raw, DedupeKey): appended first
}

// Messages is people's messages to agents.
type Messages interface {
	CreateUserMessage(ctx context.Context, m UserMessage) (UserMessage, error)
	// MarkUserMessageDelivered: pending → delivered.
	MarkUserMessageDelivered(ctx context.Context, id string) (ok bool, err error)
	// ListPendingUserMessages: status pending, due as d says.
	ListPendingUserMessages(ctx context.Context, d Due) ([]UserMessage, error)
}

// Invocations is the tasks agents give each other.
type Invocations interface {
	CreateInvocation(ctx context.Context, inv Invocation) (Invocation, error)
	// Invoke stores a task one agent gives another (i.Invocation,
	// pending, with its ID) and appends i.EventKind's event (the
	// caller's, i.EventPayload, i.EventDedupeKey) in one write.
	// created=false when an invocation with its ID exists: then nothing
	// is written and inv is the stored one. Before all this i.Message is
	// appended as AskQuestion appends a.Message. events are the events
	// appended, in order.
	Invoke(ctx context.Context, i Invoke) (inv Invocation, events []Event, created bool, err error)
	GetInvocation(ctx context.Context, id string) (Invocation, error)
	ListInvocations(ctx context.Context, f InvocationFilter) ([]Invocation, error)
	// TransitionInvocation moves an invocation whose status is one of from to
	// status to, applying patch; started_at is set on in_progress,
	// completed_at on completed, failed, cancelled and rejected.
	TransitionInvocation(ctx context.Context, id string, from []string, to string, patch InvocationPatch) (inv Invocation, ok bool, err error)
	// ListOpenWork returns the work the office's agents hold, read at
	// once: its open (pending or in_progress) invocations and its open
	// proxy tasks (ProxyTaskOpen), each oldest first, as ListInvocations
	// and ListProxyTasks return them.
	ListOpenWork(ctx context.Context, officeID string) (OpenWork, error)
	// FindOpenInvocation returns the oldest open (pending or in_progress)
	// invocation from caller to callee, or ENOTFOUND.
	FindOpenInvocation(ctx context.Context, officeID, callerAgentID, calleeAgentID string) (Invocation, error)
}

// OpenWork is the work an office's agents hold (ListOpenWork).
type OpenWork struct {
	Invocations []Invocation
	ProxyTasks  []ProxyTask
}

// Invoke is a task one agent gives another, for Invocations.Invoke.
type Invoke struct {
	Invocation     Invocation
	EventKind      string
	EventPayload   []byte // JSON
	EventDedupeKey string
	Message        Event // the agent's message that gave the task: appended first
}

// Results is what agents deliver to each other.
type Results interface {
	CreateResult(ctx context.Context, r Result) (Result, error)
	// DeliverResult stores a result an agent delivers (pending,
	// d.Result's ID, office, sender, recipient, type and content) with
	// what goes with it, in one write: its invocation is the oldest open
	// one from its recipient to its sender (none: ""), completed with it
	// (result_id set) and recorded by d.CompletedEventKind's event
	// ({invocation_id, result_id}, d.CompletedDedupeKey); then
	// d.EventKind's event is appended ({result_id, to: d.ToName,
	// invocation_id, type}, d.EventDedupeKey). When a result with its ID
	// exists (Created false) it is not written again, but its
	// invocation is completed and the events appended if they were not.
	// Before all this d.Message is appended as AskQuestion appends
	// a.Message.
	DeliverResult(ctx context.Context, d ResultDelivery) (ResultStored, error)
	GetResult(ctx context.Context, id string) (Result, error)
	ListResults(ctx context.Context, f ResultFilter) ([]Result, error)
	// MarkResultDelivered: pending → delivered.
	MarkResultDelivered(ctx context.Context, id string) (ok bool, err error)
}

// ResultDelivery is a result an agent delivers, for DeliverResult.
type ResultDelivery struct {
	Result                                 Result
	ToName                                 string // the recipient's name, for the event
	EventKind, EventDedupeKey              string // the result's event
	CompletedEventKind, CompletedDedupeKey string // its invocation's
	Message                                Event  // the agent's message that delivered it: appended first
}

// ResultStored is what DeliverResult did.
type ResultStored struct {
	Result    Result
	Created   bool    // false: stored before (a message handled again)
	Completed bool    // this call completed Result.InvocationID
	Events    []Event // the events appended, in order
	NextTask  bool    // the sender has a pending task waiting
}

// Dependencies is the agents' requests for keys, variables and services.
type Dependencies interface {
	CreateDependency(ctx context.Context, d DependencyRequest) (DependencyRequest, error)
	GetDependency(ctx context.Context, id string) (DependencyRequest, error)
	ListDependencies(ctx context.Context, f DependencyFilter) ([]DependencyRequest, error)
	// ProvideDependency: pending → provided, value stored as given, provided_at = now.
	ProvideDependency(ctx context.Context, id string, value []byte) (d DependencyRequest, ok bool, err error)
	// RejectDependency: pending → rejected with a reason.
	RejectDependency(ctx context.Context, id, reason string) (d DependencyRequest, ok bool, err error)
	// ExpireDependencies: pending with expires_at <= now → expired; returns those changed.
	ExpireDependencies(ctx context.Context, now time.Time) ([]DependencyRequest, error)
	// MarkDependencyDelivered sets delivered_at once for a provided, rejected
	// or expired request (delivered_at IS NULL → now).
	MarkDependencyDelivered(ctx context.Context, id string) (ok bool, err error)
	// ListUndeliveredDependencies: provided, rejected or expired with
	// delivered_at NULL, due as d says.
	ListUndeliveredDependencies(ctx context.Context, d Due) ([]DependencyRequest, error)
}

// Events is the append-only event log.
type Events interface {
	// AppendEvent returns inserted=false (and no error) when an event with
	// the same non-empty DedupeKey exists in the office, and then that
	// event, as stored first.
	AppendEvent(ctx context.Context, e Event) (ev Event, inserted bool, err error)
	// AppendEvents appends events in order in one write, each as
	// AppendEvent appends it: stored[i] is the event inserted, or the one
	// stored first with its dedupe key (inserted[i] false).
	AppendEvents(ctx context.Context, events []Event) (stored []Event, inserted []bool, err error)
	ListEvents(ctx context.Context, f EventFilter) ([]Event, error)
}

// Due selects rows waiting to be delivered, oldest first: those of the
// offices OfficeIDs (all offices when empty) and, when AgentID is set, of
// that agent only. The delivery of one agent reads with AgentID; the change
// feeds' catch-up reads whole offices.
type Due struct {
	OfficeIDs []string
	AgentID   string
}

// QuestionFilter selects questions; zero fields select everything.
type QuestionFilter struct {
	OfficeID string
	AgentID  string
	Status   []string
	Limit    int
}

// InvocationFilter selects invocations; zero fields select everything.
// AgentID matches caller or callee; CalleeAgentID the callee only (an
// agent's own tasks).
type InvocationFilter struct {
	OfficeID      string
	AgentID       string
	CalleeAgentID string
	Status        []string
	Limit         int
}

// ResultFilter selects results; zero fields select everything.
type ResultFilter struct {
	OfficeID     string
	ToAgentID    string
	InvocationID string
	Status       []string
	Limit        int
}

// DependencyFilter selects dependency requests; zero fields select everything.
type DependencyFilter struct {
	OfficeID string
	AgentID  string
	Status   []string
	Limit    int
}

// EventFilter selects events with ID > AfterID, oldest first.
type EventFilter struct {
	OfficeID string
	AgentID  string
	AfterID  int64
	Limit    int // 0: 100
}

// Tables the change feed reports.
const (
	TableQuestions    = "user_questions"
	TableMessages     = "user_messages"
	TableDependencies = "dependency_requests"
)

// Change ops.
const (
	OpInsert  = "INSERT"
	OpUpdate  = "UPDATE"
	OpCatchUp = "CATCHUP" // synthesised by the catch-up query after a (re)connect
)

// Change says that a row the office acts on changed. It carries the row's
// identity and new status only: the office reads the row and acts through
// the store's conditional transitions, so a change seen twice (a
// notification and a catch-up of the same row) is acted on once.
type Change struct {
	Table    string `json:"table"`
	Op       string `json:"op"`
	ID       string `json:"id"`
	OfficeID string `json:"office_id"`
	AgentID  string `json:"agent_id"`
	Status   string `json:"status"`
	// ExpiresAt is the deadline of a pending question or dependency
	// request another process inserted (nil otherwise, or when the feed
	// does not know it): the engine expires it then without polling.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// ChangeFeed tells the office about rows written by someone else: answers
// (user_questions → answered), new user_messages, and dependency_requests
// provided or rejected. A feed may also report pending questions and
// dependency requests as they are inserted (Op INSERT, with ExpiresAt), so
// that the engine knows their deadlines without polling; the catch-up does
// not report them (the engine asks the store for deadlines each time
// Connected turns true).
type ChangeFeed interface {
	// Watch calls fn for each change in the given offices (all when empty)
	// until ctx ends, reconnecting with backoff when its connection drops.
	// After every (re)connect, before any live change, it runs a catch-up
	// query and calls fn with Op=CATCHUP for every row still awaiting the
	// office: answered-undelivered questions, pending user messages, and
	// provided/rejected dependencies not yet delivered. So nothing written
	// while the feed was down is lost. fn must not block for long.
	Watch(ctx context.Context, officeIDs []string, fn func(Change)) error
	// Connected reports whether the feed is connected and caught up now.
	Connected() bool
}
