package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session/screen"
)

// recorder collects statuses and texts from a Manager's callbacks.
type recorder struct {
	mu       sync.Mutex
	statuses []Status
	texts    []Text
	changed  chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 1)} }

func (r *recorder) opts(o Options) Options {
	o.OnStatus = func(_ Key, st Status, _ Info) {
		r.mu.Lock()
		r.statuses = append(r.statuses, st)
		r.mu.Unlock()
		r.poke()
	}
	o.OnText = func(t Text) {
		r.mu.Lock()
		r.texts = append(r.texts, t)
		r.mu.Unlock()
		r.poke()
	}
	return o
}

func (r *recorder) poke() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) snapshot() ([]Status, []Text) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Status(nil), r.statuses...), append([]Text(nil), r.texts...)
}

// lines returns every text line received so far.
func (r *recorder) lines() []string {
	_, ts := r.snapshot()
	var out []string
	for _, t := range ts {
		out = append(out, t.Lines...)
	}
	return out
}

// waitFor waits until cond holds on the recorder.
func (r *recorder) waitFor(t *testing.T, what string, d time.Duration, cond func([]Status, []Text) bool) {
	t.Helper()
	deadline := time.After(d)
	for {
		if cond(r.snapshot()) {
			return
		}
		select {
		case <-r.changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			st, tx := r.snapshot()
			t.Fatalf("timed out waiting for %s; statuses %v; texts %+v", what, st, tx)
		}
	}
}

func lastStatus(st []Status) Status {
	if len(st) == 0 {
		return ""
	}
	return st[len(st)-1]
}

func countStatus(st []Status, s Status) int {
	n := 0
	for _, x := range st {
		if x == s {
			n++
		}
	}
	return n
}

// checkGoroutines fails t if goroutines started during the test are still
// running once it ends (after the cleanups registered later ran).
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutine leak: %d before, %d after:\n%s", before, n, buf)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// script writes an sh script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func newTestManager(t *testing.T, r *recorder, o Options) *Manager {
	t.Helper()
	if o.EnterDelay == 0 {
		o.EnterDelay = 20 * time.Millisecond
	}
	if o.StopGrace == 0 {
		o.StopGrace = 500 * time.Millisecond
	}
	m := NewManager(r.opts(o))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close manager: %v", err)
		}
	})
	return m
}

// A line-oriented agent: prints a banner and a prompt, answers each line.
const replAgent = `
echo "banner: hello"
printf '> '
while IFS= read -r line; do
  echo "got: $line"
  printf '> '
done
`

func TestCommandSessionTurns(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{})
	ctx := context.Background()
	key := Key{"o1", "a1"}
	s, err := m.Start(ctx, key, Spec{Kind: KindCommand, Command: script(t, replAgent), PromptPattern: `^>$`, Quiescence: 100 * time.Millisecond, Cols: 80, Rows: 10})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 5*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	if got, ok := m.Get(key); !ok || got != s || len(m.List()) != 1 {
		t.Fatal("Get/List do not return the session")
	}
	if s.Info().PID == 0 {
		t.Fatal("no PID in Info")
	}

	// Echo is not output: the typed text carries a tag; the agent's own
	// answer ("got: ...") carries it too and is its words.
	if err := s.Send(ctx, "please [INVOKE:X] now"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "answer", 5*time.Second, func(st []Status, tx []Text) bool {
		return len(tx) > 0 && tx[len(tx)-1].TurnEnd && lastStatus(st) == office.SessionReady && strings.Contains(strings.Join(r.lines(), "\n"), "got:")
	})
	st, texts := r.snapshot()
	want := []Status{office.SessionStarting, office.SessionReady, office.SessionBusy, office.SessionReady}
	if fmt.Sprint(st) != fmt.Sprint(want) {
		t.Errorf("statuses %v, want %v", st, want)
	}
	for _, x := range texts {
		if x.Source != FromScreen {
			t.Errorf("text %s: source %v, want screen", x.ID, x.Source)
		}
	}
	if s.Info().Resumes {
		t.Error("a command agent's Info says it resumes its conversation")
	}
	got := r.lines()
	wantLines := []string{"banner: hello", "got: please [INVOKE:X] now"}
	if strings.Join(got, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("lines %q, want %q (texts %+v)", got, wantLines, texts)
	}

	// Enough turns to scroll the screen: nothing is dispatched twice and
	// no echo leaks.
	for i := range 12 {
		if err := s.Send(ctx, fmt.Sprintf("line %d [INVOKE:X]", i)); err != nil {
			t.Fatal(err)
		}
	}
	r.waitFor(t, "12 more answers", 10*time.Second, func(st []Status, tx []Text) bool {
		return lastStatus(st) == office.SessionReady && len(r.lines()) == 14
	})
	got = r.lines()
	for i := range 12 {
		if w := fmt.Sprintf("got: line %d [INVOKE:X]", i); got[i+2] != w {
			t.Errorf("line %d = %q, want %q", i+2, got[i+2], w)
		}
	}
	_, texts = r.snapshot()
	checkNoTextTwice(t, texts)
	if err := m.Stop(ctx, key); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(); st != office.SessionStopped {
		t.Errorf("status after stop = %s", st)
	}
	if _, ok := m.Get(key); ok {
		t.Error("stopped session still listed")
	}
	if err := s.Send(ctx, "x"); err == nil {
		t.Error("Send to a stopped session succeeded")
	}
}

