// Package screen turns a terminal byte stream into the text a person sees.
//
// A [Screen] is a small VT emulator for the output of a program in a
// pseudo-terminal: it keeps a grid of cells, the cursor, scroll margins, a
// main and an alternate screen, the modes (bracketed paste, cursor
// visibility, autowrap, origin and insert mode, and those that change what
// the terminal sends: cursor keys, keypad, mouse, focus), and each cell's
// SGR colours and attributes, so that [Screen.Snapshot] can draw the screen
// again in another terminal. Escape sequences are tokenized by
// charmbracelet/x/ansi's parser; character widths come from go-runewidth with
// East-Asian wide characters (Hangul, CJK) as two columns and ambiguous ones
// as one, as terminals in UTF-8 locales draw them.
//
// Text is read in two ways: [Screen.Lines] returns the visible rows, and
// [Screen.TakeScrolled] returns the rows that scrolled off the top of the
// main screen since the last call. A scrolled row can no longer change, so a
// reader can treat it as final; the visible rows may still be redrawn.
//
// Spaces drawn by moving the cursor (Claude Code writes `질문:ESC[9G로그인`)
// come out as spaces: every cell that was never written reads as a space,
// and only trailing blanks of a row are trimmed.
package screen

import (
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/parser"
	"github.com/mattn/go-runewidth"
)

// DefaultScrolledLimit is how many scrolled-off rows a Screen keeps for
// TakeScrolled from earlier writes when nobody takes them; older ones are
// dropped (and counted by Dropped) when the next Write starts. The rows one
// Write scrolls off are never dropped before a TakeScrolled after it, so a
// reader that takes them after every Write loses nothing, however much one
// write scrolls.
const DefaultScrolledLimit = 10000

// MaxCols and MaxRows bound a screen's size (New and Resize clamp to
// them), so a hostile resize cannot make a screen take much memory: at most
// 1000x500 cells of 8 bytes, 4 MB per screen.
const (
	MaxCols = 1000
	MaxRows = 500
)

// maxOSC bounds the OSC payload a Screen keeps (window titles).
const maxOSC = 4096

// widths is the width table: East-Asian wide = 2, ambiguous = 1 (what
// terminals do outside CJK locales), combining marks = 0.
var widths = &runewidth.Condition{EastAsianWidth: false, StrictEmojiNeutral: true}

// cell is one column of a row. The zero value is a blank cell, so a fresh
// row is a plain make.
type cell struct {
	r    rune  // 0: blank (reads as a space)
	fg   color // SGR foreground (0: the default)
	bg   color // SGR background (0: the default)
	attr attrs // SGR bold, italic…
	kind uint8 // kindNarrow, kindWide (first column of a wide rune), kindCont (its second column), kindSkip
}

const (
	kindNarrow uint8 = iota
	kindWide
	kindCont
	// kindSkip marks the last column of a row that a wide rune skipped: it
	// did not fit there and wrapped whole to the next row. The cell reads
	// as it did before (blank, or what an earlier draw left there, as
	// xterm and tmux keep it) but is not part of the line the program
	// printed, so a wrapped row's Row.Text leaves it out. Any write or
	// erase of the cell replaces it with a plain cell, clearing the mark;
	// the mark only ever sits in a row's last column (see unskip).
	kindSkip
)

type row struct {
	cells []cell
	// comb holds combining marks by column; nil for almost every row.
	comb map[int]string
	// wrapped: the text continues on the next row by autowrap (not by a
	// newline the program wrote).
	wrapped bool
	// end bounds the written cells: every cell from end on is blank, so
	// rendering skips the blank tail of a row without looking at it.
	end int
	// used is how many columns of the row the program wrote, blanks it
	// printed included, as a terminal that reflows its lines counts them
	// (tmux's "cells used"): printing extends it, an erase of the whole
	// row resets it, an erase of a part leaves it. A reflow after a resize
	// moves the first used columns of each row (reflow.go).
	used int
}

func newRow(cols int) *row { return &row{cells: make([]cell, cols)} }

func (r *row) clear() {
	clear(r.cells[:min(r.end, len(r.cells))])
	r.comb = nil
	r.wrapped = false
	r.end = 0
	r.used = 0
}

// text renders the row: blanks as spaces, the second column of a wide rune
// as nothing, trailing spaces trimmed.
func (r *row) text(buf []byte) []byte { return r.render(buf, true) }

