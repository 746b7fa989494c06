package protocol

import (
	"bytes"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/office-server/office-server/protocol/ansistrip"
)

var update = flag.Bool("update", false, "rewrite the .golden files in testdata")

// pipeline is what `office-server parse` does with a transcript delivered in
// chunks: strip escape sequences, cut lines, parse, flush at the end.
func pipeline(chunks [][]byte, opts Options) []Message {
	st := ansistrip.Stripper{CursorSpaces: true}
	var sp Splitter
	p := NewParser(opts)
	var out []Message
	feed := func(l string) { out = append(out, p.Feed(l)...) }
	var buf []byte
	for _, c := range chunks {
		buf = st.Append(buf[:0], c)
		sp.Split(buf, feed)
	}
	sp.Flush(feed)
	return append(out, p.Flush()...)
}

// jsonLines renders messages as `office-server parse` prints them.
func jsonLines(t testing.TB, msgs []Message) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, m := range msgs {
		if err := enc.Encode(m); err != nil {
			t.Fatalf("marshal %v: %v", m, err)
		}
	}
	return b.Bytes()
}

// transcripts lists the testdata inputs: *.txt written for the tests, and
// *.bin recorded from a real terminal (claude_code_2.1.330_capture.bin is
// Claude Code 2.1.330's PTY output answering with an [ASK_USER] block, from
// session/screen/testdata/claude_korean.bin).
func transcripts(t testing.TB) []string {
	var files []string
	for _, pat := range []string{"testdata/*.txt", "testdata/*.bin"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatalf("no testdata transcripts")
	}
	return files
}

// TestGolden parses every testdata transcript and compares the messages,
// as JSON lines, with its .golden file. Run with -update to rewrite them
// after checking the difference by eye.
func TestGolden(t *testing.T) {
	for _, file := range transcripts(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			in, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got := jsonLines(t, pipeline([][]byte{in}, Options{}))
			golden := strings.TrimSuffix(file, filepath.Ext(file)) + ".golden"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if diff := cmp.Diff(string(got), string(want)); diff != "" {
				t.Errorf("%s (-got +want):\n%s", golden, diff)
			}
			// Every message round-trips through its JSON form.
			for _, line := range bytes.Split(bytes.TrimSpace(got), []byte("\n")) {
				var m Message
				if err := json.Unmarshal(line, &m); err != nil {
					t.Fatalf("unmarshal %s: %v", line, err)
				}
				again := bytes.TrimSpace(jsonLines(t, []Message{m}))
				if !bytes.Equal(again, line) {
					t.Errorf("round trip:\n got %s\nwant %s", again, line)
				}
			}
		})
	}
}

// TestChunking feeds every transcript split in two at every byte offset
// (which includes every line boundary and every point inside a block, a
// character or an escape sequence), one byte at a time, and in random
// chunks: the messages must always be those of the whole transcript.
func TestChunking(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for _, file := range transcripts(t) {
		in, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		want := pipeline([][]byte{in}, Options{})
		if len(want) == 0 {
			t.Fatalf("%s: no messages", file)
		}
		check := func(how string, chunks [][]byte) {
			t.Helper()
			got := pipeline(chunks, Options{})
			if reflect.DeepEqual(got, want) { // cheap; cmp.Diff only to explain
				return
			}
			t.Fatalf("%s %s (-got +want):\n%s", file, how, cmp.Diff(got, want))
		}
		for cut := 0; cut <= len(in); cut++ {
			check("cut at "+itoa(cut), [][]byte{in[:cut], in[cut:]})
		}
		bytewise := make([][]byte, len(in))
		for i := range in {
			bytewise[i] = in[i : i+1]
		}
		check("byte by byte", bytewise)
		for range 50 {
			var chunks [][]byte
			for rest := in; len(rest) > 0; {
				n := min(1+r.IntN(64), len(rest))
				chunks = append(chunks, rest[:n])
				rest = rest[n:]
			}
			check("in random chunks", chunks)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// FuzzParse checks, for any input: no panic; the same messages however the
// input is chunked; every message well-formed and round-tripping through
// JSON; and the parser never holding more than its block limit.
func FuzzParse(f *testing.F) {
	for _, file := range transcripts(f) {
		in, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(in, uint16(len(in)/3))
	}
	f.Add([]byte("[ASK_USER]\nquestion: x\noptions: ['a\\'b', \"c\\\"d\"]"), uint16(5))
	f.Add([]byte("=== PHASE 1 COMPLETE ===\n- a\n\n- b\nStep 1/2: c"), uint16(9))
	const limit = 512
	opts := Options{MaxBlockBytes: limit}
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		whole := pipeline([][]byte{in}, opts)
		c := int(cut) % (len(in) + 1)
		if diff := cmp.Diff(pipeline([][]byte{in[:c], in[c:]}, opts), whole); diff != "" {
			t.Fatalf("cut at %d changes the messages (-got +want):\n%s", c, diff)
		}
		for _, m := range whole {
			if m.payload() == nil {
				t.Fatalf("message without its payload: %#v", m)
			}
			if m.Kind == KindInvalid && (m.Invalid.Reason == "" || m.Invalid.Kind == "") {
				t.Fatalf("invalid message without kind or reason: %#v", m)
			}
			j, err := json.Marshal(m)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			var back Message
			if err := json.Unmarshal(j, &back); err != nil {
				t.Fatalf("unmarshal %s: %v", j, err)
			}
		}
		// Bounded memory: feed line by line and look at what is held.
		p := NewParser(opts)
		for _, line := range strings.Split(string(in), "\n") {
			p.Feed(line)
			if p.blk != nil && p.blk.size > limit {
				t.Fatalf("open block holds %d bytes, limit %d", p.blk.size, limit)
			}
			if p.blk != nil && p.blk.over && (len(p.blk.raw) > 0 || len(p.blk.body) > 0) {
				t.Fatalf("an oversized block still holds lines")
			}
			if p.phase != nil && p.phase.size > limit {
				t.Fatalf("phase message holds %d bytes, limit %d", p.phase.size, limit)
			}
		}
		p.Flush()
	})
}
