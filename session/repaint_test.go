package session

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/office-server/office-server/protocol"
)

// capture is a raw recording of a real program's terminal with its sizes
// and turn ends (session/screen/testdata, recorded by
// session/screen/record_test.go).
type capture struct {
	data []byte
	meta struct {
		Cols, Rows int
		Resizes    []struct{ Offset, Cols, Rows int }
		TurnEnds   []int `json:"turn_ends"`
	}
}

func loadCapture(t *testing.T, name string) capture {
	t.Helper()
	var c capture
	var err error
	if c.data, err = os.ReadFile(filepath.Join("screen", "testdata", name+".bin")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("screen", "testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &c.meta); err != nil {
		t.Fatal(err)
	}
	return c
}

// replayCapture plays c through the screen path in writes of size bytes,
// resizing and reading the live area where the recording did, and returns
// the protocol messages parsed from the lines read, in order.
func replayCapture(c capture, size int) []protocol.Message {
	x := &screenLines{scr: newScreen(c.meta.Cols, c.meta.Rows), cols: c.meta.Cols, rows: c.meta.Rows}
	p := protocol.NewParser(protocol.Options{})
	var msgs []protocol.Message
	take := func() {
		l, _ := x.take()
		for _, s := range l {
			msgs = append(msgs, p.Feed(s)...)
		}
	}
	type event struct {
		off        int
		cols, rows int // a resize, or a turn end when 0
	}
	var evs []event
	for _, r := range c.meta.Resizes {
		evs = append(evs, event{r.Offset, r.Cols, r.Rows})
	}
	for _, o := range c.meta.TurnEnds {
		evs = append(evs, event{o, 0, 0})
	}
	// Turn ends before resizes at the same offset: the recorder marks the
	// turn's end, then resizes.
	for i := range evs {
		for j := i + 1; j < len(evs); j++ {
			if evs[j].off < evs[i].off || (evs[j].off == evs[i].off && evs[j].cols == 0 && evs[i].cols != 0) {
				evs[i], evs[j] = evs[j], evs[i]
			}
		}
	}
	off := 0
	play := func(to int) {
		for off < to {
			n := min(size, to-off)
			x.write(c.data[off : off+n])
			off += n
			take()
		}
	}
	for _, e := range evs {
		play(e.off)
		if e.cols == 0 {
			x.turnEnd(nil)
			take()
			msgs = append(msgs, p.Flush()...)
		} else {
			x.resized(e.cols, e.rows)
		}
	}
	play(len(c.data))
	x.turnEnd(nil)
	take()
	return append(msgs, p.Flush()...)
}

// questions returns the ASK_USER questions among msgs, in order.
func questions(msgs []protocol.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Kind == protocol.KindAskUser {
			out = append(out, m.Question.Question)
		}
	}
	return out
}

// TestRepaintCaptures replays real captures of TUI agents that paint their
// history again (docs/notes/screen.md, "Repaints"): each block the agent
// printed comes out exactly once, in order, with its fields, the same
// block printed again in a later turn on purpose included, whatever the
// write sizes.
func TestRepaintCaptures(t *testing.T) {
	const q = "배포를 진행할까요? 이 질문은 화면 폭보다 길어서 프로그램이 스스로 줄을 바꿔 그립니다 — 결제 모듈과 로그인 모듈을 함께 올립니다."
	const task = "로그인 화면을 만들어 주세요. 이 작업 설명은 길어서 화면 폭을 넘고 프로그램이 줄을 바꿔 그립니다 — 결제 화면과 같은 모양으로."
	ask := string(protocol.KindAskUser)
	tests := []struct {
		name  string
		kinds []string // the messages, in order
	}{
		// Qwen Code 0.24.4 (Ink): the history is painted again after
		// ESC[2J ESC[3J ESC[H on every frame once the reply is taller than
		// the screen. Three turns, each with the block: three questions.
		{"qwen_repaint", []string{ask, ask, ask}},
		// Codex 0.169.0 on the alternate screen, scrolling its history
		// inside it.
		{"codex_repaint", []string{ask, ask, ask}},
		// Gemini CLI 0.61.0 (Ink, the main screen): three replies taller
		// than the screen, cleared (ED 2, ED 3) and painted again on every
		// frame, resized in the middle of the first. The old position-only
		// path (before the screen document) read this capture as 142
		// ASK_USER and 98 INVOKE messages.
		{"gemini_repaint", []string{"INVOKE", ask, ask, ask}},
		// Gemini CLI 0.61.0: a long reply, a resize after it that the CLI
		// does not answer with a repaint (the terminal reflows the history:
		// the screen model must not cut the question's rows), two short
		// replies below it.
		{"gemini_resize", []string{"INVOKE", ask, ask, ask}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := loadCapture(t, tt.name)
			for _, size := range []int{1 << 20, 4093, 517, 61} {
				msgs := replayCapture(c, size)
				var kinds []string
				for _, m := range msgs {
					kinds = append(kinds, string(m.Kind))
				}
				if strings.Join(kinds, " ") != strings.Join(tt.kinds, " ") {
					t.Fatalf("writes of %d: messages %v, want %v", size, kinds, tt.kinds)
				}
				for i, m := range msgs {
					switch {
					case m.Question != nil:
						// The TUI broke the long question itself: the
						// same words, with its line break.
						if strings.Join(strings.Fields(m.Question.Question), " ") != q || m.Question.Type != "confirmation" {
							t.Errorf("writes of %d: message %d: question %q, type %q", size, i, m.Question.Question, m.Question.Type)
						}
					case m.Invoke != nil:
						if m.Target != "개발자" || strings.Join(strings.Fields(m.Invoke.Task), " ") != task || m.Invoke.Context != "이슈 #13" {
							t.Errorf("writes of %d: message %d: invoke %q: %q, context %q", size, i, m.Target, m.Invoke.Task, m.Invoke.Context)
						}
					}
				}
			}
		})
	}
}

