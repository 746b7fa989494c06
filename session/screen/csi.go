package screen

import "github.com/charmbracelet/x/ansi"

// count returns parameter i as a repeat count: missing or 0 means 1.
func count(p ansi.Params, i int) int {
	n, _, _ := p.Param(i, 1)
	if n <= 0 {
		return 1
	}
	return n
}

// param returns parameter i, def when missing.
func param(p ansi.Params, i, def int) int {
	n, _, _ := p.Param(i, def)
	return n
}

// clampLimit bounds the repeat counts that loop (REP) so garbage cannot make
// one sequence run for long.
const clampLimit = 1 << 16

func (s *Screen) csi(cmd ansi.Cmd, p ansi.Params) {
	prefix, inter, final := cmd.Prefix(), cmd.Intermediate(), cmd.Final()
	if prefix == '?' {
		switch {
		case inter == 0 && final == 'h':
			s.setModes(p, true, true)
		case inter == 0 && final == 'l':
			s.setModes(p, true, false)
		case inter == 0 && final == 'J': // DECSED: selective erase, as ED
			s.wrapNext = false
			s.eraseDisplay(param(p, 0, 0))
		case inter == 0 && final == 'K': // DECSEL
			s.wrapNext = false
			s.eraseLine(param(p, 0, 0))
		}
		return
	}
	if prefix != 0 {
		return // '>' '<' '=': device attributes, key modifiers… no screen effect
	}
	if inter != 0 {
		if inter == '!' && final == 'p' { // DECSTR soft reset
			s.softReset()
		}
		if inter == ' ' && final == 'q' { // DECSCUSR: the cursor's shape
			s.cursorStyle = min(max(param(p, 0, 0), 0), 6)
		}
		return // DECSCUSR (SP q) and the like
	}
	switch final {
	case '@': // ICH
		s.wrapNext = false
		s.insertBlanks(count(p, 0))
	case 'A': // CUU
		s.cursorUp(count(p, 0))
	case 'B', 'e': // CUD, VPR
		s.cursorDown(count(p, 0))
	case 'C', 'a': // CUF, HPR
		s.moveTo(s.x+count(p, 0), s.y)
	case 'D': // CUB
		s.moveTo(s.x-count(p, 0), s.y)
	case 'E': // CNL
		s.cursorDown(count(p, 0))
		s.x = 0
	case 'F': // CPL
		s.cursorUp(count(p, 0))
		s.x = 0
	case 'G', '`': // CHA, HPA
		s.moveTo(count(p, 0)-1, s.y)
	case 'd': // VPA
		s.moveToOrigin(s.x, count(p, 0)-1)
	case 'H', 'f': // CUP, HVP
		s.moveToOrigin(count(p, 1)-1, count(p, 0)-1)
	case 'I': // CHT
		s.tab(min(count(p, 0), s.cols))
	case 'Z': // CBT
		s.backTab(min(count(p, 0), s.cols))
	case 'J': // ED
		s.wrapNext = false
		s.eraseDisplay(param(p, 0, 0))
	case 'K': // EL
		s.wrapNext = false
		s.eraseLine(param(p, 0, 0))
	case 'L': // IL
		if s.y >= s.top && s.y <= s.bot {
			s.scrollDown(s.y, s.bot, count(p, 0))
			s.x, s.wrapNext = 0, false
		}
	case 'M': // DL
		if s.y >= s.top && s.y <= s.bot {
			s.deleteLines(count(p, 0))
			s.x, s.wrapNext = 0, false
		}
	case 'P': // DCH
		s.wrapNext = false
		s.deleteChars(count(p, 0))
	case 'X': // ECH
		s.wrapNext = false
		s.erase(s.y, s.x, s.x+count(p, 0))
	case 'S': // SU
		s.scrollUp(s.top, s.bot, count(p, 0))
	case 'T': // SD (with more than one parameter it is mouse tracking: ignored)
		if len(p) <= 1 {
			s.scrollDown(s.top, s.bot, count(p, 0))
		}
	case 'b': // REP: repeat the last printed rune
		if s.lastPrinted != 0 {
			for n := min(count(p, 0), clampLimit); n > 0; n-- {
				s.print(s.lastPrinted)
			}
		}
	case 'g': // TBC
		switch param(p, 0, 0) {
		case 0:
			s.tabs[s.x] = false
		case 3:
			clear(s.tabs)
		}
	case 'h', 'l': // SM, RM: only IRM (4) matters here
		p.ForEach(0, func(_, m int, _ bool) {
			if m == 4 {
				s.insert = final == 'h'
			}
		})
	case 'r': // DECSTBM
		top, bot := count(p, 0)-1, param(p, 1, s.rows)
		if bot <= 0 || bot > s.rows {
			bot = s.rows
		}
		bot--
		if top < bot {
			s.top, s.bot = top, bot
			s.moveToOrigin(0, 0)
		}
	case 'm': // SGR
		s.sgr(p)
	case 's': // SCOSC
		s.saveCursor()
	case 'u': // SCORC
		s.restoreCursor()
	}
	// n (DSR), c (DA), t (window ops)…: no effect on the screen.
}

