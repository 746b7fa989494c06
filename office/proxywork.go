package office

import (
	"context"
	"encoding/json"
	"time"
)

// Proxy request statuses (proxy_requests). A request is parked until a
// proxy can take it, then assigned; when no proxy ever can (or it waited
// longer than the office waits), it is backed up to a file and a person is
// asked (docs/notes/office.md, "The proxy protocol").
const (
	ProxyParked   = "parked"
	ProxyAssigned = "assigned"
	ProxyBackedUp = "backed_up"
	ProxyTimedOut = "timed_out"
)

// Proxy task statuses (proxy_tasks): update_status's statuses. A task is
// open — it counts in its proxy's load — while pending, in_progress or
// blocked.
const (
	ProxyTaskPending    = "pending"
	ProxyTaskInProgress = "in_progress"
	ProxyTaskBlocked    = "blocked"
	ProxyTaskCompleted  = "completed"
	ProxyTaskFailed     = "failed"
	ProxyTaskCancelled  = "cancelled"
)

// ProxyTaskOpen lists the statuses of tasks a proxy still holds.
var ProxyTaskOpen = []string{ProxyTaskPending, ProxyTaskInProgress, ProxyTaskBlocked}

// ProxyRequest is one [PROXY_REQUEST] the office accepted (proxy_requests):
// its JSON as the requester sent it, and what became of it.
type ProxyRequest struct {
	ID               string          `json:"id"`
	OfficeID         string          `json:"office_id"`
	RequesterAgentID string          `json:"requester_agent_id"`
	ProxyAgentID     string          `json:"proxy_agent_id,omitempty"` // the proxy it waits for, or that took it
	Action           string          `json:"action"`                   // create_plan, update_status
	Payload          json.RawMessage `json:"payload"`
	Status           string          `json:"status"`
	Reason           string          `json:"reason,omitempty"`      // why it waits, or why no proxy took it
	BackupPath       string          `json:"backup_path,omitempty"` // the file it was backed up to
	ExpiresAt        time.Time       `json:"expires_at"`            // a parked request times out then
	CreatedAt        time.Time       `json:"created_at"`
	UpdatedAt        time.Time       `json:"updated_at"`
}

// ProxyTask is one task of a create_plan a proxy holds for its requester
// (proxy_tasks). Its ID ("<requester initials>-<hex>") is unique in the
// office.
type ProxyTask struct {
	ID               string    `json:"id"`
	OfficeID         string    `json:"office_id"`
	RequestID        string    `json:"request_id"`
	RequesterAgentID string    `json:"requester_agent_id"`
	ProxyAgentID     string    `json:"proxy_agent_id,omitempty"` // empty: backed up, no proxy holds it
	Content          string    `json:"content"`
	Priority         string    `json:"priority"`
	Status           string    `json:"status"`
	CreatedAt        time.Time `json:"created_at"`
	UpdatedAt        time.Time `json:"updated_at"`
}

// ProxyRequestPatch holds what a transition of a proxy request sets
// besides its status (empty fields are left alone) and the tasks it
// creates with it.
type ProxyRequestPatch struct {
	ProxyAgentID string
	Reason       string
	BackupPath   string
	Tasks        []ProxyTask
}

// ProxyRequestFilter selects proxy requests; zero fields select everything.
type ProxyRequestFilter struct {
	OfficeID string
	Status   []string
	Limit    int
}

// ProxyTaskFilter selects proxy tasks; zero fields select everything.
type ProxyTaskFilter struct {
	OfficeID     string
	ID           string
	ProxyAgentID string
	RequestID    string
	Status       []string
	Limit        int
}

// ProxyWork is the proxy protocol's requests and the tasks proxies hold.
type ProxyWork interface {
	// CreateProxyRequest stores a request (status parked by default);
	// ECONFLICT when its ID exists.
	CreateProxyRequest(ctx context.Context, r ProxyRequest) (ProxyRequest, error)
	GetProxyRequest(ctx context.Context, id string) (ProxyRequest, error)
	// ListProxyRequests returns the requests f selects, oldest first.
	ListProxyRequests(ctx context.Context, f ProxyRequestFilter) ([]ProxyRequest, error)
	// TransitionProxyRequest moves a request whose status is one of from to
	// status to, applying patch and creating patch.Tasks with it; ok=false
	// (and no task created) when the request is not in from.
	TransitionProxyRequest(ctx context.Context, id string, from []string, to string, patch ProxyRequestPatch) (r ProxyRequest, ok bool, err error)
	// ListProxyTasks returns the tasks f selects, oldest first.
	ListProxyTasks(ctx context.Context, f ProxyTaskFilter) ([]ProxyTask, error)
	// SetProxyTaskStatus sets the status of the office's task id; ok=false
	// when there is no such task.
	SetProxyTaskStatus(ctx context.Context, officeID, id, status string) (t ProxyTask, ok bool, err error)
}
