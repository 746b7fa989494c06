package screen

import "strings"

// Lines returns the rows of the visible screen (the alternate screen while a
// program uses it), top to bottom, always Size's rows many. Blank cells read
// as spaces, the second column of a wide character adds nothing, combining
// marks follow their base, and trailing spaces of every row are trimmed.
func (s *Screen) Lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.cur.rows))
	for i, r := range s.cur.rows {
		s.buf = r.text(s.buf)
		out[i] = string(s.buf)
	}
	return out
}

// Text returns Lines without the trailing empty rows, joined by newlines.
func (s *Screen) Text() string {
	ls := s.Lines()
	for len(ls) > 0 && ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return strings.Join(ls, "\n")
}

// LogicalLines is Lines with the rows the terminal wrapped (autowrap at the
// right edge, not a newline from the program) joined to the row they
// continue, so a long line the program wrote reads as one line again. A
// last column that a wide character skipped is left out (see Row.Text).
func (s *Screen) LogicalLines() []string {
	var out []string
	var cur strings.Builder
	for _, r := range s.Rows() {
		cur.WriteString(r.Text)
		if !r.Wrapped {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// TakeScrolled returns the rows that scrolled off the top of the main
// screen since the last call, oldest first, rendered as Lines renders rows.
// They are final: the program can no longer change them. Rows scrolled out
// of the alternate screen or out of a scroll region that does not start at
// the top are not kept (a terminal does not keep them either).
func (s *Screen) TakeScrolled() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.scrolled) == 0 {
		return nil
	}
	out := make([]string, len(s.scrolled))
	for i, r := range s.scrolled {
		out[i] = r.Text
		if r.Wrapped {
			out[i] = strings.TrimRight(r.Text+r.skipped, " ")
		}
	}
	s.scrolled = nil
	return out
}

// Row is a rendered row of the screen.
type Row struct {
	// Text is the row as Lines renders it; when Wrapped, with its trailing
	// blanks kept, since they are part of the line that continues, and
	// without the last column when a wide character skipped it (it did not
	// fit there and wrapped whole to the next row, leaving that column as
	// it was): that column is not part of the line, while a space the
	// program printed there is. So joining the Text of a wrapped row and
	// the rows it continues into gives the line the program printed,
	// exactly. (Lines and TakeScrolled, which render what a person sees,
	// still show the skipped column: a blank, or what an earlier draw left
	// in it.)
	Text string
	// Wrapped reports that the terminal wrapped this row into the next one
	// (autowrap at the right edge), so the two are one line of the program.
	Wrapped bool
	// Clears is Clears as it was when the row scrolled off (or, from Rows,
	// now): a reader sees which rows a program drew after it cleared the
	// screen to paint it again.
	Clears uint64
}

// TakeScrolledRows is TakeScrolled with each row's wrap flag, so a reader
// can join a long line the terminal wrapped (as LogicalLines does for the
// visible rows). TakeScrolled and TakeScrolledRows take from the same list.
func (s *Screen) TakeScrolledRows() []Row {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.scrolled) == 0 {
		return nil
	}
	out := make([]Row, len(s.scrolled))
	for i, r := range s.scrolled {
		out[i] = r.Row
	}
	s.scrolled = nil
	return out
}

// Rows returns the visible rows with their wrap flags (see Row).
func (s *Screen) Rows() []Row {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Row, len(s.cur.rows))
	for i, r := range s.cur.rows {
		s.buf = r.render(s.buf, !r.wrapped)
		out[i] = Row{Text: string(s.buf), Wrapped: r.wrapped, Clears: s.clears}
	}
	return out
}

// Clears counts the times the screen was wiped for a repaint: erase of the
// whole display (ED 2, or ED 0 from the top-left corner), erase of the
// saved lines (ED 3), a reset (RIS), a switch between the main and the
// alternate screen, and a resize. A program that clears and paints its
// history again shows rows already read; a reader tells them apart by this
// count (docs/notes/screen.md, "Repaints").
func (s *Screen) Clears() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clears
}

// Dropped returns how many scrolled-off rows were discarded because more
// than the scrolled limit were left waiting for TakeScrolled.
func (s *Screen) Dropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// BracketedPaste reports whether the program turned on bracketed paste
// (mode 2004), so that pasted text must be framed by ESC[200~ and ESC[201~.
func (s *Screen) BracketedPaste() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bracketed
}

// Cursor returns the cursor's column and row, from 0.
func (s *Screen) Cursor() (x, y int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.x, s.y
}

