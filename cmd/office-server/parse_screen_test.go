package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/office-server/office-server/protocol"
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
		{"parse", "--rows", "100000", "-"},
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

// TestParseScreenAgentBlocks parses a recorded command agent that prints 60
// blocks on a 24-row screen: most are read from rows that scrolled off, the
// last ones from the final screen, each exactly once and in order.
func TestParseScreenAgentBlocks(t *testing.T) {
	out, errOut, code := runCmd(t, "", "parse", "--cols", "80", "--rows", "24", "--no-raw", captureDir+"agent_blocks.bin")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	msgs := decodeJSONLines(t, out)
	if len(msgs) != 60 {
		t.Fatalf("got %d messages, want 60:\n%s", len(msgs), out)
	}
	for i := 0; i < 30; i++ {
		inv, ask := msgs[2*i], msgs[2*i+1]
		sp := "  "
		if i+1 >= 10 {
			sp = " " // "  작업 10:" reaches column 10; ESC[12G adds one space
		}
		wantTask := fmt.Sprintf("작업 %d:%s로그인  화면을 만들어 주세요", i+1, sp)
		if inv["kind"] != "INVOKE" || inv["target"] != "개발자" || inv["task"] != wantTask || inv["context"] != fmt.Sprintf("이슈 #%d", i+1) {
			t.Errorf("message %d: %v, want task %q", 2*i, inv, wantTask)
		}
		if ask["kind"] != "ASK_USER" || ask["question"] != fmt.Sprintf("%d번째 질문입니다. 계속할까요?", i+1) || ask["type"] != "confirmation" {
			t.Errorf("message %d: %v", 2*i+1, ask)
		}
	}
}

// BenchmarkParseScreenPipeline measures the screen + protocol parser
// pipeline (what a command session runs on its PTY output) on recorded
// captures: MB/s of raw terminal bytes, and MB per CPU-second of this
// process (the machine is shared, so wall-clock figures vary). agent_blocks
// is the worst case: a complete protocol block every 120 bytes.
func BenchmarkParseScreenPipeline(b *testing.B) {
	for _, c := range []struct {
		name       string
		cols, rows int
	}{{"agent_blocks", 80, 24}, {"seq_korean", 30, 8}, {"claude_korean", 100, 30}} {
		b.Run(c.name, func(b *testing.B) {
			data, err := os.ReadFile(captureDir + c.name + ".bin")
			if err != nil {
				b.Fatal(err)
			}
			stream := bytes.Repeat(data, max(1, (1<<20)/len(data)))
			src := screenSource{cols: c.cols, rows: c.rows}
			b.SetBytes(int64(len(stream)))
			msgs := 0
			cpu0 := processCPU()
			for b.Loop() {
				p := protocol.NewParser(protocol.Options{})
				err := src.read(context.Background(), bytes.NewReader(stream),
					func(l string) { msgs += len(p.Feed(l)) },
					func() { msgs += len(p.Flush()) })
				if err != nil {
					b.Fatal(err)
				}
			}
			if cpu := processCPU() - cpu0; cpu > 0 {
				b.ReportMetric(float64(b.N)*float64(len(stream))/cpu.Seconds()/1e6, "MB/cpu-s")
			}
			b.ReportMetric(float64(msgs)/float64(b.N), "msgs/op")
		})
	}
}

// processCPU returns the CPU time (user+system) used by this process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
