package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/office-server/office-server/internal/testenv"
)

// replayLimit is what a late viewer was sent before the viewers' screen
// model: the last 1 MiB of raw output. The programs below write more.
const replayLimit = 1 << 20

var hangul = []string{"에이전트", "상황판", "작업", "진행 중", "완료", "대기", "질문", "결제 모듈", "로그인 방식을"}

// altProgram is a full-screen program on the alternate screen at 200×50:
// it draws a frame once (box, a bold coloured Hangul header, labels) and
// then only redraws parts of it — counters in 16 colours, a log area
// scrolling inside a scroll region, a progress bar in background colour,
// an inverse status — for more than replayLimit bytes (part 1), and more
// of the same in part 2. It also turns on bracketed paste and application
// cursor keys and sets the title.
func altProgram(part int) []byte {
	var b bytes.Buffer
	const cols, rows = 200, 50
	if part == 1 {
		b.WriteString("\x1b[?1049h\x1b[?2004h\x1b[?1h\x1b]0;상황판 long TUI\a\x1b[H\x1b[2J")
		b.WriteString("\x1b[1;34m┌" + strings.Repeat("─", cols-2) + "┐\x1b[0m")
		for r := 2; r < rows; r++ {
			fmt.Fprintf(&b, "\x1b[%d;1H\x1b[34m│\x1b[%d;%dH│\x1b[0m", r, r, cols)
		}
		fmt.Fprintf(&b, "\x1b[2;3H\x1b[1;33;44m 에이전트 상황판 — office TUI \x1b[0m")
		for k := range 10 {
			fmt.Fprintf(&b, "\x1b[%d;3Hagent-%02d 상태:", 4+k, k)
		}
		// The bottom line last: its last column leaves a wrap pending.
		fmt.Fprintf(&b, "\x1b[%d;1H\x1b[34m└%s┘\x1b[0m", rows, strings.Repeat("─", cols-2))
	}
	start, limit := 0, replayLimit+replayLimit/5
	if part == 2 {
		start, limit = 1_000_000, 100<<10
	}
	for i := start; b.Len() < limit; i++ {
		k := i % 10
		fmt.Fprintf(&b, "\x1b[%d;20H\x1b[%dm%7d %-10s\x1b[0m", 4+k, 30+i%8+60*(i/8%2), i, hangul[i%len(hangul)])
		if i%3 == 0 {
			// A log line in the region of rows 20–40, which scrolls.
			fmt.Fprintf(&b, "\x1b[20;40r\x1b[40;1H\n\x1b[34m│\x1b[0m \x1b[3%dmlog %d %s %d\x1b[0m\x1b[40;%dH\x1b[34m│\x1b[0m\x1b[r",
				i%7+1, i, hangul[(i/3)%len(hangul)], i*7%1000, cols)
		}
		if i%97 == 0 {
			n := i / 97 % 150
			fmt.Fprintf(&b, "\x1b[45;3H\x1b[42m%s\x1b[0m%s", strings.Repeat(" ", n), strings.Repeat("·", 150-n))
		}
		if i%13 == 0 {
			fmt.Fprintf(&b, "\x1b[46;3H\x1b[7m status %d: %s \x1b[0m", i, hangul[i%len(hangul)])
		}
	}
	if part == 1 {
		b.WriteString("\x1b[48;3HPART1-DONE\x1b[25;100H")
	} else {
		b.WriteString("\x1b]0;second title\a\x1b[48;3HPART2-DONE\x1b[26;90H")
	}
	return b.Bytes()
}

