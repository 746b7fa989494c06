package sqlite

import (
	"context"

	"github.com/office-server/office-server/office"
)

const grantCols = `office_id, agent_id, conversation_id, rule, coalesce(question_id, ''), created_at`

func scanGrant(r scanner) (office.PermissionGrant, error) {
	var g office.PermissionGrant
	err := r.Scan(&g.OfficeID, &g.AgentID, &g.ConversationID, &g.Rule, &g.QuestionID, tsVal{&g.CreatedAt})
	return g, err
}

// AddPermissionGrant stores g; ECONFLICT when the agent's conversation has
// the rule already.
func (s *Store) AddPermissionGrant(ctx context.Context, g office.PermissionGrant) error {
	const op = "add permission grant"
	if g.OfficeID == "" || g.AgentID == "" || g.ConversationID == "" || g.Rule == "" {
		return office.Errorf(office.EINVALID, "%s: a grant needs an office, an agent, a conversation and a rule", op)
	}
	_, now := nowTS()
	if !g.CreatedAt.IsZero() {
		now = ts(g.CreatedAt)
	}
	_, err := s.ws.exec(ctx, `insert into permission_grants (office_id, agent_id, conversation_id, rule, question_id, created_at)
		values (?, ?, ?, ?, ?, ?)`, g.OfficeID, g.AgentID, g.ConversationID, g.Rule, nullStr(g.QuestionID), now)
	return s.fail(op, err)
}

// ListPermissionGrants returns the grants of an agent's conversation,
// oldest first.
func (s *Store) ListPermissionGrants(ctx context.Context, agentID, conversationID string) ([]office.PermissionGrant, error) {
	rows, err := s.rs.query(ctx, `select `+grantCols+` from permission_grants
		where agent_id = ? and conversation_id = ? order by created_at, rule`, agentID, conversationID)
	out, err := collect(rows, err, scanGrant)
	return out, s.fail("list permission grants", err)
}

// EndPermissionGrants deletes every grant of the agent.
func (s *Store) EndPermissionGrants(ctx context.Context, agentID string) (int, error) {
	res, err := s.ws.exec(ctx, `delete from permission_grants where agent_id = ?`, agentID)
	if err != nil {
		return 0, s.fail("end permission grants", err)
	}
	n, err := res.RowsAffected()
	return int(n), s.fail("end permission grants", err)
}
