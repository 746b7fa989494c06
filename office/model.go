// Package office is the office's domain: its model (offices, agents,
// sessions, questions, messages, invocations, results, dependency requests,
// events), its errors, the small role interfaces of its persistence (Store
// and the roles it is made of), and the rules that need nothing else
// (agent names and workspaces, sealing secret values, the instructions
// given to every agent). The routing core that acts on the model is
// package engine (docs/notes/engine.md).
package office

import (
	"encoding/json"
	"time"
	"unicode/utf8"
)

// The data model. Field names follow the table columns of the migrations
// (migrations/*.sql; the web frontend reads the same names). IDs are UUIDs
// as text; a store fills ID, CreatedAt and UpdatedAt when they are empty.

// Office is one office: a set of agents and the people who may watch it.
type Office struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// QuestionTTL is how long an ASK_USER question waits for an answer
	// before it expires; zero means the server default (5 minutes).
	QuestionTTL time.Duration `json:"question_ttl"`
	CreatedAt   time.Time     `json:"created_at"`
	UpdatedAt   time.Time     `json:"updated_at"`
}

// Agent statuses (office_agents.status): what the operator wants, kept in
// step with the session by the office.
const (
	AgentIdle     = "idle"     // no session running
	AgentActive   = "active"   // session running
	AgentDisabled = "disabled" // operator switched it off; never auto-started
	AgentFailed   = "failed"   // crashed too often
)

// Agent is an office agent (office_agents).
type Agent struct {
	ID             string     `json:"id"`
	OfficeID       string     `json:"office_id"`
	Name           string     `json:"name"` // unique per office, case-insensitively
	Role           string     `json:"role"`
	Capabilities   []string   `json:"capabilities"`
	Priority       int        `json:"priority"`
	Expertise      []string   `json:"expertise"`
	AllowedActions []string   `json:"allowed_actions"`
	MaxLoad        int        `json:"max_load"` // 0: the default (1 open task)
	Launch         LaunchSpec `json:"launch"`   // jsonb column launch_spec
	Status         string     `json:"status"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

// LaunchSpec says how an agent's process is started. It is stored as JSON.
type LaunchSpec struct {
	// Kind is the kind of agent, one of session.Kinds(): Claude Code (the
	// default), any CLI agent, a scripted agent compiled into the server
	// (the example office and tests)…
	Kind           string            `json:"kind,omitempty"`
	Command        string            `json:"command,omitempty"`
	Args           []string          `json:"args,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Dir            string            `json:"dir,omitempty"`
	PromptPattern  string            `json:"prompt_pattern,omitempty"`
	Model          string            `json:"model,omitempty"`
	PermissionMode string            `json:"permission_mode,omitempty"`
	Script         string            `json:"script,omitempty"` // builtin: which script
	// User, when set, is the OS user (name or uid) the agent runs as; the
	// server must be root or have CAP_SETUID and CAP_SETGID.
	User string `json:"user,omitempty"`
	// Permissions is the agent's tool-permission policy (Claude Code):
	// what runs without asking, what is refused, what is always asked, and
	// how long a request waits for a person. See docs/notes/permissions.md.
	Permissions *PermissionPolicy `json:"permissions,omitempty"`
	// HibernateAfter, when positive, is how long the agent may be idle
	// (no turn in progress, nothing queued for it, no dialog or permission
	// request open, nothing typed to it) before its process is stopped and
	// its session is hibernated; zero: never. See CanHibernate.
	HibernateAfter time.Duration `json:"hibernate_after,omitempty"`
}

// ResumingKinds are the kinds of agent whose CLI keeps its conversation
// across a stop and resumes it at the next start (session.Info.Resumes):
// an office's hibernate_after applies to them. An agent of another kind
// (a plain command, the built-in scripts) loses its state when stopped, so
// it hibernates only when its own launch spec says so.
var ResumingKinds = []string{"", "claude", "codex", "gemini", "qwen"}

// MaxHibernateAfter bounds LaunchSpec.HibernateAfter.
const MaxHibernateAfter = 30 * 24 * time.Hour

// CheckHibernateAfter reports an EINVALID error for a negative or too
// long hibernate_after.
func CheckHibernateAfter(d time.Duration) error {
	if d < 0 || d > MaxHibernateAfter {
		return Errorf(EINVALID, "hibernate_after %s: want between 0 (never) and %s", d, MaxHibernateAfter)
	}
	return nil
}

// WithDefaults returns a with what a stored agent has when nobody said
// otherwise: status idle, and empty (not nil) capabilities, expertise and
// allowed actions.
func (a Agent) WithDefaults() Agent {
	if a.Status == "" {
		a.Status = AgentIdle
	}
	for _, s := range []*[]string{&a.Capabilities, &a.Expertise, &a.AllowedActions} {
		if *s == nil {
			*s = []string{}
		}
	}
	return a
}

