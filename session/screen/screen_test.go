package screen

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSequences(t *testing.T) {
	tests := []struct {
		name       string
		cols, rows int
		in         []string // written one by one: split sequences cross calls
		want       string   // Text()
		scrolled   []string
		x, y       int // cursor; -1: not checked
	}{
		{name: "plain", cols: 20, rows: 3, in: []string{"hello\r\nworld"}, want: "hello\nworld", x: 5, y: 1},
		{name: "claude spacing", cols: 40, rows: 2, in: []string{"  질문:\x1b[9G로그인\x1b[16G방식을"}, want: "  질문: 로그인 방식을", x: 21, y: 0},
		{name: "hangul is two columns", cols: 10, rows: 2, in: []string{"한글ab\x1b[1;5H|"}, want: "한글|b", x: 5, y: 0},
		{name: "overwrite half of wide", cols: 10, rows: 1, in: []string{"한글\x1b[1;2Hx"}, want: " x글", x: 2, y: 0},
		{name: "wide at last column wraps", cols: 5, rows: 2, in: []string{"abcd한"}, want: "abcd\n한", x: 2, y: 1},
		{name: "combining mark", cols: 10, rows: 1, in: []string{"e\u0301x"}, want: "e\u0301x", x: 2, y: 0},
		{name: "split utf8 and csi", cols: 20, rows: 2, in: []string{"\xed\x95", "\x9c\x1b[", "3", "Cx"}, want: "한   x", x: 6, y: 0},
		{name: "invalid utf8", cols: 10, rows: 1, in: []string{"a\xffb"}, want: "a\uFFFDb", x: 3, y: 0},
		{name: "autowrap pending", cols: 5, rows: 3, in: []string{"abcde"}, want: "abcde", x: 4, y: 0},
		{name: "autowrap then text", cols: 5, rows: 3, in: []string{"abcdef"}, want: "abcde\nf", x: 1, y: 1},
		{name: "pending wrap cancelled by CR", cols: 5, rows: 3, in: []string{"abcde\rX"}, want: "Xbcde", x: 1, y: 0},
		{name: "nowrap", cols: 5, rows: 2, in: []string{"\x1b[?7labcdefg"}, want: "abcdg", x: 4, y: 0},
		{name: "backspace and tab", cols: 20, rows: 1, in: []string{"ab\bc\tX"}, want: "ac      X", x: 9, y: 0},
		{name: "cursor moves", cols: 10, rows: 4, in: []string{"\x1b[3;4HA\x1b[2AB\x1b[3DC\x1b[BD\x1b[5GE"}, want: "  C B\n   DE\n   A", x: 5, y: 1},
		{name: "vpa cha", cols: 10, rows: 3, in: []string{"\x1b[3dX\x1b[7GY"}, want: "\n\nX     Y", x: 7, y: 2},
		{name: "erase line", cols: 10, rows: 2, in: []string{"abcdefgh\x1b[4G\x1b[K"}, want: "abc", x: 3, y: 0},
		{name: "erase line start", cols: 10, rows: 2, in: []string{"abcdefgh\x1b[4G\x1b[1K"}, want: "    efgh", x: 3, y: 0},
		{name: "erase display", cols: 10, rows: 3, in: []string{"aaa\r\nbbb\r\nccc\x1b[2;2H\x1b[J"}, want: "aaa\nb", x: 1, y: 1},
		{name: "erase display all", cols: 10, rows: 3, in: []string{"aaa\r\nbbb\x1b[2J"}, want: "", x: 3, y: 1},
		{name: "ich dch ech", cols: 10, rows: 1, in: []string{"abcdef\x1b[1;2H\x1b[2@\x1b[1;6H\x1b[P\x1b[1;1H\x1b[1X"}, want: "   bcef", x: 0, y: 0},
		{name: "dch of wide", cols: 10, rows: 1, in: []string{"a한b\x1b[1;2H\x1b[P"}, want: "a b", x: 1, y: 0},
		{name: "scroll to scrollback", cols: 10, rows: 2, in: []string{"one\r\ntwo\r\nthree\r\nfour"}, want: "three\nfour", scrolled: []string{"one", "two"}, x: 4, y: 1},
		{name: "scroll region no scrollback", cols: 10, rows: 4, in: []string{"top\x1b[2;3r\x1b[2;1Ha\r\nb\r\nc\r\nd\x1b[4;1Hbottom"}, want: "top\nc\nd\nbottom", x: 6, y: 3},
		{name: "reverse index at top", cols: 10, rows: 3, in: []string{"a\r\nb\x1b[H\x1bMz"}, want: "z\na\nb", x: 1, y: 0},
		{name: "su sd", cols: 10, rows: 3, in: []string{"a\r\nb\r\nc\x1b[S"}, want: "b\nc", scrolled: []string{"a"}, x: 1, y: 2},
		{name: "sd", cols: 10, rows: 3, in: []string{"a\r\nb\r\nc\x1b[2T"}, want: "\n\na", x: 1, y: 2},
		{name: "insert delete lines", cols: 10, rows: 4, in: []string{"1\r\n2\r\n3\r\n4\x1b[2;1H\x1b[L\x1b[4;1H\x1b[M"}, want: "1\n\n2", x: 0, y: 3},
		{name: "save restore", cols: 10, rows: 3, in: []string{"ab\x1b7\x1b[3;5Hx\x1b8c", "\x1b[s\x1b[2;1Hy\x1b[uz"}, want: "abcz\ny\n    x", x: 4, y: 0},
		{name: "alt screen", cols: 10, rows: 2, in: []string{"main\x1b[?1049hALT\r\n1\r\n2\r\n3"}, want: "2\n3", x: 1, y: 1},
		{name: "alt screen exit", cols: 10, rows: 2, in: []string{"main\x1b[?1049hALT\r\n1\r\n2\x1b[?1049lX"}, want: "mainX", x: 5, y: 0},
		{name: "osc title with C1 byte inside", cols: 20, rows: 1, in: []string{"\x1b]0;\u2733 Claude\x07ok"}, want: "ok", x: 2, y: 0},
		{name: "osc st and hyperlink", cols: 20, rows: 1, in: []string{"\x1b]8;id=1;http://x\x1b\\link\x1b]8;;\x1b\\!"}, want: "link!", x: 5, y: 0},
		{name: "dcs ignored", cols: 20, rows: 1, in: []string{"a\x1bP1$r0m\x1b\\b"}, want: "ab", x: 2, y: 0},
		{name: "sgr ignored", cols: 20, rows: 1, in: []string{"\x1b[1;38;5;174mred\x1b[0m \x1b[38:2::1:2:3mx"}, want: "red x", x: 5, y: 0},
		{name: "dec graphics", cols: 20, rows: 1, in: []string{"\x1b(0lqqk\x1b(B ok"}, want: "┌──┐ ok", x: 7, y: 0},
		{name: "rep", cols: 20, rows: 1, in: []string{"-\x1b[4b"}, want: "-----", x: 5, y: 0},
		{name: "insert mode", cols: 10, rows: 1, in: []string{"abc\x1b[1G\x1b[4hX\x1b[4lY"}, want: "XYbc", x: 2, y: 0},
		{name: "origin mode", cols: 10, rows: 4, in: []string{"\x1b[2;3r\x1b[?6h\x1b[1;1HA\x1b[9;1HB"}, want: "\nA\nB", x: 1, y: 2},
		{name: "crlf at bottom in region", cols: 5, rows: 3, in: []string{"\x1b[1;2r\x1b[3;1Hz\n\n"}, want: "\n\nz", x: 1, y: 2},
		{name: "ris", cols: 10, rows: 2, in: []string{"abc\x1b[?2004h\x1bcd"}, want: "d", x: 1, y: 0},
		{name: "cursor clamps", cols: 5, rows: 2, in: []string{"\x1b[99;99Hx\x1b[99Dy"}, want: "\ny   x", x: 1, y: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.cols, tt.rows)
			for _, in := range tt.in {
				if n, err := s.Write([]byte(in)); n != len(in) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if diff := cmp.Diff(s.Text(), tt.want); diff != "" {
				t.Errorf("text (-got +want):\n%s", diff)
			}
			if diff := cmp.Diff(s.TakeScrolled(), tt.scrolled); diff != "" {
				t.Errorf("scrolled (-got +want):\n%s", diff)
			}
			if x, y := s.Cursor(); tt.x >= 0 && (x != tt.x || y != tt.y) {
				t.Errorf("cursor = %d,%d, want %d,%d", x, y, tt.x, tt.y)
			}
		})
	}
}

