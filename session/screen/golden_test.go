package screen

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the screen model")

// captureMeta describes a raw capture: the terminal size it was recorded at
// and where in the byte stream the terminal was resized.
type captureMeta struct {
	Cols    int           `json:"cols"`
	Rows    int           `json:"rows"`
	Resizes []resizeEvent `json:"resizes,omitempty"`
	// TurnEnds are the offsets where a turn of an agent ended (it went
	// quiet after a reply).
	TurnEnds []int `json:"turn_ends,omitempty"`
	// Program says what produced the capture, for people.
	Program string `json:"program"`
}

type resizeEvent struct {
	Offset int `json:"offset"` // bytes of output before the resize
	Cols   int `json:"cols"`
	Rows   int `json:"rows"`
}

// rendering is what a capture shows: every row that scrolled off the top,
// then the final screen (trailing empty rows dropped) and the cursor.
type rendering struct {
	Scrolled []string
	Screen   []string
	X, Y     int
}

func (r rendering) String() string {
	var b strings.Builder
	b.WriteString("--- scrolled ---\n")
	for _, l := range r.Scrolled {
		b.WriteString(l + "\n")
	}
	b.WriteString("--- screen ---\n")
	for _, l := range r.Screen {
		b.WriteString(l + "\n")
	}
	fmt.Fprintf(&b, "--- cursor %d,%d ---\n", r.X, r.Y)
	return b.String()
}

func trimEmpty(ls []string) []string {
	for len(ls) > 0 && ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// eraseSaved is ED 3, the erase of the saved lines (the scrollback).
var eraseSaved = []byte("\x1b[3J")

// replay renders data through a Screen, resizing where meta says, writing
// at most chunk bytes at a time (0: everything at once). The rows the model
// lets scroll off are final (a reader has taken them), while a terminal's
// history changes: it loses its rows at ED 3 (Ink programs clear it before
// painting their history again) and tmux reflows it at a resize. So that
// the rendering compares with tmux's, the scrolled rows are kept here as a
// history that does both (history).
func replay(data []byte, meta captureMeta, chunk int) rendering {
	s := New(meta.Cols, meta.Rows)
	var h history
	write := func(p []byte) {
		for len(p) > 0 {
			// Up to the end of the next ED 3, in writes of chunk.
			part := p
			if i := bytes.Index(p, eraseSaved); i >= 0 {
				part = p[:i+len(eraseSaved)]
			}
			p = p[len(part):]
			for q := part; len(q) > 0; {
				n := len(q)
				if chunk > 0 && chunk < n {
					n = chunk
				}
				s.Write(q[:n])
				q = q[n:]
			}
			h.take(s)
			if bytes.HasSuffix(part, eraseSaved) {
				h = nil
			}
		}
	}
	off := 0
	for _, ev := range meta.Resizes {
		write(data[off:ev.Offset])
		off = ev.Offset
		if c, _ := s.Size(); c != ev.Cols && !s.AltScreen() {
			h = h.reflow(ev.Cols)
		}
		s.Resize(ev.Cols, ev.Rows)
		h.take(s)
	}
	write(data[off:])
	var r rendering
	for _, hr := range h {
		r.Scrolled = append(r.Scrolled, hr.show())
	}
	r.Screen = trimEmpty(s.Lines())
	r.X, r.Y = s.Cursor()
	return r
}

// history is a terminal's history as tmux keeps it: the rows scrolled off
// the top, each with its text, wrap flag and used columns.
type history []scrolledRow

// take moves the rows that scrolled off s into h.
func (h *history) take(s *Screen) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*h = append(*h, s.scrolled...)
	s.scrolled = nil
}

// show renders a history row as TakeScrolled does.
func (r scrolledRow) show() string {
	if r.Wrapped {
		return strings.TrimRight(r.Text+r.skipped, " ")
	}
	return r.Text
}

