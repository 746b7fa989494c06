package session

import "github.com/office-server/office-server/session/screen"

// newScreen makes the screen model of command sessions.
var newScreen = func(cols, rows int) screenModel { return screen.New(cols, rows) }
