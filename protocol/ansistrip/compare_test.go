package ansistrip

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// This file measures the alternatives the design card and the issue name,
// for docs/notes/protocol.md: a regex stripper equivalent to
// acarl005/stripansi (its published pattern, not imported), charmbracelet/x/ansi's
// one-shot Strip, and its stateful Parser driven through a Handler.

// stripansiRe is the pattern acarl005/stripansi uses (the chalk ansi-regex).
var stripansiRe = regexp.MustCompile("[\u001B\u009B][[\\]()#;?]*(?:(?:(?:[a-zA-Z\\d]*(?:;[a-zA-Z\\d]*)*)?\u0007)|(?:(?:\\d{1,4}(?:;\\d{0,4})*)?[\\dA-PRZcf-ntqry=><~]))")

// stripper is one way to strip a stream delivered in chunks.
type stripper struct {
	name     string
	stateful bool // carries state across chunks
	// run strips chunks, appending to out (reused between runs so that a
	// benchmark measures stripping, not buffer growth).
	run func(out []byte, chunks [][]byte) []byte
}

func (s stripper) string(chunks ...[]byte) string { return string(s.run(nil, chunks)) }

var strippers = []stripper{
	{"hand state machine (this package)", true, func(out []byte, chunks [][]byte) []byte {
		var s Stripper
		for _, c := range chunks {
			out = s.Append(out, c)
		}
		return out
	}},
	{"charmbracelet/x/ansi Parser + Handler", true, func(out []byte, chunks [][]byte) []byte {
		p := ansi.NewParser()
		p.SetHandler(ansi.Handler{
			Print: func(r rune) { out = utf8.AppendRune(out, r) },
			Execute: func(b byte) {
				if b == '\n' || b == '\r' || b == '\t' {
					out = append(out, b)
				}
			},
		})
		for _, c := range chunks {
			p.Parse(c)
		}
		return out
	}},
	{"charmbracelet/x/ansi Strip (per chunk)", false, func(out []byte, chunks [][]byte) []byte {
		for _, c := range chunks {
			out = append(out, ansi.Strip(string(c))...)
		}
		return out
	}},
	{"regex = acarl005/stripansi (per chunk)", false, func(out []byte, chunks [][]byte) []byte {
		for _, c := range chunks {
			out = append(out, stripansiRe.ReplaceAll(c, nil)...)
		}
		return out
	}},
}

// TestFidelityTable scores every stripper on the fidelity cases, whole and
// split in two at every offset, and prints the table with -v. Only this
// package's stripper is required to pass everything (TestStripFidelity);
// the table records how the others fare.
func TestFidelityTable(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "| case |")
	for _, s := range strippers {
		fmt.Fprintf(&b, " %s |", s.name)
	}
	fmt.Fprintf(&b, "\n|---|%s\n", strings.Repeat("---|", len(strippers)))
	wholeOK := make([]int, len(strippers))
	splitOK := make([]int, len(strippers))
	for _, tc := range fidelityCases {
		fmt.Fprintf(&b, "| %s |", tc.name)
		for i, s := range strippers {
			whole := s.string([]byte(tc.in)) == tc.want
			split := true
			for cut := 1; cut < len(tc.in); cut++ {
				if s.string([]byte(tc.in[:cut]), []byte(tc.in[cut:])) != tc.want {
					split = false
					break
				}
			}
			mark := "ok"
			switch {
			case !whole:
				mark = "**wrong**"
			case !split:
				mark = "ok whole, wrong split"
			}
			if whole {
				wholeOK[i]++
			}
			if whole && split {
				splitOK[i]++
			}
			fmt.Fprintf(&b, " %s |", mark)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "| **correct whole / at every split** |")
	for i := range strippers {
		fmt.Fprintf(&b, " %d / %d of %d |", wholeOK[i], splitOK[i], len(fidelityCases))
	}
	t.Logf("fidelity table:\n%s", b.String())
	if wholeOK[0] != len(fidelityCases) || splitOK[0] != len(fidelityCases) {
		t.Errorf("this package's stripper fails cases")
	}
}

// reportCPU adds the metric "cpu-MB/s": bytes per op over the CPU time the
// loop used, which, unlike MB/s, does not count time other processes held
// the CPU (run with -cpu 1).
func reportCPU(b *testing.B, bytes int, since time.Duration) {
	if cpu := cpuTime() - since; cpu > 0 {
		b.ReportMetric(float64(bytes)*float64(b.N)/cpu.Seconds()/1e6, "cpu-MB/s")
	}
}

// benchInput is a PTY-like stream: text (a third Hangul), colours, cursor
// moves, titles and hyperlinks, about 1 MB.
func benchInput() []byte {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"the", "office", "agent", "질문", "로그인", "방식을", "선택해주세요", "result", "[ASK_USER]"}
	var b bytes.Buffer
	for b.Len() < 1<<20 {
		switch r.IntN(10) {
		case 0:
			fmt.Fprintf(&b, "\x1b[38;2;%d;%d;%dm", r.IntN(256), r.IntN(256), r.IntN(256))
		case 1:
			fmt.Fprintf(&b, "\x1b[%dG", r.IntN(80)+1)
		case 2:
			b.WriteString("\x1b[0m\r\n")
		case 3:
			if r.IntN(20) == 0 {
				b.WriteString("\x1b]0;✳ Claude Code\x07\x1b]8;;https://example.com\x1b\\")
			}
		}
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.Bytes()
}

// BenchmarkStrip measures each stripper on benchInput fed in 4 KiB chunks,
// as a PTY read loop would.
func BenchmarkStrip(b *testing.B) {
	in := benchInput()
	var chunks [][]byte
	for i := 0; i < len(in); i += 4096 {
		chunks = append(chunks, in[i:min(i+4096, len(in))])
	}
	for _, s := range strippers {
		b.Run(strings.NewReplacer(" ", "_", "/", "_").Replace(s.name), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			var out []byte
			cpu0 := cpuTime()
			for b.Loop() {
				out = s.run(out[:0], chunks)
			}
			reportCPU(b, len(in), cpu0)
		})
	}
	b.Run("hand_state_machine_CursorSpaces", func(b *testing.B) {
		b.SetBytes(int64(len(in)))
		var out []byte
		cpu0 := cpuTime()
		for b.Loop() {
			s := Stripper{CursorSpaces: true}
			out = out[:0]
			for _, c := range chunks {
				out = s.Append(out, c)
			}
		}
		reportCPU(b, len(in), cpu0)
	})
}