// inkFrames writes what an Ink app does (ink's build/ink.js onRender, as
// shipped in the pinned Qwen Code and Gemini CLI bundles; docs/notes/clis.md)
// for a history of lines on a screen of rows rows: once the output is
// taller than the screen, every frame is ESC[2J ESC[3J ESC[H followed by
// the whole static output and the dynamic part.
func inkFrames(history []string, dynamic string) string {
	// The terminal's line discipline turns the program's \n into \r\n.
	return "\x1b[2J\x1b[3J\x1b[H" + strings.Join(history, "\r\n") + "\r\n" + dynamic
}

// TestRepaintGenerated covers the repaint rules with generated output
// where a capture cannot: many frames, a later turn repeating a block, an
// echo of the typed text inside the repainted history, the alternate
// screen scrolling by an arbitrary amount.
func TestRepaintGenerated(t *testing.T) {
	block := []string{"✦ [ASK_USER]", "  질문: 계속할까요?", "  [/ASK_USER]"}
	t.Run("ink frames", func(t *testing.T) { repaintInkFrames(t, block) })
	t.Run("alternate screen scrolls", func(t *testing.T) { repaintAltScrolls(t, block) })
}

// repaintInkFrames: three turns streamed a line a frame, each frame
// painting the history and the reply so far (as Ink does), give one
// question a turn.
func repaintInkFrames(t *testing.T, block []string) {
	x := &screenLines{scr: newScreen(60, 10), cols: 60, rows: 10}
	p := protocol.NewParser(protocol.Options{})
	var msgs []protocol.Message
	read := func() {
		l, _ := x.take()
		for _, s := range l {
			msgs = append(msgs, p.Feed(s)...)
		}
	}
	var history []string
	for turn := 1; turn <= 3; turn++ {
		x.typed(fmt.Sprintf("turn %d", turn))
		history = append(history, fmt.Sprintf("> turn %d", turn))
		reply := []string{fmt.Sprintf("reply %d begins", turn)}
		for i := range 15 {
			reply = append(reply, fmt.Sprintf("line %d.%d", turn, i))
		}
		reply = append(reply, block...)
		reply = append(reply, fmt.Sprintf("reply %d ends", turn))
		// Stream the reply a line a frame: each frame paints the
		// history and the reply so far.
		for n := 1; n <= len(reply); n++ {
			x.write([]byte(inkFrames(append(append([]string(nil), history...), reply[:n]...), "⠋ thinking")))
			read()
		}
		history = append(history, reply...)
		x.write([]byte(inkFrames(history, "> ")))
		read()
		x.turnEnd(nil)
		read()
		msgs = append(msgs, p.Flush()...)
	}
	if got := questions(msgs); len(got) != 3 {
		t.Fatalf("%d questions, want 3 (one a turn): %q", len(got), got)
	}
}

// repaintAltScrolls: on the alternate screen, a view that scrolls by
// shift lines a turn and is redrawn after a resize gives one question a
// turn.
func repaintAltScrolls(t *testing.T, block []string) {
	for _, shift := range []int{1, 3, 7, 9} {
		x := &screenLines{scr: newScreen(60, 12), cols: 60, rows: 12}
		p := protocol.NewParser(protocol.Options{})
		var msgs []protocol.Message
		var view []string
		paint := func() {
			var b strings.Builder
			b.WriteString("\x1b[H")
			for i := range 10 {
				b.WriteString("\x1b[2K")
				if i < len(view) {
					b.WriteString(view[max(0, len(view)-10):][i])
				}
				b.WriteString("\r\n")
			}
			b.WriteString("\x1b[2K› prompt")
			x.write([]byte(b.String()))
		}
		x.write([]byte("\x1b[?1049h"))
		for turn := 1; turn <= 3; turn++ {
			view = append(view, fmt.Sprintf("› turn %d", turn))
			for i := range shift {
				view = append(view, fmt.Sprintf("• %d.%d", turn, i))
			}
			view = append(view, block...)
			paint()
			x.turnEnd(nil)
			l, _ := x.take()
			for _, s := range l {
				msgs = append(msgs, p.Feed(s)...)
			}
			msgs = append(msgs, p.Flush()...)
			// A resize redraws the same view.
			x.resized(61, 12)
			paint()
			x.turnEnd(nil)
			l, _ = x.take()
			for _, s := range l {
				msgs = append(msgs, p.Feed(s)...)
			}
			msgs = append(msgs, p.Flush()...)
			x.resized(60, 12)
		}
		if got := questions(msgs); len(got) != 3 {
			t.Errorf("shift %d: %d questions, want 3 (one a turn): %q", shift, len(got), got)
		}
	}
}
