package session

// ScreenReader reads an agent's words off raw terminal output exactly as a
// command session does (screenlines.go): lines that scroll off are final,
// the visible rows are read at each turn end, and what a program paints
// again after clearing its screen, or moves inside the alternate screen,
// is read once (docs/notes/screen.md, "Repaints"). `office-server parse
// --screen` uses it. It is not safe for concurrent use.
type ScreenReader struct{ x *screenLines }

// NewScreenReader returns a reader of a cols x rows terminal.
func NewScreenReader(cols, rows int) *ScreenReader {
	return &ScreenReader{x: &screenLines{scr: newScreen(cols, rows), cols: cols, rows: rows}}
}

// Write feeds terminal output; it never fails.
func (r *ScreenReader) Write(p []byte) (int, error) {
	r.x.write(p)
	return len(p), nil
}

// Resize follows a change of the terminal's size.
func (r *ScreenReader) Resize(cols, rows int) { r.x.resized(cols, rows) }

// Lines returns the new lines read since the last call, in order.
func (r *ScreenReader) Lines() []string {
	l, _ := r.x.take()
	return l
}

// TurnEnd reads the visible rows (the turn is over) and returns the new
// lines, in order.
func (r *ScreenReader) TurnEnd() []string {
	r.x.turnEnd(nil)
	return r.Lines()
}
