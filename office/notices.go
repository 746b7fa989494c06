package office

import (
	"context"
	"time"
)

// Notices is the engine's notices waiting to be typed into agents (the
// table office_notices: the server's own, no member reads it). A notice
// is something the office tells one agent that no other row carries: a
// proxy's response, a proxy request, a permission refused, a task
// failed, a reminder after a restart. Stored, it survives a stop of the
// server; it comes back in DueWork.Notices, is typed first, and is
// marked delivered by MarkDelivered (DeliveredNotice) after its typing,
// with the typing marker of any other row (TypingRow("notice", id)).
type Notices interface {
	// AddNotices appends texts as pending notices of the agent, in order,
	// as many as fit under max pending notices of that agent (max <= 0:
	// no bound), in one write; added is how many were stored: the first
	// added of texts. An agent that is not one of the office's is
	// refused (EINVALID).
	AddNotices(ctx context.Context, officeID, agentID string, texts []string, max int) (added int, err error)
}

// Notice statuses (office_notices).
const (
	NoticePending   = "pending"
	NoticeDelivered = "delivered"
)

// Notice is one notice to an agent (office_notices).
type Notice struct {
	ID          string     `json:"id"`
	OfficeID    string     `json:"office_id"`
	AgentID     string     `json:"agent_id"`
	Text        string     `json:"text"`
	Status      string     `json:"status"`
	CreatedAt   time.Time  `json:"created_at"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
}