func TestModes(t *testing.T) {
	s := New(80, 24)
	if s.BracketedPaste() || s.AltScreen() || !s.CursorVisible() {
		t.Fatal("initial modes wrong")
	}
	s.Write([]byte("\x1b[?2004h\x1b[?25l\x1b[?1049h\x1b]2;제목\x1b\\"))
	if !s.BracketedPaste() || !s.AltScreen() || s.CursorVisible() || s.Title() != "제목" {
		t.Errorf("modes after set: paste %v alt %v cursor %v title %q", s.BracketedPaste(), s.AltScreen(), s.CursorVisible(), s.Title())
	}
	s.Write([]byte("\x1b[?2004;25l\x1b[?1049l"))
	if s.BracketedPaste() || s.AltScreen() {
		t.Errorf("modes after reset: paste %v alt %v", s.BracketedPaste(), s.AltScreen())
	}
}

func TestTakeScrolledFinalAndLimit(t *testing.T) {
	s := New(10, 2)
	s.SetScrolledLimit(3)
	for _, l := range []string{"a", "b", "c", "d", "e", "f"} {
		s.Write([]byte(l + "\r\n"))
	}
	// Rows a, b, c, d, e scrolled off, one per write from the second on.
	// When the last write started, four were waiting: the oldest went.
	if diff := cmp.Diff(s.TakeScrolled(), []string{"b", "c", "d", "e"}); diff != "" {
		t.Errorf("scrolled (-got +want):\n%s", diff)
	}
	if s.Dropped() != 1 {
		t.Errorf("dropped %d", s.Dropped())
	}
	if got := s.TakeScrolled(); got != nil {
		t.Errorf("second take %q", got)
	}
	// One write that scrolls more than the limit loses nothing.
	var many strings.Builder
	for i := range 10 {
		fmt.Fprintf(&many, "%d\r\n", i)
	}
	s.Write([]byte(many.String()))
	got := s.TakeScrolled()
	if len(got) != 10 || got[0] != "f" || got[9] != "8" {
		t.Errorf("one big write scrolled %q", got)
	}
}

