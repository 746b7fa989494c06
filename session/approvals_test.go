package session

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/geminitest"
	"github.com/office-server/office-server/internal/openaitest"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
)

// approvalCLI is one CLI whose tool approvals the office routes through
// its hook, for TestChatPermissionHook: how to start it against its
// scripted model, whose reply to "please run <word>" is a shell command
// making d-<word> and printing ran-<word>, and how to read what the model
// got back from the tool.
type approvalCLI struct {
	name  string
	via   string // how its requests come: ViaHook or ViaScreen
	start func(t *testing.T) (spec Spec, toolOutputs func() []string)
}

// shellCall is the command the scripted models ask for.
func shellCall(u string) (string, bool) {
	for _, w := range []string{"one", "two", "three"} {
		if strings.Contains(u, "please run "+w) {
			return "mkdir -p d-" + w + " && echo ran-" + w, true
		}
	}
	return "", false
}

// geminiApproval starts the Gemini CLI: in a HOME the office made
// (nothing in it; the key in the environment) or in a person's, with their
// API-key settings.
func geminiApproval(officeMade bool) func(t *testing.T) (Spec, func() []string) {
	return func(t *testing.T) (Spec, func() []string) {
		bin := testenv.CLIBin(t, "gemini")
		srv := geminitest.New(t)
		prepare := geminitest.Prepare
		if officeMade {
			prepare = func(string) error { return nil }
		}
		home, dir := cliDirs(t, prepare)
		srv.Reply(func(r geminitest.Request) geminitest.Response {
			if outs := r.FunctionResponses(); r.LastIsFunctionResponse() {
				return geminitest.Response{Text: "tool said: " + outs[len(outs)-1]}
			}
			if c, ok := shellCall(r.LastUserText()); ok {
				return geminitest.Response{Calls: []geminitest.Call{{Name: "run_shell_command", Args: map[string]any{"command": c, "description": "say it"}}}}
			}
			return geminitest.Response{Text: "OK"}
		})
		outputs := func() []string {
			var out []string
			for _, r := range srv.MainRequests() {
				out = append(out, r.FunctionResponses()...)
			}
			return out
		}
		env := srv.Env(home)
		if officeMade {
			env = env[1:] // no HOME: the office's own (Spec.Home)
		}
		return Spec{Kind: KindGemini, Command: bin, Dir: dir, Home: home, Env: env, Cols: 120, Rows: 40}, outputs
	}
}

var approvalCLIs = []approvalCLI{
	{name: "gemini-office-home", via: ViaHook, start: geminiApproval(true)},
	{name: "gemini-person-home", via: ViaScreen, start: geminiApproval(false)},
	{name: "qwen", via: ViaHook, start: func(t *testing.T) (Spec, func() []string) {
		bin := testenv.CLIBin(t, "qwen")
		srv := openaitest.New(t)
		srv.Side(openaitest.QwenSide)
		home, dir := cliDirs(t, openaitest.PrepareQwen)
		srv.Reply(func(r openaitest.Request) openaitest.Response {
			switch {
			case strings.HasPrefix(r.System, "You are a security classifier"):
				// Unclassified: Qwen Code's Auto mode asks the person.
				return openaitest.Response{Calls: []openaitest.Call{{Name: "respond_in_schema", Arguments: `{"shouldBlock":"unsure"}`}}}
			case r.LastIsToolOutput():
				outs := r.FunctionOutputs()
				return openaitest.Response{Text: "tool said: " + outs[len(outs)-1]}
			}
			if c, ok := shellCall(r.LastUserText()); ok {
				args, _ := json.Marshal(map[string]any{"command": c, "description": "say it"})
				return openaitest.Response{Calls: []openaitest.Call{{Name: "run_shell_command", Arguments: string(args)}}}
			}
			return openaitest.Response{Text: "OK"}
		})
		outputs := func() []string {
			var out []string
			for _, r := range srv.MainRequests() {
				out = append(out, r.FunctionOutputs()...)
			}
			return out
		}
		return Spec{Kind: KindQwen, Command: bin, Dir: dir, Home: home, Env: srv.QwenEnv(home), Cols: 120, Rows: 40}, outputs
	}},
}