// Session statuses (agent_sessions.status).
const (
	SessionStarting = "starting"
	SessionReady    = "ready"
	SessionBusy     = "busy"
	SessionWaiting  = "waiting" // waiting for a person (question or dependency)
	SessionStopped  = "stopped"
	SessionExited   = "exited"
	SessionCrashed  = "crashed"
	SessionFailed   = "failed"
	// SessionNeedsAttention: the agent shows something other than its
	// input prompt (a dialog: folder trust, API-key approval, a permission
	// prompt…). Nothing is typed into it; SessionRecord.Detail holds the
	// dialog's text, and a person resolves it from the console.
	SessionNeedsAttention = "needs_attention"
	// SessionHibernated: the agent was idle for its HibernateAfter and its
	// process was stopped cleanly to give its memory back; its
	// conversation is kept, and any work for it starts it again with the
	// conversation resumed (docs/notes/hibernate.md).
	SessionHibernated = "hibernated"
)

// SessionRecord is an agent's session as persisted (agent_sessions). There is
// at most one row per agent: it is updated in place across restarts, so
// AgentSessionID (Claude Code's conversation id) survives a server restart
// and the conversation is resumed.
type SessionRecord struct {
	ID             string     `json:"id"`
	OfficeID       string     `json:"office_id"`
	AgentID        string     `json:"agent_id"`
	Node           string     `json:"node"`
	PID            int        `json:"pid"`
	Status         string     `json:"status"`
	AgentSessionID string     `json:"agent_session_id"`
	StartedAt      *time.Time `json:"started_at,omitempty"`
	LastOutputAt   *time.Time `json:"last_output_at,omitempty"`
	ExitCode       *int       `json:"exit_code,omitempty"`
	// Detail says why the session is in its status: the dialog's text
	// (needs_attention), or the exit code and last screen lines of an agent
	// that exited, crashed or failed. Empty otherwise.
	Detail    string    `json:"detail"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// MaxSessionDetail is the most bytes of SessionRecord.Detail a store keeps
// (the agent_sessions.detail check constraint says the same). Stores cut a
// longer Detail with CutSessionDetail instead of refusing the session.
const MaxSessionDetail = 4000

// CutSessionDetail returns detail cut to at most MaxSessionDetail bytes,
// on a rune boundary so that valid UTF-8 stays valid. A detail within the
// cap is returned as it is.
func CutSessionDetail(detail string) string {
	if len(detail) <= MaxSessionDetail {
		return detail
	}
	n := MaxSessionDetail
	// Back up over at most UTFMax-1 continuation bytes: further back the
	// text is not UTF-8 anyway, and the cut stays at the cap.
	for i := n; i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(detail[i]) {
			return detail[:i]
		}
	}
	return detail[:n]
}

// QuestionPermission is the category of the questions that carry an
// agent's tool-permission requests (docs/notes/permissions.md): answered
// with one of PermissionOptions, or "deny: <reason>".
const QuestionPermission = "permission"

// The options of a permission question, in order.
const (
	PermissionAllowOnce    = "allow once"
	PermissionAllowSession = "allow for this session"
	PermissionDeny         = "deny"
)

// PermissionOptions returns the options of a permission question.
func PermissionOptions() []string {
	return []string{PermissionAllowOnce, PermissionAllowSession, PermissionDeny}
}

// Question types and statuses (user_questions).
const (
	QuestionText         = "text"
	QuestionSelection    = "selection"
	QuestionConfirmation = "confirmation"

	QuestionPending   = "pending"
	QuestionAnswered  = "answered"
	QuestionDelivered = "delivered"
	QuestionExpired   = "expired"
	QuestionCancelled = "cancelled"
)

// Question is a question for a person (user_questions).
type Question struct {
	ID            string     `json:"id"`
	OfficeID      string     `json:"office_id"`
	AgentID       string     `json:"agent_id"`
	SessionID     string     `json:"session_id,omitempty"`
	QuestionType  string     `json:"question_type"`
	Category      string     `json:"category,omitempty"`
	Question      string     `json:"question"`
	Options       []string   `json:"options"`
	DefaultAnswer string     `json:"default_answer,omitempty"`
	Context       string     `json:"context,omitempty"`
	Required      bool       `json:"required"`
	Status        string     `json:"status"`
	Response      string     `json:"response,omitempty"`
	AnsweredBy    string     `json:"answered_by,omitempty"` // auth.users id, or "" for the console
	AnsweredAt    *time.Time `json:"answered_at,omitempty"`
	DeliveredAt   *time.Time `json:"delivered_at,omitempty"`
	ExpiresAt     time.Time  `json:"expires_at"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
}

