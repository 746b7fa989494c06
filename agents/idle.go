package agents

import (
	"time"

	"github.com/office-server/office-server/session"
)

// IdleSince reports whether the agent's session is live and idle, and
// since when (session.Session.IdleSince; engine.Idler).
func (a *Sessions) IdleSince(officeID, agentID string) (time.Time, bool) {
	s, ok := a.m.Get(session.Key{OfficeID: officeID, AgentID: agentID})
	if !ok {
		return time.Time{}, false
	}
	return s.IdleSince()
}

// Live returns how many sessions of this server are live (running, or
// crashed and waiting for their restart): what --max-live caps
// (engine.Idler).
func (a *Sessions) Live() int {
	n := 0
	for _, s := range a.m.List() {
		if live(s) {
			n++
		}
	}
	return n
}
