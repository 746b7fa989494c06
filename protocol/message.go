// Package protocol reads the office protocol out of an agent's words.
//
// Agents talk to the office by printing blocks such as
//
//	[ASK_USER]
//	question: Which login method?
//	options: ["email", "social", "SSO"]
//	[/ASK_USER]
//
// and line messages such as "=== PHASE 1 COMPLETE ===" or "Step 3/9: Design".
// A Parser takes the agent's text one line at a time and returns every
// complete message exactly once, in order, as a typed Message. A block that
// cannot be understood comes out as a KindInvalid message that says why, so the
// office can tell the agent what to fix; nothing is dropped silently.
//
// Splitter cuts a byte stream into lines for a Parser; the subpackage
// ansistrip removes terminal escape sequences from one first. The
// value validators (ValidateDependencyValue and the functions it calls)
// check what a person provides for a DEPENDENCY_REQUEST.
//
// The package is pure: no I/O, no goroutines, no clocks.
package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Kind names what a message is. Its values are the tag names of the protocol.
type Kind string

// The kinds of message. KindInvalid is a block that failed to parse or
// validate; its Invalid field says what it tried to be and why it failed.
const (
	KindAskUser           Kind = "ASK_USER"
	KindInvoke            Kind = "INVOKE"
	KindDeliverResult     Kind = "DELIVER_RESULT"
	KindUserQuestion      Kind = "USER_QUESTION"
	KindDependencyRequest Kind = "DEPENDENCY_REQUEST"
	KindError             Kind = "ERROR"
	KindPhaseComplete     Kind = "PHASE_COMPLETE"
	KindStep              Kind = "STEP"
	KindStepComplete      Kind = "STEP_COMPLETE"
	KindProxyRequest      Kind = "PROXY_REQUEST"
	KindInvalid           Kind = "INVALID"
)

// Message is one protocol message read from an agent's output.
//
// Exactly one of the payload pointers is set, chosen by Kind:
//
//	KindAskUser, KindUserQuestion  Question
//	KindInvoke                     Invoke
//	KindDeliverResult              Result
//	KindDependencyRequest          Dependency
//	KindError                      Error
//	KindPhaseComplete              Phase
//	KindStep                       Step
//	KindStepComplete               StepComplete
//	KindProxyRequest               Proxy
//	KindInvalid                    Invalid
//
// Message marshals to flat JSON: kind, target, line, raw and the payload's
// fields side by side (see MarshalJSON).
type Message struct {
	Kind Kind
	// Target is the agent named in the tag ([INVOKE:PO] → "PO"); empty when
	// the tag names none, in which case the office picks one (docs/protocol.md, Blocks).
	Target string
	// Raw is the message's text as it was read: the tag lines and the body
	// for a block (decoration and common indentation kept), the line(s) for
	// a line message. For a block over the size limit it is the first part
	// only.
	Raw string
	// Line is the 1-based number, among all lines fed to the parser, of the
	// message's first line. With the session's chunk identity it names the
	// message for exactly-once handling.
	Line int

	Question     *Question          // ASK_USER and USER_QUESTION
	Invoke       *Invoke            // INVOKE
	Result       *DeliverResult     // DELIVER_RESULT
	Dependency   *DependencyRequest // DEPENDENCY_REQUEST
	Error        *AgentError        // ERROR
	Phase        *PhaseComplete     // PHASE_COMPLETE
	Step         *Step              // STEP
	StepComplete *StepComplete      // STEP_COMPLETE
	Proxy        *ProxyRequest      // PROXY_REQUEST
	Invalid      *Invalid           // INVALID
}

// Question types (user_questions.question_type).
const (
	QuestionText         = "text"
	QuestionSelection    = "selection"
	QuestionConfirmation = "confirmation"
)

// Question categories (docs/protocol.md, Questions).
const (
	CategoryBusiness      = "business"
	CategoryClarification = "clarification"
	CategoryChoice        = "choice"
	CategoryConfirmation  = "confirmation"
)

// Question is a question for a person: an [ASK_USER] or a [USER_QUESTION]
// block (docs/protocol.md, Questions). Both become a user_questions row.
type Question struct {
	Question string `json:"question"`
	// Type is text, selection or confirmation. When the block gives none it
	// is selection if there are options, confirmation for the category
	// confirmation, and text otherwise.
	Type string `json:"type"`
	// Category is business, clarification, choice or confirmation; required
	// for USER_QUESTION, optional for ASK_USER.
	Category string   `json:"category,omitempty"`
	Options  []string `json:"options,omitempty"`
	Default  string   `json:"default,omitempty"`
	Context  string   `json:"context,omitempty"`
	// Required is true unless the block says `required: false`: a question
	// nobody must answer is rare, and assuming so would let it lapse.
	Required bool `json:"required"`
}

// Invoke is an [INVOKE:Agent] block: a task for another agent.
type Invoke struct {
	Task    string `json:"task"`
	Context string `json:"context,omitempty"`
}

