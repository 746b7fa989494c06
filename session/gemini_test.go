package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/geminitest"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/protocol"
)

// TestGeminiEndToEnd drives the real Gemini CLI (0.61.0, from npm) as a
// gemini agent against a scripted Gemini API, from a HOME holding only the
// person's API-key settings (no folder-trust dialog: the office trusts the
// agent's folder; settings.json stays byte for byte as it was, and no
// trust answer is written): the office's instructions
// reach the first request through ~/.gemini/GEMINI.md (what the person
// wrote there kept); a 90-line reply with one [ASK_USER], taller than the
// 30-row terminal (the CLI clears and repaints its history), is read from
// the chat recording exactly once and gives one question; a restart
// resumes the conversation; a shell command the model asks for puts the
// agent in needs_attention with the command in the dialog's text, and the
// keys a person presses answer it (the command's output reaches the
// model).
func TestGeminiEndToEnd(t *testing.T) {
	bin := testenv.CLIBin(t, "gemini")
	checkGoroutines(t)
	srv := geminitest.New(t)
	home, dir := t.TempDir(), filepath.Join(t.TempDir(), "work")
	settings, md := prepGeminiHome(t, home, dir)
	reply1, reply2 := longRepaintedReply(), "알겠습니다.\n[RESULT] 완료"
	srv.Enqueue(geminitest.Response{Text: reply1, Delay: 5 * time.Millisecond}, geminitest.Response{Text: reply2},
		geminitest.Response{Calls: []geminitest.Call{{Name: "run_shell_command", Args: map[string]any{"command": "mkdir -p made-by-agent && echo office-perm-ok", "description": "make a folder"}}}},
		geminitest.Response{Text: "명령을 실행했습니다."})
	r := newRecorder()
	m := newTestManager(t, r, Options{StopGrace: 2 * time.Second, RestartBackoff: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	key := Key{"office", "gemini"}
	spec := Spec{
		Kind: KindGemini, Command: bin, Dir: dir, Home: home,
		Env:                srv.Env(home),
		AppendSystemPrompt: "OFFICE-INSTRUCTIONS: answer with protocol blocks such as [ASK_USER].",
		ConversationID:     "00000000-0000-4000-8000-0000000ce111",
		Cols:               100, Rows: 30,
	}
	s, err := m.Start(ctx, key, spec)
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready", 90*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
	sctx, scancel := context.WithTimeout(ctx, 40*time.Second)
	defer scancel()
	if err := s.Send(sctx, "[OFFICE] Message from a person in the office:\n> 배포 전에 물어봐 주세요"); err != nil {
		t.Fatalf("%v; info %+v; screen:\n%s", err, s.Info(), strings.Join(s.Screen(), "\n"))
	}
	r1, err := srv.WaitMain(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	checkPersonNote(t, r1.Has, md)
	r.waitFor(t, "first turn", 90*time.Second, func(st []Status, ts []Text) bool {
		return len(turns(ts)) >= 1 && lastStatus(st) == office.SessionReady
	})
	_, ts := r.snapshot()
	checkLongTurn(t, s, ts, reply1)
	if s.Info().ConversationID != spec.ConversationID {
		t.Errorf("conversation id %q, want the office's %q", s.Info().ConversationID, spec.ConversationID)
	}
	if err := s.Send(ctx, "네, 진행하세요"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "second turn", 60*time.Second, func(st []Status, ts []Text) bool {
		return len(turns(ts)) >= 2 && lastStatus(st) == office.SessionReady
	})
	restartResumes(t, ctx, r, m, s, key)
	if err := s.Send(ctx, "echo로 확인해 주세요"); err != nil {
		t.Fatal(err)
	}
	r3, err := srv.WaitMain(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !r3.Has("질문: 배포를 진행할까요?") || !r3.Has("[RESULT] 완료") {
		t.Error("resumed conversation lacks the earlier replies")
	}
	approveCommand(t, ctx, r, s, srv, dir)
	r.waitFor(t, "third turn", 60*time.Second, func(st []Status, ts []Text) bool {
		return len(turns(ts)) >= 3 && lastStatus(st) == office.SessionReady
	})
	_, ts = r.snapshot()
	checkTextsOnce(t, ts, "the chat recording")
	if got := turns(ts); len(got) != 3 || got[1] != reply2 || got[2] != "명령을 실행했습니다." {
		t.Errorf("turns: %q", got)
	}
	settings.Same(t)
	if _, err := os.Stat(filepath.Join(home, ".gemini", "trustedFolders.json")); err == nil { // the office trusts without writing
		t.Error("a trust answer was written to ~/.gemini/trustedFolders.json")
	}
	checkEntersOnEcho(t, s)
	if err := m.Stop(ctx, key); err != nil {
		t.Fatal(err)
	}
}

// restartResumes: after a restart the session is ready again and resumed
// its conversation.
func restartResumes(t *testing.T, ctx context.Context, r *recorder, m *Manager, s *Session, key Key) {
	if err := m.Restart(ctx, key, nil); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "ready after restart", 90*time.Second, func(st []Status, _ []Text) bool {
		return lastStatus(st) == office.SessionReady && countStatus(st, office.SessionStarting) == 2
	})
	if !s.Info().Resumed {
		t.Error("restart did not resume the conversation")
	}
}

// checkLongTurn: the first turn's text is the long reply as the model
// sent it, and gives one question.
func checkLongTurn(t *testing.T, s *Session, ts []Text, reply1 string) {
	if got := turns(ts)[0]; got != reply1 {
		t.Errorf("first turn's text differs from the reply:\n got %.300q\nwant %.300q", got, reply1)
		rec, _ := os.ReadFile(s.Info().Transcript)
		t.Logf("chat recording:\n%.4000s", rec)
	}
	if asks := countAsks(ts); asks != 1 {
		t.Errorf("%d ASK_USER messages from a long repainted reply with one, want 1", asks)
	}
}

// prepGeminiHome makes dir, and home a new user's HOME: only their
// API-key settings; no folder trust (the office trusts the agent's folder
// without writing there); and a GEMINI.md of the person's. It returns the
// settings as the person wrote them and GEMINI.md's path.
func prepGeminiHome(t *testing.T, home, dir string) (testenv.PersonFile, string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := geminitest.Prepare(home); err != nil {
		t.Fatal(err)
	}
	settings := testenv.ReadPersonFile(t, filepath.Join(home, ".gemini", "settings.json"))
	md := filepath.Join(home, ".gemini", "GEMINI.md")
	if err := os.WriteFile(md, []byte("USER-NOTE: 사람이 쓴 지시입니다.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return settings, md
}

// approveCommand: the model asked to run a command: the CLI's approval
// dialog puts the agent in needs_attention with the command in its text;
// Enter ("Allow once", the first choice) runs it and its output reaches
// the model.
func approveCommand(t *testing.T, ctx context.Context, r *recorder, s *Session, srv *geminitest.Server, dir string) {
	r.waitFor(t, "needs attention", 60*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionNeedsAttention })
	if d := s.Info().Detail; !strings.Contains(d, "mkdir -p made-by-agent") {
		t.Errorf("needs_attention detail %q, want the command", d)
	} else {
		t.Logf("needs_attention detail:\n%s", d)
	}
	if err := s.Input([]byte("\r")); err != nil { // "Allow once", the first choice
		t.Fatal(err)
	}
	r4, err := srv.WaitMain(ctx, 4)
	if err != nil {
		t.Fatalf("%v; screen:\n%s", err, strings.Join(s.Screen(), "\n"))
	}
	if fr := strings.Join(r4.FunctionResponses(), "\n"); !strings.Contains(fr, "office-perm-ok") {
		t.Errorf("the model got %q, want the command's output", fr)
	}
	if _, err := os.Stat(filepath.Join(dir, "made-by-agent")); err != nil {
		t.Errorf("the allowed command did not run: %v", err)
	}
}

// checkTextsOnce: no text was emitted twice, and each came from the
// transcript (from names it).
func checkTextsOnce(t *testing.T, ts []Text, from string) {
	seen := map[string]bool{}
	for _, x := range ts {
		if seen[x.ID] {
			t.Errorf("text %s emitted twice", x.ID)
		}
		seen[x.ID] = true
		if x.Source != FromTranscript {
			t.Errorf("text %s from %v, want %s", x.ID, x.Source, from)
		}
	}
}

// countAsks parses the texts as the office does and counts ASK_USER
// messages.
func countAsks(ts []Text) int {
	p := protocol.NewParser(protocol.Options{})
	var n int
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
				n++
			}
		}
	}
	return n
}

// TestGeminiTitle follows the terminal title through writes cut anywhere.
func TestGeminiTitle(t *testing.T) {
	out := "x\x1b]0;◇  Ready (work)\x07y\x1b]0;✦  Working… (work)\x1b\\z\x1b]0;✋  Action Required (work)\x07"
	for size := 1; size <= len(out); size++ {
		var cur string
		var tail []byte
		for off := 0; off < len(out); off += size {
			cur, tail = oscTitle(cur, tail, []byte(out[off:min(off+size, len(out))]))
		}
		if cur != "✋  Action Required (work)" {
			t.Fatalf("writes of %d: title %q", size, cur)
		}
	}
}

// TestGeminiRecordingCursor reads a chat recording as the driver does: a
// record written again (same id) and a history "$set" repeating read
// messages give nothing new; a new id inside a "$set" is new; after a
// server restart the office's cursor (a turn end's ID) skips what was
// acted on, and a cursor of another session skips nothing.
func TestGeminiRecordingCursor(t *testing.T) {
	const id = "00000000-0000-4000-8000-0000000ce112"
	lines := []string{
		`{"sessionId":"` + id + `","projectHash":"x","kind":"main"}`,
		`{"$set":{"messages":[{"id":"ctx","type":"user","content":[{"text":"<session_context>"}]}]}}`,
		`{"id":"u1","type":"user","content":[{"text":"first"}]}`,
		`{"id":"g1","type":"gemini","content":"reply one\n[RESULT] a"}`,
		`{"id":"g1","type":"gemini","content":"reply one\n[RESULT] a","tokens":{"input":1}}`,
		`{"$set":{"messages":[{"id":"ctx","type":"user"},{"id":"u1","type":"user"},{"id":"g1","type":"gemini","content":"reply one\n[RESULT] a"}]}}`,
		`{"id":"u2","type":"user","content":[{"text":"second"}]}`,
		`{"$set":{"messages":[{"id":"u2","type":"user"},{"id":"g2","type":"gemini","content":"reply two"}]}}`,
	}
	read := func(after string, n int) []string {
		d := &chatDriver{s: &Session{key: Key{"o", "a"}}, cli: geminiCLI, id: id, seen: map[string]bool{}, after: after, skipping: strings.HasPrefix(after, id+"/")}
		var got []string
		for _, l := range lines[:n] {
			for _, x := range d.entry([]byte(l)) {
				got = append(got, x.ID+"="+strings.Join(x.Lines, "|"))
			}
		}
		return got
	}
	if got := strings.Join(read("", len(lines)), " "); got != "g1=reply one|[RESULT] a g2=reply two" {
		t.Errorf("read from the start: %s", got)
	}
	// The office recorded the cursor at the first turn's end (the last
	// record then was g1's rewrite).
	if got := strings.Join(read(id+"/g1", len(lines)), " "); got != "g2=reply two" {
		t.Errorf("after the cursor: %s, want only the second reply", got)
	}
	if got := strings.Join(read("00000000-0000-4000-8000-000000000000/g1", len(lines)), " "); got != "g1=reply one|[RESULT] a g2=reply two" {
		t.Errorf("a cursor of another session: %s, want everything", got)
	}
}
