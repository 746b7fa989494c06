package session

import (
	"strings"
	"time"

	"github.com/office-server/office-server/office"
)

// startDialogWait is how long a choice may stay on the screen of an agent
// that is starting before it counts as a dialog for a person.
const startDialogWait = 2 * time.Second

// startDialog is a dialog an agent shows before its input is ready that
// the office does not answer for it: a sign-in or auth-type choice, or a
// folder-trust question the server could not prevent (docs/notes/clis.md).
// The session goes to needs_attention with the dialog's text and back to
// starting once it is gone; nothing is typed meanwhile (only a ready
// session is typed into), so nothing queued is lost. Locked.
type startDialog struct {
	seen time.Time // when the current choice was first seen
	up   bool      // the session is in needs_attention for it
}

// step returns the status given the choice text on screen now (empty:
// none) and the status the driver decided otherwise.
func (g *startDialog) step(s *Session, now time.Time, next Status, text string) Status {
	switch {
	case g.up && next != office.SessionNeedsAttention:
		g.up, g.seen = false, time.Time{} // left by another way (a restart)
		return next
	case g.up && text == "":
		g.up, g.seen = false, time.Time{}
		s.info.Detail = ""
		return office.SessionStarting
	case g.up:
		s.info.Detail = text
		return office.SessionNeedsAttention
	case next != office.SessionStarting || text == "":
		g.seen = time.Time{}
		return next
	}
	if g.seen.IsZero() {
		g.seen = now
	}
	if now.Sub(g.seen) < startDialogWait {
		return next
	}
	g.up = true
	s.info.Detail = text
	s.log.Warn("agent needs attention", "dialog", text)
	return office.SessionNeedsAttention
}

// choiceText returns the text of a choice on screen: at least two
// numbered options ("1. …", "2. …"), one of them marked as the current one
// (›, >, ●, ❯ before it). The text is the box around it when it is drawn
// in one (╭ … ╰), else every row of the screen; rows trimmed, box edges
// and rules dropped. "" when the screen offers no such choice (a model's
// numbered list has no marker).
func choiceText(rows []string) string {
	options := 0
	anchor := -1 // the marked option
	for i, r := range rows {
		t := strings.TrimSpace(strings.Trim(strings.TrimSpace(r), "│"))
		mark := false
		for _, m := range []string{"›", ">", "●", "❯"} {
			if rest, ok := strings.CutPrefix(t, m); ok {
				t, mark = rest, true
				break
			}
		}
		if !numbered(t) {
			continue
		}
		options++
		if mark && anchor < 0 {
			anchor = i
		}
	}
	if options < 2 || anchor < 0 {
		return ""
	}
	top, end := 0, len(rows)
	for i := anchor; i >= 0; i-- {
		if strings.HasPrefix(strings.TrimSpace(rows[i]), "╰") {
			break // a box closed above: the choice is not in one
		}
		if strings.HasPrefix(strings.TrimSpace(rows[i]), "╭") {
			top = i
			for j := anchor; j < len(rows); j++ {
				if strings.HasPrefix(strings.TrimSpace(rows[j]), "╰") {
					end = j
					break
				}
			}
			break
		}
	}
	return plainRows(rows[top:end], func(r string) string {
		return strings.TrimSpace(strings.Trim(strings.TrimSpace(r), "│╭╮─"))
	})
}
