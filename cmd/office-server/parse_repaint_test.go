package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestParseScreenRepaints runs `office-server parse --screen` on real
// captures of TUI agents that paint their history again or move it inside
// the alternate screen (Qwen Code 0.24.4, Codex 0.169.0, Gemini CLI 0.61.0;
// recorded by session/screen/record_test.go), with the capture's resizes
// and turn ends: each turn's [ASK_USER] comes out once, three in all (the
// same block every turn, printed again on purpose), with the TUI's own
// line break in the question; the Gemini captures' [INVOKE] comes out
// once, before them, with its target, task and context.
func TestParseScreenRepaints(t *testing.T) {
	const q = "배포를 진행할까요? 이 질문은 화면 폭보다 길어서 프로그램이 스스로 줄을 바꿔 그립니다 — 결제 모듈과 로그인 모듈을 함께 올립니다."
	const task = "로그인 화면을 만들어 주세요. 이 작업 설명은 길어서 화면 폭을 넘고 프로그램이 줄을 바꿔 그립니다 — 결제 화면과 같은 모양으로."
	for _, name := range []string{"qwen_repaint", "codex_repaint", "gemini_repaint", "gemini_resize"} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(captureDir + name + ".json")
			if err != nil {
				t.Fatal(err)
			}
			var meta struct {
				Cols, Rows int
				Resizes    []struct{ Offset, Cols, Rows int }
				TurnEnds   []int `json:"turn_ends"`
			}
			if err := json.Unmarshal(b, &meta); err != nil {
				t.Fatal(err)
			}
			var rs, ends []string
			for _, r := range meta.Resizes {
				rs = append(rs, fmt.Sprintf("%d:%dx%d", r.Offset, r.Cols, r.Rows))
			}
			for _, e := range meta.TurnEnds {
				ends = append(ends, fmt.Sprint(e))
			}
			out, errOut, code := runCmd(t, "", "parse", "--no-raw", "--cols", fmt.Sprint(meta.Cols), "--rows", fmt.Sprint(meta.Rows),
				"--resizes", strings.Join(rs, ","), "--turn-ends", strings.Join(ends, ","), captureDir+name+".bin")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			msgs := decodeJSONLines(t, out)
			if strings.HasPrefix(name, "gemini") {
				if len(msgs) == 0 || msgs[0]["kind"] != "INVOKE" || msgs[0]["target"] != "개발자" || msgs[0]["context"] != "이슈 #13" ||
					strings.Join(strings.Fields(fmt.Sprint(msgs[0]["task"])), " ") != task {
					t.Fatalf("first message, want the [INVOKE]:\n%s", out)
				}
				msgs = msgs[1:]
			}
			if len(msgs) != 3 {
				t.Fatalf("%d questions, want 3 (one a turn):\n%s", len(msgs), out)
			}
			for i, m := range msgs {
				got, _ := m["question"].(string)
				if m["kind"] != "ASK_USER" || m["type"] != "confirmation" || strings.Join(strings.Fields(got), " ") != q || !strings.Contains(got, "\n") {
					t.Errorf("message %d: %v", i, m)
				}
			}
		})
	}
}

// TestParseScreenEventFlags: offsets out of order or malformed are refused
// with a clear error, nothing parsed.
func TestParseScreenEventFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--turn-ends", "10,5"},
		{"--turn-ends", "x"},
		{"--resizes", "10:80"},
		{"--resizes", "10:0x5"},
		{"--resizes", "20:80x24,10:80x24"},
	} {
		out, errOut, code := runCmd(t, "", append(append([]string{"parse"}, args...), captureDir+"qwen_repaint.bin")...)
		if code == 0 || out != "" || !strings.Contains(errOut, args[0]) {
			t.Errorf("%v: exit %d, out %q, err %q; want a failure naming %s", args, code, out, errOut, args[0])
		}
	}
}
