package supabase

import (
	"context"
	"time"

	"github.com/supabase-community/postgrest-go"

	"github.com/office-server/office-server/office"
)

// ---- "allow for this session" answers ----

// AddPermissionGrant implements office.Store; see its contract in office/grants.go.
func (s *Store) AddPermissionGrant(ctx context.Context, g office.PermissionGrant) error {
	const op = "add permission grant"
	if !validID(g.OfficeID) || !validID(g.AgentID) || (g.QuestionID != "" && !validID(g.QuestionID)) {
		return office.Errorf(office.EINVALID, "%s: office, agent and question must be UUIDs", op)
	}
	if g.ConversationID == "" || g.Rule == "" {
		return office.Errorf(office.EINVALID, "%s: a grant needs a conversation and a rule", op)
	}
	created := g.CreatedAt
	if created.IsZero() {
		created = s.stamp()
	}
	body := map[string]any{"office_id": g.OfficeID, "agent_id": g.AgentID, "conversation_id": g.ConversationID,
		"rule": g.Rule, "question_id": optional(g.QuestionID), "created_at": created.UTC().Format(time.RFC3339Nano)}
	return s.exec(ctx, op, s.from("permission_grants").Insert(body, false, "", "minimal", ""), preferMinimal, nil)
}

// ListPermissionGrants implements office.Store; see its contract in office/grants.go.
func (s *Store) ListPermissionGrants(ctx context.Context, agentID, conversationID string) ([]office.PermissionGrant, error) {
	if !validID(agentID) {
		return []office.PermissionGrant{}, nil
	}
	var rows []struct {
		office.PermissionGrant
		QuestionID *string `json:"question_id"`
	}
	fb := s.from("permission_grants").Select("*", "", false).Eq("agent_id", agentID).Eq("conversation_id", conversationID).
		Order("created_at", &postgrest.OrderOpts{Ascending: true}).Order("rule", &postgrest.OrderOpts{Ascending: true})
	if err := s.exec(ctx, "list permission grants", fb, "", &rows); err != nil {
		return nil, err
	}
	out := make([]office.PermissionGrant, len(rows))
	for i, r := range rows {
		out[i] = r.PermissionGrant
		if r.QuestionID != nil {
			out[i].QuestionID = *r.QuestionID
		}
	}
	return out, nil
}

// EndPermissionGrants implements office.Store; see its contract in office/grants.go.
func (s *Store) EndPermissionGrants(ctx context.Context, agentID string) (int, error) {
	if !validID(agentID) {
		return 0, nil
	}
	var rows []struct {
		Rule string `json:"rule"`
	}
	err := s.exec(ctx, "end permission grants", s.from("permission_grants").Delete("representation", "").Eq("agent_id", agentID), preferRepresentation, &rows)
	return len(rows), err
}
