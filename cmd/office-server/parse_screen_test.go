package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The captures and transcripts in session/screen/testdata were recorded
// from the real Claude Code binary answering with this block (see
// session/screen/record_test.go).
const (
	captureDir      = "../../session/screen/testdata/"
	claudeQuestion  = "로그인 방식을 골라 주세요. 이 줄은 화면 폭보다 길어서 Claude Code가 스스로 단어 경계에서 줄을 바꿔 그려야 합니다."
	claudeQuestion1 = "로그인 방식을 골라 주세요. 이 줄은 화면 폭보다 길어서 Claude Code가 스스로 단어 경계에서"
)

func decodeJSONLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var msgs []map[string]any
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("output is not JSON lines: %v\n%s", err, out)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// TestParseScreenCapture renders a raw capture of Claude Code's terminal at
// the size it was recorded and finds the [ASK_USER] block drawn there. The
// screen is not the text: Claude Code wrapped the long question itself, so
// the question read from the screen keeps that line break.
func TestParseScreenCapture(t *testing.T) {
	out, errOut, code := runCmd(t, "", "parse", "--cols", "100", "--rows", "30", "--no-raw", captureDir+"claude_korean.bin")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	msgs := decodeJSONLines(t, out)
	if len(msgs) != 1 {
		t.Fatalf("got %d messages, want 1:\n%s", len(msgs), out)
	}
	m := msgs[0]
	if m["kind"] != "ASK_USER" || m["type"] != "selection" {
		t.Errorf("message %v", m)
	}
	if diff := cmp.Diff(m["options"], []any{"OAuth", "비밀번호"}); diff != "" {
		t.Errorf("options (-got +want):\n%s", diff)
	}
	q, _ := m["question"].(string)
	if want := claudeQuestion1 + "\n줄을 바꿔 그려야 합니다."; q != want {
		t.Errorf("question %q, want %q", q, want)
	}
	// The default size (200x50) renders the same capture: Claude Code drew
	// for 100 columns, and the cells beyond stay blank.
	out2, _, code := runCmd(t, "", "parse", "--screen", "--no-raw", captureDir+"claude_korean.bin")
	if code != 0 || out2 != out {
		t.Errorf("--screen (200x50) differs from --cols 100 --rows 30:\n%s\n%s", out2, out)
	}
}

// TestParseScreenScrolled checks the order of a screen's lines: rows that
// scroll off the top come first, then the final screen, so a block spread
// over both reads whole.
func TestParseScreenScrolled(t *testing.T) {
	in := "noise 1\r\nnoise 2\r\n[INVOKE:PO]\r\n로그인\x1b[8G화면을\r\n만들어\x1b[2C주세요\r\n[/INVOKE]\r\n$ "
	out, errOut, code := runCmd(t, in, "parse", "--cols", "20", "--rows", "3", "--no-raw")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	msgs := decodeJSONLines(t, out)
	if len(msgs) != 1 || msgs[0]["kind"] != "INVOKE" || msgs[0]["target"] != "PO" {
		t.Fatalf("messages:\n%s", out)
	}
	if task := msgs[0]["task"]; task != "로그인 화면을\n만들어  주세요" {
		t.Errorf("task %q", task)
	}
}

func TestParseScreenFlags(t *testing.T) {
	for _, args := range [][]string{
		{"parse", "--cols", "-1", "-"},
		{"parse", "--transcript", "--screen", "-"},
	} {
		if _, _, code := runCmd(t, "", args...); code == 0 {
			t.Errorf("%v: exit 0, want an error", args)
		}
	}
}

// TestParseTranscriptCapture reads the transcript Claude Code wrote while
// the capture above was recorded: there the question is exactly what the
// model sent, without the screen's line break.
func TestParseTranscriptCapture(t *testing.T) {
	for _, name := range []string{"claude_korean", "claude_resize"} {
		out, errOut, code := runCmd(t, "", "parse", "--transcript", "--no-raw", captureDir+name+".jsonl")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errOut)
		}
		msgs := decodeJSONLines(t, out)
		if len(msgs) != 1 {
			t.Fatalf("%s: got %d messages:\n%s", name, len(msgs), out)
		}
		if q := msgs[0]["question"]; q != claudeQuestion {
			t.Errorf("%s: question %q, want %q", name, q, claudeQuestion)
		}
		if diff := cmp.Diff(msgs[0]["options"], []any{"OAuth", "비밀번호"}); diff != "" {
			t.Errorf("%s: options (-got +want):\n%s", name, diff)
		}
	}
}
