package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/office-server/office-server/internal/testenv"
)

// tuiScript draws a full-screen TUI at the terminal's size (stty size) and
// draws it again on every resize (SIGWINCH): a border on every edge, the
// bottom-right corner written last (the pending-wrap case), text at
// absolute positions, colours, an erased line tail, a row right-aligned.
// A viewer that re-wrapped the output at another width would garble it.
const tuiScript = `
draw() {
  set -- $(stty size); r=$1; c=$2
  line=$(printf '%*s' $((c-2)) '' | tr ' ' '=')
  printf '\033[?1049h\033[H\033[2J'
  printf '+%s+' "$line"
  i=2; while [ $i -lt $r ]; do printf '\033[%d;1H|\033[%d;%dH|' $i $i $c; i=$((i+1)); done
  printf '\033[3;4H\033[1;32mTUI %dx%d\033[0m' $c $r
  printf '\033[5;4Hlist and done commands: the quick brown fox jumps over the lazy dog 0123456789'
  printf '\033[7;%dHright-aligned' $((c-14))
  j=0; while [ $j -lt 8 ]; do printf '\033[9;%dHcol%d' $((4+j*12)) $j; j=$((j+1)); done
  printf '\033[11;4Habcdefghij\033[11;7H\033[K'
  printf '\033[%d;4H\033[7m status: drawn \033[0m' $((r-1))
  printf '\033[%d;1H+%s+' $r "$line"
  printf '\033[%d;%dH' $((r/2)) $((c/2))
}
trap draw WINCH
draw
while :; do sleep 1 & wait $!; done
`

// needyScript asks for a dependency and then repeats what it is told.
const needyScript = `printf '[DEPENDENCY_REQUEST]\ntype: env_variable\nname: API_URL\ndescription: where the API lives\nrequired: true\n[/DEPENDENCY_REQUEST]\n'
echo 'needy>'
while IFS= read -r l; do echo "got: $l"; echo 'needy>'; done
`

// terminalOffice has the TUI agent, one that crashes with a reason and one
// that needs a dependency.
func terminalOffice(dir string) string {
	tui := filepath.Join(dir, "tui.sh")
	_ = os.WriteFile(tui, []byte(tuiScript), 0o755)
	needy := filepath.Join(dir, "needy.sh")
	_ = os.WriteFile(needy, []byte(needyScript), 0o755)
	return fmt.Sprintf(`
office:
  name: Terminal office
agents:
  - name: tui
    role: Full-screen program
    launch: {kind: command, command: /bin/sh, args: [%q]}
  - name: crasher
    role: Crashes
    launch: {kind: command, command: /bin/sh, args: [-c, "echo 'crasher: cannot open /nonexistent/app.toml: no such file'; exit 3"]}
  - name: needy
    role: Needs a dependency
    launch: {kind: command, command: /bin/sh, args: [%q], prompt_pattern: "^needy>$"}
`, tui, needy)
}