// TestResize: a narrower screen wraps the lines anew (reflow), the rows
// that no longer fit scroll off, and the cursor stays on its character; a
// wider one joins wrapped rows again. The expected text of the shrink is
// what tmux 3.3a shows for the same bytes and resize (checked with
// tmuxRender); on the grow tmux also pulls "3" and the first half of the
// Korean line back from its history, while rows scrolled off here are
// final, so the joined line stands alone at the top.
func TestResize(t *testing.T) {
	s := New(10, 4)
	s.Write([]byte("1\r\n2\r\n3\r\n한글한글한"))
	s.Resize(5, 2)
	if diff := cmp.Diff(s.TakeScrolled(), []string{"1", "2", "3", "한글"}); diff != "" {
		t.Errorf("scrolled by shrink (-got +want):\n%s", diff)
	}
	// The Korean line, wrapped anew at 5 columns: a wide rune does not
	// fit in the fifth column of each row.
	if diff := cmp.Diff(s.Lines(), []string{"한글", "한"}); diff != "" {
		t.Errorf("lines (-got +want):\n%s", diff)
	}
	if x, y := s.Cursor(); x != 2 || y != 1 {
		t.Errorf("cursor %d,%d, want 2,1 (the end of the line)", x, y)
	}
	s.Resize(12, 3)
	if diff := cmp.Diff(s.Lines(), []string{"한글한", "", ""}); diff != "" {
		t.Errorf("lines after grow (-got +want):\n%s", diff)
	}
	s.Write([]byte("\r\nabcdefghijkl"))
	if diff := cmp.Diff(s.Lines(), []string{"한글한", "abcdefghijkl", ""}); diff != "" {
		t.Errorf("lines after grow (-got +want):\n%s", diff)
	}
	// Tab stops extend to the new width.
	s.Write([]byte("\r\x1b[K\t\tx"))
	// 12 columns: the only stop is at 8, the second tab goes to the last column.
	if got, want := s.Lines()[1], strings.Repeat(" ", 11)+"x"; got != want {
		t.Errorf("tabbed line %q, want %q", got, want)
	}
}

