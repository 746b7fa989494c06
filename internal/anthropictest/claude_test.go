package anthropictest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/office-server/office-server/internal/testenv"
)

// term is the real claude binary in a PTY, its output collected.
type term struct {
	t    *testing.T
	cmd  *exec.Cmd
	ptmx *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func startClaude(t *testing.T, srv *anthropictest.Server, home, dir string, args ...string) *term {
	t.Helper()
	return startClaudeEnv(t, srv, home, dir, false, args...)
}

func startClaudeEnv(t *testing.T, srv *anthropictest.Server, home, dir string, traffic bool, args ...string) *term {
	t.Helper()
	bin := testenv.ClaudeBin(t)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "TERM=xterm-256color", "LANG=C.UTF-8"}, srv.Env(home)...)
	if traffic {
		var env []string
		for _, e := range cmd.Env {
			if !strings.HasPrefix(e, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=") {
				env = append(env, e)
			}
		}
		cmd.Env = env
	}
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 120, Rows: 40})
	if err != nil {
		t.Fatalf("start claude: %v", err)
	}
	tm := &term{t: t, cmd: cmd, ptmx: ptmx, done: make(chan struct{})}
	go func() {
		defer close(tm.done)
		buf := make([]byte, 32<<10)
		for {
			n, err := ptmx.Read(buf)
			if n > 0 {
				tm.mu.Lock()
				tm.out.Write(buf[:n])
				tm.mu.Unlock()
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
		<-tm.done
	})
	return tm
}

func (tm *term) output() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.out.String()
}