// startMainOffice runs the serve command on the embedded store with the
// given office file until the test ends.
func startMainOffice(t *testing.T, officeYAML string) *liveServer {
	t.Helper()
	dir := t.TempDir()
	officePath := filepath.Join(dir, "office.yaml")
	if err := os.WriteFile(officePath, []byte(officeYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseServeConfig([]string{"--data-dir", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0", "--office", officePath, "--shutdown-timeout", "10s"},
		func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return runMain(t, cfg, filepath.Join(dir, "data"))
}

// chromeSized is chromeContext with the given window size.
func chromeSized(t *testing.T, bin string, w, h int) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(w, h),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, tcancel := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { tcancel(); cancel(); acancel() })
	return ctx
}

// tmuxScreen renders bytes in tmux at cols×rows and returns its screen
// (capture-pane), rows with trailing spaces dropped.
func tmuxScreen(t *testing.T, data []byte, cols, rows int) string {
	t.Helper()
	return tmuxCapture(t, data, cols, rows, 0)
}

// tmuxCapture is tmuxScreen with the last history rows of tmux's
// scrollback above the screen.
func tmuxCapture(t *testing.T, data []byte, cols, rows, history int) string {
	t.Helper()
	bin, err := exec.LookPath("tmux")
	if err != nil {
		testenv.Missing(t, "tmux", "run scripts/setup.sh (apt-get install tmux)")
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "bytes")
	if err := os.WriteFile(f, data, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	tmux := func(args ...string) string {
		cmd := exec.Command(bin, append([]string{"-S", sock, "-f", "/dev/null"}, args...)...)
		cmd.Env = append(os.Environ(), "TERM=xterm-256color")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-s", "v", "-x", fmt.Sprint(cols), "-y", fmt.Sprint(rows), "cat "+f+"; sleep 60")
	defer func() { _ = exec.Command(bin, "-S", sock, "kill-server").Run() }()
	// Wait until the screen stops changing (cat is done).
	prev, same := "", 0
	for range 100 {
		time.Sleep(50 * time.Millisecond)
		cur := tmux("capture-pane", "-p", "-t", "v", "-S", fmt.Sprint(-history))
		if cur == prev && cur != "" {
			if same++; same == 3 {
				break
			}
		} else {
			same = 0
		}
		prev = cur
	}
	return normScreen(prev)
}

// normScreen drops trailing spaces of every row and trailing empty rows.
func normScreen(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\u00a0", " "), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}

// TestConsoleTerminalMatchesTmux opens a full-screen program's terminal in
// the console at two window sizes, read-only: the page draws it at the
// session's own size (scaled into the pane) and shows exactly what tmux
// shows for the same bytes at that size. Taking control in the small
// window resizes the session to fit, the program redraws, and the page
// again equals tmux at the new size. A crashing agent is listed at the top
// with its reason.
func TestConsoleTerminalMatchesTmux(t *testing.T) {
	bin := testenv.Chromium(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		testenv.Missing(t, "tmux", "run scripts/setup.sh (apt-get install tmux)")
	}
	r := startMainOffice(t, terminalOffice(t.TempDir()))
	officeID := r.officeID(t)

	tm := tuiRun{t: t, r: r, officeID: officeID}
	size, compare := tm.size, tm.compare

	for _, win := range []struct{ w, h int }{{1440, 900}, {1024, 700}} {
		name := fmt.Sprintf("%dx%d", win.w, win.h)
		ctx := chromeSized(t, bin, win.w, win.h)
		if err := chromedp.Do(ctx,
			chromedp.Navigate(r.base+"/?token="+r.token),
			chromedp.WaitVisible(chromedp.CSS(`tr.agent[data-name="tui"] a.open`)),
			chromedp.Click(chromedp.CSS(`tr.agent[data-name="tui"] a.open`)),
		); err != nil {
			t.Fatalf("%s: open the terminal: %v", name, err)
		}
		c0, r0 := size()
		compare(ctx, name+" read-only")
		if c, rr := size(); c != c0 || rr != r0 {
			t.Fatalf("%s: a read-only viewer changed the session's size from %dx%d to %dx%d", name, c0, r0, c, rr)
		}
		// The crash is at the top, with its reason.
		if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#attention .card.agent[data-name="crasher"]`))); err != nil {
			t.Fatalf("%s: the crashed agent is not in the needs-you list: %v", name, err)
		}
		detail, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#attention .card.agent[data-name="crasher"]').innerText`))
		if err != nil || !strings.Contains(detail, "cannot open /nonexistent/app.toml") {
			t.Errorf("%s: crash card %q (%v): want the reason the agent printed", name, detail, err)
		}
		saveScreenshot(t, ctx, "console-terminal-"+name+".png")
		if win.w != 1024 {
			tm.pinned(ctx, c0, r0)
			provideDependency(t, ctx, r, officeID)
			continue
		}
		// Take control and fit in the small window: the session takes
		// the pane's size, the program redraws, every viewer follows.
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#takefit`)), chromedp.WaitVisible(chromedp.CSS(`body[data-control="you"]`))); err != nil {
			t.Fatalf("take control: %v", err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for c, rr := size(); c == c0 && rr == r0; c, rr = size() {
			if time.Now().After(deadline) {
				t.Fatalf("taking control did not resize the session to the pane (still %dx%d)", c, rr)
			}
			time.Sleep(100 * time.Millisecond)
		}
		compare(ctx, name+" in control")
		saveScreenshot(t, ctx, "console-terminal-control.png")
	}
}

// tuiRun is the office of TestConsoleTerminalMatchesTmux.
type tuiRun struct {
	t        *testing.T
	r        *liveServer
	officeID string
}

// size is the tui session's size.
func (tm tuiRun) size() (int, int) {
	var a struct{ Cols, Rows int }
	tm.r.get(tm.t, "/api/offices/"+tm.officeID+"/agents/tui", &a)
	return a.Cols, a.Rows
}

// compare waits until the page shows the TUI at the session's size and
// equals tmux's rendering of the session's bytes.
func (tm tuiRun) compare(ctx context.Context, label string) {
	t, r, officeID := tm.t, tm.r, tm.officeID
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var page, want string
	var cols, rows int
	for time.Now().Before(deadline) {
		cols, rows = tm.size()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`window.consoleSize()`))
		if err != nil {
			t.Fatal(err)
		}
		p, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.consoleScreen()`))
		if err == nil {
			page = normScreen(p)
		}
		if len(got) == 2 && got[0] == cols && got[1] == rows && strings.Contains(page, fmt.Sprintf("TUI %dx%d", cols, rows)) {
			want = tmuxScreen(t, []byte(r.replay(t, officeID, "tui")), cols, rows)
			if page == want {
				t.Logf("%s: page equals tmux at %dx%d", label, cols, rows)
				return
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("%s: the page's terminal (session %dx%d) is not tmux's rendering.\npage:\n%s\ntmux:\n%s", label, cols, rows, page, want)
}

// pinned: pinned, the TUI stays on as a preview (tmux's rendering at
// c0×r0) while another agent's terminal is open.
func (tm tuiRun) pinned(ctx context.Context, c0, r0 int) {
	t, r, officeID := tm.t, tm.r, tm.officeID
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#pin`)),
		chromedp.Click(chromedp.CSS(`tr.agent[data-name="needy"] a.open`)),
		chromedp.WaitVisible(chromedp.CSS(`#minis .mini[data-name="tui"] .xterm-screen`)),
	); err != nil {
		t.Fatalf("pin the TUI and open needy: %v", err)
	}
	var pinned string
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(pinned, fmt.Sprintf("TUI %dx%d", c0, r0)); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the pinned preview shows:\n%s", pinned)
		}
		pinned, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`window.consolePinned("tui")`))
	}
	if want := tmuxScreen(t, []byte(r.replay(t, officeID, "tui")), c0, r0); normScreen(pinned) != want {
		t.Errorf("the pinned preview is not tmux's rendering:\n%s\ntmux:\n%s", pinned, want)
	}
	saveScreenshot(t, ctx, "console-pinned.png")
}

// provideDependency answers needy's dependency request from its card in
// the needs-you list; the agent is told.
func provideDependency(t *testing.T, ctx context.Context, r *liveServer, officeID string) {
	t.Helper()
	card := `#attention .card.dependency`
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(card+` input.value`)),
		chromedp.SendKeys(chromedp.CSS(card+` input.value`), "http://api.example:8080"),
		chromedp.Click(chromedp.CSS(card+` button.provide`)),
		chromedp.WaitNotPresent(chromedp.CSS(card)),
	); err != nil {
		t.Fatalf("provide the dependency in the page: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	// The office tells the agent (the value itself is put in its
	// environment, never typed).
	for !strings.Contains(r.replay(t, officeID, "needy"), "DEPENDENCY_PROVIDED") {
		if time.Now().After(deadline) {
			t.Fatalf("the provided value never reached the agent:\n%s", r.replay(t, officeID, "needy"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
