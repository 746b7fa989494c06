package session

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/anthropictest"
	"github.com/office-server/office-server/internal/testenv"
)

// enterLog records the session's "enter" debug records: how long after
// the text was written Enter went, and on which signal (awaitLanded:
// canonical, read, echo, or bound when none came).
type enterLog struct {
	mu     sync.Mutex
	after  []time.Duration
	signal []string
}

func (l *enterLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *enterLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *enterLog) WithGroup(string) slog.Handler            { return l }
func (l *enterLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "enter" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "after":
			l.after = append(l.after, a.Value.Duration())
		case "signal":
			l.signal = append(l.signal, a.Value.String())
		}
		return true
	})
	return nil
}

// TestClaudeEnterWhenLanded types prompts of every shape into the real
// Claude Code (one line, several lines as a bracketed paste, Korean, a
// line longer than the screen, 2 KB) with a long bound (2 s) on the wait
// before Enter: each Enter goes as soon as Claude Code shows the text (on
// the echo: it waits for its terminal in epoll and times pastes, so its
// input queue read is no signal), and every prompt reaches the model
// once, on the first typing (an Enter too early would leave it in the
// input box, unsubmitted, until the acknowledgement timeout typed it
// again).
func TestClaudeEnterWhenLanded(t *testing.T) {
	bin := testenv.ClaudeBin(t)
	srv := anthropictest.New(t)
	home, dir := t.TempDir(), t.TempDir()
	log := &enterLog{}
	r := newRecorder()
	m := newTestManager(t, r, Options{EnterDelay: 2 * time.Second, StopGrace: 2 * time.Second, Logger: slog.New(log)})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s, err := m.Start(ctx, Key{"o", "enter"}, Spec{Command: bin, Dir: dir, Home: home, ConfigDir: filepath.Join(home, ".claude"),
		Env: append([]string{"ANTHROPIC_API_KEY=" + srv.Key}, srv.Env(home)...), Cols: 100, Rows: 40})
	if err != nil {
		t.Fatal(err)
	}
	prompts := []string{
		"short one",
		"두 번째 메시지: 한국어로 된 한 줄입니다",
		"three\nlines\nof text",
		strings.Repeat("a line longer than the screen is wide ", 5) + "end-4",
		"[OFFICE] Answer to question q-1 (\"Which?\"):\n> SSO",
		strings.Repeat("이천 바이트 쯤 되는 긴 붙여넣기 ", 60) + "end-6",
	}
	for i := 7; i <= 20; i++ {
		prompts = append(prompts, "message number "+strings.Repeat("x", i)+" end")
	}
	for i, p := range prompts {
		if err := s.Send(ctx, p); err != nil {
			t.Fatalf("prompt %d: %v", i, err)
		}
		if _, err := srv.WaitMain(ctx, i+1); err != nil {
			t.Fatalf("prompt %d never reached the model: %v", i, err)
		}
	}
	got := srv.MainRequests()
	if len(got) != len(prompts) {
		t.Errorf("%d model requests for %d prompts", len(got), len(prompts))
	}
	for i, req := range got {
		// A long paste can reach Claude Code in two reads (a terminal
		// write is passed on in pieces of at most 2 KiB); on a loaded
		// machine it then sends the first piece as <pasted_content> and
		// the rest as typed (seen once in CI). The words are all there, in
		// order: compared without that markup.
		text := pastedContent.ReplaceAllString(req.LastUserText(), " ")
		if i < len(prompts) && !strings.Contains(strings.Join(strings.Fields(text), ""), strings.Join(strings.Fields(prompts[i]), "")) {
			t.Errorf("request %d has %q, want prompt %q", i, req.LastUserText(), prompts[i])
		}
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.after) != len(prompts) {
		t.Fatalf("%d typings for %d prompts: a prompt was typed again (an Enter too early?)", len(log.after), len(prompts))
	}
	for i, sig := range log.signal {
		if sig != "echo" {
			t.Errorf("prompt %d: Enter on %q after %v, want on the echo (Claude Code shows the text)", i, sig, log.after[i])
		}
	}
	d := slices.Clone(log.after)
	slices.Sort(d)
	t.Logf("text written → Enter over %d prompts: p50 %v, max %v", len(d), d[len(d)/2], d[len(d)-1])
}

// TestEnterWaitsForItsOwnText: the sign that typed text has landed is that
// text in the program's input box (Claude Code's prompt box), or shown once
// more than before the typing (programs without a known box) — not the
// same ending already on screen from an earlier prompt, as the office's
// prompts often end alike. Taking the history for the sign sent Enter on
// the first output after the typing (TestClaudeEnterWhenLanded's prompts
// 13 to 20 end alike; under a load average of 250 one Enter came before
// Claude Code had read the text, which it then took as a paste).
func TestEnterWaitsForItsOwnText(t *testing.T) {
	rule := strings.Repeat("─", 60)
	earlier, next := "message number xxxxxxxxxxxxx end", "message number xxxxxxxxxxxxxx end"
	tail := landTail(next)
	history := []string{"❯ " + earlier, "● OK", "✻ Cooked for 0s · done 12:56 AM"}
	screen := func(box ...string) []string {
		return slices.Concat(history, []string{rule}, box, []string{rule, "  ⏵⏵ auto mode on (shift+tab to cycle)"})
	}
	d := &claudeDriver{}
	for _, tc := range []struct {
		name string
		rows []string
		want int
	}{
		{"empty box, the same ending above it", screen("❯ "), 0},
		{"the text in the box", screen("❯ " + next), 1},
		{"the text wrapped in the box", screen("❯ message number", "  xxxxxxxxxxxxxx end"), 1},
		{"a paste's placeholder in the box", screen("❯ [Pasted text #1 +20 lines]"), 1},
		{"no box drawn", history, 0},
	} {
		if got := landMarks(d.inputRows(tc.rows), tail); got != tc.want {
			t.Errorf("%s: %d signs in the box, want %d", tc.name, got, tc.want)
		}
	}
	// Without a known box the count must grow: the echo, not the history.
	if base, echoed := landMarks(history, tail), landMarks(append(slices.Clone(history), "> "+next), tail); base != 1 || echoed != 2 {
		t.Errorf("whole screen: %d before the echo, %d after; want 1, 2", base, echoed)
	}
}

// TestEnterAgainOnlyForItsOwnPrompt: a CLI that records another user
// message (Gemini CLI records the session's context as one) while the
// typed text sits unsubmitted in its composer is pressed Enter again; the
// text's own record ends it.
func TestEnterAgainOnlyForItsOwnPrompt(t *testing.T) {
	t0 := time.Now()
	var e enterAgain
	e.typed(t0, "[OFFICE] Message from a person in the office:\n> please run one")
	e.recorded([]string{"This is the Gemini CLI. We are setting up the context for our chat."})
	if !e.due(t0.Add(3100*time.Millisecond), 3, 3*time.Second) {
		t.Fatal("another prompt recorded stopped the Enter again")
	}
	e.recorded([]string{"[OFFICE] Message from a person in the office:\n> please run one"})
	if e.due(t0.Add(6100*time.Millisecond), 3, 3*time.Second) {
		t.Fatal("Enter pressed again after the text was recorded")
	}
}