func TestRedrawDispatchedOnce(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{})
	ctx := context.Background()
	// On SIGWINCH the agent clears the screen and draws it again.
	agent := script(t, `
draw() { printf '\033[2J\033[H'; echo "[RESULT] one"; echo "second line"; printf '> '; }
trap draw WINCH
draw
while :; do if read -r line; then echo "got: $line"; printf '> '; fi; done
`)
	s, err := m.Start(ctx, Key{"o", "redraw"}, Spec{Kind: KindCommand, Command: agent, PromptPattern: `^>`, Quiescence: 100 * time.Millisecond, Cols: 60, Rows: 8})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 5*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	v := s.Attach(1000)
	<-v.C() // the snapshot
	if err := s.Resize(50, 8); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := s.Send(ctx, "next"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "answer", 5*time.Second, func(st []Status, _ []Text) bool {
		return lastStatus(st) == office.SessionReady && strings.Contains(strings.Join(r.lines(), "\n"), "got: next")
	})
	var live []byte
	for len(v.C()) > 0 {
		live = append(live, <-v.C()...)
	}
	v.Close()
	if n := bytes.Count(live, []byte("[RESULT] one")); n != 1 {
		t.Fatalf("the agent drew its message %d times after the resize, want 1 (a redraw)", n)
	}
	got := strings.Join(r.lines(), "\n")
	if want := "[RESULT] one\nsecond line\ngot: next"; got != want {
		t.Errorf("lines %q, want %q", got, want)
	}
	if i := s.Info(); i.Cols != 50 {
		t.Errorf("Info cols = %d after resize", i.Cols)
	}
}