// Result types of [DELIVER_RESULT] (agent_results.result_type).
const (
	ResultGitHubIssue = "github_issue"
	ResultMarkdown    = "markdown"
	ResultJSON        = "json"
	ResultFilePath    = "file_path"
	ResultMessage     = "message"
)

// DeliverResult is a [DELIVER_RESULT:Agent] block: a result for another agent.
type DeliverResult struct {
	// Type is github_issue, markdown, json, file_path or message (the
	// default when the block gives none).
	Type    string `json:"result_type"`
	Content string `json:"content"`
	// ContentType is a MIME type: given by a content_type line, else derived
	// from Type (markdown → text/markdown, json → application/json, else
	// text/plain).
	ContentType string `json:"content_type"`
}

// Dependency types (docs/protocol.md, Dependency requests).
const (
	DependencyAPIKey     = "api_key"
	DependencyEnvVar     = "env_variable"
	DependencyService    = "service"
	DependencyFile       = "file"
	DependencyPermission = "permission"
	DependencyPackage    = "package"
)

// DependencyRequest is a [DEPENDENCY_REQUEST] block (docs/protocol.md,
// Dependency requests): the agent needs something it cannot get itself.
type DependencyRequest struct {
	Type        string `json:"type"`
	Name        string `json:"name"`
	Description string `json:"description"`
	// Required is true unless the block says `required: false`.
	Required bool   `json:"required"`
	Default  string `json:"default,omitempty"`
}

// Error types and recovery strategies of [ERROR] (docs/protocol.md,
// Errors; the finer types are accepted too).
const (
	ErrorRecoverable = "recoverable"
	ErrorFatal       = "fatal"

	RecoveryPauseAndRetry     = "pause_and_retry"
	RecoveryCheckpointAndFail = "checkpoint_and_fail"
	RecoveryNotifyUser        = "notify_user"
)

// AgentError is an [ERROR] block: the agent reports a failure of its own.
type AgentError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	// Recovery is pause_and_retry, checkpoint_and_fail or notify_user.
	// When the block gives none: pause_and_retry for recoverable,
	// checkpoint_and_fail for fatal, notify_user otherwise.
	Recovery string `json:"recovery"`
	Details  string `json:"details,omitempty"`
}

// PhaseComplete is a "=== PHASE N COMPLETE ===" line with the optional
// "Phase: name" line and deliverables list that follow it (docs/protocol.md, Phases and steps).
type PhaseComplete struct {
	Number       int      `json:"number"`
	Name         string   `json:"name,omitempty"`
	Deliverables []string `json:"deliverables,omitempty"`
}

// Step is a step update line: "Step 3/9: name", "Step 3 of 9: name" or
// "현재 Step: 3/9: name" (docs/protocol.md, Phases and steps).
type Step struct {
	Current int    `json:"current"`
	Total   int    `json:"total"`
	Name    string `json:"name"`
}

// StepComplete is a [STEP_COMPLETE] block (docs/protocol.md, Blocks): the agent finished a
// step. Both fields are optional.
type StepComplete struct {
	// Name is the step's name, from a `step:` or `name:` line.
	Name string `json:"name,omitempty"`
	// Summary is the rest of the block's text.
	Summary string `json:"summary,omitempty"`
}

// Proxy actions (docs/protocol.md, Proxy requests).
const (
	ProxyCreatePlan   = "create_plan"
	ProxyUpdateStatus = "update_status"
)

