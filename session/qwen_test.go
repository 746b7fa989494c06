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

	"github.com/google/go-cmp/cmp"

	"github.com/office-server/office-server/internal/openaitest"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
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
	r.waitFor(t, "ready", 90*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	for turn := 1; turn <= 3; turn++ {
		if err := s.Send(ctx, "turn "+string(rune('0'+turn))); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.WaitMain(ctx, turn); err != nil {
			t.Fatal(err)
		}
		// The whole reply: a turn read off the screen may end within it
		// (the model paused), and the rest comes after.
		r.waitFor(t, "turn end", 90*time.Second, func(st []Status, ts []Text) bool {
			return lastStatus(st) == office.SessionReady && strings.Count(strings.Join(r.lines(), "\n"), "끝.") >= turn
		})
	}
	first := srv.MainRequests()[0]
	if !first.Has("OFFICE-INSTRUCTIONS") || !first.Has("USER-NOTE") {
		t.Errorf("first request: office instructions %v, the person's note %v; want both", first.Has("OFFICE-INSTRUCTIONS"), first.Has("USER-NOTE"))
	}
	if b, _ := os.ReadFile(md); !strings.Contains(string(b), "USER-NOTE") {
		t.Errorf("QWEN.md lost what the person wrote:\n%s", b)
	}
	if asks := questionsRead(t, r, "계속할까요?"); asks != 3 {
		t.Errorf("%d ASK_USER messages, want 3 (one a turn); lines:\n%s", asks, strings.Join(r.lines(), "\n"))
	}
	if err := m.Stop(ctx, Key{"office", "qwen"}); err != nil {
		t.Fatal(err)
	}
}

// questionsRead counts the ASK_USER blocks in what r received, each
// asking want. The texts are parsed as one: a block cut by a turn end
// read off the screen is held open by the office (engine
// TestScreenTurnEndHoldsOpenBlock).
func questionsRead(t *testing.T, r *recorder, want string) int {
	t.Helper()
	_, ts := r.snapshot()
	var lines []string
	for _, x := range ts {
		lines = append(lines, x.Lines...)
	}
	asks := 0
	for _, m := range protocol.ParseString(strings.Join(lines, "\n"), protocol.Options{}) {
		if m.Kind == protocol.KindAskUser {
			asks++
			if m.Question.Question != want {
				t.Errorf("question %q, want %q (screen chrome such as a scroll bar is not the agent's words)", m.Question.Question, want)
			}
		}
	}
	return asks
}

// TestQwenApprovalDialog drives the real Qwen Code as a qwen agent whose
// scripted model asks to run a shell command: its approval dialog (its
// title says a confirmation waits) puts the agent in needs_attention with
// the command in the dialog's text; Enter (its first choice, allow once)
// runs the command, and the turn ends with the model's reply to its
// output, read from the chat recording.
func TestQwenApprovalDialog(t *testing.T) {
	bin := testenv.CLIBin(t, "qwen")
	checkGoroutines(t)
	srv := openaitest.New(t)
	srv.Side(openaitest.QwenSide)
	home, dir := cliDirs(t, openaitest.PrepareQwen)
	// Its Auto mode asks a classifier first (its own system prompt, one
	// tool): an answer that breaks the classifier's schema leaves the call
	// unclassified, and Qwen Code asks the person.
	srv.Reply(func(r openaitest.Request) openaitest.Response {
		switch {
		case strings.HasPrefix(r.System, "You are a security classifier"):
			return openaitest.Response{Calls: []openaitest.Call{{Name: "respond_in_schema", Arguments: `{"shouldBlock":"unsure"}`}}}
		case strings.Contains(strings.Join(r.FunctionOutputs(), "\n"), "qwen-ok"):
			return openaitest.Response{Text: "폴더를 만들었습니다."}
		}
		return openaitest.Response{Calls: []openaitest.Call{{Name: "run_shell_command", Arguments: `{"command":"mkdir -p made-by-qwen && echo qwen-ok","description":"make a folder"}`}}}
	})
	r := newRecorder()
	m := newTestManager(t, r, Options{StopGrace: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	key := Key{"office", "qwen-approval"}
	s, err := m.Start(ctx, key, Spec{
		Kind: KindQwen, Command: bin, Dir: dir, Home: home, Env: srv.QwenEnv(home), Cols: 100, Rows: 30,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("screen:\n%s", strings.Join(s.Screen(), "\n"))
			for _, q := range srv.Requests() {
				t.Logf("model request %d main=%v tools=%d: %.80q / %.200q", q.Seq, q.Main, q.Tools, q.System, q.LastUserText())
			}
		}
	}()
	r.waitFor(t, "ready", 90*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	if err := s.Send(ctx, "make the folder"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "needs attention", 60*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionNeedsAttention })
	if d := s.Info().Detail; !strings.Contains(d, "mkdir -p made-by-qwen") {
		t.Errorf("detail %q, want the command", d)
	} else {
		t.Logf("needs_attention detail:\n%s", d)
	}
	if err := s.Input([]byte("\r")); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready after the command", 60*time.Second, func(st []Status, ts []Text) bool {
		return lastStatus(st) == office.SessionReady && len(turns(ts)) == 1
	})
	if _, err := os.Stat(filepath.Join(dir, "made-by-qwen")); err != nil {
		t.Errorf("the allowed command did not run: %v", err)
	}
	if _, ts := r.snapshot(); turns(ts)[0] != "폴더를 만들었습니다." {
		t.Errorf("turn %q, want the model's reply to the command's output", turns(ts)[0])
	}
	if err := m.Stop(ctx, key); err != nil {
		t.Fatal(err)
	}
}