func TestCrashBackoffFailed(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{RestartBackoff: 50 * time.Millisecond, MaxRestarts: 3, RestartWindow: time.Minute})
	ctx := context.Background()
	key := Key{"o", "crash"}
	s, err := m.Start(ctx, key, Spec{Kind: KindCommand, Command: script(t, "echo dying; exit 3"), Quiescence: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r.waitFor(t, "failed", 10*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionFailed })
	elapsed := time.Since(start)
	st, _ := r.snapshot()
	if n := countStatus(st, office.SessionCrashed); n != 3 {
		t.Errorf("crashed %d times before failing, want 3 (statuses %v)", n, st)
	}
	if n := countStatus(st, office.SessionStarting); n != 4 {
		t.Errorf("started %d times, want 4 (statuses %v)", n, st)
	}
	// Backoff 50+100+200ms between the four starts.
	if elapsed < 350*time.Millisecond {
		t.Errorf("failed after %v: backoff not applied", elapsed)
	}
	info := s.Info()
	if info.ExitCode != 3 || info.Restarts != 3 {
		t.Errorf("info %+v: want exit code 3, 3 restarts", info)
	}
	if err := s.Send(ctx, "hello"); err != ErrFailed {
		t.Errorf("Send to failed session = %v, want ErrFailed", err)
	}
	// Restart revives it.
	if err := m.Restart(ctx, key, &Spec{Kind: KindCommand, Command: script(t, replAgent), PromptPattern: `^>`, Quiescence: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready after restart", 5*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
}

func TestExitedNotRestarted(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{RestartBackoff: 10 * time.Millisecond})
	s, err := m.Start(context.Background(), Key{"o", "exit0"}, Spec{Kind: KindCommand, Command: script(t, "echo bye")})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "exited", 5*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionExited })
	time.Sleep(200 * time.Millisecond)
	if st, _ := r.snapshot(); countStatus(st, office.SessionStarting) != 1 {
		t.Errorf("restarted after a clean exit: %v", st)
	}
	if got := strings.Join(r.lines(), "\n"); got != "bye" {
		t.Errorf("last words %q, want bye", got)
	}
	if err := s.Send(context.Background(), "hello"); err != ErrExited {
		t.Errorf("Send to an exited agent = %v, want ErrExited", err)
	}
	// Start replaces a session whose agent exited.
	s2, err := m.Start(context.Background(), Key{"o", "exit0"}, Spec{Kind: KindCommand, Command: script(t, replAgent)})
	if err != nil {
		t.Fatal(err)
	}
	if s2 == s || s.Status() != office.SessionStopped {
		t.Errorf("old session not replaced (status %s)", s.Status())
	}
}

func TestStartErrors(t *testing.T) {
	r := newRecorder()
	m := newTestManager(t, r, Options{})
	ctx := context.Background()
	if _, err := m.Start(ctx, Key{"o", "x"}, Spec{Kind: KindCommand, Command: "/nonexistent/agent"}); err == nil {
		t.Error("start of a missing command succeeded")
	}
	if _, ok := m.Get(Key{"o", "x"}); ok {
		t.Error("failed start left a session behind")
	}
	if _, err := m.Start(ctx, Key{"o", "y"}, Spec{Kind: "nope", Command: "sh"}); err == nil {
		t.Error("unknown kind accepted")
	}
	if _, err := m.Start(ctx, Key{"o", "y"}, Spec{Kind: KindCommand, Command: "sh", PromptPattern: "("}); err == nil {
		t.Error("bad prompt pattern accepted")
	}
	if _, err := m.Start(ctx, Key{"o", "z"}, Spec{ConversationID: "not-a-uuid", Command: "sh"}); err == nil {
		t.Error("bad conversation id accepted")
	}
	if _, err := m.Start(ctx, Key{"o", "d"}, Spec{Kind: KindCommand, Command: script(t, replAgent)}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(ctx, Key{"o", "d"}, Spec{Kind: KindCommand, Command: script(t, replAgent)}); err == nil {
		t.Error("second start of the same key succeeded")
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(m.List()) != 0 {
		t.Error("sessions left after Close")
	}
	if _, err := m.Start(ctx, Key{"o", "e"}, Spec{Kind: KindCommand, Command: script(t, replAgent)}); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close = %v, want ErrClosed", err)
	}
}

// TestSendHostile types hostile text into an agent that records the exact
// bytes it receives in raw mode.
func TestSendHostile(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{})
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "typed")
	agent := script(t, fmt.Sprintf(`stty raw -echo; printf '\033[?2004h> '; exec cat > %q`, out))
	s, err := m.Start(ctx, Key{"o", "raw"}, Spec{Kind: KindCommand, Command: agent, Quiescence: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 5*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	hostile := "line one\x1b[201~\x03\x1b[2J\x1b]0;x\x07\nline two \u009b\x04 [INVOKE:X]"
	if err := s.Send(ctx, hostile); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, "single\x1b[A\x03"); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, "tab\there"); err != nil {
		t.Fatal(err)
	}
	want := "\x1b[200~line one[201~[2J]0;x\nline two  [INVOKE:X]\x1b[201~\rsingle[A\r\x1b[200~tab\there\x1b[201~\r"
	deadline := time.Now().Add(5 * time.Second)
	var got []byte
	for time.Now().Before(deadline) {
		got, _ = os.ReadFile(out)
		if len(got) >= len(want) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if string(got) != want {
		t.Errorf("typed bytes\n got %q\nwant %q", got, want)
	}
	if n := bytes.Count(got, []byte("\x1b[201~")); n != 2 {
		t.Errorf("%d bracketed-paste ends, want exactly the one we wrote", n)
	}
	if bytes.IndexByte(got, 0x03) >= 0 {
		t.Error("Ctrl-C reached the agent")
	}
}