func (s *Screen) esc(cmd ansi.Cmd) {
	inter, final := cmd.Intermediate(), cmd.Final()
	switch inter {
	case 0:
		switch final {
		case '=': // DECKPAM
			s.keypad = true
		case '>': // DECKPNM
			s.keypad = false
		}
	case '(': // designate G0
		s.decGraphics = final == '0'
		return
	case '#':
		if final == '8' { // DECALN: fill with E
			for y := range s.cur.rows {
				for x := range s.cur.rows[y].cells {
					s.cur.rows[y].cells[x] = cell{r: 'E'}
				}
				s.cur.rows[y].end = s.cols
				s.cur.rows[y].used = s.cols
				s.cur.rows[y].comb = nil
			}
		}
		return
	default:
		return
	}
	switch final {
	case '7':
		s.saveCursor()
	case '8':
		s.restoreCursor()
	case 'D': // IND
		s.index()
	case 'E': // NEL
		s.index()
		s.x = 0
	case 'M': // RI
		s.reverseIndex()
	case 'H': // HTS
		s.tabs[s.x] = true
	case 'c': // RIS
		s.fullReset()
	}
}

// moveTo moves the cursor to column x, row y, clamped to the screen.
func (s *Screen) moveTo(x, y int) {
	s.x = min(max(x, 0), s.cols-1)
	s.y = min(max(y, 0), s.rows-1)
	s.wrapNext = false
}

// moveToOrigin moves to x, y counted from the top margin in origin mode,
// and keeps the cursor inside the margins then.
func (s *Screen) moveToOrigin(x, y int) {
	if s.origin {
		y = min(max(y+s.top, s.top), s.bot)
	}
	s.moveTo(x, y)
}

// cursorUp moves up n rows, stopping at the top margin when the cursor is
// inside the region.
func (s *Screen) cursorUp(n int) {
	lim := 0
	if s.y >= s.top {
		lim = s.top
	}
	s.moveTo(s.x, max(s.y-n, lim))
}

func (s *Screen) cursorDown(n int) {
	lim := s.rows - 1
	if s.y <= s.bot {
		lim = s.bot
	}
	s.moveTo(s.x, min(s.y+n, lim))
}

func (s *Screen) deleteLines(n int) {
	n = min(n, s.bot-s.y+1)
	rows := s.cur.rows
	out := s.spare(n)
	copy(out, rows[s.y:s.y+n])
	copy(rows[s.y:], rows[s.y+n:s.bot+1])
	for i, r := range out {
		s.blankRow(r)
		rows[s.bot+1-n+i] = r
	}
}

