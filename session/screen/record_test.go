package screen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/google/uuid"

	"github.com/office-server/office-server/internal/anthropictest"
	"github.com/office-server/office-server/internal/geminitest"
	"github.com/office-server/office-server/internal/openaitest"
	"github.com/office-server/office-server/internal/testenv"
)

// The captures in testdata are raw PTY output of real programs. Re-make them
// with
//
//	go test ./session/screen -run TestRecord -record
//
// which runs each program in a PTY, saves its output (<name>.bin) and the
// terminal size and resizes (<name>.json), then replays the bytes into tmux,
// an independent terminal emulator, and saves what tmux shows as the
// expected text (<name>.golden). Check the new goldens by eye before
// committing them.
var record = flag.Bool("record", false, "re-record testdata captures from real programs (needs tmux and the claude binary)")

// recorder runs one program in a PTY and keeps everything it writes.
type recorder struct {
	t    *testing.T
	cmd  *exec.Cmd
	ptmx *os.File
	meta captureMeta
	mu   sync.Mutex
	out  bytes.Buffer
	last time.Time
	done chan struct{}
}

func startRecorder(t *testing.T, cols, rows int, dir string, env []string, name string, args ...string) *recorder {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "TERM=xterm-256color", "LANG=C.UTF-8", "LC_ALL=C.UTF-8"}, env...)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	r := &recorder{t: t, cmd: cmd, ptmx: ptmx, meta: captureMeta{Cols: cols, Rows: rows}, done: make(chan struct{}), last: time.Now()}
	go func() {
		defer close(r.done)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			if n > 0 {
				r.mu.Lock()
				r.out.Write(buf[:n])
				r.last = time.Now()
				r.mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		ptmx.Close()
		<-r.done
	})
	return r
}

func (r *recorder) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

func (r *recorder) typeKeys(s string) {
	r.t.Helper()
	if _, err := r.ptmx.Write([]byte(s)); err != nil {
		r.t.Fatalf("type: %v", err)
	}
}