// ProxyRequest is a [PROXY_REQUEST] block: a JSON request (docs/protocol.md, Proxy requests) for a
// proxy agent (create_plan or update_status).
type ProxyRequest struct {
	Action    string `json:"action"`
	Requester string `json:"requester"`
	// create_plan
	Tasks       []ProxyTask       `json:"tasks,omitempty"`
	Preferences *ProxyPreferences `json:"preferences,omitempty"`
	// update_status
	TaskID   string          `json:"task_id,omitempty"`
	Status   string          `json:"status,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// Payload is the request's JSON exactly as the agent wrote it, so a
	// field this type does not know is not lost.
	Payload json.RawMessage `json:"payload"`
}

// ProxyTask is one task of a create_plan request.
type ProxyTask struct {
	Content       string   `json:"content"`
	Priority      string   `json:"priority,omitempty"`
	EstimatedTime string   `json:"estimated_time,omitempty"`
	Dependencies  []string `json:"dependencies,omitempty"`
}

// ProxyPreferences are a create_plan request's wishes about its proxy.
type ProxyPreferences struct {
	PreferredProxy  string `json:"preferred_proxy,omitempty"`
	FallbackAllowed *bool  `json:"fallback_allowed,omitempty"`
}

// Invalid is a block that could not be read or failed validation.
type Invalid struct {
	// Kind is what the block tried to be (ASK_USER, INVOKE…).
	Kind Kind `json:"invalid_kind"`
	// Reason says what is wrong and how to write it instead, in words meant
	// for the agent that wrote the block, e.g.
	// "ASK_USER: missing 'question:' line; write `question: <text>`".
	Reason string `json:"reason"`
}

// Priority orders messages by urgency (docs/protocol.md, Priority): ERROR (4) before
// PHASE_COMPLETE (3) before DEPENDENCY_REQUEST (2) before questions,
// ASK_USER and USER_QUESTION (1), before everything else (0). An invalid
// block changes nothing but what the agent is told, so it ranks 0.
func (m Message) Priority() int {
	switch m.Kind {
	case KindError:
		return 4
	case KindPhaseComplete:
		return 3
	case KindDependencyRequest:
		return 2
	case KindAskUser, KindUserQuestion:
		return 1
	}
	return 0
}

// Valid reports whether m is a well-formed message of a known kind.
func (m Message) Valid() bool { return m.Kind != KindInvalid && m.payload() != nil }

// String renders m briefly for logs: kind, target, and the reason if invalid.
func (m Message) String() string {
	s := string(m.Kind)
	if m.Target != "" {
		s += ":" + m.Target
	}
	if m.Invalid != nil {
		s += fmt.Sprintf("(%s: %s)", m.Invalid.Kind, m.Invalid.Reason)
	}
	return s
}

// payload returns the payload pointer that Kind selects, or nil.
func (m Message) payload() any {
	switch m.Kind {
	case KindAskUser, KindUserQuestion:
		if m.Question != nil {
			return m.Question
		}
	case KindInvoke:
		if m.Invoke != nil {
			return m.Invoke
		}
	case KindDeliverResult:
		if m.Result != nil {
			return m.Result
		}
	case KindDependencyRequest:
		if m.Dependency != nil {
			return m.Dependency
		}
	case KindError:
		if m.Error != nil {
			return m.Error
		}
	case KindPhaseComplete:
		if m.Phase != nil {
			return m.Phase
		}
	case KindStep:
		if m.Step != nil {
			return m.Step
		}
	case KindStepComplete:
		if m.StepComplete != nil {
			return m.StepComplete
		}
	case KindProxyRequest:
		if m.Proxy != nil {
			return m.Proxy
		}
	case KindInvalid:
		if m.Invalid != nil {
			return m.Invalid
		}
	}
	return nil
}

// envelope is the part of the JSON form every message has.
type envelope struct {
	Kind   Kind   `json:"kind"`
	Target string `json:"target,omitempty"`
	Line   int    `json:"line"`
	Raw    string `json:"raw,omitempty"`
}

// MarshalJSON encodes m as one flat object: kind, target (when set), line,
// raw, and the fields of its payload with snake_case names, e.g.
//
//	{"kind":"INVOKE","target":"PO","line":3,"raw":"…","task":"…","context":"…"}
//
// An invalid message carries invalid_kind and reason.
func (m Message) MarshalJSON() ([]byte, error) {
	head, err := marshalPlain(envelope{Kind: m.Kind, Target: m.Target, Line: m.Line, Raw: m.Raw})
	if err != nil {
		return nil, err
	}
	p := m.payload()
	if p == nil {
		return head, nil
	}
	body, err := marshalPlain(p)
	if err != nil {
		return nil, fmt.Errorf("marshal %s payload: %w", m.Kind, err)
	}
	if len(body) <= 2 { // "{}"
		return head, nil
	}
	// Splice {"kind"…} and {"question"…} into {"kind"…,"question"…}.
	out := make([]byte, 0, len(head)+len(body))
	out = append(out, head[:len(head)-1]...)
	out = append(out, ',')
	out = append(out, body[1:]...)
	return out, nil
}

// marshalPlain is json.Marshal without HTML escaping: agents' text is full
// of <, > and &, and the JSON is read by people and programs, not browsers.
func marshalPlain(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// UnmarshalJSON decodes the form MarshalJSON writes. It fails on an unknown
// kind.
func (m *Message) UnmarshalJSON(b []byte) error {
	var e envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return err
	}
	*m = Message{Kind: e.Kind, Target: e.Target, Line: e.Line, Raw: e.Raw}
	var p any
	switch e.Kind {
	case KindAskUser, KindUserQuestion:
		m.Question = new(Question)
		p = m.Question
	case KindInvoke:
		m.Invoke = new(Invoke)
		p = m.Invoke
	case KindDeliverResult:
		m.Result = new(DeliverResult)
		p = m.Result
	case KindDependencyRequest:
		m.Dependency = new(DependencyRequest)
		p = m.Dependency
	case KindError:
		m.Error = new(AgentError)
		p = m.Error
	case KindPhaseComplete:
		m.Phase = new(PhaseComplete)
		p = m.Phase
	case KindStep:
		m.Step = new(Step)
		p = m.Step
	case KindStepComplete:
		m.StepComplete = new(StepComplete)
		p = m.StepComplete
	case KindProxyRequest:
		m.Proxy = new(ProxyRequest)
		p = m.Proxy
	case KindInvalid:
		m.Invalid = new(Invalid)
		p = m.Invalid
	default:
		return fmt.Errorf("unmarshal message: unknown kind %q", e.Kind)
	}
	return json.Unmarshal(b, p)
}