func (s *Screen) eraseDisplay(mode int) {
	switch mode {
	case 0:
		if s.x == 0 && s.y == 0 {
			s.clears++
		}
		s.erase(s.y, s.x, s.cols)
		for y := s.y + 1; y < s.rows; y++ {
			s.blankRow(s.cur.rows[y])
		}
	case 1:
		for y := 0; y < s.y; y++ {
			s.blankRow(s.cur.rows[y])
		}
		s.erase(s.y, 0, s.x+1)
	case 2:
		s.clears++
		for _, r := range s.cur.rows {
			s.blankRow(r)
		}
	case 3: // erase saved lines: what scrolled off is already final
		s.clears++
	}
}

func (s *Screen) eraseLine(mode int) {
	switch mode {
	case 0:
		s.erase(s.y, s.x, s.cols)
	case 1:
		s.erase(s.y, 0, s.x+1)
	case 2:
		s.erase(s.y, 0, s.cols)
	}
}

func (s *Screen) saveCursor() {
	s.cur.saved = savedCursor{x: s.x, y: s.y, wrapNext: s.wrapNext, origin: s.origin, charset: s.decGraphics, set: true}
}

func (s *Screen) restoreCursor() {
	c := s.cur.saved
	if !c.set {
		s.origin, s.decGraphics = false, false
		s.moveTo(0, 0)
		return
	}
	s.origin, s.decGraphics = c.origin, c.charset
	s.moveTo(c.x, c.y)
	s.wrapNext = c.wrapNext && s.x == s.cols-1
}

func (s *Screen) setModes(p ansi.Params, private, on bool) {
	p.ForEach(0, func(_, m int, _ bool) {
		switch m {
		case 6: // DECOM
			s.origin = on
			s.moveToOrigin(0, 0)
		case 7: // DECAWM
			s.autowrap = on
			if !on {
				s.wrapNext = false
			}
		case 25: // DECTCEM
			s.cursorHidden = !on
		case 2004:
			s.bracketed = on
		case 1, 9, 12, 1000, 1001, 1002, 1003, 1004, 1005, 1006, 1015, 1016, 2031:
			s.setPrivate(m, on)
		case 47, 1047:
			s.switchScreen(on, m == 1047 && !on)
		case 1048:
			if on {
				s.saveCursor()
			} else {
				s.restoreCursor()
			}
		case 1049:
			if on {
				if !s.altActive {
					s.saveCursor()
					s.switchScreen(true, false)
					for _, r := range s.cur.rows {
						r.clear()
					}
				}
			} else if s.altActive {
				s.switchScreen(false, false)
				s.restoreCursor()
			}
		}
	})
}

// switchScreen enters (on) or leaves the alternate screen; clear blanks the
// alternate screen on the way out (1047).
func (s *Screen) switchScreen(on, clearAlt bool) {
	if on == s.altActive {
		return
	}
	s.clears++
	if on {
		if s.alt == nil {
			s.alt = s.newBuffer()
		}
		s.cur, s.altActive = s.alt, true
		return
	}
	if clearAlt {
		for _, r := range s.alt.rows {
			r.clear()
		}
	}
	s.cur, s.altActive = s.main, false
	s.wrapNext = false
}

func (s *Screen) softReset() {
	s.cursorHidden, s.origin, s.insert, s.autowrap, s.decGraphics = false, false, false, true, false
	s.pen, s.keypad = cell{}, false
	s.setPrivate(1, false)
	s.top, s.bot = 0, s.rows-1
	s.main.saved, s.wrapNext = savedCursor{}, false
	if s.alt != nil {
		s.alt.saved = savedCursor{}
	}
}

func (s *Screen) fullReset() {
	s.clears++
	if s.altActive {
		s.switchScreen(false, false)
	}
	s.alt = nil
	for _, r := range s.main.rows {
		r.clear()
	}
	s.main.saved = savedCursor{}
	s.reset()
	s.title = ""
}