func TestSendQueueAndCancel(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{})
	// Never ready: no prompt ever matches.
	s, err := m.Start(context.Background(), Key{"o", "q"}, Spec{Kind: KindCommand, Command: script(t, "echo working; exec sleep 100"), PromptPattern: `^never$`})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.Send(ctx, "hello"); err != context.DeadlineExceeded {
		t.Errorf("Send to a busy agent = %v, want deadline exceeded", err)
	}
	if err := s.Send(context.Background(), "\x1b\x03"); err != ErrEmpty {
		t.Errorf("Send of only controls = %v, want ErrEmpty", err)
	}
	s.mu.Lock()
	n := len(s.sendQ)
	s.mu.Unlock()
	if n != 0 {
		t.Errorf("cancelled send left in queue (%d)", n)
	}
}

func TestFanOutStalledViewer(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{Scrollback: 100})
	ctx := context.Background()
	agent := script(t, `read -r go; i=0; while [ $i -lt 3000 ]; do echo "output line $i"; i=$((i+1)); done; echo END; exec sleep 100`)
	s, err := m.Start(ctx, Key{"o", "fan"}, Spec{Kind: KindCommand, Command: agent, Quiescence: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 5*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	stalled := s.Attach(2)
	live := s.Attach(100000)
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		for p := range live.C() {
			buf.Write(p)
			if bytes.Contains(buf.Bytes(), []byte("END")) {
				return
			}
		}
	}()
	if err := s.Send(ctx, "go"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the reading viewer did not get all output: the reader was held up")
	}
	live.Close()
	if !stalled.Dropped() {
		t.Error("stalled viewer not dropped")
	}
	n := 0
	for range stalled.C() { // closed after its queued chunks
		n++
	}
	if n > 3 {
		t.Errorf("stalled viewer got %d chunks, queue was 2 (+replay)", n)
	}
	if !strings.Contains(buf.String(), "output line 2999") {
		t.Error("live viewer missed output")
	}
	// A new viewer gets the screen and the last rows of history (the
	// Scrollback option: 100 rows), drawn again from the screen model.
	v := s.Attach(4)
	defer v.Close()
	first := <-v.C()
	term := screen.New(200, 50) // the session's size
	term.SetScrolledLimit(1000)
	term.Write(first)
	got := append(term.TakeScrolled(), term.Lines()...)
	for len(got) > 0 && got[len(got)-1] == "" {
		got = got[:len(got)-1]
	}
	// 100 rows of history, then the screen's 49 rows of output above the
	// cursor's row: output lines 2852–2999 and END.
	var want []string
	for i := 3000 - 148; i < 3000; i++ {
		want = append(want, fmt.Sprintf("output line %d", i))
	}
	if len(got) < 2 || got[len(got)-1] != "END" || !slices.Equal(got[:len(got)-1], want) {
		t.Errorf("a late viewer's terminal shows %d rows (%q … %q), want the 100 rows of history and the screen up to END", len(got), got[:min(3, len(got))], got[max(0, len(got)-3):])
	}
}

