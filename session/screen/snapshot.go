package screen

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// Snapshot appends to buf the bytes that put a terminal of the screen's
// size, in any state, into the state of this screen: a reset (RIS), the
// last history rows that scrolled off the main screen and are still kept
// (SetScrolledLimit; text only, into the terminal's scrollback; as many of
// the newest as fit in historyBytes), then each
// row of the main screen with its colours and attributes, the alternate
// screen over it when a program uses it, the scroll margins, the modes a
// program set (cursor visibility, bracketed paste, autowrap, insert and
// origin mode, application cursor keys and keypad, mouse reporting, focus
// events), the cursor with a pending wrap, its shape, the pen, the
// character set and the title. It is what a terminal attaching to a
// running program needs instead of a replay of its output from some point
// (tmux redraws an attaching client the same way, from its grid).
//
// Written to xterm.js (or xterm) of the same size, the result shows what
// the screen holds, cell for cell; output written after it continues as
// on the original terminal.
func (s *Screen) Snapshot(buf []byte, historyBytes int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	buf = append(buf, "\x1bc\x1b[0m"...)
	buf = s.appendHistory(buf, historyBytes)
	var pen cell
	buf = s.appendRows(buf, s.main, &pen)
	if s.altActive {
		// 1049 saves the cursor on the way in: put it where it was saved.
		buf = s.appendSaved(buf, s.main, "\x1b[?1049h", &pen)
		buf = s.appendRows(buf, s.alt, &pen)
		if s.alt.saved.set {
			buf = s.appendSaved(buf, s.alt, "\x1b7", &pen)
		}
	} else if s.main.saved.set {
		buf = s.appendSaved(buf, s.main, "\x1b7", &pen)
	}
	if s.top != 0 || s.bot != s.rows-1 {
		buf = append(buf, "\x1b["...)
		buf = strconv.AppendInt(buf, int64(s.top+1), 10)
		buf = append(buf, ';')
		buf = strconv.AppendInt(buf, int64(s.bot+1), 10)
		buf = append(buf, 'r')
	}
	buf = s.appendModes(buf)
	// The cursor: a pending wrap is made again by printing the last
	// column's character again (before autowrap may be turned off).
	if s.wrapNext && !s.origin {
		buf = appendPendingWrap(buf, s.cur.rows[s.y], s.y, &pen)
	}
	if !s.autowrap {
		buf = append(buf, "\x1b[?7l"...)
	}
	if s.insert {
		buf = append(buf, "\x1b[4h"...)
	}
	switch {
	case s.origin:
		buf = append(buf, "\x1b[?6h"...)
		buf = appendCUP(buf, s.x, s.y-s.top)
	case !s.wrapNext:
		buf = appendCUP(buf, s.x, s.y)
	}
	buf = appendSGR(buf, s.pen)
	if s.decGraphics {
		buf = append(buf, "\x1b(0"...)
	}
	if s.title != "" {
		buf = append(buf, "\x1b]2;"...)
		buf = append(buf, s.title...)
		buf = append(buf, '\a')
	}
	return buf
}

// appendHistory appends the history rows that fit in historyBytes: they
// scroll into the terminal's scrollback, each row and a newline, then
// enough newlines to push the last one off the screen. Locked.
func (s *Screen) appendHistory(buf []byte, historyBytes int) []byte {
	from, size := len(s.scrolled), 0
	for from > 0 && from > len(s.scrolled)-s.scrolledLimit && size+len(s.scrolled[from-1].Text)+2 <= historyBytes {
		from--
		size += len(s.scrolled[from].Text) + 2
	}
	hist := s.scrolled[from:]
	for _, r := range hist {
		buf = appendCut(buf, r.Text, s.cols)
		buf = append(buf, "\r\n"...)
	}
	if len(hist) > 0 {
		for range s.rows - 1 {
			buf = append(buf, '\n')
		}
	}
	return buf
}

// appendModes appends the modes that change what the terminal shows and
// sends: cursor visibility, bracketed paste, the private modes set, the
// keypad, the cursor's shape. Locked.
func (s *Screen) appendModes(buf []byte) []byte {
	if s.cursorHidden {
		buf = append(buf, "\x1b[?25l"...)
	}
	if s.bracketed {
		buf = append(buf, "\x1b[?2004h"...)
	}
	modes := make([]int, 0, len(s.private))
	for m := range s.private {
		modes = append(modes, m)
	}
	slices.Sort(modes)
	for _, m := range modes {
		buf = append(buf, "\x1b[?"...)
		buf = strconv.AppendInt(buf, int64(m), 10)
		buf = append(buf, 'h')
	}
	if s.keypad {
		buf = append(buf, "\x1b="...)
	}
	if s.cursorStyle != 0 {
		buf = append(buf, "\x1b["...)
		buf = strconv.AppendInt(buf, int64(s.cursorStyle), 10)
		buf = append(buf, " q"...)
	}
	return buf
}

// appendSaved puts the cursor where b's saved cursor is (a pending wrap
// and the character set included) and saves it with save (DECSC, or 1049
// which saves and enters the alternate screen).
func (s *Screen) appendSaved(buf []byte, b *buffer, save string, pen *cell) []byte {
	c := b.saved
	if c.wrapNext && c.x == s.cols-1 {
		buf = appendPendingWrap(buf, b.rows[c.y], c.y, pen)
	} else {
		buf = appendCUP(buf, c.x, c.y)
	}
	if c.charset {
		buf = append(buf, "\x1b(0"...)
	}
	buf = append(buf, save...)
	if c.charset {
		buf = append(buf, "\x1b(B"...)
	}
	return buf
}

