package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/anthropictest"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
)

// turnText joins the lines of the texts of each turn.
func turns(ts []Text) []string {
	var out []string
	var cur []string
	for _, t := range ts {
		cur = append(cur, t.Lines...)
		if t.TurnEnd {
			out = append(out, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	return out
}

func hasAssistant(r anthropictest.Request, text string) bool {
	for _, m := range r.Messages {
		if m.Role == "assistant" && strings.Contains(m.Text(), text) {
			return true
		}
	}
	return false
}

// TestClaudeEndToEnd drives the real Claude Code binary against a scripted
// Messages API: the parser-facing text equals what the model sent, answers
// reach the model as the next user message, a restart resumes the
// conversation, and a new manager given the cursor emits nothing twice.
func TestClaudeEndToEnd(t *testing.T) {
	bin := testenv.ClaudeBin(t)
	checkGoroutines(t)
	srv := anthropictest.New(t)
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "작업 dir.x")

	long := "이 줄은 화면 너비보다 훨씬 길어서 Claude Code가 자기 방식대로 줄을 바꾸어 그려야 하는 줄입니다; " +
		strings.Repeat("the quick brown fox jumps over the lazy dog ", 6) + "끝."
	reply1 := "# 로그인\n\n[ASK_USER]\n질문: 로그인 방식을 골라 주세요\n" + long +
		"\n**옵션**: [OAuth, 비밀번호]\n- `코드` 와 *강조*\n[/ASK_USER]"
	reply2 := "알겠습니다. **OAuth**로 진행합니다.\n[RESULT] 완료"
	reply3 := "다시 왔습니다: 앞의 대화를 기억합니다."
	srv.Enqueue(anthropictest.Response{Text: reply1, Delay: 5 * time.Millisecond},
		anthropictest.Response{Text: reply2}, anthropictest.Response{Text: reply3})

	r := newRecorder()
	m := newTestManager(t, r, Options{EnterDelay: 300 * time.Millisecond, StopGrace: 2 * time.Second, RestartBackoff: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	key := Key{"office", "claude"}
	spec := Spec{
		Command:            bin,
		Dir:                dir,
		Home:               home,
		ConfigDir:          filepath.Join(home, ".claude"),
		Env:                append([]string{"ANTHROPIC_API_KEY=" + srv.Key}, srv.Env(home)...),
		AppendSystemPrompt: "OFFICE-INSTRUCTIONS: answer with protocol blocks.",
		Cols:               100,
		Rows:               40,
	}
	s, err := m.Start(ctx, key, spec)
	if err != nil {
		t.Fatal(err)
	}
	id := s.Info().ConversationID
	if id == "" {
		t.Fatal("no conversation id in Info")
	}
	if !s.Info().Resumes {
		t.Error("a claude session's Info does not say it resumes its conversation")
	}
	t.Logf("%v waiting: ready", time.Now().Format("05.000"))
	r.waitFor(t, "ready", 60*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })

	if v, text := readClaudeScreen(s.Screen()); v != viewPrompt {
		t.Errorf("ready while the screen does not show the input prompt (view %d, dialog %q): did Claude Code change its prompt?", v, text)
	}

	c := &claudeRun{t: t, srv: srv, r: r, m: m, s: s, key: key}
	c.firstTurn(ctx, reply1)
	cursor := c.secondTurn(ctx, reply1, reply2)
	c.restart(ctx, id, reply1, reply2, reply3)
	c.crash(ctx, id)
	newManagerFromCursor(t, ctx, key, spec, id, cursor, reply3)
	// The project directory rule, checked against the real binary on a
	// working directory with Hangul, a space and a dot.
	want := filepath.Join(home, ".claude", "projects", ProjectDirName(dir), id+".jsonl")
	if _, err := os.Stat(want); err != nil {
		entries, _ := os.ReadDir(filepath.Join(home, ".claude", "projects"))
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("transcript not where ProjectDirName says (%v); projects: %q", err, names)
	}
	if got := s.Info().Transcript; got != want {
		t.Errorf("Info().Transcript = %q, want %q", got, want)
	}
}

// claudeRun is TestClaudeEndToEnd's session of the real Claude Code.
type claudeRun struct {
	t   *testing.T
	srv *anthropictest.Server
	r   *recorder
	m   *Manager
	s   *Session
	key Key
}

// firstTurn: the prompt carries a tag: typed text is never the agent's
// words; the first turn's text is what the model sent.
func (c *claudeRun) firstTurn(ctx context.Context, reply1 string) {
	t := c.t
	prompt := "첫 질문입니다 [INVOKE:X] 입니다"
	if err := c.s.Send(ctx, prompt); err != nil {
		t.Fatal(err)
	}
	r1, err := c.srv.WaitMain(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := r1.LastUserText(); got != prompt {
		t.Errorf("first user message %q, want %q", got, prompt)
	}
	if !strings.Contains(r1.System, "OFFICE-INSTRUCTIONS") {
		t.Errorf("system prompt lacks the appended instructions: %.200q", r1.System)
	}
	t.Logf("%v waiting: first turn", time.Now().Format("05.000"))
	c.r.waitFor(t, "first turn", 60*time.Second, func(st []Status, ts []Text) bool {
		return len(turns(ts)) >= 1 && lastStatus(st) == office.SessionReady
	})
	_, ts := c.r.snapshot()
	if got := turns(ts)[0]; got != reply1 {
		t.Errorf("first turn's text\n got %q\nwant %q", got, reply1)
	}
	for _, x := range ts {
		if strings.Contains(strings.Join(x.Lines, "\n"), "[INVOKE:X]") {
			t.Errorf("the typed prompt came back as agent text: %+v", x)
		}
	}

}

// secondTurn: a multi-line answer goes as a bracketed paste and arrives
// whole. It returns the last text's id, the cursor.
func (c *claudeRun) secondTurn(ctx context.Context, reply1, reply2 string) string {
	t := c.t
	answer := "답: OAuth\n이유: 간편함"
	if err := c.s.Send(ctx, answer); err != nil {
		t.Fatal(err)
	}
	r2, err := c.srv.WaitMain(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := r2.LastUserText(); got != answer {
		t.Errorf("second user message %q, want %q", got, answer)
	}
	if !hasAssistant(r2, reply1) {
		t.Error("second request lacks the first reply")
	}
	t.Logf("%v waiting: second turn", time.Now().Format("05.000"))
	c.r.waitFor(t, "second turn", 60*time.Second, func(st []Status, ts []Text) bool {
		return len(turns(ts)) >= 2 && lastStatus(st) == office.SessionReady
	})
	_, ts := c.r.snapshot()
	if got := turns(ts)[1]; got != reply2 {
		t.Errorf("second turn's text %q, want %q", got, reply2)
	}
	return ts[len(ts)-1].ID

}

// restart: the conversation resumes, nothing is emitted twice.
func (c *claudeRun) restart(ctx context.Context, id, reply1, reply2, reply3 string) {
	t := c.t
	if err := c.m.Restart(ctx, c.key, nil); err != nil {
		t.Fatal(err)
	}
	if got := c.s.Info().ConversationID; got != id {
		t.Errorf("conversation id changed on restart: %s → %s", id, got)
	}
	t.Logf("%v waiting: ready after restart", time.Now().Format("05.000"))
	c.r.waitFor(t, "ready after restart", 60*time.Second, func(st []Status, _ []Text) bool {
		return lastStatus(st) == office.SessionReady && countStatus(st, office.SessionStarting) == 2
	})
	if err := c.s.Send(ctx, "계속"); err != nil {
		t.Fatal(err)
	}
	r3, err := c.srv.WaitMain(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !hasAssistant(r3, reply1) || !hasAssistant(r3, reply2) {
		t.Error("resumed conversation lacks the earlier replies")
	}
	t.Logf("%v waiting: third turn", time.Now().Format("05.000"))
	c.r.waitFor(t, "third turn", 60*time.Second, func(st []Status, ts []Text) bool {
		return len(turns(ts)) >= 3 && lastStatus(st) == office.SessionReady
	})
	_, ts := c.r.snapshot()
	if got := turns(ts); len(got) != 3 || got[2] != reply3 {
		t.Errorf("turns after restart: %q", got)
	}

}

// crash: the agent is restarted after the backoff and resumes; no text is
// emitted twice.
func (c *claudeRun) crash(ctx context.Context, id string) {
	t := c.t
	if err := syscall.Kill(c.s.Info().PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("%v waiting: ready after a crash", time.Now().Format("05.000"))
	c.r.waitFor(t, "ready after a crash", 60*time.Second, func(st []Status, _ []Text) bool {
		return lastStatus(st) == office.SessionReady && countStatus(st, office.SessionCrashed) == 1 && countStatus(st, office.SessionStarting) == 3
	})
	if args := strings.Join(c.s.claudeArgsForTest(), " "); !strings.Contains(args, "--resume "+id) {
		t.Errorf("relaunched with %q, want --resume %s", args, id)
	}
	time.Sleep(500 * time.Millisecond)
	_, ts := c.r.snapshot()
	seen := map[string]bool{}
	for _, x := range ts {
		if seen[x.ID] {
			t.Errorf("text %s emitted twice", x.ID)
		}
		seen[x.ID] = true
	}
	if got := turns(ts); len(got) != 3 {
		t.Errorf("%d turns after the crash, want 3", len(got))
	}
	if err := c.m.Stop(ctx, c.key); err != nil {
		t.Fatal(err)
	}

}

// newManagerFromCursor: a restarted server: a new manager given the cursor
// of the second turn emits the third turn only.
func newManagerFromCursor(t *testing.T, ctx context.Context, key Key, spec Spec, id, cursor, reply3 string) {
	r2rec := newRecorder()
	m2 := newTestManager(t, r2rec, Options{})
	spec.ConversationID = id
	spec.Resume = true
	spec.TranscriptAfter = cursor
	if _, err := m2.Start(ctx, key, spec); err != nil {
		t.Fatal(err)
	}
	r2rec.waitFor(t, "replay after cursor", 60*time.Second, func(st []Status, ts []Text) bool {
		return lastStatus(st) == office.SessionReady && len(turns(ts)) >= 1
	})
	time.Sleep(300 * time.Millisecond)
	_, ts := r2rec.snapshot()
	if got := turns(ts); len(got) != 1 || got[0] != reply3 {
		t.Errorf("after the cursor a new manager emitted %q, want only the third turn", got)
	}
}

// claudeArgsForTest returns the arguments of the running process.
func (s *Session) claudeArgsForTest() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return nil
	}
	return s.p.cmd.Args
}