// waitFor waits until the output contains s.
func (r *recorder) waitFor(s string) {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(r.output(), s) {
		if time.Now().After(deadline) {
			r.t.Fatalf("no %q in output:\n%q", s, r.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// quiet waits until nothing was written for d, counting from the call at
// the earliest (so that the program has time to react to what was typed).
func (r *recorder) quiet(d time.Duration) {
	start := time.Now()
	for {
		r.mu.Lock()
		idle := time.Since(r.last)
		r.mu.Unlock()
		idle = min(idle, time.Since(start))
		if idle >= d {
			return
		}
		time.Sleep(d - idle)
	}
}

func (r *recorder) resize(cols, rows int) {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := pty.Setsize(r.ptmx, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}); err != nil {
		r.t.Fatalf("resize: %v", err)
	}
	r.meta.Resizes = append(r.meta.Resizes, resizeEvent{Offset: r.out.Len(), Cols: cols, Rows: rows})
}

// turnEnd marks the end of a turn here (the program went quiet after a
// reply): a reader of the capture reads the live area at these offsets.
func (r *recorder) turnEnd() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.meta.TurnEnds = append(r.meta.TurnEnds, r.out.Len())
}

// exited waits for the program to end by itself.
func (r *recorder) exited() {
	r.t.Helper()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		r.t.Fatalf("program did not exit; output:\n%q", r.output())
	}
}

// save writes the capture and its expected rendering by tmux.
func (r *recorder) save(name, program string) {
	r.t.Helper()
	r.mu.Lock()
	data := bytes.Clone(r.out.Bytes())
	meta := r.meta
	r.mu.Unlock()
	meta.Program = program
	mb, _ := json.MarshalIndent(meta, "", "  ")
	if err := os.WriteFile(filepath.Join("testdata", name+".bin"), data, 0o644); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", name+".json"), append(mb, '\n'), 0o644); err != nil {
		r.t.Fatal(err)
	}
	want, err := tmuxRender(data, meta)
	if err != nil {
		r.t.Fatalf("render %s with tmux: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join("testdata", name+".golden"), []byte(want.String()), 0o644); err != nil {
		r.t.Fatal(err)
	}
	got := replay(data, meta, 0)
	if got.String() != want.String() {
		r.t.Errorf("%s: the screen model and tmux differ; compare before committing:\n--- model\n%s--- tmux\n%s", name, got, want)
	}
}

// tmuxRender plays data into a detached tmux pane of the capture's size,
// resizing between the parts, and reads back the history and the screen.
func tmuxRender(data []byte, meta captureMeta) (rendering, error) {
	dir, err := os.MkdirTemp("", "screen-tmux")
	if err != nil {
		return rendering{}, err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "sock")
	conf := filepath.Join(dir, "tmux.conf")
	os.WriteFile(conf, []byte("set -g status off\nset -g history-limit 100000\nset -g scroll-on-clear off\nset -g default-terminal xterm-256color\n"), 0o644)
	tmux := func(args ...string) (string, error) {
		cmd := exec.Command("tmux", append([]string{"-u", "-S", sock, "-f", conf}, args...)...)
		cmd.Env = append(os.Environ(), "LANG=C.UTF-8", "LC_ALL=C.UTF-8")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("tmux %v: %v: %s", args, err, out)
		}
		return string(out), nil
	}
	defer tmux("kill-server")
	parts, script, err := playScript(dir, sock, data, meta)
	if err != nil {
		return rendering{}, err
	}
	if _, err := tmux("new-session", "-d", "-s", "cap", "-x", strconv.Itoa(meta.Cols), "-y", strconv.Itoa(meta.Rows), script); err != nil {
		return rendering{}, err
	}
	for i := range parts {
		if _, err := tmux("wait-for", fmt.Sprintf("played%d", i)); err != nil {
			return rendering{}, err
		}
		time.Sleep(500 * time.Millisecond) // let tmux parse what cat wrote
		if i < len(meta.Resizes) {
			ev := meta.Resizes[i]
			if _, err := tmux("resize-window", "-t", "cap", "-x", strconv.Itoa(ev.Cols), "-y", strconv.Itoa(ev.Rows)); err != nil {
				return rendering{}, err
			}
			time.Sleep(200 * time.Millisecond)
		}
		if _, err := tmux("wait-for", "-S", fmt.Sprintf("go%d", i)); err != nil {
			return rendering{}, err
		}
	}
	info, err := tmux("display", "-p", "-t", "cap", "#{history_size} #{cursor_x} #{cursor_y}")
	if err != nil {
		return rendering{}, err
	}
	var hist int
	var r rendering
	if _, err := fmt.Sscan(info, &hist, &r.X, &r.Y); err != nil {
		return rendering{}, fmt.Errorf("tmux display %q: %w", info, err)
	}
	// tmux shows the pending-wrap state (the last column was written) as
	// the cursor one past the last column; the model keeps it on the last
	// column with a flag, as xterm does.
	cols := meta.Cols
	if n := len(meta.Resizes); n > 0 {
		cols = meta.Resizes[n-1].Cols
	}
	r.X = min(r.X, cols-1)
	out, err := tmux("capture-pane", "-p", "-t", "cap", "-S", "-", "-E", "-")
	if err != nil {
		return rendering{}, err
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if hist > len(lines) {
		return rendering{}, errors.New("tmux history longer than its capture")
	}
	r.Scrolled = lines[:hist]
	if hist == 0 {
		r.Scrolled = nil
	}
	r.Screen = trimEmpty(lines[hist:])
	return r, nil
}

// playScript writes data's parts between resizes into dir and returns
// them and the shell script that plays them one by one with a handshake
// (tmux wait-for on sock), so that a resize happens exactly between two
// parts.
func playScript(dir, sock string, data []byte, meta captureMeta) ([][]byte, string, error) {
	var parts [][]byte
	off := 0
	for _, ev := range meta.Resizes {
		parts = append(parts, data[off:ev.Offset])
		off = ev.Offset
	}
	parts = append(parts, data[off:])
	var script strings.Builder
	script.WriteString("stty raw -echo; ")
	for i, p := range parts {
		f := filepath.Join(dir, fmt.Sprintf("part%d", i))
		if err := os.WriteFile(f, p, 0o644); err != nil {
			return nil, "", err
		}
		fmt.Fprintf(&script, "cat %s; tmux -S %s wait-for -S played%d; tmux -S %s wait-for go%d; ", f, sock, i, sock, i)
	}
	script.WriteString("sleep 600")
	return parts, script.String(), nil
}

func TestRecord(t *testing.T) {
	if !*record {
		t.Skip("recording captures only with -record")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("recording needs tmux (apt-get install tmux) for the expected text")
	}
	work := t.TempDir()
	korean := filepath.Join(work, "korean.txt")
	var kb strings.Builder
	for i := 1; i <= 120; i++ {
		fmt.Fprintf(&kb, "%03d 한글 줄 — 가나다라 %d번째, 文字 ascii\n", i, i)
		if i%10 == 0 {
			fmt.Fprintf(&kb, "%03d 이 줄은 화면보다 넓어서 less와 vim이 다음 줄로 접어서 보여 줍니다: 가나다라마바사아자차카타파하\n", i)
		}
	}
	os.WriteFile(korean, []byte(kb.String()), 0o644)

	for _, rc := range recordings {
		t.Run(rc.name, func(t *testing.T) { rc.run(t, work, korean) })
	}
}

// recordings are the captures TestRecord makes: each runs a program in a
// terminal (work is a scratch directory, korean a file of 120 Korean
// lines) and saves what it drew.
var recordings = []struct {
	name string
	run  func(t *testing.T, work, korean string)
}{
	{"printf_korean", func(t *testing.T, work, korean string) {
		r := startRecorder(t, 40, 10, work, nil, "bash", "-c",
			`printf '안녕하세요, 세계!\n  질문:\e[9G로그인\e[16G방식을\n'; printf '%s\n' '이 줄은 마흔 칸보다 길어서 터미널이 알아서 다음 줄로 넘깁니다 (autowrap).'; printf 'tab\there\n\e[1;31m빨강\e[0m 보통\ncr: xxxxx\rok\n'`)
		r.exited()
		r.save("printf_korean", "bash -c printf… (Korean, cursor-drawn spaces, autowrap, tab, SGR, CR)")
	}},
	{"seq_korean", func(t *testing.T, work, korean string) {
		r := startRecorder(t, 30, 8, work, nil, "bash", "-c", `for i in $(seq 1 40); do echo "줄 $i: 한글 텍스트 $i"; done`)
		r.exited()
		r.save("seq_korean", "bash loop printing 40 Korean lines on 8 rows (scrolling)")
	}},
	{"ls_color", func(t *testing.T, work, korean string) {
		dir := filepath.Join(work, "ls")
		os.MkdirAll(filepath.Join(dir, "디렉터리"), 0o755)
		for _, f := range []string{"a.txt", "보고서.md", "long-file-name-number-one.go", "사진.png"} {
			os.WriteFile(filepath.Join(dir, f), nil, 0o644)
		}
		os.WriteFile(filepath.Join(dir, "실행.sh"), nil, 0o755)
		os.Symlink("a.txt", filepath.Join(dir, "링크"))
		r := startRecorder(t, 50, 8, dir, nil, "ls", "--color=always", "-C")
		r.exited()
		r.save("ls_color", "ls --color=always -C on Korean file names")
	}},
	{"bash_prompt", func(t *testing.T, work, korean string) {
		r := startRecorder(t, 40, 12, work, []string{"PS1=[사무실] \\$ ", "HOME=" + work, "INPUTRC=/dev/null"}, "bash", "--norc", "--noprofile", "-i")
		r.waitFor("] ")
		r.typeKeys("echo 안녕 세계\r")
		r.waitFor("안녕 세계\r\n")
		r.quiet(300 * time.Millisecond)
		r.typeKeys("echo 이 명령은 길어서 readline이 줄을 넘겨 그립니다 abcdefghij\r")
		r.quiet(500 * time.Millisecond)
		r.typeKeys("printf 'x\\ty\\n'; exit\r")
		r.exited()
		r.save("bash_prompt", "interactive bash with a Korean prompt, readline wrapping a long Korean command")
	}},
	{"less_korean", func(t *testing.T, work, korean string) {
		r := startRecorder(t, 60, 12, work, []string{"LESSHISTFILE=-", "HOME=" + work}, "less", korean)
		r.waitFor("korean.txt")
		r.quiet(300 * time.Millisecond)
		r.typeKeys(" ")
		r.quiet(300 * time.Millisecond)
		r.typeKeys("jjj")
		r.quiet(300 * time.Millisecond)
		r.typeKeys("kkkk") // backwards: reverse index
		r.quiet(300 * time.Millisecond)
		r.save("less_korean", "less on 120 Korean lines: page, line down, line up (RI); recorded while it runs")
	}},
	{"vim_scroll", func(t *testing.T, work, korean string) {
		r := startRecorder(t, 60, 12, work, []string{"HOME=" + work}, "vim", "-u", "NONE", "-N", "-n", "-i", "NONE", "+set nomore", korean)
		r.waitFor("korean.txt")
		r.quiet(500 * time.Millisecond)
		for _, keys := range []string{"\x05\x05\x05", "10j", "\x19\x19", "3dd", "O새 줄 — 삽입 모드\x1b", "30G", "\x06"} {
			r.typeKeys(keys)
			r.quiet(300 * time.Millisecond)
		}
		r.save("vim_scroll", "vim -u NONE: scroll (scroll regions), delete lines, insert Korean, page; recorded while it runs")
	}},
	{"vim_resize", func(t *testing.T, work, korean string) {
		r := startRecorder(t, 60, 12, work, []string{"HOME=" + work}, "vim", "-u", "NONE", "-N", "-n", "-i", "NONE", korean)
		r.waitFor("korean.txt")
		r.quiet(500 * time.Millisecond)
		r.resize(45, 9)
		r.quiet(500 * time.Millisecond)
		r.typeKeys("20G")
		r.quiet(300 * time.Millisecond)
		r.resize(70, 14)
		r.quiet(500 * time.Millisecond)
		r.save("vim_resize", "vim resized twice while showing Korean text; recorded while it runs")
	}},
	{"agent_blocks", func(t *testing.T, work, korean string) {
		r := startRecorder(t, 80, 24, work, nil, "bash", "-c", `for i in $(seq 1 30); do
  printf '\e[1m● [INVOKE:개발자]\e[0m\n  작업 %d:\e[12G로그인\e[2C화면을 만들어 주세요\n  context: 이슈 #%d\n  [/INVOKE]\n' $i $i
  printf '[ASK_USER]\n질문: %d번째 질문입니다. 계속할까요?\n타입: confirmation\n[/ASK_USER]\n' $i
done`)
		r.exited()
		r.save("agent_blocks", "a scripted command agent printing 30 [INVOKE] and 30 [ASK_USER] blocks with SGR and cursor-drawn spaces (scrolls)")
	}},
	{"claude_korean", func(t *testing.T, work, korean string) { recordClaude(t, "claude_korean", false) }},
	{"claude_resize", func(t *testing.T, work, korean string) { recordClaude(t, "claude_resize", true) }},
	{"qwen_repaint", func(t *testing.T, work, korean string) { recordCLI(t, "qwen_repaint", "qwen") }},
	{"codex_repaint", func(t *testing.T, work, korean string) { recordCLI(t, "codex_repaint", "codex") }},
	{"gemini_repaint", func(t *testing.T, work, korean string) { recordGemini(t, "gemini_repaint", true) }},
	{"gemini_resize", func(t *testing.T, work, korean string) { recordGemini(t, "gemini_resize", false) }},
}

// cliReply is the scripted model's answer in the repaint captures: a few
// lines, Korean text, a line wider than the screen and one [ASK_USER]
// block, the same block every turn (printed again on purpose).
func cliReply(turn int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "턴 %d의 답변입니다.\n", turn)
	for i := 1; i <= 4; i++ {
		fmt.Fprintf(&b, "줄 %d: 답변의 한 줄 — line %d of turn %d.\n", i, i, turn)
	}
	b.WriteString("[ASK_USER]\n질문: 배포를 진행할까요? 이 질문은 화면 폭보다 길어서 프로그램이 스스로 줄을 바꿔 그립니다 — 결제 모듈과 로그인 모듈을 함께 올립니다.\n타입: confirmation\n[/ASK_USER]\n")
	fmt.Fprintf(&b, "턴 %d 끝.", turn)
	return b.String()
}

