package server

import (
	"context"

	"github.com/office-server/office-server/office"
)

// hibernated reports whether the agent's session row says hibernated
// (office.SessionHibernated): its terminal opens once it is woken.
func (s *Server) hibernated(ctx context.Context, officeID, agentID string) bool {
	recs, err := s.cfg.Store.ListSessions(ctx, officeID)
	if err != nil {
		return false
	}
	for _, rec := range recs {
		if rec.AgentID == agentID {
			return rec.Status == office.SessionHibernated
		}
	}
	return false
}