// render renders the row; trim false (a wrapped row, rendered for a reader
// that joins it to the next) keeps trailing blanks and leaves out a column
// a wide rune skipped (kindSkip).
func (r *row) render(buf []byte, trim bool) []byte {
	buf = buf[:0]
	end := len(r.cells)
	if trim {
		end = min(r.end, end)
	}
	for trim && end > 0 && (r.cells[end-1].r == 0 || r.cells[end-1].r == ' ') && (r.comb == nil || r.comb[end-1] == "") {
		end--
	}
	for i := 0; i < end; i++ {
		c := r.cells[i]
		switch {
		case c.kind == kindCont:
			continue
		case c.kind == kindSkip && !trim:
			// Rendering a wrapped row for a joiner: the column a wide
			// rune skipped is not the program's text.
			continue
		case c.r == 0:
			buf = append(buf, ' ')
		case c.r < utf8.RuneSelf:
			buf = append(buf, byte(c.r))
		default:
			buf = utf8.AppendRune(buf, c.r)
		}
		if r.comb != nil {
			buf = append(buf, r.comb[i]...)
		}
	}
	return buf
}

// buffer is one of the two screens (main, alternate).
type buffer struct {
	rows []*row
	// saved cursor (DECSC), per screen as in xterm.
	saved savedCursor
}

type savedCursor struct {
	x, y     int
	wrapNext bool
	origin   bool
	charset  bool
	set      bool
}

// Screen is a terminal screen. Its methods are safe for concurrent use.
type Screen struct {
	mu sync.Mutex

	p    *ansi.Parser
	cols int
	rows int

	main, alt *buffer
	cur       *buffer
	altActive bool

	x, y     int
	wrapNext bool // pending wrap: the last column was written
	top, bot int  // scroll margins, inclusive

	tabs []bool

	// modes
	autowrap     bool
	origin       bool
	insert       bool
	cursorHidden bool
	bracketed    bool
	decGraphics  bool // G0 is the DEC special graphics set
	lastPrinted  rune
	pen          cell // the SGR state: fg, bg and attr of what is printed next (r and kind unused)
	keypad       bool // DECKPAM (ESC =): application keypad
	cursorStyle  int  // DECSCUSR (CSI n SP q), 0 the default
	// other DEC private modes that change what the terminal sends rather
	// than what it shows (cursor keys, mouse reporting, focus events…),
	// kept so that a viewer joining late is put in the same state
	// (Snapshot); see passModes.
	private map[int]bool

	// string-sequence state (OSC, DCS, SOS, PM, APC) handled here rather
	// than in the parser, so that UTF-8 bytes such as 0x9C (a C1 ST) inside
	// a title do not end it.
	inString bool
	isOSC    bool
	osc      []byte
	title    string

	pending []byte // an incomplete UTF-8 sequence at the end of the last Write

	scrolled      []scrolledRow
	scrolledLimit int
	dropped       int
	clears        uint64 // see Clears

	params     [16]ansi.Param // scratch for csiFast
	buf        []byte         // scratch for rendering rows
	rowScratch []*row         // scratch for scrolling
}

// New returns a blank screen of cols x rows (each at least 1, at most
// MaxCols x MaxRows).
func New(cols, rows int) *Screen {
	cols, rows = min(max(cols, 1), MaxCols), min(max(rows, 1), MaxRows)
	s := &Screen{cols: cols, rows: rows, scrolledLimit: DefaultScrolledLimit}
	// Not ansi.NewParser: it allocates a 64 KiB string buffer, and strings
	// (OSC, DCS…) are collected by the Screen itself.
	s.p = new(ansi.Parser)
	s.p.SetParamsSize(parser.MaxParamsSize)
	s.p.SetDataSize(1)
	s.p.SetHandler(ansi.Handler{
		Print:     s.print,
		Execute:   s.execute,
		HandleCsi: s.csi,
		HandleEsc: s.esc,
	})
	s.main = s.newBuffer()
	s.cur = s.main
	s.reset()
	return s
}

func (s *Screen) newBuffer() *buffer {
	b := &buffer{rows: make([]*row, s.rows)}
	for i := range b.rows {
		b.rows[i] = newRow(s.cols)
	}
	return b
}

// reset puts modes, margins, cursor and tab stops back to their power-on
// values; the contents of the screens are left to the caller.
func (s *Screen) reset() {
	s.x, s.y, s.wrapNext = 0, 0, false
	s.top, s.bot = 0, s.rows-1
	s.autowrap = true
	s.origin, s.insert, s.cursorHidden, s.bracketed, s.decGraphics = false, false, false, false, false
	s.pen, s.keypad, s.cursorStyle, s.private = cell{}, false, 0, nil
	s.tabs = make([]bool, s.cols)
	for i := 8; i < s.cols; i += 8 {
		s.tabs[i] = true
	}
}