// recordCLI records a real CLI agent (qwen or codex) against openaitest,
// 100x30: three turns whose replies carry the same [ASK_USER] block (on
// purpose), resized to 80x24 after the first; each turn pushes the earlier
// replies up the screen.
func recordCLI(t *testing.T, name, cli string) {
	bin := testenv.CLIBin(t, cli)
	srv := openaitest.New(t)
	dir := "/tmp/office-screen-capture"
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	home := t.TempDir()
	var env []string
	switch cli {
	case "qwen":
		if err := openaitest.PrepareQwen(home); err != nil {
			t.Fatal(err)
		}
		env = srv.QwenEnv(home)
		srv.Side(openaitest.QwenSide)
	case "codex":
		if err := srv.PrepareCodex(home); err != nil {
			t.Fatal(err)
		}
		env = srv.CodexEnv(home)
	}
	for turn := 1; turn <= 3; turn++ {
		reply := cliReply(turn)
		srv.Enqueue(openaitest.Response{Text: reply, Chunks: splitEvery(reply, 60), Delay: 30 * time.Millisecond})
	}
	var args []string
	if cli == "codex" {
		// --no-daemon: its shared server would outlive the recording; no
		// update check, as the office runs it (session/codex.go).
		args = []string{"--no-daemon", "-c", "check_for_update_on_startup=false"}
	}
	r := startRecorder(t, 100, 30, dir, env, bin, args...)
	r.waitFor(map[string]string{"qwen": "Type your message", "codex": "Ask Codex"}[cli])
	r.quiet(2 * time.Second)
	for turn := 1; turn <= 3; turn++ {
		r.typeKeys(fmt.Sprintf("turn %d: please answer", turn))
		time.Sleep(500 * time.Millisecond)
		// An Enter while the program is still busy starting up is lost:
		// press it again until the request comes (on an empty input box
		// Enter does nothing).
		for try := 0; ; try++ {
			r.typeKeys("\r")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := srv.WaitMain(ctx, turn)
			cancel()
			if err == nil {
				break
			}
			if try == 5 {
				t.Fatalf("%v\n%q", err, r.output())
			}
		}
		r.quiet(5 * time.Second)
		r.turnEnd()
		if turn == 1 {
			r.resize(80, 24)
			r.quiet(2 * time.Second)
		}
	}
	for _, q := range srv.Requests() {
		var body struct {
			Messages []struct {
				Role    string
				Content any
			}
		}
		json.Unmarshal(q.Body, &body)
		last := ""
		if n := len(body.Messages); n > 0 {
			last = fmt.Sprintf("%s %.300v", body.Messages[n-1].Role, body.Messages[n-1].Content)
		}
		t.Logf("request %d main=%v tools=%d stream=%v system=%.60q last=%s", q.Seq, q.Main, q.Tools, q.Stream, q.System, last)
	}
	r.save(name, cli+" against openaitest: three replies with the same [ASK_USER] block (Korean, a wide line), resized 100x30 → 80x24 after the first")
}

