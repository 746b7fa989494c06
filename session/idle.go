package session

import (
	"time"

	"github.com/office-server/office-server/office"
)

// IdleSince reports whether the session's agent is idle now, and since
// when: its process runs, it is at its input prompt (ready: no turn in
// progress, no dialog or permission prompt on screen), and no text waits
// to be typed into it. The time is the later of its last status change
// and the last input typed into it (by Send or by a person's keys), so a
// person typing into the terminal keeps it awake. The office uses it to
// hibernate an agent that has been idle long enough (engine/hibernate.go).
func (s *Session) IdleSince() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || s.p == nil || isClosed(s.p.exited) || s.info.Status != office.SessionReady || len(s.sendQ) > 0 {
		return time.Time{}, false
	}
	since := s.statusAt
	if s.inputAt.After(since) {
		since = s.inputAt
	}
	return since, true
}
