package session

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/anthropictest"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
)

// TestMain lets this test binary be the PermissionRequest hook
// (Options.Hook = {itself, "hook"}), as the server's executable is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "hook" {
		os.Exit(RunPermissionHook(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// permRecorder collects permission requests and ended hooks.
type permRecorder struct {
	mu    sync.Mutex
	reqs  []PermissionRequest
	ended []string
	poke  chan struct{}
}

func (p *permRecorder) opts(o Options) Options {
	o.OnPermission = func(r PermissionRequest) {
		p.mu.Lock()
		p.reqs = append(p.reqs, r)
		p.mu.Unlock()
		select {
		case p.poke <- struct{}{}:
		default:
		}
	}
	o.OnPermissionEnd = func(_ Key, id string, answered bool) {
		p.mu.Lock()
		if !answered {
			id = "unanswered:" + id
		}
		p.ended = append(p.ended, id)
		p.mu.Unlock()
		select {
		case p.poke <- struct{}{}:
		default:
		}
	}
	return o
}

func (p *permRecorder) wait(t *testing.T, what string, cond func(reqs []PermissionRequest, ended []string) bool) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		p.mu.Lock()
		ok := cond(p.reqs, p.ended)
		p.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-p.poke:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestClaudePermissionHook runs the real Claude Code in the default
// permission mode with the PermissionRequest hook (this test binary, as
// the server's executable in production) and a scripted model that asks
// to run Bash commands. Measured facts it guards: the hook gets the tool
// and its input; allow runs the command and the model gets its output;
// deny with a message gives the model an is_error tool_result whose
// content is exactly the message; a second decision for the same request
// fails; a rule in Spec.Permissions.Allow runs its command without asking;
// a dialog answered in the terminal ends the hook (OnPermissionEnd).
func TestClaudePermissionHook(t *testing.T) {
	bin := testenv.ClaudeBin(t)
	checkGoroutines(t)
	srv := anthropictest.New(t)
	srv.Reply(bashModel)
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "work")
	pr := &permRecorder{poke: make(chan struct{}, 1)}
	r := newRecorder()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m := newTestManager(t, r, pr.opts(Options{EnterDelay: 300 * time.Millisecond, StopGrace: 2 * time.Second, Hook: []string{self, "hook"}}))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	key := Key{"office", "perm"}
	s, err := m.Start(ctx, key, Spec{
		Command: bin, Dir: dir, Home: home, ConfigDir: filepath.Join(home, ".claude"),
		Env:            append([]string{"ANTHROPIC_API_KEY=" + srv.Key}, srv.Env(home)...),
		PermissionMode: "default", Cols: 120, Rows: 40,
		Permissions: PermissionRules{Allow: []string{"Bash(mkdir -p d-three)"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("screen:\n%s", strings.Join(s.Screen(), "\n"))
		}
	}()
	r.waitFor(t, "ready", 60*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })

	c := &permRun{t: t, ctx: ctx, srv: srv, r: r, m: m, s: s, key: key, pr: pr}
	c.allow()
	c.deny()
	c.rule()
	c.inTerminal()
}

// bashModel asks, on "run <n>", to run a Bash command making d-<n> and
// echoing ran-<n>; given a tool's result, it repeats it.
func bashModel(r anthropictest.Request) anthropictest.Response {
	if out, isErr, ok := r.ToolResult(); ok {
		return anthropictest.Response{Text: "tool said: " + out + map[bool]string{true: " (error)"}[isErr]}
	}
	u := r.LastUserText()
	for _, c := range []string{"one", "two", "three", "four"} {
		if strings.Contains(u, "run "+c) {
			return anthropictest.Response{Text: "Running.", ToolUses: []anthropictest.ToolUse{{
				Name: "Bash", Input: map[string]string{"command": "mkdir -p d-" + c + " && echo ran-" + c, "description": "say " + c},
			}}}
		}
	}
	return anthropictest.Response{Text: "OK"}
}

// permRun is TestClaudePermissionHook's session and its permission
// requests.
type permRun struct {
	t   *testing.T
	ctx context.Context
	srv *anthropictest.Server
	r   *recorder
	m   *Manager
	s   *Session
	key Key
	pr  *permRecorder
}

// toolResult waits up to 60 s for a tool_result with marker at the model.
func (c *permRun) toolResult(marker string) (string, bool) {
	t := c.t
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, rq := range c.srv.MainRequests() {
			if out, isErr, ok := rq.ToolResult(); ok && strings.Contains(out, marker) {
				return out, isErr
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no tool_result with %q reached the model", marker)
	return "", false
}

// send sends text; it returns once received: the turn waits on the hook.
func (c *permRun) send(text string) {
	go func() { _ = c.s.Send(c.ctx, text) }()
}

// allow: the hook gets the tool and its input; allow runs the command and
// the model gets its output; a second decision fails.
func (c *permRun) allow() {
	t := c.t
	c.send("please run one")
	c.pr.wait(t, "the first request", func(reqs []PermissionRequest, _ []string) bool { return len(reqs) == 1 })
	req := c.pr.reqs[0]
	var in struct{ Command string }
	_ = json.Unmarshal(req.Input, &in)
	if req.Tool != "Bash" || in.Command != "mkdir -p d-one && echo ran-one" || req.Key != c.key || req.ConversationID != c.s.Info().ConversationID {
		t.Fatalf("request %+v (command %q), want Bash mkdir of %v in conversation %s", req, in.Command, c.key, c.s.Info().ConversationID)
	}
	if err := c.m.DecidePermission(c.key, req.ID, PermissionDecision{Allow: true}); err != nil {
		t.Fatal(err)
	}
	if err := c.m.DecidePermission(c.key, req.ID, PermissionDecision{Allow: true}); err == nil {
		t.Error("a second decision for the same request was accepted")
	}
	if out, isErr := c.toolResult("ran-one"); isErr || strings.TrimSpace(out) != "ran-one" {
		t.Errorf("allowed: tool_result %q (error %v), want the command's output", out, isErr)
	}
	c.r.waitFor(t, "ready after one", 60*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })

}

// deny: deny with a message gives the model an is_error tool_result whose
// content is exactly the message.
func (c *permRun) deny() {
	t := c.t
	c.send("please run two")
	c.pr.wait(t, "the second request", func(reqs []PermissionRequest, _ []string) bool { return len(reqs) == 2 })
	const reason = "Denied by Kim: not on Fridays (ran-two refused)"
	if err := c.m.DecidePermission(c.key, c.pr.reqs[1].ID, PermissionDecision{Message: reason}); err != nil {
		t.Fatal(err)
	}
	if out, isErr := c.toolResult("ran-two refused"); !isErr || out != reason {
		t.Errorf("denied: tool_result %q (error %v), want exactly %q as an error", out, isErr, reason)
	}
	c.r.waitFor(t, "ready after two", 60*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })

}

// rule: a rule in Spec.Permissions.Allow runs its command without asking.
func (c *permRun) rule() {
	t := c.t
	c.send("please run three")
	if out, isErr := c.toolResult("ran-three"); isErr || strings.TrimSpace(out) != "ran-three" {
		t.Errorf("allowed by rule: tool_result %q (error %v)", out, isErr)
	}
	c.pr.mu.Lock()
	n := len(c.pr.reqs)
	c.pr.mu.Unlock()
	if n != 2 {
		t.Errorf("a command allowed by a rule made a request (%d requests, want 2)", n)
	}
	c.r.waitFor(t, "ready after three", 60*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })

}

// inTerminal: a dialog answered in the terminal (Enter: "Yes") while the
// hook waits ends the hook (OnPermissionEnd).
func (c *permRun) inTerminal() {
	t := c.t
	c.send("please run four")
	c.pr.wait(t, "the fourth request", func(reqs []PermissionRequest, _ []string) bool { return len(reqs) == 3 })
	c.r.waitFor(t, "the dialog", 30*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionNeedsAttention })
	if err := c.s.Input([]byte("\r")); err != nil {
		t.Fatal(err)
	}
	if out, _ := c.toolResult("ran-four"); strings.TrimSpace(out) != "ran-four" {
		t.Errorf("answered in the terminal: tool_result %q", out)
	}
	c.pr.wait(t, "the hook to end", func(_ []PermissionRequest, ended []string) bool { return len(ended) == 1 })
	if c.pr.ended[0] != c.pr.reqs[2].ID {
		t.Errorf("ended %v, want the fourth request %s", c.pr.ended, c.pr.reqs[2].ID)
	}
	if err := c.m.DecidePermission(c.key, c.pr.reqs[2].ID, PermissionDecision{Allow: true}); err == nil {
		t.Error("a decision for a request whose hook ended was accepted")
	}
}