// geminiReply is the scripted Gemini reply of turn n in the gemini_repaint
// capture: taller than the screen (so the CLI clears the screen and its
// scrollback and paints the history again), Korean lines, lines wider than
// the screen (the CLI wraps them at word boundaries), and the same
// [ASK_USER] block every turn (printed again on purpose); turn 1 also has
// an [INVOKE] block. The lines differ from each other (the CLI cuts a reply
// of identical lines as a loop).
func geminiReply(turn int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "턴 %d의 긴 답변입니다.\n", turn)
	for i := 1; i <= 18; i++ {
		fmt.Fprintf(&b, "줄 %d.%d %s — line %d of a long reply (%d).\n", turn, i, strings.Repeat("가", i%7+1), i, i*i+turn)
		if i%6 == 0 {
			fmt.Fprintf(&b, "넓은 줄 %d.%d: 이 줄은 화면 폭보다 길어서 프로그램이 단어 경계에서 스스로 줄을 바꿉니다 — a line wider than the screen, number %d.\n", turn, i, i)
		}
	}
	if turn == 1 {
		b.WriteString("[INVOKE:개발자]\n로그인 화면을 만들어 주세요. 이 작업 설명은 길어서 화면 폭을 넘고 프로그램이 줄을 바꿔 그립니다 — 결제 화면과 같은 모양으로.\ncontext: 이슈 #13\n[/INVOKE]\n")
	}
	b.WriteString("[ASK_USER]\n질문: 배포를 진행할까요? 이 질문은 화면 폭보다 길어서 프로그램이 스스로 줄을 바꿔 그립니다 — 결제 모듈과 로그인 모듈을 함께 올립니다.\n타입: confirmation\n[/ASK_USER]\n")
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&b, "뒤 줄 %d.%d — more of the long reply, %d.\n", turn, i, i*7+turn)
	}
	fmt.Fprintf(&b, "턴 %d 끝.", turn)
	return b.String()
}

