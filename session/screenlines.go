package session

import (
	"strings"

	"github.com/mattn/go-runewidth"

	"github.com/office-server/office-server/session/screen"
)

// screenModel is what the screen path needs from a terminal screen model
// (implemented by session/screen).
type screenModel interface {
	Write(p []byte) (int, error)
	Resize(cols, rows int)
	Lines() []string
	Rows() []screen.Row
	TakeScrolledRows() []screen.Row
}

// maxPendingBytes bounds the lines scrolled off the screen and not yet
// taken by the worker (a worker held up by a slow OnText). Beyond it the
// oldest are dropped and counted (lost), so the PTY reader, which feeds the
// screen, never waits and memory stays bounded.
const maxPendingBytes = 1 << 20

// screenLines turns a command agent's screen into the agent's words:
//   - rows the terminal wrapped (autowrap at the right edge) are joined to
//     the row they continue, so a long line reads as the one line the
//     program printed;
//   - a line that scrolls off the top is final and is emitted at once;
//   - the live area (the visible rows) is read at turn end;
//   - rows already dispatched are remembered by position (consumed), so a
//     redraw of the same content (after a resize, say) is not dispatched
//     again, and consumed rows that scroll off later are not either;
//   - the echo of what the server typed is filtered out: the typed lines are
//     kept as pending echo, and a line ending with (a prefix of, if its last
//     row is full) the next pending echo line is the echo, not output.
type screenLines struct {
	scr      screenModel
	cols     int
	consumed []string // rows of the screen already dispatched or skipped, top first
	partial  []string // scrolled-off rows of a wrapped line whose end is still on screen
	echo     []string // lines typed by the server whose echo has not been seen
	out      []string // lines waiting to be dispatched
	outBytes int
	lost     int // lines dropped because out was full (not yet reported)
}

// write feeds PTY output through the screen and collects the lines that
// scrolled off the top.
func (x *screenLines) write(p []byte) {
	_, _ = x.scr.Write(p)
	for _, r := range x.scr.TakeScrolledRows() {
		t := strings.TrimRight(r.Text, " ")
		if len(x.consumed) > 0 {
			c := x.consumed[0]
			x.consumed = x.consumed[1:]
			if c == t && len(x.partial) == 0 {
				continue
			}
		}
		x.partial = append(x.partial, r.Text)
		if r.Wrapped {
			continue
		}
		l := joinRows(x.partial)
		last := x.partial[len(x.partial)-1]
		x.partial = x.partial[:0]
		if x.isEcho(l, last) {
			continue
		}
		x.emit(l)
	}
}

// emit queues line l, dropping the oldest queued lines beyond
// maxPendingBytes.
func (x *screenLines) emit(l string) {
	x.out = append(x.out, l)
	x.outBytes += len(l) + 1
	n := 0
	for x.outBytes > maxPendingBytes && n < len(x.out)-1 {
		x.outBytes -= len(x.out[n]) + 1
		n++
	}
	if n > 0 {
		x.lost += n
		x.out = append(x.out[:0], x.out[n:]...)
	}
}

// joinRows joins the rows of one line the terminal wrapped. The rows are
// screen.Row texts: a wrapped row keeps its trailing blanks (they are part
// of the line) and leaves out a last column that a wide rune skipped (it
// did not fit there and wrapped whole), so plain concatenation is the line
// the program printed, a space it printed in the last column included.
func joinRows(rows []string) string {
	if len(rows) == 1 {
		return strings.TrimRight(rows[0], " ")
	}
	return strings.TrimRight(strings.Join(rows, ""), " ")
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

// turnEnd collects the live area's new lines; skipLast reports a last line
// to leave out (the prompt). The pending echo is forgotten: whatever was
// not echoed by now will not be.
func (x *screenLines) turnEnd(skipLast func(string) bool) {
	rows := x.scr.Rows()
	for len(rows) > 0 && strings.TrimSpace(rows[len(rows)-1].Text) == "" {
		rows = rows[:len(rows)-1]
	}
	consumed := make([]string, len(rows))
	for i, r := range rows {
		consumed[i] = strings.TrimRight(r.Text, " ")
	}
	// Group the rows into lines: a line ends at a row that was not wrapped.
	// The first may continue rows that already scrolled off (partial).
	group := append([]string(nil), x.partial...)
	fresh := len(x.partial) > 0
	for i, r := range rows {
		group = append(group, r.Text)
		if i >= len(x.consumed) || x.consumed[i] != consumed[i] {
			fresh = true
		}
		if r.Wrapped && i < len(rows)-1 {
			continue
		}
		l, last := joinRows(group), group[len(group)-1]
		group = group[:0]
		isFresh := fresh
		fresh = false
		if !isFresh {
			continue
		}
		if x.isEcho(l, last) {
			continue
		}
		if i == len(rows)-1 && skipLast != nil && skipLast(l) {
			continue
		}
		x.emit(l)
	}
	x.partial = x.partial[:0]
	x.consumed = consumed
	x.echo = nil
}

// resized tells the screen its new size.
func (x *screenLines) resized(cols, rows int) {
	x.cols = cols
	x.scr.Resize(cols, rows)
}

// take returns and clears the lines waiting to be dispatched, and how many
// were dropped since the last call because nobody took them in time.
func (x *screenLines) take() ([]string, int) {
	out, lost := x.out, x.lost
	x.out, x.outBytes, x.lost = nil, 0, 0
	return out, lost
}

// isEcho reports whether line l (whose last screen row is last) is (part
// of) the echo of the next pending typed line, and consumes what it
// matched.
func (x *screenLines) isEcho(l, last string) bool {
	for len(x.echo) > 0 {
		e := x.echo[0]
		if l == "" {
			return false
		}
		if strings.HasSuffix(l, e) {
			x.echo = x.echo[1:]
			return true
		}
		// A long echo a program broke itself (a newline at the right
		// edge rather than autowrap): this line ends with a prefix of it
		// and its last row is full.
		if runewidth.StringWidth(strings.TrimRight(last, " ")) >= x.cols-1 {
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
