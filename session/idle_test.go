package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/geminitest"
	"github.com/office-server/office-server/internal/openaitest"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
)

// idleWindow is how long a ready session is watched doing nothing: the
// 500 ms poll the sessions had woke each four times in it.
const idleWindow = 2 * time.Second

// timerWakesWhileIdle returns how often s's worker was woken by its timer
// during idleWindow.
func timerWakesWhileIdle(s *Session) int64 {
	// What the agent drew last is read once it has settled (a timer
	// that output set); then it is idle.
	for o := s.outputs.Load(); ; {
		time.Sleep(time.Second)
		if n := s.outputs.Load(); n != o {
			o = n
			continue
		}
		break
	}
	before := s.timerWakes.Load()
	time.Sleep(idleWindow)
	return s.timerWakes.Load() - before
}

// expectSleeps fails t when s's worker woke by its timer while s sat idle.
func expectSleeps(t *testing.T, s *Session, when string) {
	t.Helper()
	if n := timerWakesWhileIdle(s); n != 0 {
		t.Errorf("%s: idle %s session woken %d times by its timer in %v, want 0", when, s.Info().Kind, n, idleWindow)
	}
}

// appendLine appends line and a newline to path and returns when.
func appendLine(t *testing.T, path, line string) time.Time {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	at := time.Now()
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
	return at
}

// waitLine waits for a text line want and returns how long after since it
// came.
func waitLine(t *testing.T, r *recorder, want string, since time.Time) time.Duration {
	t.Helper()
	r.waitFor(t, want, 5*time.Second, func([]Status, []Text) bool { return slices.Contains(r.lines(), want) })
	return time.Since(since)
}

// noticeBound: a line written to a watched transcript is read within this;
// a poll would take up to 500 ms.
const noticeBound = 150 * time.Millisecond

// TestIdleSessionsSetNoTimer: a ready session of each kind, with nothing
// happening, is woken by no timer (issue 17: idle is free), before its
// first prompt and after a turn; and what its agent writes to its
// transcript meanwhile is still read within milliseconds, because the file
// is watched. Codex, the Gemini CLI and Qwen Code are the real ones.
func TestIdleSessionsSetNoTimer(t *testing.T) {
	t.Run("command", testIdleCommand)
	t.Run("claude", testIdleClaude)
	t.Run("codex", testIdleCodex)
	t.Run("gemini", testIdleGemini)
	t.Run("qwen", testIdleQwen)
}

// testIdleCommand: a screen agent whose prompt row holds what a person
// typed (so the screen does not end with its prompt) is read once it has
// settled, and then not again until it writes.
func testIdleCommand(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{})
	s, err := m.Start(context.Background(), Key{"o", "cmd"}, Spec{Kind: KindCommand, Command: script(t, replAgent), PromptPattern: `^>$`, Quiescence: 100 * time.Millisecond, Cols: 80, Rows: 10})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 10*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	expectSleeps(t, s, "ready")
	if err := s.Input([]byte("half a line")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // echoed, settled and read once
	expectSleeps(t, s, "a half-typed line on screen")
}

func testIdleClaude(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{})
	ctx := context.Background()
	s, err := m.Start(ctx, Key{"o", "claude"}, Spec{Command: script(t, fakeClaude), Home: t.TempDir(), Dir: filepath.Join(t.TempDir(), "work"), Env: []string{"ANTHROPIC_API_KEY=sk-test-0123456789abcdefghijklmnop"}})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 10*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	expectSleeps(t, s, "before the first prompt (no transcript yet)")
	if err := s.Send(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "turn", 10*time.Second, func(st []Status, ts []Text) bool { return lastStatus(st) == office.SessionReady && len(turns(ts)) == 1 })
	expectSleeps(t, s, "after a turn")
	at := appendLine(t, s.Info().Transcript, `{"type":"assistant","uuid":"late","isSidechain":false,"message":{"role":"assistant","content":[{"type":"text","text":"late words"}],"stop_reason":"end_turn"}}`)
	if d := waitLine(t, r, "late words", at); d > noticeBound {
		t.Errorf("an entry written while idle was read after %v, want under %v", d, noticeBound)
	}
}

