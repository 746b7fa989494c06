package server

import (
	"context"

	"github.com/office-server/office-server/office"
)

// hibernated reports whether the agent's session row says hibernated
// (office.SessionHibernated): its terminal opens once it is woken.
func (s *Server) hibernated(ctx context.Context, officeID, agentID string) bool {
	return s.hibernatedAgents(ctx, officeID)[agentID]
}

// hibernatedAgents returns the IDs of officeID's agents whose session row
// says hibernated (none when the rows cannot be read).
func (s *Server) hibernatedAgents(ctx context.Context, officeID string) map[string]bool {
	recs, err := s.cfg.Store.ListSessions(ctx, officeID)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, rec := range recs {
		if rec.Status == office.SessionHibernated {
			out[rec.AgentID] = true
		}
	}
	return out
}