// CursorVisible reports whether the cursor is shown (mode 25).
func (s *Screen) CursorVisible() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.cursorHidden
}

// AltScreen reports whether the alternate screen (modes 1049, 1047, 47) is
// in use: a full-screen program is running, and nothing it draws scrolls
// off into TakeScrolled.
func (s *Screen) AltScreen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.altActive
}

// Title returns the window title last set with OSC 0 or OSC 2.
func (s *Screen) Title() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.title
}

// Size returns the screen's columns and rows.
func (s *Screen) Size() (cols, rows int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cols, s.rows
}

// Resize changes the screen to cols x rows (each at least 1, at most
// MaxCols x MaxRows), as a terminal window does. When the screen gets
// shorter than the cursor row, rows from the top scroll off (into
// TakeScrolled on the main screen) so the cursor's row stays visible. A
// new width reflows the main screen's lines as tmux and most terminals do
// (see reflow): a line wider than the screen is wrapped onto more rows
// rather than cut, rows the terminal wrapped are joined again when there
// is room, the rows that no longer fit scroll off the top, and the cursor
// stays on its character. The alternate screen is cut or padded on the
// right (a full-screen program redraws after SIGWINCH). Scroll margins are
// reset.
func (s *Screen) Resize(cols, rows int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cols, rows = min(max(cols, 1), MaxCols), min(max(rows, 1), MaxRows)
	if cols == s.cols && rows == s.rows {
		return
	}
	s.clears++
	// The main screen's lines are wrapped anew to the new width (below),
	// as terminals that reflow do; the alternate screen is cut or padded.
	reflow := cols != s.cols && !s.altActive
	// Rows first, at the old width, so scrolled rows render as they were.
	if s.altActive {
		s.resizeRows(s.alt, &s.y, rows, false)
		y := s.main.saved.y
		s.resizeRows(s.main, &y, rows, true)
		s.main.saved.y = y
	} else {
		if reflow {
			// Only the rows below the cursor go now; the rows above
			// that no longer fit scroll off after the reflow, at the
			// new width (tmux reflows them in its history).
			if k := min(len(s.main.rows)-rows, len(s.main.rows)-1-s.y); k > 0 {
				s.main.rows = s.main.rows[:len(s.main.rows)-k]
			}
		} else {
			s.resizeRows(s.main, &s.y, rows, true)
		}
		if s.alt != nil {
			y := s.alt.saved.y
			s.resizeRows(s.alt, &y, rows, false)
			s.alt.saved.y = y
		}
	}
	s.rows = rows
	x, y, wrapNext := min(s.x, cols-1), min(s.y, rows-1), false
	if reflow {
		x, y, wrapNext = s.reflow(cols)
	}
	for _, b := range []*buffer{s.main, s.alt} {
		if b == nil {
			continue
		}
		for _, r := range b.rows {
			resizeCols(r, cols)
		}
		b.saved.x = min(b.saved.x, cols-1)
	}
	tabs := make([]bool, cols)
	copy(tabs, s.tabs)
	for i := (len(s.tabs) + 7) / 8 * 8; i < cols; i += 8 {
		tabs[i] = true
	}
	s.tabs = tabs
	s.cols = cols
	s.top, s.bot = 0, rows-1
	s.x, s.y, s.wrapNext = x, y, wrapNext
}

// resizeRows makes b rows tall; when *y would fall off the bottom, the rows
// above it scroll off the top first (kept when keep).
func (s *Screen) resizeRows(b *buffer, y *int, rows int, keep bool) {
	if n := *y - (rows - 1); n > 0 {
		for _, r := range b.rows[:n] {
			if keep {
				s.pushScrolled(r)
			}
		}
		b.rows = append(b.rows[:0], b.rows[n:]...)
		*y -= n
	}
	for len(b.rows) < rows {
		b.rows = append(b.rows, newRow(s.cols))
	}
	b.rows = b.rows[:rows]
}

func resizeCols(r *row, cols int) {
	if cols < len(r.cells) {
		r.cells = r.cells[:cols]
		r.end = min(r.end, cols)
		r.used = min(r.used, cols)
		if r.cells[cols-1].kind == kindWide {
			r.cells[cols-1] = cell{}
		}
		for k := range r.comb {
			if k >= cols {
				delete(r.comb, k)
			}
		}
		r.wrapped = false
		return
	}
	if cols > len(r.cells) {
		unskip(r, len(r.cells)-1) // no longer the last column
		r.cells = append(r.cells, make([]cell, cols-len(r.cells))...)
		r.wrapped = false
	}
}