// TestChatPermissionHook runs the real Gemini CLI and Qwen Code, in their
// default approval modes, with the office's approval hook (this test
// binary, as the server's executable in production): a shell command the
// model asks for reaches Options.OnPermission with the command, and no
// dialog is shown; allow runs it and the model gets its output; deny with a
// reason keeps it from running and the model gets the reason. The hook's
// settings are given as a system settings file of the session's own: the
// person's files stay as they were.
func TestChatPermissionHook(t *testing.T) {
	for _, c := range approvalCLIs {
		t.Run(c.name, func(t *testing.T) { runChatPermission(t, c) })
	}
}

func runChatPermission(t *testing.T, c approvalCLI) {
	checkGoroutines(t)
	spec, toolOutputs := c.start(t)
	settings := filepath.Join(spec.Home, "."+spec.Kind, "settings.json")
	person, _ := os.ReadFile(settings)
	pr := &permRecorder{poke: make(chan struct{}, 1)}
	r := newRecorder()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m := newTestManager(t, r, pr.opts(Options{StopGrace: 2 * time.Second, Hook: []string{self, "hook"}}))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	key := Key{"office", c.name}
	s, err := m.Start(ctx, key, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer logChatFailure(t, s, toolOutputs, pr)
	r.waitFor(t, "ready", 90*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	cp := &chatPerm{t: t, ctx: ctx, m: m, s: s, key: key, pr: pr, r: r, spec: spec, via: c.via, toolOutputs: toolOutputs}
	cp.allowOne()
	cp.denyTwo()
	pr.mu.Lock()
	if n := len(pr.reqs); n != 2 {
		// A dialog answered and still drawn until the CLI redraws
		// is no new request: answered, its key would go to what
		// follows it.
		t.Errorf("%d requests for two tool calls", n)
	}
	pr.mu.Unlock()
	if err := m.Stop(ctx, key); err != nil {
		t.Fatal(err)
	}
	if !officeHome(spec) {
		// Qwen Code notes things of its own in its settings; the
		// office writes nothing there.
		if now, _ := os.ReadFile(settings); strings.Contains(string(now), officeHookName) || (spec.Kind == KindGemini && string(now) != string(person)) {
			t.Errorf("the person's %s was written:\n%s", settings, now)
		}
	}
}

// logChatFailure logs, for a failed test, the screen, the tool outputs
// and the permission requests.
func logChatFailure(t *testing.T, s *Session, toolOutputs func() []string, pr *permRecorder) {
	if !t.Failed() {
		return
	}
	t.Logf("screen:\n%s", strings.Join(s.Screen(), "\n"))
	t.Logf("tool outputs: %q", toolOutputs())
	pr.mu.Lock()
	for _, q := range pr.reqs {
		t.Logf("request %s via %s: %s %s", q.ID, q.Via, q.Tool, q.Input)
	}
	t.Logf("ended: %q", pr.ended)
	pr.mu.Unlock()
}

// chatPerm is a CLI's session in TestChatPermissionHook.
type chatPerm struct {
	t           *testing.T
	ctx         context.Context
	m           *Manager
	s           *Session
	key         Key
	pr          *permRecorder
	r           *recorder
	spec        Spec
	via         string
	toolOutputs func() []string
}

// output waits up to 60 s for a tool output holding marker at the model.
func (c *chatPerm) output(marker string) string {
	t := c.t
	t.Helper()
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		for _, o := range c.toolOutputs() {
			if strings.Contains(o, marker) {
				return o
			}
		}
	}
	t.Fatalf("no tool output with %q reached the model", marker)
	return ""
}

// allowOne: the shell command reaches OnPermission with the command (no
// dialog shown through the hook); allowed, it runs and the model gets its
// output.
func (c *chatPerm) allowOne() {
	t := c.t
	go func() { _ = c.s.Send(c.ctx, "please run one") }()
	c.pr.wait(t, "the first request", func(reqs []PermissionRequest, _ []string) bool { return len(reqs) == 1 })
	req := c.pr.reqs[0]
	var in struct{ Command string }
	_ = json.Unmarshal(req.Input, &in)
	wantTool := map[string]string{ViaHook: "run_shell_command", ViaScreen: "Shell"}[c.via]
	if in.Command != "mkdir -p d-one && echo ran-one" || req.Key != c.key || req.Tool != wantTool || req.Via != c.via {
		t.Fatalf("request %+v (command %q), want %s with the mkdir of one, via %s", req, in.Command, wantTool, c.via)
	}
	if st := c.s.Info().Status; c.via == ViaHook && st == office.SessionNeedsAttention {
		t.Errorf("status %s while the office decides: a dialog is shown", st)
	}
	if err := c.m.DecidePermission(c.key, req.ID, PermissionDecision{Allow: true}); err != nil {
		t.Fatal(err)
	}
	if out := c.output("ran-one"); !strings.Contains(out, "ran-one") {
		t.Errorf("allowed: output %q", out)
	}
	if _, err := os.Stat(filepath.Join(c.spec.Dir, "d-one")); err != nil {
		t.Errorf("allowed command did not run: %v", err)
	}
	c.r.waitFor(t, "ready after one", 60*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })

}