// recordGemini records the real Gemini CLI against geminitest, 100x30:
// three turns of long replies (taller than the screen), resized to 80x24 in
// the middle of the first reply (mid); or a long reply, a resize to 80x24
// after it, and two short replies (not mid).
func recordGemini(t *testing.T, name string, mid bool) {
	bin := testenv.CLIBin(t, "gemini")
	srv := geminitest.New(t)
	dir := "/tmp/office-screen-capture"
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	home := t.TempDir()
	if err := geminitest.Prepare(home); err != nil {
		t.Fatal(err)
	}
	for turn := 1; turn <= 3; turn++ {
		reply := geminiReply(turn)
		if turn > 1 && !mid {
			// Short: the screen is not cleared again, so what the
			// resize left of the first reply stays in the history.
			reply = cliReply(turn)
		}
		srv.Enqueue(geminitest.Response{Text: reply, Chunks: splitEvery(reply, 60), Delay: 80 * time.Millisecond})
	}
	// The folder trusted as the office trusts an agent's (session/gemini.go).
	env := append(srv.Env(home), "GEMINI_CLI_TRUST_WORKSPACE=true")
	r := startRecorder(t, 100, 30, dir, env, bin, "--session-id", "00000000-0000-4000-8000-00000000ca9e")
	r.waitFor("Type your message")
	r.quiet(2 * time.Second)
	for turn := 1; turn <= 3; turn++ {
		r.typeKeys(fmt.Sprintf("turn %d: please answer", turn))
		time.Sleep(500 * time.Millisecond)
		for try := 0; ; try++ {
			r.typeKeys("\r")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := srv.WaitMain(ctx, turn)
			cancel()
			if err == nil {
				break
			}
			if try == 5 {
				t.Fatalf("%v\n%q", err, r.output())
			}
		}
		if turn == 1 && mid {
			// In the middle of the reply: after its second wide line
			// (the Korean words are drawn a syllable at a time).
			r.waitFor("number 12.")
			r.resize(80, 24)
		}
		r.quiet(5 * time.Second)
		r.turnEnd()
		if turn == 1 && !mid {
			r.resize(80, 24)
			r.quiet(2 * time.Second)
		}
	}
	what := "three long replies (taller than the screen: cleared and painted again) with the same [ASK_USER] block (Korean, wide lines), an [INVOKE] in the first; resized 100x30 → 80x24 in the middle of the first reply"
	if !mid {
		what = "a long reply (taller than the screen: cleared and painted again) with an [INVOKE] and an [ASK_USER] block (Korean, wide lines), resized 100x30 → 80x24 after it (the CLI does not paint its history again: the terminal reflows it), then two short replies with the same [ASK_USER] block"
	}
	r.save(name, "Gemini CLI 0.61.0 against geminitest: "+what)
}

