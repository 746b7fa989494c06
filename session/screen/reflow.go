package screen

// A reflow wraps the main screen's lines anew for a new width, as tmux
// (3.3a, grid_reflow) and most terminals do, so that text a program wrote
// for the old width is neither cut nor left short (docs/notes/screen.md,
// "Reflow at a resize"). A line is a run of rows joined by autowrap (Row.Wrapped); its
// cells are each row's used columns. The line is laid out again from its
// first cell, a new row starting where the next character does not fit (a
// wide one that would straddle the edge moves whole to the next row and
// leaves a skipped column, as when it was printed). Rows that were wrapped
// are joined again when there is room; a row that nothing of the line
// reaches (a blank after a wrapped row) stays a row of its own.
//
// The screen then shows the last rows of the result: rows beyond the
// screen's height scroll off the top (final, into TakeScrolled), and a
// screen left short gets blank rows at the bottom (tmux pulls rows back
// from its history instead; rows here that scrolled off are final).

// reflowLine is one line being laid out again: its cells and combining
// marks (by cell index), and whether its last row was wrapped (the screen
// ended in the middle of a line).
type reflowLine struct {
	cells   []cell
	comb    map[int]string
	wrapped bool
}

// reflow lays the main screen's rows out again at cols columns and returns
// the cursor's new place: on the character it was on, or at the end of its
// line when it was past the line's used columns (also as tmux does).
func (s *Screen) reflow(cols int) (x, y int, wrapNext bool) {
	lines, curLine, curCell := s.reflowLines()
	var out []*row
	x, y = -1, -1
	for li, l := range lines {
		rw := newRow(cols)
		at := 0 // the next column of rw
		for ci, c := range l.cells {
			if li == curLine && ci == curCell {
				y, x = len(out), at
				if c.kind == kindCont {
					x = max(at-1, 0)
				}
			}
			w := 1
			switch c.kind {
			case kindCont:
				continue // placed with its wide rune
			case kindWide:
				w = 2
			}
			if w > cols {
				continue // a wide rune on a one-column screen
			}
			if at+w > cols {
				if at < cols {
					rw.cells[at] = cell{kind: kindSkip}
				}
				rw.wrapped, rw.used, rw.end = true, at, cols
				out = append(out, rw)
				rw, at = newRow(cols), 0
				if li == curLine && ci == curCell {
					y, x = len(out), 0
				}
			}
			rw.cells[at] = c
			if w == 2 {
				rw.cells[at+1] = cell{kind: kindCont, fg: c.fg, bg: c.bg, attr: c.attr}
			}
			if m := l.comb[ci]; m != "" {
				if rw.comb == nil {
					rw.comb = map[int]string{}
				}
				rw.comb[at] = m
			}
			at += w
		}
		rw.wrapped, rw.used, rw.end = l.wrapped, at, at
		out = append(out, rw)
		if li == curLine && curCell < 0 {
			y, x = len(out)-1, at
		}
	}
	if x >= cols {
		x, wrapNext = cols-1, true
	}
	if n := len(out) - s.rows; n > 0 {
		for _, r := range out[:n] {
			s.pushScrolled(r)
		}
		out = out[n:]
		if y -= n; y < 0 {
			x, y, wrapNext = 0, 0, false // the cursor's row scrolled off
		}
	}
	for len(out) < s.rows {
		out = append(out, newRow(cols))
	}
	s.main.rows = out
	return max(x, 0), max(y, 0), wrapNext
}

// reflowLines gathers the main screen's rows into lines and returns them
// with the cursor's place: its line and its cell in the line, or -1 for
// the line's end (the cursor was at or past the used columns of its row).
func (s *Screen) reflowLines() (lines []reflowLine, curLine, curCell int) {
	curLine, curCell = -1, -1
	var l reflowLine
	open := false // l continues: the last row gathered was wrapped
	for i, r := range s.main.rows {
		if open && r.used == 0 && !r.wrapped {
			// Nothing of the line reaches this row: it stays a blank
			// row of its own.
			lines = append(lines, l)
			l, open = reflowLine{}, false
		}
		used := min(r.used, len(r.cells))
		if i == s.y {
			curLine = len(lines)
			x := s.x
			if s.wrapNext {
				x = len(r.cells)
			}
			if x < used {
				curCell = len(l.cells) + x
			}
		}
		for k, m := range r.comb {
			if k < used {
				if l.comb == nil {
					l.comb = map[int]string{}
				}
				l.comb[len(l.cells)+k] = m
			}
		}
		for _, c := range r.cells[:used] {
			if c.kind == kindSkip {
				c.kind = kindNarrow // what an earlier draw left there is part of the row
			}
			l.cells = append(l.cells, c)
		}
		open = r.wrapped
		if !open {
			lines = append(lines, l)
			l = reflowLine{}
		}
	}
	if open {
		l.wrapped = true
		lines = append(lines, l)
	}
	return lines, curLine, curCell
}