func TestStopNoZombies(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{StopGrace: 300 * time.Millisecond})
	ctx := context.Background()
	// Ignores SIGHUP and SIGTERM, and has a child of its own.
	agent := script(t, `trap '' HUP TERM; sleep 1000 & echo started; wait`)
	s, err := m.Start(ctx, Key{"o", "stubborn"}, Spec{Kind: KindCommand, Command: agent, Quiescence: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 5*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	pid := s.Info().PID
	children := childPIDs(pid)
	if len(children) == 0 {
		t.Fatal("agent has no child")
	}
	v := s.Attach(10)
	start := time.Now()
	if err := m.Stop(ctx, s.Key()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("stopped in %v: grace not given", d)
	}
	// Our own child is reaped by Stop itself.
	if st := procState(pid); st != "" {
		t.Errorf("agent process %d still there after stop (state %s)", pid, st)
	}
	// Its orphaned children were killed; init reaps them.
	for _, p := range children {
		deadline := time.Now().Add(3 * time.Second)
		for procState(p) != "" && time.Now().Before(deadline) {
			if st := procState(p); st != "Z" && time.Since(start) > time.Second {
				t.Errorf("child %d of the agent still running after stop (state %s)", p, st)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if st := procState(p); st != "" && st != "Z" {
			t.Errorf("child %d of the agent still alive (state %s)", p, st)
		}
	}
	for range v.C() {
	}
	if v.Dropped() {
		t.Error("viewer of a stopped session reported as dropped")
	}
}

// procState returns the state letter of pid from /proc, or "" if gone.
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return "?"
	}
	return s[i+2 : i+3]
}

func childPIDs(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var p int
		if _, err := fmt.Sscanf(e.Name(), "%d", &p); err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		var st string
		var ppid int
		if _, err := fmt.Sscanf(s[i+2:], "%s %d", &st, &ppid); err == nil && ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// TestEchoWrappedNotOutput: a typed line longer than the terminal is wide
// wraps on screen; none of its echo may reach the parser, tags included.
func TestEchoWrappedNotOutput(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{})
	ctx := context.Background()
	agent := script(t, `printf '> '; while :; do if read -r line; then echo "ok ${#line}"; printf '> '; fi; done`)
	s, err := m.Start(ctx, Key{"o", "wrap"}, Spec{Kind: KindCommand, Command: agent, PromptPattern: `^>`, Quiescence: 100 * time.Millisecond, Cols: 40, Rows: 6})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 5*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	in := strings.Repeat("가", 20) + " [INVOKE:X] " + strings.Repeat("word ", 12) + "[INVOKE:Y] end"
	for i := range 4 { // enough to scroll the echo off the top
		if err := s.Send(ctx, in); err != nil {
			t.Fatal(err)
		}
		r.waitFor(t, "answer", 5*time.Second, func(st []Status, _ []Text) bool {
			return lastStatus(st) == office.SessionReady && len(r.lines()) == i+1
		})
	}
	if n := len(r.lines()); n != 4 {
		t.Errorf("%d lines, want 4 answers: %q", n, r.lines())
	}
	for _, l := range r.lines() {
		if !strings.HasPrefix(l, "ok ") {
			t.Errorf("echo leaked as output: %q (all: %q)", l, r.lines())
		}
	}
}

// TestUnpromptedOutputAndConsoleEcho: output that arrives while the agent
// waits at its prompt is read once it settles; what a person types in the
// console (Input) is echo, not the agent's words.
func TestUnpromptedOutputAndConsoleEcho(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{})
	ctx := context.Background()
	agent := script(t, `printf '> '; sleep 0.6; printf '\r[RESULT] background done\n> '
while :; do if read -r line; then echo "got: $line"; printf '> '; fi; done`)
	s, err := m.Start(ctx, Key{"o", "bg"}, Spec{Kind: KindCommand, Command: agent, PromptPattern: `^>`, Quiescence: 100 * time.Millisecond, Cols: 60, Rows: 10})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "background output", 5*time.Second, func(st []Status, _ []Text) bool {
		return lastStatus(st) == office.SessionReady && len(r.lines()) == 1
	})
	if got := r.lines(); got[0] != "[RESULT] background done" {
		t.Errorf("lines %q", got)
	}
	// A person types, with a typo corrected by backspace.
	for _, k := range []string{"he", "lx\x7flo [INV", "OKE:X]", "\r"} {
		if err := s.Input([]byte(k)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond)
	}
	r.waitFor(t, "answer", 5*time.Second, func(st []Status, _ []Text) bool {
		return lastStatus(st) == office.SessionReady && len(r.lines()) == 2
	})
	time.Sleep(300 * time.Millisecond)
	if got := r.lines(); len(got) != 2 || got[1] != "got: hello [INVOKE:X]" {
		t.Errorf("lines %q, want the background line and the answer only", got)
	}
}