// SetScrolledLimit sets how many untaken scrolled-off rows of earlier
// writes are kept (at least 1); the oldest are dropped first, when the next
// Write starts.
func (s *Screen) SetScrolledLimit(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scrolledLimit = max(n, 1)
}

// Write feeds terminal output to the screen. It always consumes all of p and
// never fails; sequences and UTF-8 runes split across calls are joined.
func (s *Screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trimScrolled()
	n := len(p)
	if len(s.pending) > 0 {
		p = append(s.pending, p...)
		s.pending = nil
	}
	for i := 0; i < len(p); {
		b := p[i]
		if s.inString {
			i += s.stringBytes(p[i:])
			continue
		}
		if s.p.State() == parser.GroundState {
			if b >= 0x20 && b < 0x7f {
				j := i + 1
				for j < len(p) && p[j] >= 0x20 && p[j] < 0x7f {
					j++
				}
				s.printASCII(p[i:j])
				i = j
				continue
			}
			if b == 0x1b && i+1 < len(p) && p[i+1] == '[' {
				if n := s.csiFast(p[i:]); n > 0 {
					i += n
					continue
				}
			}
			if b >= 0x80 {
				if !utf8.FullRune(p[i:]) {
					s.pending = append(s.pending[:0], p[i:]...)
					break
				}
				r, size := utf8.DecodeRune(p[i:])
				s.print(r) // utf8.RuneError for an invalid byte
				i += size
				continue
			}
		}
		s.p.Advance(b)
		i++
		switch s.p.State() {
		case parser.OscStringState, parser.DcsStringState, parser.SosStringState, parser.PmStringState, parser.ApcStringState:
			s.inString = true
			s.isOSC = s.p.State() == parser.OscStringState
			s.osc = s.osc[:0]
		}
	}
	return n, nil
}

// csiFast dispatches the plain CSI sequence (ESC [, digits and semicolons,
// a final byte) that p starts with, exactly as the parser would dispatch
// it, without stepping the parser through it byte by byte: most of what
// programs write between text is such sequences. It returns the bytes used,
// or 0 to leave the sequence to the parser (private prefixes,
// intermediates, sub-parameters, controls inside, many parameters, or a
// sequence cut by the end of p).
func (s *Screen) csiFast(p []byte) int {
	params := s.params[:0]
	cur, seen := parser.MissingParam, false
	for i := 2; i < len(p) && i < 64; i++ {
		b := p[i]
		switch {
		case b >= '0' && b <= '9':
			if cur == parser.MissingParam {
				cur = 0
			}
			cur = cur*10 + int(b-'0')
			seen = true
		case b == ';':
			if len(params) == len(s.params)-1 {
				return 0
			}
			params = append(params, ansi.Param(cur))
			cur, seen = parser.MissingParam, true
		case b >= 0x40 && b <= 0x7e:
			if seen {
				params = append(params, ansi.Param(cur))
			}
			s.csi(ansi.Cmd(b), params)
			return i + 1
		default:
			return 0
		}
	}
	return 0
}

// stringBytes consumes the body of a string sequence up to its end (BEL,
// ST, or ESC starting a new sequence; CAN and SUB cancel it) and returns
// how many bytes it used.
func (s *Screen) stringBytes(p []byte) int {
	for i, b := range p {
		switch b {
		case 0x07, 0x1b, 0x18, 0x1a:
			if s.isOSC && b != 0x18 && b != 0x1a {
				s.osc = append(s.osc, p[:i]...)
				s.handleOSC()
			}
			s.inString = false
			s.p.Reset()
			if b == 0x1b {
				// ESC \ (ST) then dispatches as an ESC sequence, ignored.
				s.p.Advance(b)
			}
			return i + 1
		}
	}
	if s.isOSC && len(s.osc) < maxOSC {
		s.osc = append(s.osc, p[:min(len(p), maxOSC-len(s.osc))]...)
	}
	return len(p)
}

func (s *Screen) handleOSC() {
	data := s.osc
	if len(data) > maxOSC {
		data = data[:maxOSC]
	}
	cmd, rest, ok := strings.Cut(string(data), ";")
	if !ok {
		return
	}
	if cmd == "0" || cmd == "2" {
		s.title = strings.ToValidUTF8(rest, "\uFFFD")
	}
}

