package office

import (
	"context"
	"time"
)

// PermissionGrant is an "allow for this session" answer to a permission
// request (permission_grants): the agent's calls that rule covers are
// allowed without asking, in that conversation only, until it ends (a
// fresh conversation). Kept in the store so that it outlives a restart of
// the server or the agent's process, which resume the conversation.
type PermissionGrant struct {
	OfficeID       string    `json:"office_id"`
	AgentID        string    `json:"agent_id"`
	ConversationID string    `json:"conversation_id"` // the CLI's own session id (Claude Code's session_id)
	Rule           string    `json:"rule"`            // a Claude Code permission rule, "Bash(npm test:*)"
	QuestionID     string    `json:"question_id"`     // the answer that granted it
	CreatedAt      time.Time `json:"created_at"`
}

// PermissionGrants is the "allow for this session" answers.
type PermissionGrants interface {
	// AddPermissionGrant stores g; ECONFLICT when the agent's conversation
	// has the rule already.
	AddPermissionGrant(ctx context.Context, g PermissionGrant) error
	// ListPermissionGrants returns the grants of an agent's conversation,
	// oldest first.
	ListPermissionGrants(ctx context.Context, agentID, conversationID string) ([]PermissionGrant, error)
	// EndPermissionGrants deletes every grant of the agent (its
	// conversation ended) and returns how many there were.
	EndPermissionGrants(ctx context.Context, agentID string) (int, error)
}
