package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/openaitest"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/protocol"
)

// TestQwenCommandAgent drives the real Qwen Code (0.24.4, from npm) as a
// command agent against a scripted Chat Completions API: the office's
// instructions reach the model's first request through ~/.qwen/QWEN.md
// (what the person wrote there kept), and three turns whose replies carry
// the same [ASK_USER] block give three questions, one a turn, read off
// Qwen Code's repainted alternate screen.
func TestQwenCommandAgent(t *testing.T) {
	bin := testenv.CLIBin(t, "qwen")
	checkGoroutines(t)
	srv := openaitest.New(t)
	srv.Side(openaitest.QwenSide)
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "work")
	if err := openaitest.PrepareQwen(home); err != nil {
		t.Fatal(err)
	}
	md := filepath.Join(home, ".qwen", "QWEN.md")
	if err := os.WriteFile(md, []byte("USER-NOTE: 사람이 쓴 지시입니다.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reply := func(n int) string {
		return "턴 " + string(rune('0'+n)) + " 답변.\n[ASK_USER]\n질문: 계속할까요?\n타입: confirmation\n[/ASK_USER]\n끝."
	}
	srv.Enqueue(openaitest.Response{Text: reply(1)}, openaitest.Response{Text: reply(2)}, openaitest.Response{Text: reply(3)})

	r := newRecorder()
	m := newTestManager(t, r, Options{StopGrace: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := m.Start(ctx, Key{"office", "qwen"}, Spec{
		Kind: KindCommand, Command: bin, Dir: dir, Home: home,
		Env:                srv.QwenEnv(home),
		AppendSystemPrompt: "OFFICE-INSTRUCTIONS: answer with protocol blocks such as [ASK_USER].",
		PromptPattern:      `Auto mode|Type your message|YOLO|shortcuts`,
		Quiescence:         1500 * time.Millisecond,
		Cols:               100, Rows: 30,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 90*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == StatusReady })
	for turn := 1; turn <= 3; turn++ {
		if err := s.Send(ctx, "turn "+string(rune('0'+turn))); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.WaitMain(ctx, turn); err != nil {
			t.Fatal(err)
		}
		r.waitFor(t, "turn end", 90*time.Second, func(st []Status, ts []Text) bool {
			return lastStatus(st) == StatusReady && strings.Contains(strings.Join(r.lines(), "\n"), "턴 "+string(rune('0'+turn))+" 답변")
		})
	}
	first := srv.MainRequests()[0]
	if !first.Has("OFFICE-INSTRUCTIONS") || !first.Has("USER-NOTE") {
		t.Errorf("first request: office instructions %v, the person's note %v; want both", first.Has("OFFICE-INSTRUCTIONS"), first.Has("USER-NOTE"))
	}
	if b, _ := os.ReadFile(md); !strings.Contains(string(b), "USER-NOTE") {
		t.Errorf("QWEN.md lost what the person wrote:\n%s", b)
	}
	p := protocol.NewParser(protocol.Options{})
	var asks int
	_, ts := r.snapshot()
	for _, x := range ts {
		var msgs []protocol.Message
		for _, l := range x.Lines {
			msgs = append(msgs, p.Feed(l)...)
		}
		if x.TurnEnd {
			msgs = append(msgs, p.Flush()...)
		}
		for _, m := range msgs {
			if m.Kind == protocol.KindAskUser {
				asks++
				if m.Question.Question != "계속할까요?" {
					t.Errorf("question %q, want 계속할까요? (screen chrome such as a scroll bar is not the agent's words)", m.Question.Question)
				}
			}
		}
	}
	if asks != 3 {
		t.Errorf("%d ASK_USER messages, want 3 (one a turn); lines:\n%s", asks, strings.Join(r.lines(), "\n"))
	}
	if err := m.Stop(ctx, Key{"office", "qwen"}); err != nil {
		t.Fatal(err)
	}
}

// TestQwenApprovalDialog drives the real Qwen Code as a command agent whose
// scripted model asks to run a shell command: its approval dialog puts
// the agent in needs_attention with the command in the dialog's text;
// Enter (its first choice, allow once) runs the command.
func TestQwenApprovalDialog(t *testing.T) {
	bin := testenv.CLIBin(t, "qwen")
	checkGoroutines(t)
	srv := openaitest.New(t)
	srv.Side(openaitest.QwenSide)
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "work")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := openaitest.PrepareQwen(home); err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(openaitest.Response{Calls: []openaitest.Call{{Name: "run_shell_command", Arguments: `{"command":"mkdir -p made-by-qwen && echo qwen-ok","description":"make a folder"}`}}},
		openaitest.Response{Text: "Done."})
	r := newRecorder()
	m := newTestManager(t, r, Options{StopGrace: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	key := Key{"office", "qwen-approval"}
	s, err := m.Start(ctx, key, Spec{
		Kind: KindCommand, Command: bin, Dir: dir, Home: home, Env: srv.QwenEnv(home),
		PromptPattern: `Auto mode|Type your message|YOLO|shortcuts`, Quiescence: 1500 * time.Millisecond, Cols: 100, Rows: 30,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("screen:\n%s", strings.Join(s.Screen(), "\n"))
		}
	}()
	r.waitFor(t, "ready", 90*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == StatusReady })
	if err := s.Send(ctx, "make the folder"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "needs attention", 60*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == StatusNeedsAttention })
	if d := s.Info().Detail; !strings.Contains(d, "mkdir -p made-by-qwen") {
		t.Errorf("detail %q, want the command", d)
	} else {
		t.Logf("needs_attention detail:\n%s", d)
	}
	if err := s.Input([]byte("\r")); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready after the command", 60*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == StatusReady })
	if _, err := os.Stat(filepath.Join(dir, "made-by-qwen")); err != nil {
		t.Errorf("the allowed command did not run: %v", err)
	}
	if err := m.Stop(ctx, key); err != nil {
		t.Fatal(err)
	}
}