// print puts r at the cursor.
func (s *Screen) print(r rune) {
	if s.decGraphics && r >= 0x5f && r <= 0x7e {
		r = decSpecial[r-0x5f]
	}
	w := 1
	if r >= 0x7f {
		w = widths.RuneWidth(r)
	}
	if w == 0 {
		s.combine(r)
		return
	}
	s.lastPrinted = r
	if s.wrapNext {
		if s.autowrap {
			s.cur.rows[s.y].wrapped = true
			s.x = 0
			s.index()
		}
		s.wrapNext = false
	}
	if w == 2 && s.x == s.cols-1 {
		// A wide rune does not fit in the last column: it wraps whole.
		// The last column keeps what it had (xterm and tmux do the same).
		if !s.autowrap || s.cols < 2 {
			return
		}
		skipped := s.cur.rows[s.y]
		skipped.wrapped = true
		if c := &skipped.cells[s.x]; c.kind == kindNarrow {
			// Remember the skip, so a reader joining the rows does not
			// take this column for a space the program printed. (The
			// second half of a wide rune there is that rune's, not a gap.)
			c.kind = kindSkip
			skipped.end = s.cols // row.clear must reach the mark
		}
		s.x = 0
		s.index()
	}
	rw := s.cur.rows[s.y]
	if s.insert {
		s.insertBlanks(w)
	}
	if rw.cells[s.x].kind != kindNarrow {
		s.fixWide(rw, s.x)
	}
	if w == 2 {
		s.fixWide(rw, s.x+1)
		rw.cells[s.x] = s.styled(r, kindWide)
		rw.cells[s.x+1] = s.styled(0, kindCont)
	} else {
		rw.cells[s.x] = s.styled(r, kindNarrow)
	}
	rw.end = max(rw.end, s.x+w)
	rw.used = max(rw.used, s.x+w)
	if rw.comb != nil {
		delete(rw.comb, s.x)
	}
	if s.x+w >= s.cols {
		s.x = s.cols - 1
		s.wrapNext = true
	} else {
		s.x += w
	}
}

// printASCII prints a run of printable ASCII: print for each byte, with
// the per-rune checks done once per row.
func (s *Screen) printASCII(run []byte) {
	if s.insert || s.decGraphics || !s.autowrap {
		for _, b := range run {
			s.print(rune(b))
		}
		return
	}
	for len(run) > 0 {
		if s.wrapNext {
			s.cur.rows[s.y].wrapped = true
			s.x = 0
			s.index()
		}
		rw := s.cur.rows[s.y]
		n := min(len(run), s.cols-s.x)
		cells := rw.cells[s.x : s.x+n]
		if cells[0].kind == kindCont {
			s.fixWide(rw, s.x)
		}
		if cells[n-1].kind == kindWide {
			s.fixWide(rw, s.x+n-1)
		}
		for k, b := range run[:n] {
			cells[k] = cell{r: rune(b), fg: s.pen.fg, bg: s.pen.bg, attr: s.pen.attr}
		}
		rw.end = max(rw.end, s.x+n)
		rw.used = max(rw.used, s.x+n)
		if rw.comb != nil {
			for k := s.x; k < s.x+n; k++ {
				delete(rw.comb, k)
			}
		}
		s.lastPrinted = rune(run[n-1])
		if s.x+n >= s.cols {
			s.x, s.wrapNext = s.cols-1, true
		} else {
			s.x += n
		}
		run = run[n:]
	}
}

// combine attaches a zero-width rune to the cell last written.
func (s *Screen) combine(r rune) {
	x, y := s.x-1, s.y
	if s.wrapNext {
		x = s.x
	}
	rw := s.cur.rows[y]
	if x < 0 {
		return
	}
	if rw.cells[x].kind == kindCont && x > 0 {
		x--
	}
	if rw.cells[x].r == 0 {
		return
	}
	if rw.comb == nil {
		rw.comb = map[int]string{}
	}
	if len(rw.comb[x]) < 32 {
		rw.comb[x] += string(r)
	}
}

// fixWide blanks the other half of a wide rune when column x, one half of
// it, is about to be overwritten.
func (s *Screen) fixWide(rw *row, x int) {
	if x < 0 || x >= len(rw.cells) {
		return
	}
	switch rw.cells[x].kind {
	case kindCont:
		if x > 0 {
			rw.cells[x-1] = cell{}
		}
		rw.cells[x] = cell{}
	case kindWide:
		if x+1 < len(rw.cells) {
			rw.cells[x+1] = cell{}
		}
		rw.cells[x] = cell{}
	}
}