// Message statuses (user_messages).
const (
	MessagePending   = "pending"
	MessageDelivered = "delivered"
)

// UserMessage is what a person wrote to an agent from the frontend.
type UserMessage struct {
	ID          string     `json:"id"`
	OfficeID    string     `json:"office_id"`
	AgentID     string     `json:"agent_id"`
	UserID      string     `json:"user_id,omitempty"`
	Content     string     `json:"content"`
	Status      string     `json:"status"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
}

// Invocation statuses (agent_invocations).
const (
	InvocationPending    = "pending"
	InvocationInProgress = "in_progress"
	InvocationCompleted  = "completed"
	InvocationFailed     = "failed"
	InvocationCancelled  = "cancelled"
	InvocationRejected   = "rejected"
)

// Invocation is one agent giving another a task (agent_invocations).
type Invocation struct {
	ID                 string     `json:"id"`
	OfficeID           string     `json:"office_id"`
	CallerAgentID      string     `json:"caller_agent_id"`
	CalleeAgentID      string     `json:"callee_agent_id"`
	ParentInvocationID string     `json:"parent_invocation_id,omitempty"`
	Depth              int        `json:"depth"`
	Reason             string     `json:"reason"` // the task
	Context            string     `json:"context,omitempty"`
	Status             string     `json:"status"`
	ResultID           string     `json:"result_id,omitempty"`
	Error              string     `json:"error,omitempty"`
	StartedAt          *time.Time `json:"started_at,omitempty"`
	CompletedAt        *time.Time `json:"completed_at,omitempty"`
	CreatedAt          time.Time  `json:"created_at"`
	UpdatedAt          time.Time  `json:"updated_at"`
}

// Open reports whether the invocation still waits for a result.
func (i Invocation) Open() bool {
	return i.Status == InvocationPending || i.Status == InvocationInProgress
}

// InvocationPatch holds the fields a transition may set besides status.
type InvocationPatch struct {
	ResultID string
	Error    string
}

// Result statuses (agent_results).
const (
	ResultPending   = "pending"
	ResultDelivered = "delivered"
)

// Result is a result handed from one agent to another (agent_results).
type Result struct {
	ID           string     `json:"id"`
	OfficeID     string     `json:"office_id"`
	InvocationID string     `json:"invocation_id,omitempty"`
	FromAgentID  string     `json:"from_agent_id"`
	ToAgentID    string     `json:"to_agent_id"`
	ResultType   string     `json:"result_type"`  // github_issue, markdown, json, file_path, message
	ContentType  string     `json:"content_type"` // MIME type, e.g. text/markdown
	Content      string     `json:"content"`
	Status       string     `json:"status"`
	DeliveredAt  *time.Time `json:"delivered_at,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
}

// Dependency statuses (dependency_requests).
const (
	DependencyPending  = "pending"
	DependencyProvided = "provided"
	DependencyRejected = "rejected"
	DependencyExpired  = "expired"
)

// DependencyRequest is an agent asking for something it cannot get itself
// (a DEPENDENCY_REQUEST block, docs/notes/protocol.md): an API key, an environment value, a service URL, a file, a
// permission, a package.
type DependencyRequest struct {
	ID          string `json:"id"`
	OfficeID    string `json:"office_id"`
	AgentID     string `json:"agent_id"`
	SessionID   string `json:"session_id,omitempty"`
	Type        string `json:"type"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required"`
	Default     string `json:"default,omitempty"`
	Status      string `json:"status"`
	// Value is what was provided, encrypted by the office (AES-256-GCM) before
	// it reaches a store for secret types. Stores keep it as opaque bytes and
	// never log it.
	Value           []byte     `json:"-"`
	RejectionReason string     `json:"rejection_reason,omitempty"`
	ExpiresAt       time.Time  `json:"expires_at"`
	ProvidedAt      *time.Time `json:"provided_at,omitempty"`
	DeliveredAt     *time.Time `json:"delivered_at,omitempty"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
}

// Event is one entry of the audit log (office_events): every parsed message,
// phase, step, error and lifecycle change.
type Event struct {
	ID        int64           `json:"id"` // assigned by the store, increasing
	OfficeID  string          `json:"office_id"`
	AgentID   string          `json:"agent_id,omitempty"`
	SessionID string          `json:"session_id,omitempty"`
	Kind      string          `json:"kind"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	Raw       string          `json:"raw,omitempty"`
	// DedupeKey, when set, is unique per office: appending an event whose key
	// exists already does nothing and reports inserted=false. The office uses
	// it to act on each parsed message exactly once across re-renders and
	// restarts (the key names the message's source, e.g. a transcript entry).
	DedupeKey string    `json:"dedupe_key,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}
