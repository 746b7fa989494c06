package screen

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// styledProgram is randomProgram with colours, attributes, the alternate
// screen, modes and titles mixed in.
func styledProgram(r *rand.Rand, cols, rows int) []byte {
	var b strings.Builder
	for range 8 {
		b.Write(randomProgram(r, cols, rows))
		switch r.IntN(12) {
		case 0:
			fmt.Fprintf(&b, "\x1b[%d;%dm", 30+r.IntN(8), 40+r.IntN(8))
		case 1:
			fmt.Fprintf(&b, "\x1b[38;5;%d;1;3m", r.IntN(256))
		case 2:
			fmt.Fprintf(&b, "\x1b[48:2::%d:%d:%dm\x1b[K", r.IntN(256), r.IntN(256), r.IntN(256))
		case 3:
			b.WriteString([]string{"\x1b[?1049h", "\x1b[?1049l", "\x1b[?47h", "\x1b[?47l"}[r.IntN(4)])
		case 4:
			b.WriteString([]string{"\x1b[?2004h", "\x1b[?25l", "\x1b[?1h", "\x1b[?1000h\x1b[?1006h", "\x1b=", "\x1b[5 q"}[r.IntN(6)])
		case 5:
			fmt.Fprintf(&b, "\x1b]0;title %d ✳\a", r.IntN(100))
		case 6:
			fmt.Fprintf(&b, "\x1b[0;7;4;9;%dm", 90+r.IntN(8))
		case 7:
			b.WriteString("\x1b[m")
		case 8:
			fmt.Fprintf(&b, "\x1b[%dm한글 \x1b[2J", 100+r.IntN(8))
		}
	}
	return []byte(b.String())
}

// TestSnapshotRoundTrip writes random programs to a screen, its Snapshot
// to a fresh one, and requires the same cells (characters, colours,
// attributes), cursor (with a pending wrap), modes, margins, pen and title;
// then the same further output must leave both equal.
func TestSnapshotRoundTrip(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 7))
		cols, rows := 20+r.IntN(30), 5+r.IntN(10)
		a := New(cols, rows)
		a.Write(styledProgram(r, cols, rows))
		b := New(cols, rows)
		b.Write(a.Snapshot(nil, 1<<20))
		if d := screenDiff(a, b); d != "" {
			t.Fatalf("seed %d (%dx%d): after the snapshot: %s", seed, cols, rows, d)
		}
		more := styledProgram(r, cols, rows)
		a.Write(more)
		b.Write(more)
		if d := screenDiff(a, b); d != "" {
			t.Fatalf("seed %d (%dx%d): after more output: %s", seed, cols, rows, d)
		}
	}
}

// TestSnapshotHistory: the rows that scrolled off come first, as many as
// the limit keeps and the byte budget allows, then the screen.
func TestSnapshotHistory(t *testing.T) {
	a := New(30, 5)
	a.SetScrolledLimit(50)
	for i := range 200 {
		fmt.Fprintf(a, "\x1b[3%dmline %d\x1b[m\r\n", i%8, i)
	}
	a.Write([]byte("prompt> "))
	for _, tc := range []struct{ budget, first int }{{1 << 20, 146}, {10 * len("line 199\r\n"), 186}} {
		b := New(30, 5)
		b.SetScrolledLimit(1000)
		b.Write(a.Snapshot(nil, tc.budget))
		got := append(b.TakeScrolled(), b.Lines()...)
		var want []string
		for i := tc.first; i < 200; i++ {
			want = append(want, fmt.Sprintf("line %d", i))
		}
		want = append(want, "prompt>")
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("budget %d: got\n%s\nwant\n%s", tc.budget, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if d := screenDiff(a, b); d != "" {
			t.Errorf("budget %d: %s", tc.budget, d)
		}
	}
}

func screenDiff(a, b *Screen) string {
	bufs := func(s *Screen) []*buffer {
		if s.altActive {
			return []*buffer{s.main, s.alt}
		}
		return []*buffer{s.main}
	}
	if a.altActive != b.altActive {
		return fmt.Sprintf("alternate screen %v, want %v", b.altActive, a.altActive)
	}
	ab, bb := bufs(a), bufs(b)
	for i := range ab {
		for y := range ab[i].rows {
			ra, rb := ab[i].rows[y], bb[i].rows[y]
			for x := range ra.cells {
				ca, cb := unskipped(ra.cells[x]), unskipped(rb.cells[x])
				if x == len(ra.cells)-1 && ca.r == 0 && cb.r == ' ' {
					cb.r = 0 // a pending wrap (of the cursor or a saved one) over a blank is made by printing a space there
				}
				if ca != cb || combAt(ra, x) != combAt(rb, x) {
					return fmt.Sprintf("buffer %d row %d col %d: %+v %q, want %+v %q\n got %q\nwant %q", i, y, x, cb, rb.comb[x], ca, ra.comb[x], rb.text(nil), ra.text(nil))
				}
			}
		}
	}
	type state struct {
		X, Y                                          int
		WrapNext, Hidden, Bracketed, Autowrap, Insert bool
		Origin, Keypad, Graphics                      bool
		Top, Bot, Style                               int
		Pen                                           cell
		Title, Private                                string
	}
	st := func(s *Screen) state {
		return state{s.x, s.y, s.wrapNext, s.cursorHidden, s.bracketed, s.autowrap, s.insert, s.origin, s.keypad, s.decGraphics,
			s.top, s.bot, s.cursorStyle, s.pen, s.title, fmt.Sprint(s.private)}
	}
	if sa, sb := st(a), st(b); sa != sb {
		return fmt.Sprintf("state\n %+v, want\n %+v", sb, sa)
	}
	ma, mb := a.main.saved, b.main.saved
	ma.origin, mb.origin = false, false // not made again
	for _, c := range []*savedCursor{&ma, &mb} {
		if !c.set {
			*c = savedCursor{set: true} // restoring none goes to the top-left corner
		}
	}
	if ma != mb {
		return fmt.Sprintf("saved cursor %+v, want %+v", b.main.saved, a.main.saved)
	}
	return ""
}

// combAt is the combining marks on the character at column x (a mark the
// model keeps on the second column of a wide rune belongs to it).
func combAt(r *row, x int) string {
	if r.cells[x].kind == kindCont {
		return ""
	}
	m := r.comb[x]
	if x+1 < len(r.cells) && r.cells[x+1].kind == kindCont {
		m += r.comb[x+1]
	}
	return m
}

// BenchmarkSnapshot reports the cost and size (bytes/op as "B-snapshot")
// of the snapshot a viewer joining gets: a 200x50 screen full of coloured
// text and 2000 rows of history.
func BenchmarkSnapshot(b *testing.B) {
	s := New(200, 50)
	s.SetScrolledLimit(2000)
	for i := range 2100 {
		fmt.Fprintf(s, "\x1b[3%dm#%06d\x1b[0m %s \x1b[1;4%dm%s\x1b[0m\r\n", i%8, i, strings.Repeat("로그인 방식을 ", 6), i%8, strings.Repeat("x", i%100))
	}
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = len(s.Snapshot(nil, 256<<10))
	}
	b.ReportMetric(float64(n), "B-snapshot")
}
