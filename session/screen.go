package session

import "github.com/office-server/office-server/session/screen"

// newScreen makes the screen model of command sessions.
var newScreen = func(cols, rows int) screenModel { return screen.New(cols, rows) }

// termView is the screen model of a driver whose words come from a file
// (Claude Code, Codex, Gemini CLI): nil until the agent starts, read for
// readiness and dialogs, resized with the PTY. The driver's lock guards it.
type termView struct {
	term screenModel
}

func (v *termView) screen() []string {
	if v.term == nil {
		return nil
	}
	return v.term.Lines()
}

func (v *termView) resize(cols, rows int) {
	if v.term != nil {
		v.term.Resize(cols, rows)
	}
}