// TestReflow follows tmux 3.3a's reflow (the expected text is what tmux
// shows for the same bytes and resize, checked with tmuxRender): the
// cursor stays on its character, a blank row after a wrapped one (its
// continuation erased) stays a row, the alternate screen is not reflowed.
func TestReflow(t *testing.T) {
	tests := []struct {
		name           string
		in, then       string
		cols, rows     int
		scrolled, want []string
		x, y           int
	}{
		{name: "cursor in the middle", in: "0123456789abcdefghij\x1b[1;4H", then: "Q", cols: 6, rows: 5,
			scrolled: []string{"012345", "6789ab"}, want: []string{"Qdefgh", "ij", "", "", ""}, x: 1, y: 0},
		{name: "blank after a wrapped row", in: "0123456789abcde\r\n\r\nxy\x1b[2;1H\x1b[2K\x1b[4;1H", then: "Q", cols: 6, rows: 6,
			scrolled: []string{"012345"}, want: []string{"6789", "", "", "Qy", "", ""}, x: 1, y: 3},
		{name: "alternate screen", in: "\x1b[?1049h0123456789abc", then: "Q", cols: 6, rows: 5,
			want: []string{"012345", "abcQ", "", "", ""}, x: 4, y: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(10, tt.rows)
			s.Write([]byte(tt.in))
			s.Resize(tt.cols, tt.rows)
			s.Write([]byte(tt.then))
			if diff := cmp.Diff(s.TakeScrolled(), tt.scrolled); diff != "" {
				t.Errorf("scrolled (-got +want):\n%s", diff)
			}
			if diff := cmp.Diff(s.Lines(), tt.want); diff != "" {
				t.Errorf("lines (-got +want):\n%s", diff)
			}
			if x, y := s.Cursor(); x != tt.x || y != tt.y {
				t.Errorf("cursor %d,%d, want %d,%d", x, y, tt.x, tt.y)
			}
		})
	}
}