// claudeReply is the scripted model's answer in the Claude Code captures: a
// Korean [ASK_USER] block with a line too long for the screen, and Markdown.
const claudeReply = "[ASK_USER]\n" +
	"질문: 로그인 방식을 골라 주세요. 이 줄은 화면 폭보다 길어서 Claude Code가 스스로 단어 경계에서 줄을 바꿔 그려야 합니다.\n" +
	"타입: selection\n" +
	"옵션: [\"OAuth\", \"비밀번호\"]\n" +
	"[/ASK_USER]\n\n" +
	"## 참고\n\n" +
	"- **OAuth**: 외부 인증 서버를 씁니다\n" +
	"- `password`: 내부에 해시로 저장합니다\n\n" +
	"```go\nfmt.Println(\"안녕\")\n```\n"

func recordClaude(t *testing.T, name string, resize bool) {
	bin := testenv.ClaudeBin(t)
	srv := anthropictest.New(t)
	// A fixed working directory: Claude Code prints it in its banner.
	dir := "/tmp/office-screen-capture"
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	home := t.TempDir()
	if err := anthropictest.PrepareHome(home, dir, srv.Key); err != nil {
		t.Fatal(err)
	}
	resp := anthropictest.Response{Text: claudeReply}
	if resize {
		// Slow enough that the resize lands in the middle of the reply.
		resp.Chunks = splitEvery(claudeReply, 12)
		resp.Delay = 40 * time.Millisecond
	}
	srv.Enqueue(resp)
	id := uuid.NewString()
	r := startRecorder(t, 100, 30, dir, srv.Env(home), bin, "--session-id", id)
	r.waitFor("\u276f")
	r.quiet(500 * time.Millisecond)
	r.typeKeys("\x1b[200~로그인 방식을 정해 주세요.\n짧게 물어봐 주세요.\x1b[201~")
	time.Sleep(300 * time.Millisecond)
	r.typeKeys("\r")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := srv.WaitMain(ctx, 1); err != nil {
		t.Fatalf("%v\n%q", err, r.output())
	}
	if resize {
		time.Sleep(800 * time.Millisecond)
		r.resize(80, 24)
	}
	r.waitFor("Println")
	r.quiet(1500 * time.Millisecond)
	saveTranscript(t, anthropictest.TranscriptPath(home, dir, id), filepath.Join("testdata", name+".jsonl"))
	r.save(name, "Claude Code 2.1.330 against anthropictest: a Korean paste, a reply with [ASK_USER], a wrapping line and Markdown"+map[bool]string{true: "; resized 100x30 → 80x24 while the reply streamed", false: ""}[resize])
}

// saveTranscript copies the conversation entries of a Claude Code transcript
// (user, assistant, system), leaving out the bulky request records and
// attachments that hold Claude Code's own prompts.
func saveTranscript(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatalf("transcript: %v", err)
	}
	var out []byte
	for _, l := range bytes.Split(data, []byte("\n")) {
		var e struct{ Type string }
		if json.Unmarshal(l, &e) != nil {
			continue
		}
		switch e.Type {
		case "user", "assistant", "system":
			out = append(append(out, l...), '\n')
		}
	}
	if err := os.WriteFile(to, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func splitEvery(s string, n int) []string {
	var out []string
	rs := []rune(s)
	for len(rs) > 0 {
		k := min(n, len(rs))
		out = append(out, string(rs[:k]))
		rs = rs[k:]
	}
	return out
}
