package screen

import "github.com/charmbracelet/x/ansi"

// color is an SGR colour: 0 the terminal's default, colorIndexed|n one of
// the 256 palette colours, colorRGB|0xRRGGBB a direct colour.
type color uint32

const (
	colorIndexed color = 1 << 24
	colorRGB     color = 2 << 24
	colorKind    color = 0xff << 24
)

// attrs are the SGR rendition flags of a cell.
type attrs uint16

const (
	attrBold attrs = 1 << iota
	attrFaint
	attrItalic
	attrUnderline
	attrBlink
	attrInverse
	attrInvisible
	attrStrike
	attrOverline
)

// attrByCode is the flag SGR codes 1–9 turn on.
var attrByCode = [...]attrs{1: attrBold, 2: attrFaint, 3: attrItalic, 4: attrUnderline, 5: attrBlink, 7: attrInverse, 8: attrInvisible, 9: attrStrike}

// attrCodes are the SGR codes that turn each flag on, in flag order.
var attrCodes = [...]int{1, 2, 3, 4, 5, 7, 8, 9, 53}

// sgr applies Select Graphic Rendition (CSI … m) to the pen, as xterm does
// (https://invisible-island.net/xterm/ctlseqs/ctlseqs.html, "Character
// Attributes"): both the ';' form of extended colours (38;5;n, 38;2;r;g;b)
// and the ':' form of ITU T.416 (38:5:n, 38:2::r:g:b, 38:2:r:g:b).
func (s *Screen) sgr(p ansi.Params) {
	if len(p) == 0 {
		s.pen = cell{}
		return
	}
	for i := 0; i < len(p); i++ {
		// The sub-parameters of p[i] (the ':' form) are p[i+1:end].
		end := i + 1
		for end <= len(p)-1 && p[end-1].HasMore() {
			end++
		}
		sub := p[i+1 : end]
		n := p[i].Param(0)
		switch {
		case n == 0:
			s.pen = cell{}
		case n >= 1 && n <= 9 && n != 6:
			on := n != 4 || len(sub) == 0 || sub[0].Param(1) != 0 // 4:0 is "no underline"
			bit := attrByCode[n]
			if on {
				s.pen.attr |= bit
			} else {
				s.pen.attr &^= bit
			}
		case n == 21: // doubly underlined
			s.pen.attr |= attrUnderline
		case n == 22:
			s.pen.attr &^= attrBold | attrFaint
		case n == 23:
			s.pen.attr &^= attrItalic
		case n == 24:
			s.pen.attr &^= attrUnderline
		case n == 25:
			s.pen.attr &^= attrBlink
		case n == 27:
			s.pen.attr &^= attrInverse
		case n == 28:
			s.pen.attr &^= attrInvisible
		case n == 29:
			s.pen.attr &^= attrStrike
		case n == 53:
			s.pen.attr |= attrOverline
		case n == 55:
			s.pen.attr &^= attrOverline
		case n >= 30 && n <= 37:
			s.pen.fg = colorIndexed | color(n-30)
		case n >= 90 && n <= 97:
			s.pen.fg = colorIndexed | color(n-90+8)
		case n == 39:
			s.pen.fg = 0
		case n >= 40 && n <= 47:
			s.pen.bg = colorIndexed | color(n-40)
		case n >= 100 && n <= 107:
			s.pen.bg = colorIndexed | color(n-100+8)
		case n == 49:
			s.pen.bg = 0
		case n == 38, n == 48, n == 58:
			var c color
			var ok bool
			if len(sub) > 0 {
				c, ok = extColor(sub, true)
			} else {
				var used int
				c, ok, used = extColorSemi(p[i+1:])
				end = i + 1 + used
			}
			if ok && n == 38 {
				s.pen.fg = c
			} else if ok && n == 48 {
				s.pen.bg = c
			} // 58, the underline colour, is not kept
		}
		i = end - 1
	}
}

// extColor reads the ':' form of an extended colour: 5:n, 2:r:g:b or
// 2:cs:r:g:b.
func extColor(sub ansi.Params, colon bool) (color, bool) {
	switch sub[0].Param(0) {
	case 5:
		if len(sub) >= 2 {
			return colorIndexed | color(min(max(sub[1].Param(0), 0), 255)), true
		}
	case 2:
		rgb := sub[1:]
		if colon && len(rgb) >= 4 {
			rgb = rgb[1:] // the colour space id
		}
		if len(rgb) >= 3 {
			ch := func(k int) color { return color(min(max(rgb[k].Param(0), 0), 255)) }
			return colorRGB | ch(0)<<16 | ch(1)<<8 | ch(2), true
		}
	}
	return 0, false
}

// extColorSemi reads the ';' form (38;5;n, 38;2;r;g;b) from the parameters
// after 38/48/58 and returns how many it used.
func extColorSemi(rest ansi.Params) (color, bool, int) {
	if len(rest) == 0 {
		return 0, false, 0
	}
	switch rest[0].Param(0) {
	case 5:
		if len(rest) >= 2 {
			c, ok := extColor(rest[:2], false)
			return c, ok, 2
		}
	case 2:
		if len(rest) >= 4 {
			c, ok := extColor(rest[:4], false)
			return c, ok, 4
		}
	}
	return 0, false, len(rest)
}

// fillBlank gives the blank cells [from, to) of rw the pen's background,
// as xterm and tmux erase ("background colour erase").
func (s *Screen) fillBlank(rw *row, from, to int) {
	if s.pen.bg == 0 {
		return
	}
	for i := from; i < to; i++ {
		rw.cells[i] = cell{bg: s.pen.bg}
	}
	rw.end = max(rw.end, to)
}

// blankRow erases a whole row as the terminal does: blank cells with the
// pen's background.
func (s *Screen) blankRow(r *row) {
	r.clear()
	s.fillBlank(r, 0, len(r.cells))
}

// styled is the cell the pen prints for r.
func (s *Screen) styled(r rune, kind uint8) cell {
	return cell{r: r, fg: s.pen.fg, bg: s.pen.bg, attr: s.pen.attr, kind: kind}
}

// setPrivate records a DEC private mode that changes what the terminal
// sends (see Screen.private); only modes that are on are kept.
func (s *Screen) setPrivate(m int, on bool) {
	if on {
		if s.private == nil {
			s.private = map[int]bool{}
		}
		s.private[m] = true
	} else {
		delete(s.private, m)
	}
}
