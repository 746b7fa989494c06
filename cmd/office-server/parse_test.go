package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/office-server/office-server/protocol"
)

// runCmd runs the command line args with stdin and returns stdout, stderr
// and the exit code.
func runCmd(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), code
}

// TestParseCommandGolden runs `office-server parse FILE` on every protocol
// testdata transcript: it must print exactly the messages of the protocol
// package's golden files (which the protocol tests check by hand).
func TestParseCommandGolden(t *testing.T) {
	txt, err := filepath.Glob("../../protocol/testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := filepath.Glob("../../protocol/testdata/*.bin")
	if err != nil || len(txt) == 0 || len(bin) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	files := append(txt, bin...)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			want, err := os.ReadFile(strings.TrimSuffix(file, filepath.Ext(file)) + ".golden")
			if err != nil {
				t.Fatal(err)
			}
			out, errOut, code := runCmd(t, "", "parse", file)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if diff := cmp.Diff(out, string(want)); diff != "" {
				t.Errorf("parse %s (-got +want):\n%s", file, diff)
			}
			// The same from stdin, with "-".
			in, _ := os.ReadFile(file)
			out, _, _ = runCmd(t, string(in), "parse", "-")
			if out != string(want) {
				t.Errorf("parse - differs from parse FILE")
			}
		})
	}
}

// decodeOutput reads the command's JSON lines back into messages.
func decodeOutput(t *testing.T, out string) []protocol.Message {
	t.Helper()
	var msgs []protocol.Message
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var m protocol.Message
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("output is not JSON lines: %v\n%s", err, out)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

func TestParseCommandStdinAndFlags(t *testing.T) {
	in := "\x1b[1m● [INVOKE:PO]\x1b[0m\r\n  Plan the\x1b[2Clogin.\r\n[ASK_USER]\nquestion: " + strings.Repeat("x", 200) + "\n[/ASK_USER]\n"
	out, errOut, code := runCmd(t, in, "parse", "--no-raw", "--max-block", "100")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// The ASK_USER block opening ends the INVOKE; the ASK_USER is too big.
	want := "{\"kind\":\"INVOKE\",\"target\":\"PO\",\"line\":1,\"task\":\"Plan the  login.\"}\n" +
		"{\"kind\":\"INVALID\",\"line\":3,\"invalid_kind\":\"ASK_USER\",\"reason\":\"ASK_USER: block is larger than 100 bytes; split it into smaller blocks or shorten it\"}\n"
	if diff := cmp.Diff(out, want); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
}

func TestParseCommandTranscript(t *testing.T) {
	entry := func(v map[string]any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b) + "\n"
	}
	text := func(s string) []any { return []any{map[string]any{"type": "text", "text": s}} }
	in := entry(map[string]any{"type": "user", "uuid": "u1", "message": map[string]any{"role": "user",
		// What the server typed in: never a message, even with tags.
		"content": "[ASK_USER]\nquestion: echo?\n[/ASK_USER]"}}) +
		entry(map[string]any{"type": "assistant", "uuid": "a1", "message": map[string]any{
			"content": text("I need to ask.\n[ASK_USER]\nquestion: Which DB?"), "stop_reason": nil}}) +
		entry(map[string]any{"type": "assistant", "uuid": "a2", "message": map[string]any{
			"content": []any{map[string]any{"type": "tool_use", "name": "Bash"}, map[string]any{"type": "text", "text": "options: [pg, sqlite]"}}, "stop_reason": "end_turn"}}) +
		// A sub-agent's words are not the agent's.
		entry(map[string]any{"type": "assistant", "uuid": "s1", "isSidechain": true, "message": map[string]any{
			"content": text("[INVOKE:PO]\nsidechain task"), "stop_reason": "end_turn"}}) +
		// No end_turn: the next user entry ends the turn.
		entry(map[string]any{"type": "assistant", "uuid": "a3", "message": map[string]any{
			"content": text("[INVOKE:PO]\nWrite the spec"), "stop_reason": "tool_use"}}) +
		entry(map[string]any{"type": "user", "uuid": "u2", "message": map[string]any{"content": "[STEP_COMPLETE]"}}) +
		entry(map[string]any{"type": "assistant", "uuid": "a4", "message": map[string]any{
			"content": text("Step 2/3: Spec"), "stop_reason": "end_turn"}})
	out, errOut, code := runCmd(t, in, "parse", "--transcript")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got := decodeOutput(t, out)
	want := []protocol.Message{
		{Kind: protocol.KindAskUser, Line: 2, Question: &protocol.Question{Question: "Which DB?", Type: "selection", Options: []string{"pg", "sqlite"}, Required: true}},
		{Kind: protocol.KindInvoke, Target: "PO", Line: 5, Invoke: &protocol.Invoke{Task: "Write the spec"}},
		{Kind: protocol.KindStep, Line: 7, Step: &protocol.Step{Current: 2, Total: 3, Name: "Spec"}},
	}
	opt := cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Raw" }, cmp.Ignore())
	if diff := cmp.Diff(got, want, opt); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}

	// A broken line is reported, and nothing readable is lost.
	out, errOut, code = runCmd(t, "not json\n"+in, "parse", "--transcript")
	if code != 1 || !strings.Contains(errOut, "line 1") {
		t.Errorf("exit %d, stderr %q; want 1 and the bad line named", code, errOut)
	}
	if n := len(decodeOutput(t, out)); n != len(want) {
		t.Errorf("%d messages printed despite the bad line, want %d", n, len(want))
	}
}

func TestParseCommandErrors(t *testing.T) {
	for _, args := range [][]string{
		{"parse", "a.txt", "b.txt"},
		{"parse", "/nonexistent/transcript.txt"},
		{"parse", "--max-block", "many"},
	} {
		if _, errOut, code := runCmd(t, "", args...); code == 0 || errOut == "" {
			t.Errorf("%q: exit %d, stderr %q; want a failure with a message", args, code, errOut)
		}
	}
	if out, _, code := runCmd(t, "", "parse", "-h"); code != 0 || out != "" {
		t.Errorf("parse -h: exit %d, stdout %q", code, out)
	}
}