// denyTwo: denied with a reason, the command does not run and (through
// the hook) the model gets the reason; a dialog is not decided twice.
func (c *chatPerm) denyTwo() {
	t := c.t
	go func() { _ = c.s.Send(c.ctx, "please run two") }()
	c.pr.wait(t, "the second request", func(reqs []PermissionRequest, _ []string) bool { return len(reqs) == 2 })
	const reason = "Denied by Kim: not on Fridays (two refused)"
	if err := c.m.DecidePermission(c.key, c.pr.reqs[1].ID, PermissionDecision{Message: reason}); err != nil {
		t.Fatal(err)
	}
	if c.via == ViaHook { // through the screen, the office tells the reason (engine)
		if out := c.output("two refused"); !strings.Contains(out, reason) {
			t.Errorf("denied: output %q, want the reason %q", out, reason)
		}
	}
	if _, err := os.Stat(filepath.Join(c.spec.Dir, "d-two")); err == nil {
		t.Error("a denied command ran")
	}
	c.r.waitFor(t, "ready after two", 60*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	if c.via == ViaScreen {
		if err := c.m.DecidePermission(c.key, c.pr.reqs[1].ID, PermissionDecision{Allow: true}); err == nil {
			t.Error("a dialog decided twice")
		}
	}
}

// TestGeminiHookFailsClosed: Gemini CLI runs a routed tool its policy
// allows once its BeforeTool hook does not block it, so a hook that gets
// no decision (the server gone) denies, with the reason.
func TestGeminiHookFailsClosed(t *testing.T) {
	var out, errb strings.Builder
	code := RunPermissionHook([]string{"before-tool", filepath.Join(t.TempDir(), "gone.sock")},
		strings.NewReader(`{"hook_event_name":"BeforeTool","tool_name":"run_shell_command","tool_input":{"command":"rm -rf x"}}`), &out, &errb)
	var d struct{ Decision, Reason string }
	if err := json.Unmarshal([]byte(out.String()), &d); err != nil || code != 0 {
		t.Fatalf("exit %d, output %q (%v), stderr %q", code, out.String(), err, errb.String())
	}
	if d.Decision != "deny" || !strings.Contains(d.Reason, "not approved") {
		t.Errorf("decision %+v, want deny with the reason", d)
	}
	out.Reset()
	if code := RunPermissionHook([]string{"permission", filepath.Join(t.TempDir(), "gone.sock")}, strings.NewReader(`{"tool_name":"Bash"}`), &out, &errb); code != 1 || out.Len() != 0 {
		t.Errorf("a PermissionRequest hook without a server: exit %d, output %q; want 1 and nothing (the CLI shows its dialog)", code, out.String())
	}
}

func TestSameDialog(t *testing.T) {
	a := "? Shell  mkdir -p d-two\nAllow execution of [Shell]?\n● 1. Allow once\n2. Allow for this session\n3. No, suggest changes (esc)"
	b := "? Shell  mkdir -p d-two\nAllow execution of [Shell]?\n1. Allow once\n2. Allow for this session\n● 3. No, suggest changes (esc)"
	c := "? Shell  mkdir -p d-three\nAllow execution of [Shell]?\n● 1. Allow once\n2. Allow for this session\n3. No, suggest changes (esc)"
	if !sameDialog(a, b) {
		t.Error("the highlight moved: not the same dialog")
	}
	if sameDialog(a, c) {
		t.Error("another command: the same dialog")
	}
	if !otherDialog(c, a) || otherDialog(b, a) {
		t.Error("otherDialog: another command is another dialog, a moved highlight is not")
	}
	if otherDialog("Allow execution of [Shell]?\n● 1. Allow once", a) {
		t.Error("a frame without its tool line taken for another dialog")
	}
	if choiceBox("✓  Shell mkdir -p d-two\nran-two") || !choiceBox("Allow execution of [Shell]?\n● 1. Allow once") {
		t.Error("choiceBox: the tool's own box after it ran is no dialog; a dialog drawn in part is one")
	}
}