// reflow wraps the history's lines anew at cols columns, as tmux does
// (and as the model does with its screen, reflow.go): a line's text is
// its rows' text with the last row's blanks up to its used columns,
// laid out again from its start, a wide rune that does not fit moving
// whole to the next row; a blank row after a wrapped one stays a row.
func (h history) reflow(cols int) history {
	var out history
	var line []rune
	lastWrapped := false
	flush := func() {
		row, w := []rune(nil), 0
		for _, r := range line {
			rw := widths.RuneWidth(r)
			if w+rw > cols && w > 0 {
				out = append(out, scrolledRow{Row: Row{Text: string(row), Wrapped: true}, used: w})
				row, w = nil, 0
			}
			row = append(row, r)
			w += rw
		}
		out = append(out, scrolledRow{Row: Row{Text: strings.TrimRight(string(row), " "), Wrapped: lastWrapped}, used: w})
		line = nil
	}
	open := false
	for _, r := range h {
		if open && r.used == 0 && !r.Wrapped {
			flush()
		}
		text := r.Text
		if r.Wrapped {
			text += r.skipped
		} else if pad := r.used - widths.StringWidth(text); pad > 0 {
			text += strings.Repeat(" ", pad)
		}
		line = append(line, []rune(text)...)
		open, lastWrapped = r.Wrapped, r.Wrapped
		if !open {
			flush()
		}
	}
	if open {
		flush()
	}
	return out
}

func loadCapture(t testing.TB, name string) ([]byte, captureMeta) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".bin"))
	if err != nil {
		t.Fatal(err)
	}
	mb, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var meta captureMeta
	if err := json.Unmarshal(mb, &meta); err != nil {
		t.Fatalf("%s.json: %v", name, err)
	}
	return data, meta
}

func captureNames(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no captures in testdata")
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".bin"))
	}
	return names
}

// TestGolden renders every recorded capture and compares it with the
// expected text in testdata/<name>.golden. The expected text was made by an
// independent terminal (tmux, see record_test.go) when the capture was
// recorded, and checked by eye; -update rewrites it from this model.
func TestGolden(t *testing.T) {
	for _, name := range captureNames(t) {
		t.Run(name, func(t *testing.T) {
			data, meta := loadCapture(t, name)
			got := replay(data, meta, 0)
			// Byte-at-a-time and odd-sized writes must render the same.
			for _, chunk := range []int{1, 7, 4093} {
				if diff := cmp.Diff(replay(data, meta, chunk), got); diff != "" {
					t.Errorf("writes of %d bytes render differently (-chunked +whole):\n%s", chunk, diff)
				}
			}
			path := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got.String(), string(want)); diff != "" {
				t.Errorf("%s (-got +want):\n%s", name, diff)
			}
		})
	}
}

// processCPU returns the CPU time (user+system) used by this process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkWrite(b *testing.B) {
	for _, name := range []string{"claude_korean", "vim_scroll", "seq_korean", "agent_blocks"} {
		b.Run(name, func(b *testing.B) {
			data, meta := loadCapture(b, name)
			// A realistic stream is many KB: repeat the capture up to ~1 MiB.
			stream := bytes.Repeat(data, max(1, (1<<20)/len(data)))
			b.SetBytes(int64(len(stream)))
			// The machine is shared: besides wall-clock MB/s, report MB per
			// second of CPU time this process used (GC included).
			cpu0 := processCPU()
			b.ResetTimer()
			for b.Loop() {
				s := New(meta.Cols, meta.Rows)
				for p := stream; len(p) > 0; {
					n := min(len(p), 4096) // PTY reads come in pieces
					s.Write(p[:n])
					p = p[n:]
					s.TakeScrolled() // as a session drains after every read
				}
			}
			if cpu := processCPU() - cpu0; cpu > 0 {
				b.ReportMetric(float64(b.N)*float64(len(stream))/cpu.Seconds()/1e6, "MB/cpu-s")
			}
		})
	}
}

// BenchmarkNew reports the memory of an idle screen of the sessions'
// default size (B/op), the part of a session's memory the screen takes.
func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		s := New(200, 50)
		s.Write([]byte("$ "))
	}
}
