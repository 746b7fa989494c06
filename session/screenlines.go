package session

import (
	"strings"
	"unicode/utf8"

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
//   - every line read is kept in the screen document (screendoc.go), and
//     what the program paints after it cleared the screen (a TUI painting
//     its whole history again, a redraw after a resize) and the live area
//     at turn end are aligned against it, so a line already read is not
//     dispatched again when it is painted again or has moved to another
//     row (a TUI scrolling inside the alternate screen);
//   - between clears, rows read at the last turn end that scroll off later
//     are recognised by position (consumed) and not read again;
//   - the echo of what the server typed is filtered out: the typed lines are
//     kept as pending echo, and a line ending with (a prefix of, if its last
//     row is full) the next pending echo line is the echo, not output.
type screenLines struct {
	scr      screenModel
	cols     int
	rows     int
	doc      screenDoc
	clears   uint64     // the screen's Clears when last seen
	paint    *alignment // the paint since the last clear, while there is one
	consumed []string   // rows of the screen already read at the last turn end, top first
	live     int        // where the lines of the last turn end's read begin in the document
	scrolled bool       // rows scrolled off the main screen since the last turn end
	partial  []string   // scrolled-off rows of a wrapped line whose end is still on screen
	echo     []string   // lines typed by the server whose echo has not been seen
	out      []string   // lines waiting to be dispatched
	outBytes int
	lost     int // lines dropped because out was full (not yet reported)

	// landTail is the tail of the text typed last, while its landing is
	// watched (typing.go); landOff counts its occurrences in lines that
	// scrolled off since: an echo that pushed the previous prompt (ending
	// the same way) off a full screen still counts as one more.
	landTail  string
	landOff   int
	landCarry string // the end of the rows that scrolled off, spaces removed, shorter than landTail
}

// watchLanding starts counting tail in the lines that scroll off.
func (x *screenLines) watchLanding(tail string) {
	x.landTail, x.landOff, x.landCarry = tail, 0, ""
}

// countLanding counts the watched tail in a row that scrolled off, joined
// without spaces to the rows before it (as the screen's own count joins
// its rows: the tail may span two).
func (x *screenLines) countLanding(row string) {
	if x.landTail == "" {
		return
	}
	j := x.landCarry + strings.Join(strings.Fields(row), "")
	x.landOff += strings.Count(j, x.landTail) // the carry is too short to hold one
	keep := len(x.landTail) - 1
	for keep > 0 && keep < len(j) && !isRuneStart(j, len(j)-keep) {
		keep--
	}
	x.landCarry = j[len(j)-min(keep, len(j)):]
}

// landedOff is how often the watched tail scrolled off since watchLanding,
// and the end of what scrolled off (see landWatcher).
func (x *screenLines) landedOff() (int, string) { return x.landOff, x.landCarry }

// altScreen reports whether the program shows its alternate screen, where
// a TUI may scroll its history without the rows leaving the top.
func (x *screenLines) altScreen() bool {
	a, ok := x.scr.(interface{ AltScreen() bool })
	return ok && a.AltScreen()
}

// skipRows is how far ahead in the document a painted line may be found
// and still count as read: what a program stopped showing in between (its
// last spinner, input box and footer) is at most a few screens.
func (x *screenLines) skipRows() int { return 3 * max(x.rows, 24) }

// cleared notes a clear of the screen (count c): what the program paints
// from here on is aligned against the document.
func (x *screenLines) cleared(c uint64) {
	if c == x.clears {
		return
	}
	x.clears = c
	if x.paint != nil {
		x.paint.finish(false, func(s string) { x.dispatch(s, s) })
	}
	x.paint = newAlignment(&x.doc, 0, x.skipRows())
	x.consumed = nil
	x.partial = x.partial[:0]
}

// write feeds PTY output through the screen and collects the lines that
// scrolled off the top.
func (x *screenLines) write(p []byte) {
	_, _ = x.scr.Write(p)
	for _, r := range x.scr.TakeScrolledRows() {
		x.cleared(r.Clears)
		x.scrolled = true
		r.Text = x.unscroll(r)
		x.countLanding(r.Text)
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
		x.line(l, last)
	}
}

// line reads line l (whose last screen row is last) that scrolled off.
func (x *screenLines) line(l, last string) {
	if x.paint != nil {
		x.paint.feed(l, func(s string) { x.dispatch(s, last) })
		return
	}
	if k := lineKey(l); k != 0 {
		x.doc.keys = append(x.doc.keys, k)
		x.doc.trim()
	}
	x.dispatch(l, last)
}

// dispatch emits a new line unless it is the echo of typed text.
func (x *screenLines) dispatch(l, last string) {
	if x.isEcho(l, last) {
		return
	}
	x.emit(l)
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

// turnEnd reads the live area: its lines are aligned against the document
// (as the rest of the paint since the last clear, or on their own), and
// the new ones are emitted; skipLast reports a last line to leave out (the
// prompt). The pending echo is forgotten: whatever was not echoed by now
// will not be.
func (x *screenLines) turnEnd(skipLast func(string) bool) {
	rows := x.liveRows()
	if len(rows) > 0 {
		x.cleared(rows[0].Clears)
	}
	a := x.paint
	if a == nil {
		rows, a = x.alignSinceRead(rows)
	}
	lines, lasts := groupLines(x.partial, rows)
	x.dispatchLive(a, lines, lasts, skipLast)
	x.markRead()
}

// liveRows returns the screen's rows without a TUI's scroll bar, trailing
// blank rows left out.
func (x *screenLines) liveRows() []screen.Row {
	rows := x.scr.Rows()
	for i := range rows {
		rows[i].Text = x.unscroll(rows[i])
	}
	for len(rows) > 0 && strings.TrimSpace(rows[len(rows)-1].Text) == "" {
		rows = rows[:len(rows)-1]
	}
	return rows
}

// alignSinceRead is turnEnd's start when the screen was not cleared since
// the last read: it drops the rows of rows read then (consumed, and still
// showing the same) and returns the rest with the alignment to read them
// by, anchored where the document's new lines begin when that is known.
func (x *screenLines) alignSinceRead(rows []screen.Row) ([]screen.Row, *alignment) {
	// No clear since the last read: rows still where they were then,
	// with what they showed then, were read (consumed). The others
	// may show lines of the last read moved up (a program scrolling
	// inside the alternate screen) unless the screen scrolled since
	// (then everything below the consumed rows is new).
	k, old := 0, 0
	for k < len(rows) && k < len(x.consumed) && x.consumed[k] == strings.TrimRight(rows[k].Text, " ") && len(x.partial) == 0 {
		if !rows[k].Wrapped && lineKey(x.consumed[k]) != 0 {
			old++ // a line (of the document) ends on this row
		}
		k++
	}
	// A line the terminal wrapped is read whole: one whose rows
	// continue past the consumed ones is read again from its first
	// row (it was not whole at the last read).
	for k > 0 && k < len(rows) && rows[k-1].Wrapped {
		k--
	}
	rows = rows[k:]
	minJ := x.live
	if x.scrolled {
		minJ = len(x.doc.keys)
	}
	a := newAlignment(&x.doc, minJ, x.skipRows())
	switch {
	case x.scrolled:
		a.anchorAt(len(x.doc.keys), nil)
	case old > 0 || !x.altScreen():
		// On the main screen, with neither a clear nor a scroll since
		// the last read, lines do not move: the rows below those read
		// then are new, whatever they say. Searching the document by
		// content here took a line printed again (a reply's closing
		// tag and the prompt after it, the same answer typed twice)
		// for the old one and read everything after it a second time.
		a.anchorAt(min(x.live+old, len(x.doc.keys)), nil)
	}
	return rows, a
}

// groupLines groups rows into lines: a line ends at a row that was not
// wrapped (or at the last row). The first may continue rows that already
// scrolled off (partial). lasts holds each line's last row.
func groupLines(partial []string, rows []screen.Row) (lines, lasts []string) {
	group := append([]string(nil), partial...)
	for i, r := range rows {
		group = append(group, r.Text)
		if r.Wrapped && i < len(rows)-1 {
			continue
		}
		lines = append(lines, joinRows(group))
		lasts = append(lasts, group[len(group)-1])
		group = group[:0]
	}
	return lines, lasts
}

// dispatchLive feeds the live lines through alignment a and dispatches the
// new ones; the last line is left out when skipLast reports it (the prompt).
func (x *screenLines) dispatchLive(a *alignment, lines, lasts []string, skipLast func(string) bool) {
	for i, l := range lines {
		a.feed(l, func(s string) {
			if i == len(lines)-1 && s == l && skipLast != nil && skipLast(s) {
				return
			}
			x.dispatch(s, lasts[i])
		})
	}
	a.finish(true, func(s string) {
		// Held lines decided at the end: the last may be the prompt.
		if len(lines) > 0 && s == lines[len(lines)-1] && skipLast != nil && skipLast(s) {
			return
		}
		x.dispatch(s, s)
	})
}

// markRead records the screen as read: its rows are the consumed ones, the
// live area begins where their lines begin in the document, and the paint,
// partial rows, scroll and pending echo are forgotten.
func (x *screenLines) markRead() {
	x.paint = nil
	x.partial = x.partial[:0]
	x.consumed = x.consumed[:0]
	read := 0
	for _, r := range x.scr.Rows() {
		t := strings.TrimRight(r.Text, " ")
		x.consumed = append(x.consumed, t)
		if lineKey(t) != 0 {
			read++
		}
	}
	x.live = max(0, len(x.doc.keys)-read)
	x.scrolled = false
	x.echo = nil
}

// unscroll returns row r's text without a scroll bar a TUI draws in the
// last column while its history overflows (Qwen Code: a track of │ and a
// thumb of █ after a blank): chrome, not the agent's words.
func (x *screenLines) unscroll(r screen.Row) string {
	if r.Wrapped || x.cols < 3 {
		return r.Text
	}
	last, n := utf8.DecodeLastRuneInString(r.Text)
	if last != '│' && last != '┃' && (last < 0x2580 || last > 0x259F) {
		return r.Text
	}
	rest := r.Text[:len(r.Text)-n]
	if !strings.HasSuffix(rest, " ") || runewidth.StringWidth(r.Text) != x.cols {
		return r.Text
	}
	return strings.TrimRight(rest, " ")
}

// resized tells the screen its new size.
func (x *screenLines) resized(cols, rows int) {
	x.cols, x.rows = cols, rows
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
