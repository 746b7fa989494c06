package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/office"
)

const grantCols = `office_id::text, agent_id::text, conversation_id, rule, coalesce(question_id::text, ''), created_at`

func scanGrant(r pgx.Row) (office.PermissionGrant, error) {
	var g office.PermissionGrant
	err := r.Scan(&g.OfficeID, &g.AgentID, &g.ConversationID, &g.Rule, &g.QuestionID, &g.CreatedAt)
	return g, err
}

// AddPermissionGrant stores g; ECONFLICT when the agent's conversation has
// the rule already.
func (s *Store) AddPermissionGrant(ctx context.Context, g office.PermissionGrant) error {
	const op = "add permission grant"
	var refs [3]any
	var err error
	for i, x := range []struct {
		field, id string
		optional  bool
	}{{"office_id", g.OfficeID, false}, {"agent_id", g.AgentID, false}, {"question_id", g.QuestionID, true}} {
		if refs[i], err = ref(op, x.field, x.id, x.optional); err != nil {
			return err
		}
	}
	if g.ConversationID == "" || g.Rule == "" {
		return invalid(op, "a grant needs a conversation and a rule")
	}
	_, err = s.exec(ctx, op, `insert into permission_grants (office_id, agent_id, conversation_id, rule, question_id, created_at)
		values ($1, $2, $3, $4, $5, coalesce($6, now()))`, refs[0], refs[1], g.ConversationID, g.Rule, refs[2], ts(g.CreatedAt))
	return err
}

// ListPermissionGrants returns the grants of an agent's conversation,
// oldest first.
func (s *Store) ListPermissionGrants(ctx context.Context, agentID, conversationID string) ([]office.PermissionGrant, error) {
	if !isUUID(agentID) {
		return []office.PermissionGrant{}, nil
	}
	return list(ctx, s, "list permission grants", `select `+grantCols+` from permission_grants
		where agent_id = $1 and conversation_id = $2 order by created_at, rule`, []any{agentID, conversationID}, scanGrant)
}

// EndPermissionGrants deletes every grant of the agent.
func (s *Store) EndPermissionGrants(ctx context.Context, agentID string) (int, error) {
	if !isUUID(agentID) {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, `delete from permission_grants where agent_id = $1`, agentID)
	if err != nil {
		return 0, wrap("end permission grants", err)
	}
	return int(tag.RowsAffected()), nil
}
