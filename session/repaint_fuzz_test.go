package session

import (
	"fmt"
	"strings"
	"testing"
	"unicode"

	"github.com/mattn/go-runewidth"
)

// FuzzRepaint checks the repaint rules on arbitrary text: a program that
// prints a history of distinct lines the Ink way (every frame wipes the
// screen and the scrollback and paints the whole history, one line more
// each frame), in writes of any size, on a screen of any size, has every
// line read exactly once, in order.
func FuzzRepaint(f *testing.F) {
	f.Add([]byte("안녕하세요 세계\nhello world\n[ASK_USER]\n질문: 계속?\n[/ASK_USER]\n끝"), uint8(40), uint8(6), uint8(7))
	f.Add([]byte("a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk"), uint8(10), uint8(3), uint8(1))
	f.Fuzz(fuzzRepaintBody)
}

func fuzzRepaintBody(t *testing.T, data []byte, cols, rows, chunk uint8) {
	c, r := int(cols)%80+12, int(rows)%20+3
	size := int(chunk)%64 + 1
	var history []string
	for i, l := range strings.Split(string(data), "\n") {
		if i >= 60 {
			break
		}
		l = strings.Map(func(r rune) rune {
			if !unicode.IsPrint(r) || runewidth.RuneWidth(r) == 0 {
				return -1
			}
			return r
		}, strings.ToValidUTF8(l, ""))
		// Distinct lines that fit the screen: the program draws them.
		history = append(history, runewidth.Truncate(fmt.Sprintf("%d %s", i, l), c-1, ""))
	}
	x := &screenLines{scr: newScreen(c, r), cols: c, rows: r}
	var got []string
	take := func() {
		l, _ := x.take()
		got = append(got, l...)
	}
	for n := 1; n <= len(history); n++ {
		frame := []byte("\x1b[2J\x1b[3J\x1b[H" + strings.Join(history[:n], "\r\n") + "\r\n> ")
		for off := 0; off < len(frame); off += size {
			x.write(frame[off:min(off+size, len(frame))])
			take()
		}
	}
	x.turnEnd(func(s string) bool { return s == ">" })
	take()
	var words []string
	for _, l := range got {
		if strings.TrimSpace(l) != "" {
			words = append(words, strings.Join(strings.Fields(l), " "))
		}
	}
	var want []string
	for _, l := range history {
		want = append(want, strings.Join(strings.Fields(l), " "))
	}
	if strings.Join(words, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%dx%d, writes of %d:\n got %q\nwant %q", c, r, size, words, want)
	}
}
