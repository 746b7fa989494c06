package protocol

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/protocol/ansistrip"
)

// genTranscript builds a transcript of about size bytes: agent prose (a
// third of it Hangul; markdown bullets, headings, links and code among it)
// with protocol blocks making up about 1% of the lines. It is deterministic.
func genTranscript(size int) string {
	r := rand.New(rand.NewPCG(42, 1))
	words := []string{"the", "agent", "reads", "requirements", "and", "writes", "a", "plan", "for", "login",
		"로그인", "방식을", "선택해주세요", "요구사항", "분석", "결과", "화면", "Step", "status", "[link](x)"}
	leads := []string{"", "", "", "", "- ", "* ", "## ", "  ", "    ", "> ", "1. ", "Steps: ", "[note] "}
	blocks := []string{
		"[ASK_USER]\n질문: 로그인 방식을 선택해주세요\n타입: selection\n옵션: ['이메일', '소셜', 'SSO']\n[/ASK_USER]",
		"● [INVOKE:PO]\n  요구사항 분석을 진행해주세요.\n  컨텍스트: 로그인 기능 구현\n  [/INVOKE]",
		"[DELIVER_RESULT:PM]\ntype: markdown\ncontent:\n  # Result\n  - done\n[/DELIVER_RESULT]",
		"[USER_QUESTION]\ncategory: choice\nquestion: Which database?\noptions:\n  - PostgreSQL\n  - SQLite\nrequired: true\n[/USER_QUESTION]",
		"[DEPENDENCY_REQUEST]\ntype: api_key\nname: OPENAI_API_KEY\ndescription: for GPT\nrequired: true\n[/DEPENDENCY_REQUEST]",
		"Step 3/9: Feature Specification",
		"=== PHASE 1 COMPLETE ===\nPhase: Planning\nDocuments created:\n- docs/planning/01_idea.md\n",
	}
	var b strings.Builder
	b.Grow(size + 1024)
	lines := 0
	for b.Len() < size {
		if lines%600 == 599 {
			b.WriteString(blocks[r.IntN(len(blocks))])
			b.WriteByte('\n')
			lines += 6
			continue
		}
		b.WriteString(leads[r.IntN(len(leads))])
		n := 3 + r.IntN(18)
		for i := range n {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[r.IntN(len(words))])
		}
		b.WriteByte('\n')
		lines++
	}
	return b.String()
}

// reportCPU adds the metric "cpu-MB/s": bytes per op over the CPU time the
// loop used, which, unlike MB/s, does not count time other processes held
// the CPU (run with -cpu 1 so that only this goroutine works).
func reportCPU(b *testing.B, bytes int, since time.Duration) {
	if cpu := cpuTime() - since; cpu > 0 {
		b.ReportMetric(float64(bytes)*float64(b.N)/cpu.Seconds()/1e6, "cpu-MB/s")
	}
}

// clock is CPU time where the system gives it, wall time elsewhere.
func clock() time.Duration {
	if c := cpuTime(); c > 0 {
		return c
	}
	return time.Since(clockStart)
}

var clockStart = time.Now()

// splitLines cuts s into lines without copying.
func splitLines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// TestGenTranscriptShare checks the benchmark input is what it claims: about
// 1% of its lines belong to protocol messages, and they all parse.
func TestGenTranscriptShare(t *testing.T) {
	s := genTranscript(1 << 20)
	msgs := ParseString(s, Options{})
	inBlocks := 0
	for _, m := range msgs {
		if m.Kind == KindInvalid {
			t.Fatalf("generated transcript has an invalid message: %v\n%s", m, m.Raw)
		}
		inBlocks += strings.Count(m.Raw, "\n") + 1
	}
	share := float64(inBlocks) / float64(len(splitLines(s)))
	if share < 0.005 || share > 0.02 {
		t.Errorf("protocol lines are %.2f%% of the transcript, want about 1%%", share*100)
	}
	t.Logf("%d messages, %.2f%% of %d lines", len(msgs), share*100, len(splitLines(s)))
}

// BenchmarkParse measures the streaming parser on a 10 MB transcript with
// about 1% protocol lines: lines fed one at a time, one Flush at the end.
func BenchmarkParse(b *testing.B) {
	s := genTranscript(10 << 20)
	lines := splitLines(s)
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	var n int
	cpu0 := cpuTime()
	for b.Loop() {
		p := NewParser(Options{})
		n = 0
		for _, l := range lines {
			n += len(p.Feed(l))
		}
		n += len(p.Flush())
	}
	reportCPU(b, len(s), cpu0)
	b.ReportMetric(float64(n), "msgs/op")
}