// mainProgram writes log lines on the main screen, which scroll into the
// history: coloured, with Hangul, every 50th longer than the screen is
// wide (it wraps), every 20th a progress count redrawn with CR.
func mainProgram(part int) []byte {
	var b bytes.Buffer
	start, limit := 0, replayLimit+replayLimit/5
	if part == 2 {
		start, limit = 1_000_000, 50<<10
	}
	for i := start; b.Len() < limit; i++ {
		fmt.Fprintf(&b, "\x1b[3%dm#%06d\x1b[0m %s %d — \x1b[1m%s\x1b[0m\n", i%7+1, i, hangul[i%len(hangul)], i*13%997, strings.Repeat("=", i%40))
		if i%50 == 0 {
			fmt.Fprintf(&b, "long %d %s\n", i, strings.Repeat("가나다라마바사 abc ", 16))
		}
		if i%20 == 0 {
			for p := 0; p <= 100; p += 25 {
				fmt.Fprintf(&b, "progress %3d%%\r", p)
			}
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "PART%d-DONE\n", part)
	return b.Bytes()
}

// TestConsoleLateViewerExact opens, in headless Chromium, the terminals of
// two programs that wrote more than the old replay buffer (a full-screen
// one on the alternate screen that drew its frame once, one on the main
// screen whose lines scrolled into the history), late; then they write
// more while the page watches; then the page's socket drops and it
// reconnects. At each step the page's screen equals, row for row, tmux's
// rendering of the same bytes from the start at the session's 200×50
// (and the main screen's last 300 history rows equal tmux's), with the
// colours, modes and title the program set, at three window sizes,
// readable (a font of at least 10 px, every column within reach).
func TestConsoleLateViewerExact(t *testing.T) {
	bin := testenv.Chromium(t)
	dir := t.TempDir()
	parts := map[string][2][]byte{
		"alt":  {altProgram(1), altProgram(2)},
		"logs": {mainProgram(1), mainProgram(2)},
	}
	r := startMainOffice(t, "office:\n  name: Exact office\nagents:\n"+exactAgents(t, dir, parts))
	x := &exactRun{t: t, r: r, officeID: r.officeID(t), parts: parts, want: map[string]string{}}
	x.waitOutput("alt", "PART1-DONE")
	x.waitOutput("logs", "PART1-DONE")

	for i, win := range []struct{ w, h int }{{1440, 900}, {1024, 700}, {800, 600}} {
		name := fmt.Sprintf("%dx%d", win.w, win.h)
		ctx := chromeSized(t, bin, win.w, win.h)
		if err := chromedp.Do(ctx, chromedp.Navigate(r.base+"/?token="+r.token)); err != nil {
			t.Fatal(err)
		}
		openTerm(t, ctx, "alt")
		if i == 0 {
			x.compare(ctx, name+" opened late", "alt", 1)
			checkAltState(t, ctx, name+" opened late", 1)
			// More output while the page watches: the live stream
			// continues the snapshot with no gap and no overlap.
			if err := os.WriteFile(filepath.Join(dir, "go-alt"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		x.compare(ctx, name+" live", "alt", 2)
		checkAltState(t, ctx, name+" live", 2)
		checkReadable(t, ctx, name)
		saveScreenshot(t, ctx, "console-late-"+name+".png")
		dropSocket(t, ctx, name)
		x.compare(ctx, name+" after a dropped socket", "alt", 2)
		checkAltState(t, ctx, name+" after a dropped socket", 2)
		if i != 0 {
			continue
		}
		openTerm(t, ctx, "logs")
		x.compare(ctx, name+" opened late", "logs", 1)
		if err := os.WriteFile(filepath.Join(dir, "go-logs"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		x.compare(ctx, name+" live", "logs", 2)
		dropSocket(t, ctx, name)
		x.compare(ctx, name+" after a dropped socket", "logs", 2)
	}
}

// exactAgents writes each program's two parts and a script that writes
// part 1, waits for go-<name> in dir, then writes part 2; it returns the
// office's agents, one per program.
func exactAgents(t *testing.T, dir string, parts map[string][2][]byte) string {
	var agents strings.Builder
	for name, p := range parts {
		if len(p[0]) <= replayLimit {
			t.Fatalf("%s: part 1 is %d bytes, want more than the replay buffer", name, len(p[0]))
		}
		for i, data := range p {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s%d", name, i+1)), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		script := filepath.Join(dir, name+".sh")
		body := fmt.Sprintf("cat %[1]s/%[2]s1; while [ ! -e %[1]s/go-%[2]s ]; do sleep 0.1; done; cat %[1]s/%[2]s2; exec sleep 100000\n", dir, name)
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&agents, "  - name: %s\n    launch: {kind: command, command: /bin/sh, args: [%q]}\n", name, script)
	}
	return agents.String()
}

// exactRun holds the programs of TestConsoleLateViewerExact and tmux's
// renderings of them.
type exactRun struct {
	t        *testing.T
	r        *liveServer
	officeID string
	parts    map[string][2][]byte
	want     map[string]string
}

// render is tmux's rendering of name's parts up to upTo at 200×50 (with
// 300 history rows for logs).
func (x *exactRun) render(name string, upTo int) string {
	key := fmt.Sprint(name, upTo)
	if w, ok := x.want[key]; ok {
		return w
	}
	data := append([]byte{}, x.parts[name][0]...)
	if upTo == 2 {
		data = append(data, x.parts[name][1]...)
	}
	history := 0
	if name == "logs" {
		history = 300
	}
	w := tmuxCapture(x.t, data, 200, 50, history)
	x.want[key] = w
	return w
}

func (x *exactRun) waitOutput(name, marker string) {
	t, r := x.t, x.r
	deadline := time.Now().Add(60 * time.Second)
	r.waitAgent(t, x.officeID, name)
	for !strings.Contains(r.replay(t, x.officeID, name), marker) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed %s", name, marker)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// exactPage is what the page shows: the screen, or for logs the whole
// buffer's last rows as many as tmux gave.
func exactPage(t *testing.T, ctx context.Context, name string, want string) string {
	js := `window.consoleScreen()`
	if name == "logs" {
		js = `window.consoleText()`
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatal(err)
	}
	got = normScreen(got)
	if name == "logs" {
		lines, n := strings.Split(got, "\n"), strings.Count(want, "\n")+1
		got = strings.Join(lines[max(0, len(lines)-n):], "\n")
	}
	return got
}

// compare waits up to 30 s for the page to equal tmux's rendering.
func (x *exactRun) compare(ctx context.Context, label, name string, upTo int) {
	t := x.t
	t.Helper()
	want := x.render(name, upTo)
	var got string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		if got = exactPage(t, ctx, name, want); got == want {
			t.Logf("%s: %s equals tmux (%d rows)", label, name, strings.Count(want, "\n")+1)
			return
		}
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	same := 0
	for i := range min(len(gl), len(wl)) {
		if gl[i] == wl[i] {
			same++
		}
	}
	t.Fatalf("%s: %s: %d of %d rows equal to tmux.\npage:\n%s\ntmux:\n%s", label, name, same, len(wl), got, want)
}

func openTerm(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(`tr.agent[data-name="`+name+`"] a.open`)),
		chromedp.Click(chromedp.CSS(`tr.agent[data-name="`+name+`"] a.open`)),
		chromedp.WaitVisible(chromedp.CSS(`#term .xterm-screen`)),
	); err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
}

// dropSocket closes the page's socket and waits for its reconnection.
func dropSocket(t *testing.T, ctx context.Context, label string) {
	t.Helper()
	st := consoleState(t, ctx)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`state.term.ws.close(), true`)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); consoleState(t, ctx).Connects == st.Connects; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the page did not reconnect", label)
		}
	}
}

func checkReadable(t *testing.T, ctx context.Context, label string) {
	t.Helper()
	st := consoleState(t, ctx)
	if st.Font < 9.99 || !st.Reach {
		t.Errorf("%s: the terminal is drawn with a %.1f px font, every column within reach: %v (pane %d px, terminal %d px)", label, st.Font, st.Reach, st.PaneWidth, st.TermWidth)
	}
}

// checkAltState: the alt program's modes, title and four cells' colours.
func checkAltState(t *testing.T, ctx context.Context, label string, upTo int) {
	t.Helper()
	st := consoleState(t, ctx)
	title := "상황판 long TUI"
	if upTo == 2 {
		title = "second title"
	}
	if !st.Alt || !st.Bracketed || !st.AppCursor || st.Title != title {
		t.Errorf("%s: page terminal state %+v: want the alternate screen, bracketed paste, application cursor keys and the title %q", label, st, title)
	}
	for _, c := range []struct {
		x, y int
		want consoleCellState
	}{
		{0, 0, consoleCellState{Chars: "┌", Fg: 4, Bg: -1, Bold: true}},
		{3, 1, consoleCellState{Chars: "에", Fg: 3, Bg: 4, Bold: true}},
		{199, 49, consoleCellState{Chars: "┘", Fg: 4, Bg: -1}},
		{2, 44, consoleCellState{Chars: " ", Fg: -1, Bg: 2}},
	} {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[consoleCellState](fmt.Sprintf(`window.consoleCell(%d, %d)`, c.x, c.y)))
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s: cell %d,%d is %+v, want %+v", label, c.x, c.y, got, c.want)
		}
	}
}

type consoleCellState struct {
	Chars   string `json:"chars"`
	Fg      int    `json:"fg"`
	Bg      int    `json:"bg"`
	Bold    bool   `json:"bold"`
	Inverse bool   `json:"inverse"`
}

type consoleTermState struct {
	Alt, Bracketed, AppCursor, Reach bool
	Mouse, Title                     string
	Connects, PaneWidth, TermWidth   int
	Scale, Font                      float64
}

func consoleState(t *testing.T, ctx context.Context) consoleTermState {
	t.Helper()
	st, err := chromedp.Run(ctx, chromedp.Evaluate[consoleTermState](`window.consoleState()`))
	if err != nil {
		t.Fatal(err)
	}
	return st
}