// hookResult is how the hook's main ended: exit code and stdout.
type hookResult struct {
	code int
	out  string
}

// TestPermissionHookProtocol drives the hook's main against a session's
// socket without Claude Code: a bad command line exits 2; no server, or a
// server that ends the request without a decision, exits 1 with nothing on
// stdout (Claude Code then shows its own dialog); a decision is printed in
// Claude Code's shape, and a deny carries its message.
func TestPermissionHookProtocol(t *testing.T) {
	checkGoroutines(t)
	var stdout, stderr strings.Builder
	if code := RunPermissionHook([]string{"permission"}, strings.NewReader("{}"), &stdout, &stderr); code != 2 {
		t.Errorf("no socket: exit %d, want 2", code)
	}
	dir := t.TempDir()
	if code := RunPermissionHook([]string{"permission", filepath.Join(dir, "none.sock")}, strings.NewReader(`{"tool_name":"Bash"}`), &stdout, &stderr); code != 1 || stdout.Len() != 0 {
		t.Errorf("no server: exit %d, stdout %q; want 1 and nothing", code, stdout.String())
	}

	pr := &permRecorder{poke: make(chan struct{}, 1)}
	m := NewManager(pr.opts(Options{}))
	s := newSession(m, Key{"o", "a"}, Spec{})
	signals := filepath.Join(dir, "signals")
	if err := os.WriteFile(signals, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := listenPermissions(s, dir, signals)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.close()
	run := func(in string) (int, string) {
		var out, errb strings.Builder
		code := RunPermissionHook([]string{"permission", ln.path}, strings.NewReader(in), &out, &errb)
		return code, out.String()
	}
	for i, c := range []struct {
		decide *PermissionDecision
		want   string
	}{
		{&PermissionDecision{Allow: true}, `{"hookSpecificOutput":{"decision":{"behavior":"allow"},"hookEventName":"PermissionRequest"}}`},
		{&PermissionDecision{Message: "no: \"quoted\""}, `{"hookSpecificOutput":{"decision":{"behavior":"deny","message":"no: \"quoted\""},"hookEventName":"PermissionRequest"}}`},
		{nil, ""}, // the session ends the request (answered in the terminal)
	} {
		done := make(chan hookResult, 1)
		go func() {
			code, out := run(`{"session_id":"s","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"make"}}`)
			done <- hookResult{code, out}
		}()
		pr.wait(t, "the request", func(reqs []PermissionRequest, _ []string) bool { return len(reqs) == i+1 })
		req := pr.reqs[i]
		if req.Tool != "Bash" || string(req.Input) != `{"command":"make"}` || req.ConversationID != "s" {
			t.Errorf("request %+v", req)
		}
		if c.decide != nil {
			if err := m.DecidePermission(Key{"o", "a"}, req.ID, *c.decide); err != nil {
				t.Fatal(err)
			}
		} else {
			m.perms.end(Key{"o", "a"}, func(*permWait) bool { return true })
			pr.wait(t, "the end", func(_ []PermissionRequest, ended []string) bool { return len(ended) == 1 && ended[0] == req.ID })
		}
		r := <-done
		wantCode := 0
		if c.want == "" {
			wantCode = 1
		}
		if r.code != wantCode || strings.TrimSpace(r.out) != c.want {
			t.Errorf("case %d: exit %d, stdout %q; want %d, %q", i, r.code, r.out, wantCode, c.want)
		}
	}
	if err := m.DecidePermission(Key{"o", "other"}, pr.reqs[0].ID, PermissionDecision{}); err == nil {
		t.Error("a decision for another agent's key was accepted")
	}

	closedWhileWaiting(t, pr, ln, run)
}

// closedWhileWaiting: the session closes (the agent stops) while a
// request waits: the hook exits without a decision and the end is
// reported as not answered.
func closedWhileWaiting(t *testing.T, pr *permRecorder, ln *permListener, run func(string) (int, string)) {
	done := make(chan hookResult, 1)
	go func() {
		code, out := run(`{"tool_name":"Bash","tool_input":{"command":"make"}}`)
		done <- hookResult{code, out}
	}()
	pr.wait(t, "the last request", func(reqs []PermissionRequest, _ []string) bool { return len(reqs) == 4 })
	ln.close()
	if r := <-done; r.code != 1 || r.out != "" {
		t.Errorf("session closed: exit %d, stdout %q; want 1 and nothing", r.code, r.out)
	}
	pr.wait(t, "the unanswered end", func(reqs []PermissionRequest, ended []string) bool {
		return len(ended) == 2 && ended[1] == "unanswered:"+reqs[3].ID
	})
}
