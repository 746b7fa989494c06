package session

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mattn/go-runewidth"
)

// newScreen makes the screen model of command sessions.
var newScreen = func(cols, rows int) screenModel { return newPlainScreen(cols, rows) }

// plainScreen is a small terminal screen: printable text with East-Asian
// widths, CR, LF, BS, TAB, cursor movement, erase in line and display, and
// scrolling. Other sequences are consumed and ignored. It stands in until
// session/screen is wired in, and keeps this package testable on its own.
type plainScreen struct {
	cols, rows int
	grid       [][]rune // rune 0 = blank; -1 = right half of a wide rune
	x, y       int
	scrolled   []string
	st         int // 0 ground, 1 ESC, 2 CSI, 3 OSC/string, 4 string ESC
	params     []byte
	utf        []byte
	wrapNext   bool
}

func newPlainScreen(cols, rows int) *plainScreen {
	s := &plainScreen{cols: cols, rows: rows}
	s.grid = make([][]rune, rows)
	for i := range s.grid {
		s.grid[i] = make([]rune, cols)
	}
	return s
}

func (s *plainScreen) Resize(cols, rows int) {
	g := make([][]rune, rows)
	for i := range g {
		g[i] = make([]rune, cols)
		if i < len(s.grid) {
			copy(g[i], s.grid[i])
		}
	}
	s.grid, s.cols, s.rows = g, cols, rows
	s.x, s.y = min(s.x, cols-1), min(s.y, rows-1)
}

func (s *plainScreen) line(i int) string {
	var b strings.Builder
	for _, r := range s.grid[i] {
		switch r {
		case 0:
			b.WriteByte(' ')
		case -1:
		default:
			b.WriteRune(r)
		}
	}
	return strings.TrimRight(b.String(), " ")
}

func (s *plainScreen) Lines() []string {
	out := make([]string, s.rows)
	for i := range out {
		out[i] = s.line(i)
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

func (s *plainScreen) TakeScrolled() []string {
	out := s.scrolled
	s.scrolled = nil
	return out
}

func (s *plainScreen) scroll() {
	s.scrolled = append(s.scrolled, s.line(0))
	first := s.grid[0]
	copy(s.grid, s.grid[1:])
	clear(first)
	s.grid[s.rows-1] = first
}

func (s *plainScreen) lf() {
	if s.y == s.rows-1 {
		s.scroll()
	} else {
		s.y++
	}
}

func (s *plainScreen) put(r rune) {
	w := runewidth.RuneWidth(r)
	if w == 0 {
		return
	}
	if s.wrapNext || s.x+w > s.cols {
		s.x, s.wrapNext = 0, false
		s.lf()
	}
	s.grid[s.y][s.x] = r
	if w == 2 {
		s.grid[s.y][s.x+1] = -1
	}
	s.x += w
	if s.x >= s.cols {
		s.x, s.wrapNext = s.cols-1, true
	}
}

func (s *plainScreen) Write(p []byte) {
	for _, c := range p {
		switch s.st {
		case 1:
			switch c {
			case '[':
				s.st, s.params = 2, s.params[:0]
			case ']', 'P', '_', '^', 'X':
				s.st = 3
			default:
				s.st = 0
			}
			continue
		case 2:
			if c >= 0x40 && c <= 0x7e {
				s.csi(c)
				s.st = 0
			} else {
				s.params = append(s.params, c)
			}
			continue
		case 3:
			if c == 7 {
				s.st = 0
			} else if c == 0x1b {
				s.st = 4
			}
			continue
		case 4:
			s.st = 0
			continue
		}
		if len(s.utf) > 0 || c >= 0x80 {
			s.utf = append(s.utf, c)
			if utf8.FullRune(s.utf) {
				r, _ := utf8.DecodeRune(s.utf)
				s.utf = s.utf[:0]
				s.put(r)
			}
			continue
		}
		switch c {
		case 0x1b:
			s.st = 1
		case '\r':
			s.x, s.wrapNext = 0, false
		case '\n':
			s.wrapNext = false
			s.lf()
		case '\b':
			if s.x > 0 {
				s.x--
			}
			s.wrapNext = false
		case '\t':
			s.x = min((s.x/8+1)*8, s.cols-1)
		default:
			if c >= 0x20 && c < 0x7f {
				s.put(rune(c))
			}
		}
	}
}

func (s *plainScreen) csi(final byte) {
	if len(s.params) > 0 && (s.params[0] == '?' || s.params[0] == '>' || s.params[0] == '=') {
		return
	}
	var ns []int
	for _, f := range strings.Split(string(s.params), ";") {
		n, _ := strconv.Atoi(f)
		ns = append(ns, n)
	}
	arg := func(i, def int) int {
		if i < len(ns) && ns[i] > 0 {
			return ns[i]
		}
		return def
	}
	s.wrapNext = false
	switch final {
	case 'A':
		s.y = max(s.y-arg(0, 1), 0)
	case 'B':
		s.y = min(s.y+arg(0, 1), s.rows-1)
	case 'C':
		s.x = min(s.x+arg(0, 1), s.cols-1)
	case 'D':
		s.x = max(s.x-arg(0, 1), 0)
	case 'G':
		s.x = min(arg(0, 1)-1, s.cols-1)
	case 'H', 'f':
		s.y, s.x = min(arg(0, 1)-1, s.rows-1), min(arg(1, 1)-1, s.cols-1)
	case 'K':
		row := s.grid[s.y]
		switch arg(0, 0) {
		case 0:
			clear(row[s.x:])
		case 1:
			clear(row[:s.x+1])
		case 2:
			clear(row)
		}
	case 'J':
		switch arg(0, 0) {
		case 0:
			clear(s.grid[s.y][s.x:])
			for i := s.y + 1; i < s.rows; i++ {
				clear(s.grid[i])
			}
		case 1:
			for i := 0; i < s.y; i++ {
				clear(s.grid[i])
			}
			clear(s.grid[s.y][:s.x+1])
		case 2, 3:
			for i := range s.grid {
				clear(s.grid[i])
			}
		}
	}
}
