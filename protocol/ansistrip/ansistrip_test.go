package ansistrip

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// fidelityCase is one input of the fidelity table: what a terminal shows as
// text for it.
type fidelityCase struct {
	name, in, want string
}

// fidelityCases are the sequences a PTY delivers in practice, one kind each.
var fidelityCases = []fidelityCase{
	{"SGR colour", "\x1b[1;31mred\x1b[0m text", "red text"},
	{"SGR 256/true colour", "\x1b[38;5;196ma\x1b[38;2;255;0;0mb\x1b[m", "ab"},
	{"CSI private (DECTCEM)", "\x1b[?25lx\x1b[?25h", "x"},
	{"CSI private > (XTMODKEYS)", "\x1b[>4;2mx", "x"},
	{"CSI intermediate (DECRQM)", "\x1b[?2026$px", "x"},
	{"CSI intermediate (DECSCUSR)", "\x1b[2 qx", "x"},
	{"CSI erase + cursor", "a\x1b[2K\x1b[1Ab\x1b[10;20Hc", "abc"},
	{"OSC title, BEL", "\x1b]0;my title\x07x", "x"},
	{"OSC title, ST", "\x1b]2;my title\x1b\\x", "x"},
	{"OSC hyperlink", "\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\", "link"},
	{"OSC with Hangul title", "\x1b]0;한글 제목\x07x", "x"},
	{"DCS (DECRQSS)", "\x1bP$qm\x1b\\x", "x"},
	{"DCS with BEL inside data", "\x1bPq#0;2;0;0;0\x07x\x1b\\y", "y"},
	{"APC (kitty graphics)", "\x1b_Gf=100;AAAA\x1b\\x", "x"},
	{"PM and SOS", "\x1b^private\x1b\\\x1bXstring\x1b\\x", "x"},
	{"ESC two-byte (DECSC/DECRC)", "\x1b7a\x1b8b", "ab"},
	{"ESC charset (G0)", "\x1b(Bx\x1b)0y", "xy"},
	{"ESC # (DECALN)", "\x1b#8x", "x"},
	{"8-bit C1 CSI", "\x9b31mx", "x"},
	{"8-bit C1 OSC + ST", "\x9d0;t\x9cx", "x"},
	{"UTF-8 C1 CSI (U+009B)", "\xc2\x9b31mx", "x"},
	{"UTF-8 C1 OSC + ST", "\xc2\x9d0;t\xc2\x9cx", "x"},
	{"CAN aborts", "\x1b[31\x18x", "x"},
	{"C0 controls", "a\x07b\x08c\x00d", "abcd"},
	{"newlines and tabs kept", "a\tb\r\nc\n", "a\tb\r\nc\n"},
	{"Hangul text kept", "한글 \x1b[1m텍스트\x1b[0m", "한글 텍스트"},
	{"Hangul with 0x9C byte kept", "한국어 말", "한국어 말"}, // 한 is ED 95 9C
	{"Claude bullet kept", "\x1b[38;2;255;255;255m●\x1b[39m [ASK_USER]", "● [ASK_USER]"},
}

func TestStripFidelity(t *testing.T) {
	for _, tc := range fidelityCases {
		if got := String(tc.in); got != tc.want {
			t.Errorf("%s: String(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

// TestStripSplit feeds every fidelity case split at every byte offset (and
// one byte at a time): the result must not depend on the split.
func TestStripSplit(t *testing.T) {
	for _, tc := range fidelityCases {
		in := []byte(tc.in)
		for cut := 0; cut <= len(in); cut++ {
			var s Stripper
			got := s.Append(nil, in[:cut])
			got = s.Append(got, in[cut:])
			if string(got) != tc.want {
				t.Errorf("%s split at %d: %q, want %q", tc.name, cut, got, tc.want)
			}
		}
		var s Stripper
		var got []byte
		for i := range in {
			got = s.Append(got, in[i:i+1])
		}
		if string(got) != tc.want {
			t.Errorf("%s byte by byte: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestCursorSpaces(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// Claude Code draws the spaces between words with CHA (docs/protocol.md,
		// Claude Code's terminal).
		{"  질문:\x1b[9G로그인\x1b[16G방식을", "  질문: 로그인 방식을"},
		{"a\x1b[2Cb", "a  b"},
		{"a\x1b[Cb", "a b"},
		{"abc\x1b[2Gd", "abcd"},         // a backward move adds nothing
		{"a\x1b[?2Cb", "ab"},            // not a plain CUF
		{"ab\r\n\x1b[3Gc", "ab\r\n  c"}, // the column restarts after a newline
		{"\x1b[99999Cx", strings.Repeat(" ", maxCol) + "x"},
		{"ab\x1b[999C\x1b[999Cx", "ab" + strings.Repeat(" ", maxCol-2) + "x"}, // the right margin
		{"\x1b[999G\r\x1b[3Gx", strings.Repeat(" ", maxCol) + "\r  x"},
	} {
		s := Stripper{CursorSpaces: true}
		if got := string(s.Append(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("CursorSpaces %q = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestWriter(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, false)
	for _, chunk := range []string{"\x1b[3", "1mre", "d\x1b]0;ti", "tle\x07 \xed\x95", "\x9c"} {
		n, err := w.Write([]byte(chunk))
		if err != nil || n != len(chunk) {
			t.Fatalf("Write(%q) = %d, %v", chunk, n, err)
		}
	}
	if got, want := out.String(), "red 한"; got != want {
		t.Errorf("written %q, want %q", got, want)
	}
}

// FuzzStrip checks that stripping never panics, never lets ESC or a C0/C1
// control (but newline, CR and tab) through, produces valid UTF-8 from
// valid UTF-8, and does not depend on where the input is split.
func FuzzStrip(f *testing.F) {
	for _, tc := range fidelityCases {
		f.Add([]byte(tc.in), uint16(len(tc.in)/2))
	}
	if b, err := os.ReadFile("../testdata/claude_screen.txt"); err == nil {
		f.Add(b, uint16(17))
	}
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		whole := String(string(in))
		c := int(cut) % (len(in) + 1)
		var s Stripper
		split := string(s.Append(s.Append(nil, in[:c]), in[c:]))
		if split != whole {
			t.Fatalf("split at %d: %q, whole: %q", c, split, whole)
		}
		for _, r := range whole {
			if r == 0x1b || (r < 0x20 && r != '\n' && r != '\r' && r != '\t') || (r >= 0x80 && r < 0xA0) || r == 0x7f {
				t.Fatalf("control %U left in %q", r, whole)
			}
		}
		if utf8.Valid(in) && !utf8.ValidString(whole) {
			t.Fatalf("invalid UTF-8 out of valid input: %q", whole)
		}
		if len(whole) > len(in) {
			t.Fatalf("output longer than input: %d > %d", len(whole), len(in))
		}
	})
}

func ExampleString() {
	fmt.Printf("%q\n", String("\x1b[1m● [ASK_USER]\x1b[0m\x1b]0;claude\x07"))
	// Output: "● [ASK_USER]"
}
