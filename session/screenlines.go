package session

import (
	"strings"

	"github.com/mattn/go-runewidth"
)

// screenModel is what the screen path needs from a terminal screen model
// (implemented by session/screen).
type screenModel interface {
	Write(p []byte) (int, error)
	Resize(cols, rows int)
	Lines() []string
	TakeScrolled() []string
}

// screenLines turns a command agent's screen into the agent's words:
//   - a row that scrolls off the top is final and is emitted at once;
//   - the live area (the visible rows) is read at turn end;
//   - rows already dispatched are remembered by position (consumed), so a
//     redraw of the same content (after a resize, say) is not dispatched
//     again, and consumed rows that scroll off later are not either;
//   - the echo of what the server typed is filtered out: the typed lines are
//     kept as pending echo, and a row ending with (a prefix of, if the row is
//     full and wrapped) the next pending echo line is the echo, not output.
type screenLines struct {
	scr      screenModel
	cols     int
	consumed []string // rows of the screen already dispatched or skipped, top first
	echo     []string // lines typed by the server whose echo has not been seen
	out      []string // lines waiting to be dispatched
}

// write feeds PTY output through the screen and collects rows that
// scrolled off the top.
func (x *screenLines) write(p []byte) {
	_, _ = x.scr.Write(p)
	for _, l := range x.scr.TakeScrolled() {
		l = strings.TrimRight(l, " ")
		if len(x.consumed) > 0 {
			c := x.consumed[0]
			x.consumed = x.consumed[1:]
			if c == l {
				continue
			}
		}
		if x.isEcho(l) {
			continue
		}
		x.out = append(x.out, l)
	}
}

// typed records text typed into the terminal, whose echo is not output.
func (x *screenLines) typed(text string) {
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimRight(strings.ReplaceAll(l, "\t", " "), " ")
		if l != "" {
			x.echo = append(x.echo, l)
		}
	}
}

// turnEnd collects the live area's new rows; skip reports rows to leave out
// (the prompt). The pending echo is forgotten: whatever was not echoed by
// now will not be.
func (x *screenLines) turnEnd(skipLast func(string) bool) {
	rows := x.scr.Lines()
	for len(rows) > 0 && strings.TrimSpace(rows[len(rows)-1]) == "" {
		rows = rows[:len(rows)-1]
	}
	last := len(rows) - 1
	for i, l := range rows {
		l = strings.TrimRight(l, " ")
		rows[i] = l
		if i < len(x.consumed) && x.consumed[i] == l {
			continue
		}
		if x.isEcho(l) {
			continue
		}
		if i == last && skipLast != nil && skipLast(l) {
			continue
		}
		x.out = append(x.out, l)
	}
	x.consumed = rows
	x.echo = nil
}

// resized tells the screen its new size.
func (x *screenLines) resized(cols, rows int) {
	x.cols = cols
	x.scr.Resize(cols, rows)
}

// take returns and clears the lines waiting to be dispatched.
func (x *screenLines) take() []string {
	out := x.out
	x.out = nil
	return out
}

// isEcho reports whether row l is (part of) the echo of the next pending
// typed line, and consumes what it matched.
func (x *screenLines) isEcho(l string) bool {
	for len(x.echo) > 0 {
		e := x.echo[0]
		if l == "" {
			return false
		}
		if strings.HasSuffix(l, e) {
			x.echo = x.echo[1:]
			return true
		}
		// A long echo wraps: this row ends with a prefix of it and is full.
		if runewidth.StringWidth(l) >= x.cols-1 {
			for k := len(e) - 1; k > 0; k-- {
				if !isRuneStart(e, k) {
					continue
				}
				if strings.HasSuffix(l, e[:k]) {
					x.echo[0] = strings.TrimLeft(e[k:], " ")
					return true
				}
			}
		}
		return false
	}
	return false
}

func isRuneStart(s string, i int) bool { return i < len(s) && s[i]&0xc0 != 0x80 }
