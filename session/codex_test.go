package session

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/openaitest"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
)

// TestCodexEndToEnd drives the real Codex CLI (0.169.0, from npm) against a
// scripted Responses API, from a HOME holding only the person's provider
// settings and a folder that is a git checkout (no trust dialog: the
// office trusts the agent's folder; config.toml keeps what the person
// wrote and gets no trust entry): the office's instructions are in the
// model's first request once (a -c override), and once in the first after the resume,
// beside what the person wrote in Codex's AGENTS.md (byte-identical after);
// a reply far taller than the terminal, with one [ASK_USER], reaches the
// parser exactly as the model sent it, as one question; a restart resumes
// the conversation and emits nothing twice.
func TestCodexEndToEnd(t *testing.T) {
	bin := testenv.CLIBin(t, "codex")
	checkGoroutines(t)
	srv := openaitest.New(t)
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "work")
	config, agentsFile := prepCodexHome(t, srv, home, dir)

	reply1 := codexLongReply()
	reply2 := "알겠습니다.\n[RESULT] 완료"
	reply3 := "다시 왔습니다."
	srv.Enqueue(openaitest.Response{Text: reply1, Delay: 2 * time.Millisecond}, openaitest.Response{Text: reply2}, openaitest.Response{Text: reply3})

	r := newRecorder()
	m := newTestManager(t, r, Options{StopGrace: 2 * time.Second, RestartBackoff: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	key := Key{"office", "codex"}
	spec := Spec{
		Kind: KindCodex, Command: bin, Dir: dir, Home: home,
		Env:                srv.CodexEnv(home),
		AppendSystemPrompt: "OFFICE-INSTRUCTIONS: answer with protocol blocks such as [ASK_USER].",
		// An id the office made up (as it does for every agent): Codex
		// has no such conversation and makes its own.
		ConversationID: "00000000-0000-4000-8000-00000000c0de",
		Cols:           100, Rows: 30,
	}
	s, err := m.Start(ctx, key, spec)
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 60*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	sctx, scancel := context.WithTimeout(ctx, 40*time.Second)
	if err := s.Send(sctx, "[OFFICE] Message from a person in the office:\n> 배포 전에 물어봐 주세요"); err != nil {
		t.Fatalf("%v; %d requests; info %+v; screen:\n%s", err, len(srv.Requests()), s.Info(), strings.Join(s.Screen(), "\n"))
	}
	scancel()
	r1, err := srv.WaitMain(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !r1.Has("OFFICE-INSTRUCTIONS") || !r1.Has("USER-NOTE") {
		t.Errorf("first request: office instructions %v, the person's note %v; want both", r1.Has("OFFICE-INSTRUCTIONS"), r1.Has("USER-NOTE"))
	}
	agentsFile.Same(t) // the instructions go as a -c override, not into the person's AGENTS.md
	r.waitFor(t, "first turn", 60*time.Second, func(st []Status, ts []Text) bool {
		return len(turns(ts)) >= 1 && lastStatus(st) == office.SessionReady
	})
	_, ts := r.snapshot()
	if got := turns(ts)[0]; got != reply1 {
		t.Errorf("first turn's text differs from the reply:\n got %.300q\nwant %.300q", got, reply1)
	}
	checkFromRollout(t, ts)
	if asks := countAsks(ts); asks != 1 {
		t.Errorf("%d ASK_USER messages from a long reply with one, want 1", asks)
	}
	if err := s.Send(ctx, "네, 진행하세요"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "second turn", 60*time.Second, func(st []Status, ts []Text) bool {
		return len(turns(ts)) >= 2 && lastStatus(st) == office.SessionReady
	})
	id := s.Info().ConversationID
	if id == "" || id == spec.ConversationID {
		t.Errorf("conversation id in Info %q, want Codex's own", id)
	}

	codexResume(t, ctx, r, m, s, srv, key, r1, reply2, reply3)
	if got := s.Info().ConversationID; got != id {
		t.Errorf("conversation id changed on restart: %s → %s", id, got)
	}
	checkEntersOnEcho(t, s)
	if err := m.Stop(ctx, key); err != nil {
		t.Fatal(err)
	}
	config.Kept(t, "[projects", "trust_level", "check_for_update")
	// Nothing Codex started outlives the agent (its shared app server
	// would, without --no-daemon).
	checkNoneLeft(t, home)
}

// checkNoneLeft: for 3 s, no process mentions home.
func checkNoneLeft(t *testing.T, home string) {
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if left := processesUnder(t, home); len(left) > 0 {
			t.Errorf("processes left running from the agent's HOME: %q", left)
			break
		}
	}
}

// prepCodexHome makes home a new user's HOME: only their provider
// settings, and an AGENTS.md of their own; dir is a git checkout, where
// Codex asks whether to trust it (the office trusts it for the agent
// without writing the person's config.toml). It returns both files as
// the person wrote them.
func prepCodexHome(t *testing.T, srv *openaitest.Server, home, dir string) (testenv.PersonFile, testenv.PersonFile) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.GitInit(t, dir)
	if err := srv.PrepareCodex(home); err != nil {
		t.Fatal(err)
	}
	config := testenv.ReadPersonFile(t, filepath.Join(home, ".codex", "config.toml"))
	agentsMD := filepath.Join(home, ".codex", "AGENTS.md")
	if err := os.WriteFile(agentsMD, []byte("USER-NOTE: 사람이 쓴 지시입니다.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agentsFile := testenv.ReadPersonFile(t, agentsMD)
	return config, agentsFile
}

// codexLongReply is a reply far taller than the terminal with one
// [ASK_USER] in its middle.
func codexLongReply() string {
	var b strings.Builder
	b.WriteString("긴 답변입니다.\n")
	for i := 1; i <= 60; i++ {
		b.WriteString("줄 " + strings.Repeat("가", i%7+1) + " — a line of a long reply.\n")
	}
	b.WriteString("[ASK_USER]\n질문: 배포를 진행할까요?\n타입: confirmation\n[/ASK_USER]\n")
	for i := 1; i <= 30; i++ {
		b.WriteString("뒤 줄 — more of the long reply.\n")
	}
	return b.String() + "끝."
}

// checkFromRollout: each text came from the rollout.
func checkFromRollout(t *testing.T, ts []Text) {
	for _, x := range ts {
		if x.Source != FromTranscript {
			t.Errorf("text %s from %v, want the rollout", x.ID, x.Source)
		}
	}
}

// codexResume: a restart resumes the conversation: the next request holds
// the earlier replies and the office's instructions once (as the first
// did), and nothing is emitted twice.
func codexResume(t *testing.T, ctx context.Context, r *recorder, m *Manager, s *Session, srv *openaitest.Server, key Key, r1 openaitest.Request, reply2, reply3 string) {
	if err := m.Restart(ctx, key, nil); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready after restart", 60*time.Second, func(st []Status, _ []Text) bool {
		return lastStatus(st) == office.SessionReady && countStatus(st, office.SessionStarting) == 2
	})
	if !s.Info().Resumed {
		t.Error("restart did not resume the conversation")
	}
	if err := s.Send(ctx, "계속"); err != nil {
		t.Fatal(err)
	}
	r3, err := srv.WaitMain(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !r3.Has("질문: 배포를 진행할까요?") || !r3.Has("[RESULT] 완료") {
		t.Error("resumed conversation lacks the earlier replies")
	}
	if n1, n3 := strings.Count(string(r1.Body), "OFFICE-INSTRUCTIONS"), strings.Count(string(r3.Body), "OFFICE-INSTRUCTIONS"); n1 != 1 || n3 != 1 {
		t.Errorf("the office's instructions %d times in the first request, %d after the resume; want once each", n1, n3)
	}
	r.waitFor(t, "third turn", 60*time.Second, func(st []Status, ts []Text) bool {
		return len(turns(ts)) >= 3 && lastStatus(st) == office.SessionReady
	})
	_, ts := r.snapshot()
	checkNoTextTwice(t, ts)
	if got := turns(ts); len(got) != 3 || got[1] != reply2 || got[2] != reply3 {
		t.Errorf("turns: %q", got)
	}
}

// checkNoTextTwice: no text id was emitted twice.
func checkNoTextTwice(t *testing.T, ts []Text) {
	seen := map[string]bool{}
	for _, x := range ts {
		if seen[x.ID] {
			t.Errorf("text %s emitted twice", x.ID)
		}
		seen[x.ID] = true
	}
}

// processesUnder returns the command lines of running processes that
// mention dir (their executable or an argument).
func processesUnder(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc")
	}
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		if c := strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(c, dir) {
			out = append(out, c)
		}
	}
	return out
}