// TestBuiltinSession runs the builtin kind: its command is started as
// `agent --script NAME ARGS...`, read off its screen, and ready at the
// built-in prompt without a pattern given.
func TestBuiltinSession(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{})
	ctx := context.Background()
	key := Key{"o1", "b1"}
	bin := script(t, `echo "args: $*"
printf '> '
while IFS= read -r line; do echo "got: $line"; printf '> '; done
`)
	s, err := m.Start(ctx, key, Spec{Kind: KindBuiltin, Command: bin, Script: "po", Args: []string{"--step", "1s"}, Quiescence: 100 * time.Millisecond, Cols: 80, Rows: 10})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 5*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	if err := s.Send(ctx, "hi"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "answer", 5*time.Second, func(st []Status, _ []Text) bool {
		return lastStatus(st) == office.SessionReady && strings.Contains(strings.Join(r.lines(), "\n"), "got: hi")
	})
	want := []string{"args: agent --script po --step 1s", "got: hi"}
	if got := r.lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines %q, want %q", got, want)
	}
	if i := s.Info(); i.Kind != KindBuiltin || i.Resumes {
		t.Errorf("info kind %q resumes %v, want builtin, false", i.Kind, i.Resumes)
	}
	if err := m.Stop(ctx, key); err != nil {
		t.Fatal(err)
	}
}

// TestViewerJoinsMidStream attaches viewers while a program streams
// output (cursor moves, colours, Hangul, scrolling): each viewer's
// terminal — its snapshot, then the live chunks after it — ends equal to
// that of a viewer attached before the first byte, so the snapshot and
// the subscription neither miss nor repeat a byte.
func TestViewerJoinsMidStream(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{})
	ctx := context.Background()
	agent := script(t, `read -r go; i=0; while [ $i -lt 600 ]; do printf '\033[%d;%dH\033[3%d;4%dmline %d 한글\033[0m\033[K\n' $((i%20+1)) $((i%30+1)) $((i%8)) $((i%5)) $i; i=$((i+1)); [ $((i%20)) -eq 0 ] && sleep 0.03; done; echo END; exec sleep 100`)
	s, err := m.Start(ctx, Key{"o", "mid"}, Spec{Kind: KindCommand, Command: agent, Quiescence: 50 * time.Millisecond, Cols: 80, Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 5*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	type viewer struct {
		v    *Viewer
		term *screen.Screen
		mid  bool // its snapshot showed the program drawing
	}
	attach := func() viewer {
		v := viewer{s.Attach(100000), screen.New(80, 24), false}
		first := <-v.v.C()
		v.term.Write(first)
		v.mid = bytes.Contains(first, []byte("line ")) && !bytes.Contains(first, []byte("END"))
		return v
	}
	drain := func(v viewer) {
		for len(v.v.C()) > 0 {
			v.term.Write(<-v.v.C())
		}
	}
	ref := attach()
	if err := s.Send(ctx, "go"); err != nil {
		t.Fatal(err)
	}
	var late []viewer
	for range 40 {
		late = append(late, attach())
		time.Sleep(20 * time.Millisecond)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(ref.term.Text(), "END"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no END:\n%s", ref.term.Text())
		}
		drain(ref)
	}
	time.Sleep(200 * time.Millisecond)
	drain(ref)
	want := ref.term.Snapshot(nil, 0)
	mid := 0
	for i, v := range late {
		drain(v)
		if got := v.term.Snapshot(nil, 0); !bytes.Equal(got, want) {
			t.Errorf("viewer %d: its terminal differs from the first viewer's:\n%s\nwant\n%s", i, v.term.Text(), ref.term.Text())
		}
		if v.mid {
			mid++
		}
		v.v.Close()
	}
	ref.v.Close()
	if mid == 0 {
		t.Fatalf("none of %d viewers joined while the program drew: the test proves nothing", len(late))
	}
	t.Logf("%d of %d viewers joined while the program drew", mid, len(late))
}