// BenchmarkParseStream measures the whole byte path without escape
// stripping: 32 KiB reads → Splitter → Parser.
func BenchmarkParseStream(b *testing.B) {
	s := []byte(genTranscript(10 << 20))
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		p := NewParser(Options{})
		var sp Splitter
		feed := func(l string) { p.Feed(l) }
		for i := 0; i < len(s); i += 32 << 10 {
			sp.Split(s[i:min(i+32<<10, len(s))], feed)
		}
		sp.Flush(feed)
		p.Flush()
	}
	reportCPU(b, len(s), cpu0)
}

// BenchmarkParseStripped measures what `office-server parse` does with
// terminal output: 32 KiB reads → ansistrip (CursorSpaces) → Splitter →
// Parser. The transcript has no escape sequences; the stripper still reads
// every byte.
func BenchmarkParseStripped(b *testing.B) {
	s := []byte(genTranscript(10 << 20))
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	var text []byte
	cpu0 := cpuTime()
	for b.Loop() {
		st := ansistrip.Stripper{CursorSpaces: true}
		p := NewParser(Options{})
		var sp Splitter
		feed := func(l string) { p.Feed(l) }
		for i := 0; i < len(s); i += 32 << 10 {
			text = st.Append(text[:0], s[i:min(i+32<<10, len(s))])
			sp.Split(text, feed)
		}
		sp.Flush(feed)
		p.Flush()
	}
	reportCPU(b, len(s), cpu0)
}

// The sources' sketch (docs/notes/protocol.md, Figures): every PTY chunk is appended to a
// buffer, and the whole buffer is ANSI-stripped and scanned by each pattern
// again. RE2 has no look-ahead, so the patterns end at the next tag
// (consuming it) or at the end of the text; the work is the same.
var (
	seedANSI    = regexp.MustCompile(`[\x{001b}\x{009b}][[()#;?]*(?:[0-9]{1,4}(?:;[0-9]{0,4})*)?[0-9A-ORZcf-nqry=><]`)
	seedPattern = []*regexp.Regexp{
		regexp.MustCompile(`\[ASK_USER\]([\s\S]*?)(?:\[(?:ASK_USER|INVOKE|DELIVER_RESULT|STEP_COMPLETE)\]|$)`),
		regexp.MustCompile(`\[INVOKE:(\w+)\]([\s\S]*?)(?:\[(?:ASK_USER|INVOKE|DELIVER_RESULT|STEP_COMPLETE)\]|$)`),
		regexp.MustCompile(`\[DELIVER_RESULT:(\w+)\]([\s\S]*?)(?:\[(?:ASK_USER|INVOKE|DELIVER_RESULT|STEP_COMPLETE)\]|$)`),
	}
)

// seedReparse is one re-parse of the sketch: strip, then every pattern
// over the whole buffer. It returns how many messages it dispatched.
func seedReparse(buf string) int {
	cleaned := seedANSI.ReplaceAllString(buf, "")
	n := 0
	for _, re := range seedPattern {
		n += len(re.FindAllStringSubmatchIndex(cleaned, -1))
	}
	return n
}

// seedChunk is the size of one PTY read in the sketch's loop.
const seedChunk = 4 << 10

// BenchmarkSeedReparse runs the sketch's approach beside the streaming
// parser at 1, 4 and 16 MB, with 4 KiB reads.
//
// The sketch re-parses the whole buffer after each of size/4KiB reads, so
// its cost grows with the square of the size; run in full at 16 MB it
// would take hours. To keep `go test -bench` short, it re-parses at 8
// evenly spaced reads (the buffer as it is at those points) and scales the
// time by reads/8: the metric "s/op-full" is that estimate (the cost of
// each re-parse is measured, only the sum is extrapolated;
// BenchmarkSeedReparseExact checks the estimate at 512 KB). "dispatches/msg"
// is how often the sketch dispatches each message of the transcript.
// "Parser" is this package's parser on the same input, the same way.
func BenchmarkSeedReparse(b *testing.B) {
	for _, mb := range []int{1, 4, 16} {
		s := genTranscript(mb << 20)
		reads := (len(s) + seedChunk - 1) / seedChunk
		b.Run(fmt.Sprintf("Sketch/%dMB", mb), func(b *testing.B) {
			if testing.Short() {
				b.Skip("minutes long")
			}
			const samples = 8
			var dispatched, unique int
			var full time.Duration
			for b.Loop() {
				dispatched = 0
				start := clock()
				for k := 1; k <= samples; k++ {
					// The middle read of each eighth of the run.
					end := min((2*k-1)*reads/(2*samples)*seedChunk, len(s))
					dispatched += seedReparse(s[:end])
				}
				full += (clock() - start) * time.Duration(reads) / samples
			}
			unique = seedReparse(s)
			b.ReportMetric(full.Seconds()/float64(b.N), "s/op-full")
			b.ReportMetric(float64(dispatched)*float64(reads)/samples/float64(max(unique, 1)), "dispatches/msg")
		})
		b.Run(fmt.Sprintf("Parser/%dMB", mb), func(b *testing.B) {
			lines := splitLines(s)
			b.SetBytes(int64(len(s)))
			cpu0 := cpuTime()
			for b.Loop() {
				p := NewParser(Options{})
				for _, l := range lines {
					p.Feed(l)
				}
				p.Flush()
			}
			reportCPU(b, len(s), cpu0)
		})
	}
}