func testIdleCodex(t *testing.T) {
	bin := testenv.CLIBin(t, "codex")
	checkGoroutines(t)
	srv := openaitest.New(t)
	home, dir := cliDirs(t, srv.PrepareCodex)
	srv.Enqueue(openaitest.Response{Text: "first reply"})
	r := newRecorder()
	m := newTestManager(t, r, Options{StopGrace: 2 * time.Second})
	ctx := context.Background()
	s, err := m.Start(ctx, Key{"o", "codex"}, Spec{Kind: KindCodex, Command: bin, Dir: dir, Home: home, Env: srv.CodexEnv(home), Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 60*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	expectSleeps(t, s, "before the first prompt (no rollout yet)")
	if err := s.Send(ctx, "hello"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "turn", 60*time.Second, func(st []Status, ts []Text) bool { return len(turns(ts)) == 1 && lastStatus(st) == office.SessionReady })
	expectSleeps(t, s, "after a turn")
	path := s.Info().Transcript
	at := appendLine(t, path, `{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"late words"}]}}`)
	if d := waitLine(t, r, "late words", at); d > noticeBound {
		t.Errorf("a message written while idle was read after %v, want under %v", d, noticeBound)
	}
	appendLine(t, path, `{"type":"event_msg","payload":{"type":"task_complete"}}`)
	r.waitFor(t, "late turn end", 5*time.Second, func(_ []Status, ts []Text) bool { return len(turns(ts)) == 2 })
}

func testIdleGemini(t *testing.T) {
	bin := testenv.CLIBin(t, "gemini")
	checkGoroutines(t)
	srv := geminitest.New(t)
	home, dir := cliDirs(t, geminitest.Prepare)
	srv.Enqueue(geminitest.Response{Text: "first reply"})
	r := newRecorder()
	m := newTestManager(t, r, Options{StopGrace: 2 * time.Second})
	ctx := context.Background()
	s, err := m.Start(ctx, Key{"o", "gemini"}, Spec{Kind: KindGemini, Command: bin, Dir: dir, Home: home, Env: srv.Env(home), Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 90*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	expectSleeps(t, s, "before the first prompt")
	if err := s.Send(ctx, "hello"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "turn", 60*time.Second, func(st []Status, ts []Text) bool { return len(turns(ts)) == 1 && lastStatus(st) == office.SessionReady })
	expectSleeps(t, s, "after a turn")
	at := appendLine(t, s.Info().Transcript, fmt.Sprintf(`{"id":"late-%d","type":"gemini","content":"late words"}`, time.Now().UnixNano()))
	if d := waitLine(t, r, "late words", at); d > noticeBound {
		t.Errorf("a record written while idle was read after %v, want under %v", d, noticeBound)
	}
}

func testIdleQwen(t *testing.T) {
	bin := testenv.CLIBin(t, "qwen")
	checkGoroutines(t)
	srv := openaitest.New(t)
	srv.Side(openaitest.QwenSide)
	home, dir := cliDirs(t, openaitest.PrepareQwen)
	srv.Enqueue(openaitest.Response{Text: "first reply"})
	r := newRecorder()
	m := newTestManager(t, r, Options{StopGrace: 2 * time.Second})
	ctx := context.Background()
	s, err := m.Start(ctx, Key{"o", "qwen"}, Spec{Kind: KindQwen, Command: bin, Dir: dir, Home: home, Env: srv.QwenEnv(home), Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 90*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	expectSleeps(t, s, "before the first prompt")
	if err := s.Send(ctx, "hello"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "turn", 60*time.Second, func(st []Status, ts []Text) bool { return len(turns(ts)) == 1 && lastStatus(st) == office.SessionReady })
	expectSleeps(t, s, "after a turn")
	at := appendLine(t, s.Info().Transcript, fmt.Sprintf(`{"uuid":"late-%d","type":"assistant","message":{"role":"model","parts":[{"text":"late words"}]}}`, time.Now().UnixNano()))
	if d := waitLine(t, r, "late words", at); d > noticeBound {
		t.Errorf("a record written while idle was read after %v, want under %v", d, noticeBound)
	}
}