// erase blanks columns [from, to) of row y.
func (s *Screen) erase(y, from, to int) {
	rw := s.cur.rows[y]
	from, to = max(from, 0), min(to, s.cols)
	if from >= to {
		return
	}
	s.fixWide(rw, from)
	s.fixWide(rw, to-1)
	clear(rw.cells[from:to])
	s.fillBlank(rw, from, to)
	if rw.comb != nil {
		for k := range rw.comb {
			if k >= from && k < to {
				delete(rw.comb, k)
			}
		}
	}
	if to == s.cols {
		rw.wrapped = false
		if from == 0 {
			// The whole row: nothing of it is left, and the row above
			// no longer continues into it (tmux does the same).
			rw.used = 0
			if y > 0 {
				s.cur.rows[y-1].wrapped = false
			}
		}
	}
}

func (s *Screen) execute(b byte) {
	switch b {
	case '\b':
		s.wrapNext = false
		if s.x > 0 {
			s.x--
		}
	case '\t':
		s.tab(1)
	case '\n', '\v', '\f':
		s.index()
	case '\r':
		s.x, s.wrapNext = 0, false
	case 0x0e, 0x0f: // SO, SI: G1/G0 shifts, not tracked
	}
}

// tab moves to the n-th next tab stop, or the last column. A pending wrap
// stays pending, as in xterm: the cursor is already in the last column.
func (s *Screen) tab(n int) {
	for ; n > 0 && s.x < s.cols-1; n-- {
		s.x++
		for s.x < s.cols-1 && !s.tabs[s.x] {
			s.x++
		}
	}
}

func (s *Screen) backTab(n int) {
	s.wrapNext = false
	for ; n > 0 && s.x > 0; n-- {
		s.x--
		for s.x > 0 && !s.tabs[s.x] {
			s.x--
		}
	}
}

// index moves the cursor down a row, scrolling the region at its bottom.
func (s *Screen) index() {
	s.wrapNext = false
	switch {
	case s.y == s.bot:
		s.scrollUp(s.top, s.bot, 1)
	case s.y < s.rows-1:
		s.y++
	}
}

// reverseIndex moves the cursor up a row, scrolling the region at its top.
func (s *Screen) reverseIndex() {
	s.wrapNext = false
	switch {
	case s.y == s.top:
		s.scrollDown(s.top, s.bot, 1)
	case s.y > 0:
		s.y--
	}
}

// scrollUp moves rows top+n..bot up by n and blanks the n rows at the
// bottom. Rows leaving the top of the whole main screen go to the
// scrolled-off list.
func (s *Screen) scrollUp(top, bot, n int) {
	if top < 0 || bot >= s.rows || top > bot {
		return
	}
	n = min(n, bot-top+1)
	if n <= 0 {
		return
	}
	rows := s.cur.rows
	keep := top == 0 && !s.altActive
	out := s.spare(n)
	copy(out, rows[top:top+n])
	for _, r := range out {
		if keep {
			s.pushScrolled(r)
		}
		s.blankRow(r)
	}
	if top == 0 && bot == s.rows-1 {
		// The whole screen: slide the window over the backing array
		// instead of moving every row (append reallocates, rarely, when
		// the window reaches the end).
		s.cur.rows = append(rows[n:], out...)
		return
	}
	copy(rows[top:], rows[top+n:bot+1])
	copy(rows[bot+1-n:], out)
}

// scrollDown moves rows top..bot-n down by n and blanks the n rows at the
// top.
func (s *Screen) scrollDown(top, bot, n int) {
	if top < 0 || bot >= s.rows || top > bot {
		return
	}
	n = min(n, bot-top+1)
	if n <= 0 {
		return
	}
	rows := s.cur.rows
	out := s.spare(n)
	copy(out, rows[bot+1-n:bot+1])
	copy(rows[top+n:], rows[top:bot+1-n])
	for i, r := range out {
		s.blankRow(r)
		rows[top+i] = r
	}
}

// spare returns a scratch slice of n row pointers for moving rows.
func (s *Screen) spare(n int) []*row {
	if cap(s.rowScratch) < n {
		s.rowScratch = make([]*row, n)
	}
	return s.rowScratch[:n]
}