// BenchmarkSeedReparseExact runs the sketch in full at 512 KB (128 reads)
// and reports the same estimate as BenchmarkSeedReparse beside the
// measured CPU time, to check the extrapolation.
func BenchmarkSeedReparseExact(b *testing.B) {
	s := genTranscript(512 << 10)
	reads := (len(s) + seedChunk - 1) / seedChunk
	var est, full time.Duration
	for b.Loop() {
		start := clock()
		for k := 1; k <= 8; k++ {
			seedReparse(s[:min((2*k-1)*reads/16*seedChunk, len(s))])
		}
		est += (clock() - start) * time.Duration(reads) / 8
		start = clock()
		for end := seedChunk; ; end += seedChunk {
			seedReparse(s[:min(end, len(s))])
			if end >= len(s) {
				break
			}
		}
		full += clock() - start
	}
	b.ReportMetric(est.Seconds()/float64(b.N), "s/op-estimate")
	b.ReportMetric(full.Seconds()/float64(b.N), "s/op-measured")
}

// genDense builds a protocol-dense stream of about size bytes, the worst
// case a command agent's screen can hand the parser: a block every few
// lines (about one message per 120 bytes), shaped like the screen rows of
// session/screen/testdata/agent_blocks.bin (a bulleted INVOKE indented by
// two columns, an unindented ASK_USER) with the other kinds and a prose
// line between them. It is deterministic.
func genDense(size int) string {
	blocks := []string{
		"● [INVOKE:개발자]\n  작업 %d:  로그인  화면을 만들어 주세요\n  context: 이슈 #%d\n  [/INVOKE]",
		"[ASK_USER]\n질문: %d번째 질문입니다. 계속할까요? (%d)\n타입: confirmation\n[/ASK_USER]",
		"[ASK_USER]\nquestion: Which login method for build %d/%d?\ntype: selection\noptions: ['이메일', '소셜', 'SSO']\n[/ASK_USER]",
		"[DELIVER_RESULT:PM]\ntype: markdown\ncontent:\n  # Result %d of %d\n  - done\n[/DELIVER_RESULT]",
		"[USER_QUESTION]\ncategory: choice\nquestion: Which database (%d, %d)?\noptions:\n  - PostgreSQL\n  - SQLite\n[/USER_QUESTION]",
		"[DEPENDENCY_REQUEST]\ntype: api_key\nname: OPENAI_API_KEY_%d\ndescription: for GPT %d\nrequired: true\n[/DEPENDENCY_REQUEST]",
		"[ERROR]\ntype: recoverable\nmessage: build %d failed at %d\n[/ERROR]",
		"Step %d/%d: Feature Specification",
		"[STEP_COMPLETE]\nstep: build %d\nsummary: %d files changed\n[/STEP_COMPLETE]",
	}
	var b strings.Builder
	b.Grow(size + 1024)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, blocks[i%len(blocks)], i%9+1, 9+i%7)
		fmt.Fprintf(&b, "\nplain output line %d with some words\n", i)
	}
	return b.String()
}

// TestGenDense checks the dense benchmark input is what it claims: every
// block parses, and there is a message for about every 120 bytes.
func TestGenDense(t *testing.T) {
	s := genDense(1 << 20)
	msgs := ParseString(s, Options{})
	for _, m := range msgs {
		if m.Kind == KindInvalid {
			t.Fatalf("dense stream has an invalid message: %v\n%s", m, m.Raw)
		}
	}
	per := float64(len(s)) / float64(len(msgs))
	if per < 80 || per > 160 {
		t.Errorf("one message per %.0f bytes, want about 120", per)
	}
	t.Logf("%d messages, one per %.0f bytes, %d lines", len(msgs), per, len(splitLines(s)))
}

// BenchmarkParseDense measures the parser on the dense stream of genDense
// (a message every ~120 bytes, 4 MB): the worst case of the screen
// pipeline, where decoding and validation, not the prose fast path, set
// the rate.
func BenchmarkParseDense(b *testing.B) {
	s := genDense(4 << 20)
	lines := splitLines(s)
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	var n int
	cpu0 := cpuTime()
	for b.Loop() {
		p := NewParser(Options{})
		n = 0
		for _, l := range lines {
			n += len(p.Feed(l))
		}
		n += len(p.Flush())
	}
	reportCPU(b, len(s), cpu0)
	b.ReportMetric(float64(n), "msgs/op")
}