// appendPendingWrap leaves the cursor in the last column of row y with a
// wrap pending, as printing there does: by printing that column again.
func appendPendingWrap(buf []byte, rw *row, y int, pen *cell) []byte {
	x := len(rw.cells) - 1
	if rw.cells[x].kind == kindCont && x > 0 {
		x--
	}
	buf = appendCUP(buf, x, y)
	return appendCell(buf, rw, x, pen)
}

// appendRows draws every row of b: its cells up to the last one that is
// not a plain blank (the terminal starts blank after RIS or 1049).
func (s *Screen) appendRows(buf []byte, b *buffer, pen *cell) []byte {
	for y, rw := range b.rows {
		end := min(rw.end, len(rw.cells))
		for end > 0 && unskipped(rw.cells[end-1]) == (cell{}) && (rw.comb == nil || rw.comb[end-1] == "") {
			end--
		}
		if end == 0 {
			continue
		}
		buf = appendCUP(buf, 0, y)
		for x := 0; x < end; x++ {
			if rw.cells[x].kind == kindCont {
				continue
			}
			if n := blankRun(rw, x, end); n > 0 {
				// Blank cells: erased with their background (ECH
				// erases with the pen's), then moved over.
				if bg := rw.cells[x].bg; bg != 0 {
					if pen.fg != 0 || pen.bg != bg || pen.attr != 0 {
						*pen = cell{bg: bg}
						buf = appendSGR(buf, *pen)
					}
					buf = appendCSI(buf, n, 'X')
				}
				buf = appendCSI(buf, n, 'C')
				x += n - 1
				continue
			}
			buf = appendCell(buf, rw, x, pen)
		}
	}
	return buf
}

// blankRun counts the blank cells (no character, attribute or mark) of
// the same background from x on, before end.
func blankRun(rw *row, x, end int) int {
	n, blank := 0, cell{bg: rw.cells[x].bg}
	for x+n < end && unskipped(rw.cells[x+n]) == blank && (rw.comb == nil || rw.comb[x+n] == "") {
		n++
	}
	return n
}

// unskipped is c without a skip mark (kindSkip): it shows as a plain cell.
func unskipped(c cell) cell {
	if c.kind == kindSkip {
		c.kind = kindNarrow
	}
	return c
}

// appendCell prints the cell at column x of rw, changing the pen first if
// it differs.
func appendCell(buf []byte, rw *row, x int, pen *cell) []byte {
	c := rw.cells[x]
	if c.fg != pen.fg || c.bg != pen.bg || c.attr != pen.attr {
		buf = appendSGR(buf, c)
		*pen = cell{fg: c.fg, bg: c.bg, attr: c.attr}
	}
	switch {
	case c.r == 0:
		buf = append(buf, ' ')
	case c.r < utf8.RuneSelf && c.r >= 0x20 && c.r != 0x7f:
		buf = append(buf, byte(c.r))
	case c.r < 0xa0:
		buf = append(buf, ' ') // a control character never reaches a cell; be safe
	default:
		buf = utf8.AppendRune(buf, c.r)
	}
	if rw.comb != nil {
		buf = append(buf, rw.comb[x]...)
		if c.kind == kindWide && x+1 < len(rw.cells) {
			buf = append(buf, rw.comb[x+1]...)
		}
	}
	return buf
}

// appendSGR sets the pen to c's colours and attributes, from a reset.
func appendSGR(buf []byte, c cell) []byte {
	buf = append(buf, "\x1b[0"...)
	for i, code := range attrCodes {
		if c.attr&(1<<i) != 0 {
			buf = append(buf, ';')
			buf = strconv.AppendInt(buf, int64(code), 10)
		}
	}
	buf = appendColor(buf, c.fg, 30, 90, 38)
	buf = appendColor(buf, c.bg, 40, 100, 48)
	return append(buf, 'm')
}

func appendColor(buf []byte, c color, base, bright, ext int) []byte {
	var code []int
	switch c & colorKind {
	case 0:
		return buf
	case colorIndexed:
		switch n := int(c &^ colorKind); {
		case n < 8:
			code = []int{base + n}
		case n < 16:
			code = []int{bright + n - 8}
		default:
			code = []int{ext, 5, n}
		}
	default:
		v := int(c &^ colorKind)
		code = []int{ext, 2, v >> 16 & 0xff, v >> 8 & 0xff, v & 0xff}
	}
	for _, n := range code {
		buf = append(buf, ';')
		buf = strconv.AppendInt(buf, int64(n), 10)
	}
	return buf
}

func appendCSI(buf []byte, n int, final byte) []byte {
	buf = append(buf, "\x1b["...)
	buf = strconv.AppendInt(buf, int64(n), 10)
	return append(buf, final)
}

func appendCUP(buf []byte, x, y int) []byte {
	buf = append(buf, "\x1b["...)
	buf = strconv.AppendInt(buf, int64(y+1), 10)
	buf = append(buf, ';')
	buf = strconv.AppendInt(buf, int64(x+1), 10)
	return append(buf, 'H')
}

// appendCut appends the part of text that fits in cols columns (history
// rows are as wide as the screen was when they scrolled off).
func appendCut(buf []byte, text string, cols int) []byte {
	w := 0
	for i, r := range text {
		rw := 1
		if r >= 0x7f {
			rw = widths.RuneWidth(r)
		}
		if w+rw > cols {
			return append(buf, text[:i]...)
		}
		w += rw
	}
	return append(buf, text...)
}
