package proxy

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Actions an agent may be allowed (office_agents.allowed_actions).
const (
	ActionAskUser      = "ask_user" // ASK_USER and USER_QUESTION
	ActionInvoke       = "invoke"
	ActionDeliver      = "deliver_result"
	ActionDependency   = "dependency_request"
	ActionCreatePlan   = "create_plan"   // PROXY_REQUEST create_plan
	ActionUpdateStatus = "update_status" // PROXY_REQUEST update_status
	ActionProxy        = "proxy"         // may act as a proxy for others
	ActionAll          = "*"
)

// DefaultActions are allowed to an agent whose AllowedActions is empty: the
// whole protocol, so a freshly declared office works, while an operator
// narrows an agent by listing exactly what it may do.
var DefaultActions = []string{ActionAskUser, ActionInvoke, ActionDeliver, ActionDependency, ActionCreatePlan, ActionUpdateStatus, ActionProxy}

// Allowed reports whether a may perform action (case-insensitive; "*"
// allows everything).
func (a Agent) Allowed(action string) bool {
	list := a.AllowedActions
	if len(list) == 0 {
		list = DefaultActions
	}
	return slices.ContainsFunc(list, func(s string) bool { return s == ActionAll || strings.EqualFold(s, action) })
}

// ErrForbidden is wrapped by Authorize's errors.
var ErrForbidden = errors.New("action not allowed")

// Authorize returns nil when requester may perform action, else an error
// wrapping ErrForbidden that says what it may do instead (docs/protocol.md, Proxy requests:
// requester validation).
func Authorize(requester Agent, action string) error {
	if requester.Allowed(action) {
		return nil
	}
	list := requester.AllowedActions
	return fmt.Errorf("%w: %s may not %s (allowed: %s)", ErrForbidden, requester.Name, action, strings.Join(list, ", "))
}

// MaxContent is the default size limit of one piece of forwarded content.
const MaxContent = 64 << 10

// ErrContent is wrapped by ValidateContent's errors.
var ErrContent = errors.New("invalid content")

// ValidateContent checks text one agent sends towards another (docs/protocol.md, Proxy requests:
// content validation): valid UTF-8, at most max bytes (MaxContent when
// max <= 0), and no control characters but newline, tab and carriage return
// — an ESC or a C1 control could drive the receiver's terminal.
func ValidateContent(s string, max int) error {
	if max <= 0 {
		max = MaxContent
	}
	if len(s) > max {
		return fmt.Errorf("%w: %d bytes, more than the limit of %d", ErrContent, len(s), max)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: not valid UTF-8", ErrContent)
	}
	for i, r := range s {
		if r == '\n' || r == '\t' || r == '\r' {
			continue
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("%w: control character %U at byte %d", ErrContent, r, i)
		}
	}
	return nil
}

// Task is one task of a create_plan request.
type Task struct {
	Content       string   `json:"content"`
	Priority      string   `json:"priority,omitempty"` // high, medium, low
	EstimatedTime string   `json:"estimated_time,omitempty"`
	Dependencies  []string `json:"dependencies,omitempty"`
}

// Preferences of a create_plan request.
type Preferences struct {
	PreferredProxy  string `json:"preferred_proxy,omitempty"`
	FallbackAllowed *bool  `json:"fallback_allowed,omitempty"` // nil: true
	TaskType        string `json:"task_type,omitempty"`        // the expert's task type (coding, research, planning, …)
	Strategy        string `json:"strategy,omitempty"`         // priority, load, expertise
}