// TestCodexState follows Codex's OSC 7501 state through writes cut
// anywhere, the sequence ended by BEL, ST or its ":app=" part: no state is
// made up or lost to a cut (byte by byte, all three are seen).
func TestCodexState(t *testing.T) {
	out := "junk\x1b]7501;state=idle:app=codex\x1b\\more\x1b]7501;state=working\x07x\x1b]7501;state=done:app=codex\x07tail"
	want := []string{"idle", "working", "done"}
	for size := 1; size <= len(out); size++ {
		var cur string
		var tail []byte
		var seen []string
		for off := 0; off < len(out); off += size {
			next, nt := codexState(cur, tail, []byte(out[off:min(off+size, len(out))]))
			tail = nt
			if next != cur {
				seen = append(seen, next)
				cur = next
			}
		}
		// Each write's last state; two states in one write show as one.
		k := 0
		for _, st := range seen {
			for k < len(want) && want[k] != st {
				k++
			}
			if k == len(want) {
				t.Fatalf("writes of %d: states %q, not in the order of %q", size, seen, want)
			}
		}
		if cur != "done" || (size == 1 && len(seen) != 3) {
			t.Fatalf("writes of %d: states %q, want %q", size, seen, want)
		}
	}
}

// TestCodexRolloutCursor reads a rollout as Codex 0.169.0 writes it
// (docs/notes/clis.md): assistant messages become texts with IDs
// "<file>:<offset>", task_complete a turn end, user messages prompts; a
// cursor skips what was acted on, a cursor not in the file means all of it
// was, and a cursor naming another rollout skips nothing.
func TestCodexRolloutCursor(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rollout-2026-11-23T19-59-52-abc.jsonl")
	lines := []string{
		`{"type":"session_meta","payload":{"id":"abc","cwd":"/w"}}`,
		`{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}`,
		`{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"one\ntwo"}]}}`,
		`{"type":"event_msg","payload":{"type":"task_complete"}}`,
		`{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"three"}]}}`,
	}
	data := strings.Join(lines, "\n") + "\n"
	if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	off := func(i int) string {
		n := 0
		for _, l := range lines[:i] {
			n += len(l) + 1
		}
		return "rollout-2026-11-23T19-59-52-abc:" + fmt.Sprint(n)
	}
	read := func(after string) []Text {
		d := &codexDriver{s: &Session{}, file: file, after: after, skipping: after != ""}
		ts, err := d.poll()
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	all := read("")
	if len(all) != 3 || strings.Join(all[0].Lines, "|") != "one|two" || all[0].ID != off(2) || !all[1].TurnEnd || all[2].Lines[0] != "three" {
		t.Fatalf("texts %+v", all)
	}
	if got := read(off(3)); len(got) != 1 || got[0].Lines[0] != "three" {
		t.Errorf("after the turn end: %+v", got)
	}
	if got := read("rollout-2026-11-23T19-59-52-abc:99999"); len(got) != 0 {
		t.Errorf("a cursor not in the file: %+v, want nothing", got)
	}
	if got := read("rollout-other:10"); len(got) != 3 {
		t.Errorf("a cursor of another rollout: %d texts, want 3", len(got))
	}
}

// TestCodexPermissionHook runs the real Codex (approval policy on-request;
// the model asks to run its commands outside the sandbox) with its PermissionRequest hook
// (this test binary, as the server's executable in production) and a
// scripted model that asks to run shell commands: the request reaches
// Options.OnPermission with the command; allow runs it and the model gets
// its output; deny with a reason keeps it from running and the model
// gets the reason.
func TestCodexPermissionHook(t *testing.T) {
	bin := testenv.CLIBin(t, "codex")
	checkGoroutines(t)
	srv := openaitest.New(t)
	home, dir := cliDirs(t, srv.PrepareCodex)
	srv.Reply(execModel)
	pr := &permRecorder{poke: make(chan struct{}, 1)}
	r := newRecorder()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m := newTestManager(t, r, pr.opts(Options{StopGrace: 2 * time.Second, Hook: []string{self, "hook"}}))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	key := Key{"office", "codex-perm"}
	s, err := m.Start(ctx, key, Spec{
		Kind: KindCodex, Command: bin, Dir: dir, Home: home, Env: srv.CodexEnv(home),
		Args: []string{"--ask-for-approval", "on-request"}, Cols: 120, Rows: 40,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("screen:\n%s", strings.Join(s.Screen(), "\n"))
			if rs := srv.MainRequests(); len(rs) > 0 {
				t.Logf("tools offered: %s", toolNames(rs[0].Body))
			}
		}
	}()
	r.waitFor(t, "ready", 60*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	output := func(marker string) string { t.Helper(); return functionOutput(t, srv, marker) }

	go func() { _ = s.Send(ctx, "please run one") }()
	pr.wait(t, "the first request", func(reqs []PermissionRequest, _ []string) bool { return len(reqs) == 1 })
	req := pr.reqs[0]
	var in struct{ Command string }
	_ = json.Unmarshal(req.Input, &in)
	if !strings.Contains(in.Command, "mkdir -p d-one && echo ran-one") || req.Key != key {
		t.Fatalf("request %+v (command %q), want the mkdir of one", req, in.Command)
	}
	t.Logf("Codex's request: tool %s, input %s", req.Tool, req.Input)
	if err := m.DecidePermission(key, req.ID, PermissionDecision{Allow: true}); err != nil {
		t.Fatal(err)
	}
	if out := output("ran-one"); !strings.Contains(out, "ran-one") {
		t.Errorf("allowed: output %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "d-one")); err != nil {
		t.Errorf("allowed command did not run: %v", err)
	}
	r.waitFor(t, "ready after one", 60*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })

	go func() { _ = s.Send(ctx, "please run two") }()
	pr.wait(t, "the second request", func(reqs []PermissionRequest, _ []string) bool { return len(reqs) == 2 })
	const reason = "Denied by Kim: not on Fridays (two refused)"
	if err := m.DecidePermission(key, pr.reqs[1].ID, PermissionDecision{Message: reason}); err != nil {
		t.Fatal(err)
	}
	if out := output("two refused"); !strings.Contains(out, reason) {
		t.Errorf("denied: output %q, want the reason %q", out, reason)
	}
	if _, err := os.Stat(filepath.Join(dir, "d-two")); err == nil {
		t.Error("a denied command ran")
	}
	r.waitFor(t, "ready after two", 60*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	if err := m.Stop(ctx, key); err != nil {
		t.Fatal(err)
	}
}

// execModel asks, on "run <n>", to run a command outside the sandbox
// making d-<n> and echoing ran-<n>; given its output, it repeats it.
func execModel(r openaitest.Request) openaitest.Response {
	if outs := r.FunctionOutputs(); lastInputType(r.Body) == "function_call_output" {
		return openaitest.Response{Text: "tool said: " + outs[len(outs)-1]}
	}
	u := r.LastUserText()
	for _, c := range []string{"one", "two"} {
		if strings.Contains(u, "run "+c) {
			args, _ := json.Marshal(map[string]any{"cmd": "mkdir -p d-" + c + " && echo ran-" + c, "justification": "say " + c, "sandbox_permissions": "require_escalated"})
			return openaitest.Response{Calls: []openaitest.Call{{Name: "exec_command", Arguments: string(args)}}}
		}
	}
	return openaitest.Response{Text: "OK"}
}

// functionOutput waits up to 60 s for a function output holding marker at
// the model.
func functionOutput(t *testing.T, srv *openaitest.Server, marker string) string {
	t.Helper()
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		for _, rq := range srv.MainRequests() {
			for _, o := range rq.FunctionOutputs() {
				if strings.Contains(o, marker) {
					return o
				}
			}
		}
	}
	t.Fatalf("no function output with %q reached the model", marker)
	return ""
}

// lastInputType is the type of the last input item of a Responses API
// request ("message", "function_call_output"…).
func lastInputType(body []byte) string {
	var b struct {
		Input []struct {
			Type string `json:"type"`
		} `json:"input"`
	}
	_ = json.Unmarshal(body, &b)
	if len(b.Input) == 0 {
		return ""
	}
	return b.Input[len(b.Input)-1].Type
}

// toolNames lists the names of the tools a Responses API request offers.
func toolNames(body []byte) string {
	var b struct {
		Tools []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"tools"`
	}
	_ = json.Unmarshal(body, &b)
	var out []string
	for _, t := range b.Tools {
		out = append(out, t.Type+":"+t.Name)
	}
	return strings.Join(out, " ")
}
