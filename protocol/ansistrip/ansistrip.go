// Package ansistrip removes terminal escape sequences and control characters
// from a byte stream, keeping the text, newlines and tabs.
//
// A Stripper is a small state machine (after the DEC/ECMA-48 parser
// states) that carries its state from one call to the next, so a sequence
// split across two reads of a PTY is still removed whole. It handles:
//
//   - CSI sequences with private markers and intermediate bytes
//     (ESC [ ? 25 h, ESC [ > 4 ; 2 m, ESC [ 1 $ p);
//   - OSC strings ended by BEL or ST (ESC \ or C1 ST), e.g. titles and
//     hyperlinks; DCS, APC, PM and SOS strings ended by ST only (a BEL in
//     them is data, as in xterm);
//   - two-byte and three-byte ESC sequences (ESC 7, ESC ( B, ESC # 8);
//   - C1 controls, both as UTF-8 code points U+0080–U+009F (how a UTF-8
//     terminal reads them) and as raw 8-bit bytes where those cannot be
//     part of a UTF-8 character;
//   - CAN and SUB, which abort a sequence, and ESC inside a string, which
//     ends it.
//
// Inside strings the stripper decodes UTF-8 too, so a title with Hangul (whose
// encodings contain the byte 0x9C) is not cut short at a false ST.
//
// Stripping deletes the cursor movements a full-screen program draws its
// spaces with (docs/protocol.md, Claude Code's terminal: "질문:\e[9G로그인" strips to
// "질문:로그인"). With
// CursorSpaces set, forward moves within a line (CUF "ESC [ n C", CHA
// "ESC [ n G", HPA "ESC [ n `") become spaces instead, using East-Asian
// widths to track the column. This is an approximation for plain-text
// agents; a screen model is exact.
package ansistrip

import (
	"io"
	"unicode/utf8"

	"github.com/mattn/go-runewidth"
)

// Parser states.
const (
	ground   uint8 = iota
	escape         // after ESC
	escInter       // ESC followed by intermediate bytes (ESC ( B)
	csi            // CSI parameters and intermediates, until the final byte
	str            // OSC, DCS, APC, PM or SOS string, until ST (or BEL for OSC)
	strEsc         // ESC inside a string: ST if the next byte is '\'
)

// maxCol stands for the right margin, which a cursor movement cannot pass:
// without a screen size, 512 columns. It bounds the spaces movements add to
// one line (a stream of "ESC [ 999 C" cannot grow without end).
const maxCol = 512

// Stripper removes escape sequences from a stream. The zero value is ready
// to use. It is not safe for concurrent use.
type Stripper struct {
	// CursorSpaces turns forward cursor movements within a line into
	// spaces (see the package documentation).
	CursorSpaces bool

	state uint8
	// pend holds the first bytes of a UTF-8 character or of a UTF-8 C1
	// control (0xC2) cut off at the end of the previous call.
	pend  [4]byte
	npend uint8
	need  uint8 // UTF-8 continuation bytes still expected inside a string
	strC2 bool  // the string's last byte was 0xC2: 0x9C next is ST
	osc   bool  // the string is an OSC, which BEL ends too

	// CSI: the first parameter and whether the sequence is a plain one
	// (no private marker, no intermediates, at most one parameter).
	param int
	plain bool

	col int // column of the cursor, tracked when CursorSpaces is set
}

// String strips a whole string at once.
func String(in string) string {
	var s Stripper
	return string(s.Append(nil, []byte(in)))
}

// Append strips p and appends the text to dst. A sequence or character cut
// off at the end of p is remembered and completed by the next call.
func (s *Stripper) Append(dst, p []byte) []byte {
	// Complete a character cut off by the previous call, byte by byte, so
	// that the result is the same as if the input had come in one piece.
	for s.npend > 0 {
		if len(p) == 0 {
			return dst
		}
		if p[0]&0xC0 != 0x80 {
			// Not a continuation: the pending lead byte was invalid. As in
			// one piece, it is dropped and the bytes after it are read as
			// stray bytes.
			var rest [3]byte
			n := copy(rest[:], s.pend[1:s.npend])
			s.npend = 0
			dst = s.process(dst, rest[:n])
			break
		}
		s.pend[s.npend] = p[0]
		s.npend++
		p = p[1:]
		if int(s.npend) == int(utf8Continuations(s.pend[0]))+1 {
			buf, n := s.pend, s.npend
			s.npend = 0
			dst = s.process(dst, buf[:n])
		}
	}
	return s.process(dst, p)
}