func TestLogicalLines(t *testing.T) {
	s := New(5, 4)
	s.Write([]byte("abc de fgh\r\nxy"))
	if diff := cmp.Diff(s.Lines(), []string{"abc d", "e fgh", "xy", ""}); diff != "" {
		t.Errorf("lines (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(s.LogicalLines(), []string{"abc de fgh", "xy", ""}); diff != "" {
		t.Errorf("logical (-got +want):\n%s", diff)
	}
}

// FuzzWrite feeds garbage: the screen must not panic, must keep the cursor
// on the screen, and must render the same whether the bytes come in one
// write or one byte at a time (which also checks csiFast against the
// parser, since a sequence cut by the end of a write goes to the parser).
func FuzzWrite(f *testing.F) {
	f.Add([]byte("질문:\x1b[9G로그인\x1b[16G방식을"), 10, 3)
	f.Add([]byte("\x1b[2;3r\x1b[?6h\x1b[1;1HA\x1b[9;1HB\x1b[?1049h\x1b[5@\x1b[3P"), 5, 2)
	f.Add([]byte("\x1b]0;\xe2\x9c\xb3\x07\x1bP\x9c\xed\x95\x1b[99999999999b"), 1, 1)
	f.Add([]byte("abcdefgh 가나\x1b[1;1H\x1b[P\x1b[@\x1b[?1049h0123456789가\x1b[?1049l\x1bM"), 10, 3)
	f.Add([]byte("\x1b[;5H\x1b[1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17m\x1b[4:3m\x1b[ q\x1b[>1u"), 20, 5)
	f.Fuzz(func(t *testing.T, data []byte, cols, rows int) {
		cols, rows = cols%300, rows%100
		render := func(chunk int) (string, []string) {
			s := New(cols, rows)
			var scrolled []string
			write := func(p []byte) {
				for len(p) > 0 {
					n := min(len(p), chunk)
					s.Write(p[:n])
					p = p[n:]
				}
				scrolled = append(scrolled, s.TakeScrolled()...)
			}
			half := len(data) / 2
			write(data[:half])
			if len(data)%3 == 0 {
				s.Resize(rows, cols)
			}
			write(data[half:])
			c, r := s.Size()
			ls := s.Lines()
			if len(ls) != r {
				t.Fatalf("%d lines for %d rows", len(ls), r)
			}
			x, y := s.Cursor()
			if x < 0 || x >= c || y < 0 || y >= r {
				t.Fatalf("cursor %d,%d outside %dx%d", x, y, c, r)
			}
			s.LogicalLines()
			// A skip mark only ever sits in a row's last column; no
			// cell is written past a row's used columns.
			skipMarks(t, s.main)
			if s.alt != nil {
				skipMarks(t, s.alt)
			}
			return fmt.Sprintf("%q rows %+v cursor %d,%d paste %v alt %v", ls, s.Rows(), x, y, s.BracketedPaste(), s.AltScreen()), scrolled
		}
		whole, ws := render(len(data) + 1)
		bytewise, bs := render(1)
		if whole != bytewise {
			t.Errorf("whole and bytewise writes differ:\n%s\n%s", whole, bytewise)
		}
		if diff := cmp.Diff(ws, bs); diff != "" {
			t.Errorf("scrolled differ (-whole +bytewise):\n%s", diff)
		}
	})
}

func TestInsertBeforeWide(t *testing.T) {
	s := New(10, 1)
	s.Write([]byte("질문:\r\x1b[2@"))
	if got := s.Lines()[0]; got != "  질문:" {
		t.Errorf("ICH before a wide rune: %q", got)
	}
	s.Write([]byte("\x1b[1;4H\x1b[1@")) // inside 질: the rune is split, so blanked
	if got := s.Lines()[0]; got != "     문:" {
		t.Errorf("ICH inside a wide rune: %q", got)
	}
}

// Pending-wrap rules as xterm has them (see the wraptest results): TAB
// leaves a pending wrap pending, EL cancels it, and a wide rune that does
// not fit wraps without erasing the last column.
func TestPendingWrapRules(t *testing.T) {
	s := New(5, 3)
	s.Write([]byte("abc한\t文"))
	if diff := cmp.Diff(s.Lines(), []string{"abc한", "文", ""}); diff != "" {
		t.Errorf("tab with pending wrap (-got +want):\n%s", diff)
	}
	s = New(5, 3)
	s.Write([]byte("abcde\x1b[KX"))
	if diff := cmp.Diff(s.Lines(), []string{"abcdX", "", ""}); diff != "" {
		t.Errorf("EL cancels the pending wrap (-got +want):\n%s", diff)
	}
	s = New(5, 3)
	s.Write([]byte("abcde\x1b[1;5H한"))
	if diff := cmp.Diff(s.Lines(), []string{"abcde", "한", ""}); diff != "" {
		t.Errorf("wide rune at the last column (-got +want):\n%s", diff)
	}
}

func TestSizeBounds(t *testing.T) {
	s := New(0, -5)
	if c, r := s.Size(); c != 1 || r != 1 {
		t.Errorf("New(0,-5) size %dx%d", c, r)
	}
	s.Resize(1<<20, 1<<20)
	if c, r := s.Size(); c != MaxCols || r != MaxRows {
		t.Errorf("huge resize gave %dx%d", c, r)
	}
}

func TestScrolledRowsKeepWraps(t *testing.T) {
	s := New(6, 2)
	// "질문: 로그인" is 12 columns: the terminal wraps it after "질문: "
	// (6 columns, ending in a blank that belongs to the line).
	s.Write([]byte("질문: 로그인\r\nnext\r\nlast"))
	rows := s.TakeScrolledRows()
	want := []Row{{Text: "질문: ", Wrapped: true}, {Text: "로그인"}}
	if diff := cmp.Diff(rows, want); diff != "" {
		t.Errorf("scrolled rows (-got +want):\n%s", diff)
	}
	if got := rows[0].Text + rows[1].Text; got != "질문: 로그인" {
		t.Errorf("joined %q", got)
	}
	s = New(6, 3)
	s.Write([]byte("질문: 로그인\r\nx"))
	if diff := cmp.Diff(s.TakeScrolled(), []string(nil)); diff != "" {
		t.Errorf("nothing scrolled yet (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(s.Lines(), []string{"질문:", "로그인", "x"}); diff != "" {
		t.Errorf("lines (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(s.LogicalLines(), []string{"질문: 로그인", "x"}); diff != "" {
		t.Errorf("logical lines (-got +want):\n%s", diff)
	}
	s.Write([]byte("\r\n\r\n"))
	if diff := cmp.Diff(s.TakeScrolled(), []string{"질문:", "로그인"}); diff != "" {
		t.Errorf("TakeScrolled trims wrapped rows too (-got +want):\n%s", diff)
	}
}

// skipMarks lists the cells marked as skipped by a wide rune's wrap, as
// "row,col", and fails when one is anywhere but a row's last column.
func skipMarks(t *testing.T, b *buffer) []string {
	t.Helper()
	var out []string
	for y, r := range b.rows {
		if r.used < 0 || r.used > len(r.cells) {
			t.Errorf("row %d: used %d of %d cells", y, r.used, len(r.cells))
		}
		for x, c := range r.cells {
			// What a reflow moves: nothing is written past the used
			// columns (a blank skipped column may be).
			if x >= r.used && c.r != 0 {
				t.Errorf("row %d column %d: %q written past the used columns (%d)", y, x, c.r, r.used)
			}
			if c.kind != kindSkip {
				continue
			}
			if x != len(r.cells)-1 {
				t.Errorf("skip mark at row %d column %d, not the last column", y, x)
			}
			out = append(out, fmt.Sprintf("%d,%d", y, x))
		}
	}
	return out
}

// TestWideWrapSkip: a wide rune that does not fit in the last column wraps
// whole and leaves that column blank. A wrapped row's Text (what a joiner
// reads) leaves the skipped column out, while a space the program printed
// in the last column stays; Lines (what a person sees) shows both as
// blanks.
func TestWideWrapSkip(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		lines   []string // Lines
		rows    []Row    // Rows
		logical string   // LogicalLines()[0]
	}{
		{
			name:    "space printed in the last column",
			in:      "abcdefghi 가나",
			lines:   []string{"abcdefghi", "가나", ""},
			rows:    []Row{{Text: "abcdefghi ", Wrapped: true}, {Text: "가나"}, {}},
			logical: "abcdefghi 가나",
		},
		{
			name:    "wide rune pushed over a blank last column",
			in:      "abcdefgh 가나",
			lines:   []string{"abcdefgh", "가나", ""},
			rows:    []Row{{Text: "abcdefgh ", Wrapped: true}, {Text: "가나"}, {}},
			logical: "abcdefgh 가나",
		},
		{
			name:    "no space at all",
			in:      "abcdefghi가나",
			lines:   []string{"abcdefghi", "가나", ""},
			rows:    []Row{{Text: "abcdefghi", Wrapped: true}, {Text: "가나"}, {}},
			logical: "abcdefghi가나",
		},
		{
			name:    "two skips in a row of wide runes",
			in:      "a가나다라마바사아",
			lines:   []string{"a가나다라", "마바사아", ""},
			rows:    []Row{{Text: "a가나다라", Wrapped: true}, {Text: "마바사아"}, {}},
			logical: "a가나다라마바사아",
		},
		{
			name:    "skipped column keeps an earlier draw",
			in:      "0123456789\rabcdefghi가",
			lines:   []string{"abcdefghi9", "가", ""},
			rows:    []Row{{Text: "abcdefghi", Wrapped: true}, {Text: "가"}, {}},
			logical: "abcdefghi가",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(10, 3)
			s.Write([]byte(tt.in))
			if diff := cmp.Diff(s.Lines(), tt.lines); diff != "" {
				t.Errorf("lines (-got +want):\n%s", diff)
			}
			if diff := cmp.Diff(s.Rows(), tt.rows); diff != "" {
				t.Errorf("rows (-got +want):\n%s", diff)
			}
			if got := s.LogicalLines()[0]; got != tt.logical {
				t.Errorf("logical line %q, want %q", got, tt.logical)
			}
			// Scrolled off, the rows read the same: Text for a joiner,
			// TakeScrolled as Lines.
			s.Write([]byte("\r\n\r\n\r\n"))
			want := tt.rows[:len(tt.rows)-1]
			if diff := cmp.Diff(s.TakeScrolledRows(), want); diff != "" {
				t.Errorf("scrolled rows (-got +want):\n%s", diff)
			}
			s = New(10, 3)
			s.Write([]byte(tt.in + "\r\n\r\n\r\n"))
			if diff := cmp.Diff(s.TakeScrolled(), tt.lines[:len(tt.lines)-1]); diff != "" {
				t.Errorf("TakeScrolled (-got +want):\n%s", diff)
			}
		})
	}
}

// TestWideWrapSkipState: the skip mark lives in the cell, so it survives
// what moves rows (scrolling, IL/DL, the alternate screen) and goes away
// with what writes, erases or moves the cell (overwrite, EL/ECH, ICH, DCH,
// resize).
func TestWideWrapSkipState(t *testing.T) {
	const skipped = "abcdefgh 가나" // row 0 wrapped, its last column skipped
	joined := func(s *Screen) string { return s.LogicalLines()[0] }
	tests := []struct {
		name  string
		then  string // written after skipped
		cols  int    // resize to, after then (0: none)
		want  string // LogicalLines()[0]
		lines []string
		marks []string
	}{
		{name: "untouched", want: "abcdefgh 가나", lines: []string{"abcdefgh", "가나", "", ""}, marks: []string{"0,9"}},
		{name: "overwritten", then: "\x1b[1;10HZ", want: "abcdefgh Z가나", lines: []string{"abcdefgh Z", "가나", "", ""}},
		{name: "space written over it", then: "\x1b[1;10H ", want: "abcdefgh  가나", lines: []string{"abcdefgh", "가나", "", ""}},
		{name: "erased by ECH", then: "\x1b[1;10H\x1b[X", want: "abcdefgh", lines: []string{"abcdefgh", "가나", "", ""}},
		{name: "erased by EL", then: "\x1b[1;5H\x1b[K", want: "abcd", lines: []string{"abcd", "가나", "", ""}},
		{name: "ICH pushes it out", then: "\x1b[1;1H\x1b[@", want: " abcdefgh 가나", lines: []string{" abcdefgh", "가나", "", ""}},
		{name: "DCH moves it off the last column", then: "\x1b[1;1H\x1b[P", want: "bcdefgh   가나", lines: []string{"bcdefgh", "가나", "", ""}},
		{name: "scrolled down", then: "\x1b[1;1H\x1bM", want: "", lines: []string{"", "abcdefgh", "가나", ""}, marks: []string{"1,9"}},
		{name: "IL above", then: "\x1b[1;1H\x1b[2L", want: "", lines: []string{"", "", "abcdefgh", "가나"}, marks: []string{"2,9"}},
		{name: "DL above", then: "\x1b[4;1Hx\x1b[1;1H\x1b[L\x1b[M", want: "abcdefgh 가나", lines: []string{"abcdefgh", "가나", "", ""}, marks: []string{"0,9"}},
		{name: "alternate screen and back", then: "\x1b[?1049h0123456789\x1b[1;10H한\x1b[?1049l", want: "abcdefgh 가나", lines: []string{"abcdefgh", "가나", "", ""}, marks: []string{"0,9"}},
		// A resize wraps the line anew (as tmux shows it): wider, 나 does
		// not fit in the last column and skips it; narrower, the space
		// ends the first row.
		{name: "wider", cols: 12, want: "abcdefgh 가나", lines: []string{"abcdefgh 가", "나", "", ""}, marks: []string{"0,11"}},
		{name: "narrower", cols: 9, want: "abcdefgh 가나", lines: []string{"abcdefgh", "가나", "", ""}},
		{name: "RIS", then: "\x1bc", want: "", lines: []string{"", "", "", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(10, 4)
			s.Write([]byte(skipped + tt.then))
			if tt.cols > 0 {
				s.Resize(tt.cols, 4)
			}
			if got := joined(s); got != tt.want {
				t.Errorf("joined %q, want %q", got, tt.want)
			}
			if diff := cmp.Diff(s.Lines(), tt.lines); diff != "" {
				t.Errorf("lines (-got +want):\n%s", diff)
			}
			if diff := cmp.Diff(skipMarks(t, s.main), tt.marks); diff != "" {
				t.Errorf("skip marks (-got +want):\n%s", diff)
			}
		})
	}
	// The alternate screen has marks of its own, and keeps none of main's.
	s := New(10, 4)
	s.Write([]byte(skipped + "\x1b[?1049h\x1b[Habcdefghi가"))
	if diff := cmp.Diff(s.Rows()[:2], []Row{{Text: "abcdefghi", Wrapped: true, Clears: 1}, {Text: "가", Clears: 1}}); diff != "" {
		t.Errorf("alternate screen rows (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(skipMarks(t, s.alt), []string{"0,9"}); diff != "" {
		t.Errorf("alternate skip marks (-got +want):\n%s", diff)
	}
	// Scrolled off the top row by row, the mark goes with the row.
	s = New(10, 2)
	s.Write([]byte("x\r\n" + skipped + "\r\n"))
	if diff := cmp.Diff(s.TakeScrolledRows(), []Row{{Text: "x"}, {Text: "abcdefgh ", Wrapped: true}}); diff != "" {
		t.Errorf("scrolled rows (-got +want):\n%s", diff)
	}
}
