package protocol

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitter(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		max  int
		want []string
	}{
		{"LF", "a\nb\n", 0, []string{"a", "b"}},
		{"CRLF", "a\r\nb\r\n", 0, []string{"a", "b"}},
		{"lone CR", "50%\r60%\rdone\n", 0, []string{"50%", "60%", "done"}},
		{"blank lines", "\n\r\n\n", 0, []string{"", "", ""}},
		{"unfinished last line", "a\nb", 0, []string{"a", "b"}},
		{"long line cut", strings.Repeat("x", 10) + "\n", 4, []string{"xxxx", "xxxx", "xx"}},
		{"long line cut at a character", "가나다\n", 4, []string{"가", "나", "다"}},
		{"exactly the limit", "xxxx\n", 4, []string{"xxxx"}},
	} {
		// Whole, and split at every byte: the lines must be the same.
		for cut := 0; cut <= len(tc.in); cut++ {
			sp := Splitter{MaxLineBytes: tc.max}
			var got []string
			fn := func(l string) { got = append(got, l) }
			sp.Split([]byte(tc.in[:cut]), fn)
			sp.Split([]byte(tc.in[cut:]), fn)
			sp.Flush(fn)
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("%s, cut at %d (-got +want):\n%s", tc.name, cut, diff)
			}
		}
	}
}