// process strips p, appending the text to dst.
func (s *Stripper) process(dst, p []byte) []byte {
	for len(p) > 0 {
		switch s.state {
		case ground:
			n, out := s.ground(dst, p)
			dst, p = out, p[n:]
		default:
			n := s.sequence(&dst, p)
			p = p[n:]
		}
	}
	return dst
}

// ground copies text from p to dst until an escape sequence starts or p
// ends, and returns how many bytes it consumed. A character cut off at the
// end of p is pended.
func (s *Stripper) ground(dst, p []byte) (int, []byte) {
	i := 0
	for i < len(p) && s.state == ground {
		c := p[i]
		switch {
		case c >= 0x20 && c < 0x7F:
			// Printable ASCII: copy the whole run.
			j := i + 1
			for j < len(p) && p[j] >= 0x20 && p[j] < 0x7F {
				j++
			}
			dst = append(dst, p[i:j]...)
			s.col += j - i
			i = j
		case c == 0x1B:
			s.state = escape
			i++
		case c == '\n' || c == '\r':
			dst = append(dst, c)
			s.col = 0
			i++
		case c == '\t':
			dst = append(dst, c)
			s.col = (s.col/8 + 1) * 8
			i++
		case c < 0x20 || c == 0x7F:
			i++ // other C0 controls: BEL, BS, SO, SI… have no text
		case c >= 0x80 && c < 0xC0:
			// Not inside a character: a raw 8-bit C1 control or a stray
			// continuation byte.
			s.c1(c)
			i++
		default:
			// A UTF-8 lead byte.
			if c == 0xC2 && i+1 < len(p) && p[i+1] >= 0x80 && p[i+1] < 0xA0 {
				s.c1(p[i+1]) // C1 as a UTF-8 code point
				i += 2
				continue
			}
			r, size := utf8.DecodeRune(p[i:])
			if r == utf8.RuneError && size <= 1 {
				if !utf8.FullRune(p[i:]) {
					// Cut off at the end of this call: pend it.
					s.npend = uint8(copy(s.pend[:], p[i:]))
					return len(p), dst
				}
				i++ // invalid UTF-8: dropped
				continue
			}
			dst = append(dst, p[i:i+size]...)
			if s.CursorSpaces {
				s.col += runewidth.RuneWidth(r)
			}
			i += size
		}
	}
	return i, dst
}

// c1 acts on a C1 control byte (0x80–0x9F) in the ground state.
func (s *Stripper) c1(c byte) {
	switch c {
	case 0x9B: // CSI
		s.startCSI()
	case 0x9D, 0x90, 0x9F, 0x9E, 0x98: // OSC, DCS, APC, PM, SOS
		s.state, s.need, s.strC2, s.osc = str, 0, false, c == 0x9D
	}
	// Every other C1 control (IND, NEL, ST…) has no text.
}

func (s *Stripper) startCSI() {
	s.state, s.param, s.plain = csi, -1, true
}