// ActionRequest is the JSON body of a PROXY_REQUEST (docs/protocol.md, Proxy
// requests).
type ActionRequest struct {
	Action      string          `json:"action"` // create_plan | update_status
	Requester   string          `json:"requester"`
	TaskType    string          `json:"task_type,omitempty"` // as preferences.task_type
	Tasks       []Task          `json:"tasks,omitempty"`
	Preferences Preferences     `json:"preferences,omitempty"`
	TaskID      string          `json:"task_id,omitempty"`
	Status      string          `json:"status,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// Response is the JSON of a [PROXY_RESPONSE] (docs/protocol.md, Proxy
// requests).
type Response struct {
	Success       bool     `json:"success"`
	Proxy         string   `json:"proxy,omitempty"`
	Requester     string   `json:"requester"`
	TasksCreated  int      `json:"tasks_created"`
	TaskIDs       []string `json:"task_ids"`
	ExecutionTime string   `json:"execution_time"`
	Error         string   `json:"error,omitempty"`

	// The office's additions to the seed's response: what became of the
	// request (assigned, parked, backed_up, timed_out, updated), its ID,
	// when a parked request times out, the file a backed-up one was
	// written to, and a sentence for the requester.
	Status     string `json:"status,omitempty"`
	RequestID  string `json:"request_id,omitempty"`
	ExpiresAt  string `json:"expires_at,omitempty"`
	BackupFile string `json:"backup_file,omitempty"`
	Message    string `json:"message,omitempty"`
}

// Tools returns the tools a proxy needs for the action: todowrite to create
// a plan, todoread and todowrite to update a task's status.
func (r ActionRequest) Tools() []string {
	if r.Action == ActionUpdateStatus {
		return []string{ToolTodoRead, ToolTodoWrite}
	}
	return []string{ToolTodoWrite}
}

// Task statuses accepted by update_status.
var taskStatuses = []string{"pending", "in_progress", "completed", "failed", "cancelled", "blocked"}

// ParseAction decodes and validates a PROXY_REQUEST body. Every field is
// checked; the error names the first problem so the agent can fix it.
func ParseAction(body []byte) (ActionRequest, error) {
	var r ActionRequest
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("proxy request is not valid JSON: %w", err)
	}
	if dec.More() {
		return r, errors.New("proxy request: text after the JSON object")
	}
	if strings.TrimSpace(r.Requester) == "" {
		return r, errors.New("proxy request: requester is missing")
	}
	switch r.Action {
	case ActionCreatePlan:
		if len(r.Tasks) == 0 {
			return r, errors.New("create_plan: tasks is empty")
		}
		for i, t := range r.Tasks {
			if strings.TrimSpace(t.Content) == "" {
				return r, fmt.Errorf("create_plan: task %d has no content", i+1)
			}
			if err := ValidateContent(t.Content, 0); err != nil {
				return r, fmt.Errorf("create_plan: task %d: %w", i+1, err)
			}
			switch strings.ToLower(t.Priority) {
			case "", "high", "medium", "low":
			default:
				return r, fmt.Errorf("create_plan: task %d: priority %q is not high, medium or low", i+1, t.Priority)
			}
		}
		if r.TaskType != "" && r.Preferences.TaskType != "" && !strings.EqualFold(r.TaskType, r.Preferences.TaskType) {
			return r, fmt.Errorf("create_plan: task_type %q and preferences.task_type %q differ; give one", r.TaskType, r.Preferences.TaskType)
		}
		switch Strategy(r.Preferences.Strategy) {
		case "", ByPriority, ByLoad, ByExpertise:
		default:
			return r, fmt.Errorf("create_plan: strategy %q is not priority, load or expertise", r.Preferences.Strategy)
		}
	case ActionUpdateStatus:
		if strings.TrimSpace(r.TaskID) == "" {
			return r, errors.New("update_status: task_id is missing")
		}
		if !slices.Contains(taskStatuses, r.Status) {
			return r, fmt.Errorf("update_status: status %q is not one of %s", r.Status, strings.Join(taskStatuses, ", "))
		}
	case "":
		return r, errors.New("proxy request: action is missing")
	default:
		return r, fmt.Errorf("proxy request: unknown action %q (create_plan or update_status)", r.Action)
	}
	return r, nil
}

// Request returns the selection request for r made by the agent requester.
func (r ActionRequest) Request(requesterID string) Request {
	fallback := r.Preferences.FallbackAllowed == nil || *r.Preferences.FallbackAllowed
	return Request{
		Target:     r.Preferences.PreferredProxy,
		Tools:      r.Tools(),
		TaskType:   cmp.Or(r.Preferences.TaskType, r.TaskType),
		Strategy:   Strategy(r.Preferences.Strategy),
		Exclude:    []string{requesterID},
		NoFallback: !fallback,
		Prefer:     true,
	}
}
