package cluster

import (
	"time"

	"github.com/office-server/office-server/engine"
)

// IdleSince is the wrapped sessions' (engine.Idler): an agent of an
// office this node does not hold now is never idle here.
func (s *Sessions) IdleSince(officeID, agentID string) (time.Time, bool) {
	i, ok := s.Sessions.(engine.Idler)
	if !ok || !s.Node.Owns(officeID) {
		return time.Time{}, false
	}
	return i.IdleSince(officeID, agentID)
}

// Live is the wrapped sessions' count of live agents (engine.Idler).
func (s *Sessions) Live() int {
	if i, ok := s.Sessions.(engine.Idler); ok {
		return i.Live()
	}
	return 0
}