// sequence consumes bytes of an escape sequence from p and returns how many.
func (s *Stripper) sequence(dst *[]byte, p []byte) int {
	for i := 0; i < len(p); i++ {
		c := p[i]
		// CAN and SUB abort any sequence; ESC starts a new one (or, in a
		// string, may be the first half of ST).
		switch c {
		case 0x18, 0x1A:
			s.state = ground
			return i + 1
		case 0x1B:
			if s.state == str {
				s.state = strEsc
			} else {
				s.state = escape
			}
			continue
		}
		switch s.state {
		case escape:
			switch {
			case c == '[':
				s.startCSI()
			case c == ']' || c == 'P' || c == '_' || c == '^' || c == 'X':
				s.state, s.need, s.strC2, s.osc = str, 0, false, c == ']'
			case c >= 0x20 && c <= 0x2F:
				s.state = escInter
			case c >= 0x30 && c <= 0x7E:
				s.state = ground // ESC 7, ESC M, ESC \ …
				return i + 1
			case c < 0x20:
				s.control(dst, c)
			default:
				s.state = ground // not a sequence: let ground handle the byte
				return i
			}
		case escInter:
			switch {
			case c >= 0x20 && c <= 0x2F:
			case c >= 0x30 && c <= 0x7E:
				s.state = ground
				return i + 1
			case c < 0x20:
				s.control(dst, c)
			default:
				s.state = ground
				return i
			}
		case csi:
			switch {
			case c >= '0' && c <= '9':
				if s.param < 0 {
					s.param = 0
				}
				if s.param < 1<<20 {
					s.param = s.param*10 + int(c-'0')
				}
			case c == ';' || c == ':' || (c >= 0x3C && c <= 0x3F) || (c >= 0x20 && c <= 0x2F):
				s.plain = false // more parameters, private markers, intermediates
			case c >= 0x40 && c <= 0x7E:
				s.state = ground
				if s.CursorSpaces && s.plain {
					s.move(dst, c)
				}
				return i + 1
			case c < 0x20:
				s.control(dst, c)
			default: // DEL is ignored; a byte ≥ 0x80 ends a broken sequence
				if c >= 0x80 {
					s.state = ground
					return i
				}
			}
		case str:
			if s.need > 0 && c >= 0x80 && c < 0xC0 {
				if s.strC2 && c == 0x9C { // ST as the code point U+009C
					s.state = ground
					return i + 1
				}
				s.need-- // inside a UTF-8 character of the string
				s.strC2 = false
				continue
			}
			s.strC2 = false
			switch {
			case c == 0x07 && s.osc: // BEL ends an OSC
				s.state = ground
				return i + 1
			case c == 0x9C: // raw 8-bit ST
				s.state = ground
				return i + 1
			case c >= 0xC0:
				s.need = utf8Continuations(c)
				s.strC2 = c == 0xC2
			default:
				s.need = 0
			}
		case strEsc:
			if c == '\\' {
				s.state = ground
				return i + 1
			}
			// ESC inside a string ends it and starts a new sequence.
			s.state = escape
			i--
		}
	}
	return len(p)
}

// control executes a C0 control met inside a sequence, as a terminal does:
// only the ones with a place in text are kept.
func (s *Stripper) control(dst *[]byte, c byte) {
	switch c {
	case '\n', '\r':
		*dst = append(*dst, c)
		s.col = 0
	case '\t':
		*dst = append(*dst, c)
		s.col = (s.col/8 + 1) * 8
	}
}

// move turns a forward cursor movement into spaces.
func (s *Stripper) move(dst *[]byte, final byte) {
	n := s.param
	var spaces int
	switch final {
	case 'C': // CUF: n columns right
		if n <= 0 {
			n = 1
		}
		spaces = n
	case 'G', '`': // CHA, HPA: to column n (1-based)
		if n <= 0 {
			n = 1
		}
		spaces = n - 1 - s.col
	default:
		return
	}
	spaces = min(spaces, maxCol-s.col)
	if spaces <= 0 {
		return
	}
	for range spaces {
		*dst = append(*dst, ' ')
	}
	s.col += spaces
}

// utf8Continuations is how many continuation bytes follow lead byte c.
func utf8Continuations(c byte) uint8 {
	switch {
	case c >= 0xF0:
		return 3
	case c >= 0xE0:
		return 2
	default:
		return 1
	}
}

// Writer strips what is written to it and writes the text to another
// writer.
type Writer struct {
	w   io.Writer
	s   Stripper
	buf []byte
}

// NewWriter returns a Writer that strips into w. With cursorSpaces, forward
// cursor movements become spaces (see Stripper.CursorSpaces).
func NewWriter(w io.Writer, cursorSpaces bool) *Writer {
	return &Writer{w: w, s: Stripper{CursorSpaces: cursorSpaces}}
}

// Write strips p and writes the result. It returns len(p) unless the
// underlying writer fails.
func (w *Writer) Write(p []byte) (int, error) {
	w.buf = w.s.Append(w.buf[:0], p)
	if len(w.buf) > 0 {
		if _, err := w.w.Write(w.buf); err != nil {
			return 0, err
		}
	}
	if cap(w.buf) > 64<<10 {
		w.buf = nil // do not keep a huge buffer after one large write
	}
	return len(p), nil
}