// waitOutput waits until the raw output contains s.
func (tm *term) waitOutput(ctx context.Context, s string) error {
	for {
		if strings.Contains(tm.output(), s) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tm.done:
			return errors.New("claude exited")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (tm *term) write(s string) {
	tm.t.Helper()
	if _, err := tm.ptmx.Write([]byte(s)); err != nil {
		tm.t.Fatalf("write to pty: %v", err)
	}
}

// transcriptEntry is the part of a transcript line the test reads.
type transcriptEntry struct {
	Type        string `json:"type"`
	UUID        string `json:"uuid"`
	IsSidechain bool   `json:"isSidechain"`
	SessionID   string `json:"sessionId"`
	Message     struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		StopReason *string         `json:"stop_reason"`
	} `json:"message"`
}

func readTranscript(path string) ([]transcriptEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []transcriptEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e transcriptEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// assistantText returns the text of the main-chain assistant entries ending
// with end_turn.
func assistantText(es []transcriptEntry) (string, bool) {
	var b strings.Builder
	for _, e := range es {
		if e.Type != "assistant" || e.IsSidechain {
			continue
		}
		var blocks []struct{ Type, Text string }
		_ = json.Unmarshal(e.Message.Content, &blocks)
		for _, bl := range blocks {
			if bl.Type == "text" {
				b.WriteString(bl.Text)
			}
		}
		if e.Message.StopReason != nil && *e.Message.StopReason == "end_turn" {
			return b.String(), true
		}
	}
	return b.String(), false
}

// brief describes a request's messages in one line each.
func brief(r anthropictest.Request) string {
	var b strings.Builder
	for _, m := range r.Messages {
		for _, c := range m.Content {
			t := c.Text
			if len(t) > 60 {
				t = t[:60] + "…"
			}
			b.WriteString("\n  " + m.Role + " " + c.Type + " " + strconv.Quote(t))
		}
	}
	return b.String()
}

// waitTurns waits until the transcript holds n assistant entries with end_turn.
func waitTurns(ctx context.Context, path string, n int) ([]transcriptEntry, error) {
	for {
		es, err := readTranscript(path)
		if err == nil {
			k := 0
			for _, e := range es {
				if e.Type == "assistant" && e.Message.StopReason != nil && *e.Message.StopReason == "end_turn" {
					k++
				}
			}
			if k >= n {
				return es, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func waitTranscript(ctx context.Context, path string) (string, error) {
	for {
		es, err := readTranscript(path)
		if err == nil {
			if s, ok := assistantText(es); ok {
				return s, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestClaudeCode drives the real Claude Code binary against the scripted
// server: a prompt typed into its terminal arrives as the main request, the
// scripted reply lands in the transcript, the next prompt carries the earlier
// messages, and a resumed session sends the whole conversation again.
func TestClaudeCode(t *testing.T) {
	srv := anthropictest.New(t)
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "work_dir.x")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := anthropictest.PrepareHome(home, dir, srv.Key); err != nil {
		t.Fatal(err)
	}
	reply1 := "[ASK_USER]\n질문: 로그인 방식을 골라 주세요\n**옵션**: [OAuth, 비밀번호]\n[/ASK_USER]"
	srv.Enqueue(anthropictest.Response{Text: reply1, Delay: 5 * time.Millisecond})
	srv.Enqueue(anthropictest.Response{Text: "두 번째 답"})
	id := uuid.NewString()

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	started := time.Now()
	tm := startClaude(t, srv, home, dir, "--session-id", id)
	// Bracketed paste is turned on in the first write, before Claude Code
	// takes input; the prompt box (❯) is drawn when it does.
	if err := tm.waitOutput(ctx, "\x1b[?2004h"); err != nil {
		t.Fatalf("wait for bracketed paste on: %v\n%q", err, tm.output())
	}
	t.Logf("bracketed paste on after %v", time.Since(started))
	if err := tm.waitOutput(ctx, "\u276f"); err != nil {
		t.Fatalf("wait for the prompt box: %v\n%q", err, tm.output())
	}
	t.Logf("prompt box after %v", time.Since(started))
	time.Sleep(200 * time.Millisecond)
	tm.write("\x1b[200~첫 질문입니다\n둘째 줄\x1b[201~")
	time.Sleep(300 * time.Millisecond)
	tm.write("\r")

	r1, err := srv.WaitMain(ctx, 1)
	if err != nil {
		t.Fatalf("%v\nunknown: %v\noutput: %q", err, srv.Unknown(), tm.output())
	}
	t.Logf("first main request after %v: model %s, %d tools, stream %v", time.Since(started), r1.Model, len(r1.Tools), r1.Stream)
	if got, want := r1.LastUserText(), "첫 질문입니다\n둘째 줄"; got != want {
		t.Errorf("first request's user text = %q, want %q", got, want)
	}
	path := anthropictest.TranscriptPath(home, dir, id)
	text, err := waitTranscript(ctx, path)
	if err != nil {
		entries, _ := os.ReadDir(filepath.Join(home, ".claude", "projects"))
		t.Fatalf("transcript %s: %v; projects: %v\noutput: %q", path, err, entries, tm.output())
	}
	if text != reply1 {
		t.Errorf("transcript text = %q, want %q", text, reply1)
	}

	tm.write("답: OAuth")
	time.Sleep(300 * time.Millisecond)
	tm.write("\r")
	r2, err := srv.WaitMain(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := r2.LastUserText(); got != "답: OAuth" {
		t.Errorf("second request's user text = %q", got)
	}
	if !hasAssistant(r2, reply1) {
		t.Errorf("second request lacks the first reply: %s", brief(r2))
	}
	if _, err := waitTurns(ctx, path, 2); err != nil {
		t.Fatalf("second turn in transcript: %v", err)
	}

	resumeClaude(t, ctx, srv, tm, home, dir, id, reply1)
}

// resumeClaude: restarted with --resume, the conversation comes back: the
// next request carries the earlier replies.
func resumeClaude(t *testing.T, ctx context.Context, srv *anthropictest.Server, tm *term, home, dir, id, reply1 string) {
	_ = tm.cmd.Process.Kill()
	<-tm.done
	srv.Enqueue(anthropictest.Response{Text: "세 번째"})
	tm2 := startClaude(t, srv, home, dir, "--resume", id)
	if err := tm2.waitOutput(ctx, "\u276f"); err != nil {
		t.Fatalf("resume: %v\n%q", err, tm2.output())
	}
	time.Sleep(200 * time.Millisecond)
	tm2.write("계속")
	time.Sleep(300 * time.Millisecond)
	tm2.write("\r")
	r3, err := srv.WaitMain(ctx, 3)
	if err != nil {
		t.Fatalf("%v\n%q", err, tm2.output())
	}
	if !hasAssistant(r3, reply1) || !hasAssistant(r3, "두 번째 답") {
		t.Errorf("resumed request lacks earlier replies: %s", brief(r3))
	}
	t.Logf("unknown requests: %v", srv.Unknown())
	for _, r := range srv.Requests() {
		t.Logf("request %d: %s", r.Seq, brief(r))
		t.Logf("request %d: main=%v model=%s tools=%d stream=%v max_tokens=%d messages=%d system=%.80q", r.Seq, r.Main, r.Model, len(r.Tools), r.Stream, r.MaxTokens, len(r.Messages), r.System)
	}
}

func hasAssistant(r anthropictest.Request, text string) bool {
	for _, m := range r.Messages {
		if m.Role == "assistant" && strings.Contains(m.Text(), text) {
			return true
		}
	}
	return false
}

// TestClaudeCodeSideRequests runs Claude Code with its nonessential traffic
// allowed: then every prompt also makes a side request (2.1.330: the
// session title, on the haiku model, with no tools). The side request must
// get the side script's answer and leave the main queue to the main
// request.
func TestClaudeCodeSideRequests(t *testing.T) {
	srv := anthropictest.New(t)
	home, dir := t.TempDir(), t.TempDir()
	if err := anthropictest.PrepareHome(home, dir, srv.Key); err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(anthropictest.Response{Text: "메인 답입니다"})
	srv.ReplySide(func(r anthropictest.Request) anthropictest.Response {
		return anthropictest.Response{Text: "Go haiku"}
	})
	id := uuid.NewString()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tm := startClaudeEnv(t, srv, home, dir, true, "--session-id", id)
	if err := tm.waitOutput(ctx, "\u276f"); err != nil {
		t.Fatalf("wait for the prompt box: %v\n%q", err, tm.output())
	}
	time.Sleep(200 * time.Millisecond)
	tm.write("Write a haiku about Go")
	time.Sleep(200 * time.Millisecond)
	tm.write("\r")
	text, err := waitTranscript(ctx, anthropictest.TranscriptPath(home, dir, id))
	if err != nil {
		t.Fatalf("transcript: %v\n%q", err, tm.output())
	}
	if text != "메인 답입니다" {
		t.Errorf("main reply in the transcript = %q", text)
	}
	var side int
	for _, r := range srv.Requests() {
		if r.Main {
			continue
		}
		side++
		if len(r.Tools) != 0 {
			t.Errorf("side request %d offers tools", r.Seq)
		}
		t.Logf("side request %d: model %s, %d message(s)", r.Seq, r.Model, len(r.Messages))
	}
	if side == 0 {
		t.Errorf("no side request seen (Claude Code 2.1.330 sends a title request per prompt): %d requests", len(srv.Requests()))
	}
	if n := len(srv.MainRequests()); n != 1 {
		t.Errorf("%d main requests, want 1", n)
	}
}