// TestQwenEndToEnd drives the real Qwen Code (0.24.4, from npm) as a qwen
// agent against a scripted Chat Completions API: the office's
// instructions reach the first request through ~/.qwen/QWEN.md (what the
// person wrote there kept); a 90-line Korean reply with one [ASK_USER],
// taller than the 30-row terminal (Ink clears and repaints its history),
// is read from the chat recording exactly once, word for word, and gives
// one question; after a restart of the server (a new manager, the
// office's cursor at the last turn end) the conversation is resumed (the
// next request carries the earlier replies) and nothing is read twice.
func TestQwenEndToEnd(t *testing.T) {
	bin := testenv.CLIBin(t, "qwen")
	checkGoroutines(t)
	srv := openaitest.New(t)
	srv.Side(openaitest.QwenSide)
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "work")
	md := prepQwenHome(t, home, dir)
	reply1 := longRepaintedReply()
	reply2 := "알겠습니다.\n[RESULT] 완료"
	reply3 := "이어서 진행합니다."
	srv.Enqueue(openaitest.Response{Text: reply1, Delay: 5 * time.Millisecond}, openaitest.Response{Text: reply2}, openaitest.Response{Text: reply3})

	r := newRecorder()
	m := newTestManager(t, r, Options{StopGrace: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	key := Key{"office", "qwen"}
	spec := Spec{
		Kind: KindQwen, Command: bin, Dir: dir, Home: home,
		Env:                srv.QwenEnv(home),
		AppendSystemPrompt: "OFFICE-INSTRUCTIONS: answer with protocol blocks such as [ASK_USER].",
		ConversationID:     "00000000-0000-4000-8000-00000000a111",
		Cols:               100, Rows: 30,
	}
	s, err := m.Start(ctx, key, spec)
	if err != nil {
		t.Fatal(err)
	}
	cur := s // the session shown when the test fails
	defer func() { logQwenFailure(t, cur, srv) }()
	r.waitFor(t, "ready", 60*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	if err := s.Send(ctx, "[OFFICE] Message from a person in the office:\n> 배포 전에 물어봐 주세요"); err != nil {
		t.Fatal(err)
	}
	r1, err := srv.WaitMain(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	checkQwenFirst(t, r1, md)
	r.waitFor(t, "first turn", 60*time.Second, func(st []Status, ts []Text) bool {
		return len(turns(ts)) >= 1 && lastStatus(st) == office.SessionReady
	})
	_, ts := r.snapshot()
	if got := turns(ts)[0]; got != reply1 {
		t.Errorf("first turn's text differs from the reply:\n got %.300q\nwant %.300q", got, reply1)
	}
	if asks := countAsks(ts); asks != 1 {
		t.Errorf("%d ASK_USER messages from a long repainted reply with one, want 1", asks)
	}
	if info := s.Info(); info.ConversationID != spec.ConversationID || filepath.Base(info.Transcript) != spec.ConversationID+".jsonl" {
		t.Errorf("conversation %q in %q, want the office's id %q", info.ConversationID, info.Transcript, spec.ConversationID)
	}

	if err := s.Send(ctx, "네, 진행하세요"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "second turn", 60*time.Second, func(st []Status, ts []Text) bool {
		return len(turns(ts)) >= 2 && lastStatus(st) == office.SessionReady
	})

	// The server restarts: a new manager; the office's cursor is the
	// second turn's end.
	_, ts = r.snapshot()
	last := ts[len(ts)-1]
	if !last.TurnEnd {
		t.Fatalf("last text %+v, want the turn end", last)
	}
	checkEntersOnEcho(t, s)
	if err := m.Stop(ctx, key); err != nil {
		t.Fatal(err)
	}
	m2 := qwenAfterRestart(t, ctx, srv, key, spec, last.ID, ts, &cur, reply2, reply3)
	if err := m2.Stop(ctx, key); err != nil {
		t.Fatal(err)
	}
	checkQwenSettings(t, home)
}

// checkQwenFirst: the first request holds the office's instructions and
// what the person wrote in QWEN.md, which keeps it.
func checkQwenFirst(t *testing.T, r1 openaitest.Request, md string) {
	checkPersonNote(t, r1.Has, md)
}

// checkPersonNote: the first request (has) holds the office's
// instructions and what the person wrote in md, which keeps it.
func checkPersonNote(t *testing.T, has func(string) bool, md string) {
	if !has("OFFICE-INSTRUCTIONS") || !has("USER-NOTE") {
		t.Errorf("first request: office instructions %v, the person's note %v; want both", has("OFFICE-INSTRUCTIONS"), has("USER-NOTE"))
	}
	if got, _ := os.ReadFile(md); !strings.Contains(string(got), "USER-NOTE") {
		t.Errorf("%s lost what the person wrote:\n%s", filepath.Base(md), got)
	}
}

// prepQwenHome makes dir, and home a new user's HOME: the provider in the
// environment, privacy settings; no auth type chosen (Qwen Code takes the
// key it finds); and a QWEN.md of the person's, whose path it returns.
func prepQwenHome(t *testing.T, home, dir string) string {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := openaitest.PrepareQwen(home); err != nil {
		t.Fatal(err)
	}
	md := filepath.Join(home, ".qwen", "QWEN.md")
	if err := os.WriteFile(md, []byte("USER-NOTE: 사람이 쓴 지시입니다.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return md
}

// logQwenFailure logs, for a failed test, the session's screen and chat
// recording and what the model was asked.
func logQwenFailure(t *testing.T, cur *Session, srv *openaitest.Server) {
	if !t.Failed() {
		return
	}
	t.Logf("info %+v; screen:\n%s", cur.Info(), strings.Join(cur.Screen(), "\n"))
	rec, _ := os.ReadFile(cur.Info().Transcript)
	t.Logf("chat recording:\n%s", rec)
	for _, q := range srv.Requests() {
		t.Logf("model request %d main=%v: %.100q", q.Seq, q.Main, q.LastUserText())
	}
}

// longRepaintedReply is a reply far taller than the terminal with one
// [ASK_USER] in its middle (the Qwen Code and Gemini CLI tests).
func longRepaintedReply() string {
	var b strings.Builder
	b.WriteString("긴 답변입니다.\n")
	for i := 1; i <= 60; i++ {
		fmt.Fprintf(&b, "줄 %d %s — line %d of a long reply (%d).\n", i, strings.Repeat("가", i%7+1), i, i*i)
	}
	b.WriteString("[ASK_USER]\n질문: 배포를 진행할까요?\n타입: confirmation\n[/ASK_USER]\n")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "뒤 줄 %d — more of the long reply, %d.\n", i, i*7)
	}
	return b.String() + "끝."
}

// qwenAfterRestart: the server restarts: a new manager resumes the
// conversation from the office's cursor (the second turn's end): the next
// request holds the earlier replies, and it emits only the new reply,
// nothing twice, all from the chat recording. cur is set to the new
// session; the new manager is returned.
func qwenAfterRestart(t *testing.T, ctx context.Context, srv *openaitest.Server, key Key, spec Spec, cursor string, ts []Text, cur **Session, reply2, reply3 string) *Manager {
	r2 := newRecorder()
	m2 := newTestManager(t, r2, Options{StopGrace: 2 * time.Second})
	spec.TranscriptAfter = cursor
	s2, err := m2.Start(ctx, key, spec)
	if err != nil {
		t.Fatal(err)
	}
	*cur = s2
	r2.waitFor(t, "ready after the server's restart", 60*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	if !s2.Info().Resumed {
		t.Error("the restart did not resume the conversation")
	}
	if err := s2.Send(ctx, "계속해 주세요"); err != nil {
		t.Fatal(err)
	}
	r3, err := srv.WaitMain(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !r3.Has("질문: 배포를 진행할까요?") || !r3.Has("[RESULT] 완료") {
		t.Error("resumed conversation lacks the earlier replies")
	}
	r2.waitFor(t, "third turn", 60*time.Second, func(st []Status, ts []Text) bool {
		return len(turns(ts)) >= 1 && lastStatus(st) == office.SessionReady
	})
	_, ts2 := r2.snapshot()
	seen := map[string]bool{}
	for _, x := range append(ts, ts2...) {
		if seen[x.ID] {
			t.Errorf("text %s emitted twice", x.ID)
		}
		seen[x.ID] = true
		if x.Source != FromTranscript {
			t.Errorf("text %s from %v, want the chat recording", x.ID, x.Source)
		}
	}
	if got := turns(ts); len(got) != 2 || got[1] != reply2 {
		t.Errorf("turns before the restart: %q", got)
	}
	if got := turns(ts2); len(got) != 1 || got[0] != reply3 {
		t.Errorf("turns after the restart: %q, want only the new reply (nothing read again)", got)
	}
	return m2
}

// checkQwenSettings: Qwen Code notes in settings.json itself that its Auto
// mode notice was shown; nothing of the office's is there.
func checkQwenSettings(t *testing.T, home string) {
	var settings map[string]any
	if b, err := os.ReadFile(filepath.Join(home, ".qwen", "settings.json")); err != nil || json.Unmarshal(b, &settings) != nil {
		t.Fatalf("settings.json: %v: %s", err, b)
	}
	if _, ok := settings["security"]; ok || settings["privacy"] == nil {
		t.Errorf("settings.json after the run: %v; want the person's privacy settings and no security section", settings)
	}
}

// TestQwenRecordingCursor reads a Qwen Code chat recording (records as
// 0.24.4 writes them, shortened) as the driver does: the assistant
// records' text parts are the words (thoughts, tool calls, the empty-reply
// placeholder and system records are not); user records without a subtype
// are prompts; after a server restart the office's cursor (a turn end's
// ID) skips what was acted on, and a cursor of another session skips
// nothing. The recording is found by the session id, and only one that
// holds a record is resumed.
func TestQwenRecordingCursor(t *testing.T) {
	const id = "00000000-0000-4000-8000-00000000a112"
	lines := []string{
		`{"uuid":"u1","parentUuid":null,"sessionId":"` + id + `","type":"user","provenance":"real_user","message":{"role":"user","parts":[{"text":"첫 질문"}]}}`,
		`{"uuid":"s1","parentUuid":"u1","type":"system","subtype":"attribution_snapshot","systemPayload":{}}`,
		`{"uuid":"s2","parentUuid":"s1","type":"system","subtype":"ui_telemetry","systemPayload":{"uiEvent":{"response_text":"not the words"}}}`,
		`{"uuid":"a1","parentUuid":"s2","type":"assistant","message":{"role":"model","parts":[{"text":"생각 중","thought":true},{"text":"답 하나\n[RESULT] a"}]}}`,
		`{"uuid":"a2","parentUuid":"a1","type":"assistant","message":{"role":"model","parts":[{"functionCall":{"name":"run_shell_command","args":{}}}]}}`,
		`{"uuid":"t1","parentUuid":"a2","type":"tool_result","message":{"role":"user","parts":[{"functionResponse":{"name":"run_shell_command"}}]}}`,
		`{"uuid":"a3","parentUuid":"t1","type":"assistant","message":{"role":"model","parts":[{"text":"(empty content)"}]}}`,
		`{"uuid":"n1","parentUuid":"a3","type":"user","subtype":"notification","message":{"role":"user","parts":[{"text":"background done"}]}}`,
		`{"uuid":"u2","parentUuid":"n1","type":"user","message":{"role":"user","parts":[{"text":"둘째"}]}}`,
		`{"uuid":"a4","parentUuid":"u2","type":"assistant","message":{"role":"model","parts":[{"text":"답 "},{"text":"둘"}]}}`,
	}
	read := func(after string) (texts, prompts []string) {
		d := &chatDriver{s: &Session{key: Key{"o", "a"}}, cli: qwenCLI, id: id, seen: map[string]bool{}, after: after, skipping: strings.HasPrefix(after, id+"/")}
		for _, l := range lines {
			for _, x := range d.entry([]byte(l)) {
				texts = append(texts, x.ID+"="+strings.Join(x.Lines, "|"))
			}
		}
		return texts, d.prompts
	}
	texts, prompts := read("")
	if got := strings.Join(texts, " "); got != "a1=답 하나|[RESULT] a a4=답 둘" {
		t.Errorf("read from the start: %s", got)
	}
	if got := strings.Join(prompts, ","); got != "첫 질문,둘째" {
		t.Errorf("prompts %q", got)
	}
	// The office recorded the cursor at the first turn's end (its last
	// record then was the empty reply).
	if texts, _ := read(id + "/a3"); strings.Join(texts, " ") != "a4=답 둘" {
		t.Errorf("after the cursor: %q, want only the second reply", texts)
	}
	if texts, _ := read("00000000-0000-4000-8000-000000000000/a3"); len(texts) != 2 {
		t.Errorf("a cursor of another session: %q, want everything", texts)
	}

	root := t.TempDir()
	chats := filepath.Join(root, "projects", "-tmp-work", "chats")
	if err := os.MkdirAll(chats, 0o700); err != nil {
		t.Fatal(err)
	}
	if f := qwenFind(root, id); f != "" {
		t.Errorf("found %q before any recording", f)
	}
	path := filepath.Join(chats, id+".jsonl")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if qwenFind(root, id) != path || qwenHasRecord(path) {
		t.Errorf("an empty recording: found %q, resumable %v; want found, not resumable", qwenFind(root, id), qwenHasRecord(path))
	}
	if err := os.WriteFile(path, []byte(lines[0]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !qwenHasRecord(path) {
		t.Error("a recording with a record is not resumable")
	}
	if qwenFind(root, "../x") != "" || qwenFind(root, "*") != "" {
		t.Error("an id that is a path or a pattern found a file")
	}
}

// lateQwen stands in for Qwen Code where what matters is when its chat
// recording is written (docs/notes/clis.md): it takes --session-id, sets
// its idle title ("Qwen - work") and draws its composer; per prompt it
// says it works (◐︎), records the prompt and the model's tool call, draws
// the reply and goes idle again, and only 3 s later (longer than the
// 1.5 s of still screen that ends a turn) records the tool's result and
// the reply, as Qwen Code 0.24.4's recorder did on a busy machine.
const lateQwen = `
while [ $# -gt 0 ]; do
  case "$1" in
  --session-id|--resume) id=$2; shift ;;
  esac
  shift
done
dir=$HOME/.qwen/projects/$(pwd | sed 's/[^a-zA-Z0-9]/-/g')/chats
f=$dir/$id.jsonl
idle() { printf '\033]0;Qwen - work\007\r\n  Type your message or @path/to/file\r\n'; }
idle
n=0
while IFS= read -r line; do
  n=$((n+1))
  printf '\033]0;\342\227\220\357\270\216 Qwen - work\007'
  mkdir -p "$dir"
  printf '{"uuid":"u%s","type":"user","message":{"role":"user","parts":[{"text":"%s"}]}}\n' $n "$line" >> "$f"
  printf '{"uuid":"c%s","type":"assistant","message":{"role":"model","parts":[{"functionCall":{"name":"run_shell_command","args":{"command":"true"}}}]}}\n' $n >> "$f"
  printf '\r\n  reply %s\r\n' $n
  idle
  sleep 3
  printf '{"uuid":"t%s","type":"tool_result","message":{"role":"user","parts":[{"functionResponse":{"name":"run_shell_command","response":{"output":""}}}]}}\n' $n >> "$f"
  printf '{"uuid":"a%s","type":"assistant","message":{"role":"model","parts":[{"text":"reply %s"}]}}\n' $n $n >> "$f"
done
`

// TestQwenReplyRecordedLate: a turn whose end Qwen Code's title and screen
// say before its recording holds the model's words (the tool call is
// recorded, its result and the reply 3 s after the idle title) ends once
// the reply is recorded, with the reply as its text, each turn.
func TestQwenReplyRecordedLate(t *testing.T) {
	checkGoroutines(t)
	r := newRecorder()
	m := newTestManager(t, r, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "work")
	key := Key{"office", "late-qwen"}
	s, err := m.Start(ctx, key, Spec{Kind: KindQwen, Command: script(t, lateQwen), Dir: dir, Home: home, Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 30*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	for n := 1; n <= 2; n++ {
		if err := s.Send(ctx, fmt.Sprintf("prompt %d", n)); err != nil {
			t.Fatal(err)
		}
		r.waitFor(t, "turn end", 30*time.Second, func(st []Status, ts []Text) bool {
			return lastStatus(st) == office.SessionReady && len(turns(ts)) == n
		})
	}
	_, ts := r.snapshot()
	if d := cmp.Diff(turns(ts), []string{"reply 1", "reply 2"}); d != "" {
		t.Errorf("turns (-got +want):\n%s", d)
	}
	if err := m.Stop(ctx, key); err != nil {
		t.Fatal(err)
	}
}