// scrolledRow is a row that scrolled off: the Row TakeScrolledRows gives,
// and what a skipped last column shows (skipped), which Row.Text leaves out
// but TakeScrolled, rendering as Lines does, keeps.
type scrolledRow struct {
	Row
	skipped string
	used    int // the row's used columns (see row.used)
}

// pushScrolled renders r onto the scrolled-off list.
func (s *Screen) pushScrolled(r *row) {
	s.buf = r.render(s.buf, !r.wrapped)
	sr := scrolledRow{Row: Row{Text: string(s.buf), Wrapped: r.wrapped, Clears: s.clears}, used: r.used}
	if last := len(r.cells) - 1; r.wrapped && r.cells[last].kind == kindSkip && r.cells[last].r != 0 {
		// What an earlier draw left in the skipped column (rare).
		sr.skipped = string(r.cells[last].r)
		if r.comb != nil {
			sr.skipped += r.comb[last]
		}
	}
	s.scrolled = append(s.scrolled, sr)
}

// trimScrolled drops the oldest untaken rows beyond the limit.
func (s *Screen) trimScrolled() {
	if over := len(s.scrolled) - s.scrolledLimit; over > 0 {
		s.dropped += over
		clear(s.scrolled[:over])
		s.scrolled = append(s.scrolled[:0], s.scrolled[over:]...)
	}
}

// insertBlanks shifts the cells from the cursor right by n (ICH and insert
// mode); cells pushed past the right edge are lost.
func (s *Screen) insertBlanks(n int) {
	rw := s.cur.rows[s.y]
	n = min(n, s.cols-s.x)
	if n <= 0 {
		return
	}
	if rw.cells[s.x].kind == kindCont {
		s.fixWide(rw, s.x) // the insertion splits a wide rune
	}
	s.fixWide(rw, s.cols-n) // the rune cut at the right edge
	copy(rw.cells[s.x+n:], rw.cells[s.x:s.cols-n])
	clear(rw.cells[s.x : s.x+n])
	s.fillBlank(rw, s.x, s.x+n)
	rw.end = min(rw.end+n, s.cols)
	if s.x+n < s.cols {
		rw.used = s.cols // the moved cells reach the edge (as tmux counts them)
	}
	s.shiftComb(rw, s.x, n)
}

// deleteChars removes n cells at the cursor, shifting the rest left (DCH).
func (s *Screen) deleteChars(n int) {
	rw := s.cur.rows[s.y]
	n = min(n, s.cols-s.x)
	if n <= 0 {
		return
	}
	s.fixWide(rw, s.x)
	s.fixWide(rw, s.x+n-1)
	copy(rw.cells[s.x:], rw.cells[s.x+n:])
	clear(rw.cells[s.cols-n:])
	s.fillBlank(rw, s.cols-n, s.cols)
	if s.x+n < s.cols {
		rw.used = max(rw.used, s.cols-n) // the moved cells, as tmux counts them
	} else if s.x == 0 {
		rw.used = 0 // the whole row
	}
	unskip(rw, s.cols-1-n) // a skip mark moved off the last column
	s.shiftComb(rw, s.x, -n)
}

// unskip turns a skip mark at column x back into a plain cell (keeping
// what it shows): the mark means "the last column of a wrapped row that a
// wide rune skipped", so it must not stay in a cell that is moved away
// from the last column.
func unskip(rw *row, x int) {
	if x >= 0 && x < len(rw.cells) && rw.cells[x].kind == kindSkip {
		rw.cells[x].kind = kindNarrow
	}
}

// shiftComb moves combining marks at columns >= from by d columns.
func (s *Screen) shiftComb(rw *row, from, d int) {
	if rw.comb == nil {
		return
	}
	m := make(map[int]string, len(rw.comb))
	for k, v := range rw.comb {
		switch {
		case k < from:
			m[k] = v
		case d < 0 && k < from-d:
			// deleted
		case k+d < s.cols:
			m[k+d] = v
		}
	}
	rw.comb = m
}

// decSpecial maps 0x5f..0x7e in the DEC special graphics set (ESC ( 0) to
// the box-drawing characters it stands for.
var decSpecial = [...]rune{
	' ', '◆', '▒', '␉', '␌', '␍', '␊', '°', '±', '␤', '␋', '┘', '┐', '┌', '└', '┼',
	'⎺', '⎻', '─', '⎼', '⎽', '├', '┤', '┴', '┬', '│', '≤', '≥', 'π', '≠', '£', '·',
}
