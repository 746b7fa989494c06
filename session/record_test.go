package session

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRecordedSince: the check before typing a text again finds a prompt
// in each CLI's record only when it was stamped at or after the first
// typing, and never an assistant's words, a sidechain's prompt or a line
// that is not JSON.
func TestRecordedSince(t *testing.T) {
	typed := time.Date(2026, 11, 28, 12, 0, 0, 500_400_000, time.UTC) // cut to .500 ms
	tests := []struct {
		name   string
		lines  string
		decode func([]byte) []stamped
		want   bool
	}{
		{"claude, after", `{"type":"user","timestamp":"2026-11-28T12:00:00.500Z","message":{"role":"user","content":"[OFFICE] hello  there"}}`, claudePrompts, true},
		{"claude, before", `{"type":"user","timestamp":"2026-11-28T12:00:00.499Z","message":{"role":"user","content":"[OFFICE] hello there"}}`, claudePrompts, false},
		{"claude, blocks", `{"type":"user","timestamp":"2026-11-28T12:00:01Z","message":{"role":"user","content":[{"type":"text","text":"[OFFICE] hello there"}]}}`, claudePrompts, true},
		{"claude, sidechain", `{"type":"user","isSidechain":true,"timestamp":"2026-11-28T12:00:01Z","message":{"content":"[OFFICE] hello there"}}`, claudePrompts, false},
		{"claude, assistant", `{"type":"assistant","timestamp":"2026-11-28T12:00:01Z","message":{"content":"[OFFICE] hello there"}}`, claudePrompts, false},
		{"claude, other text", `{"type":"user","timestamp":"2026-11-28T12:00:01Z","message":{"content":"hello"}}`, claudePrompts, false},
		{"claude, bad line then prompt", "not json\n" + `{"type":"user","timestamp":"2026-11-28T12:00:01Z","message":{"content":"[OFFICE] hello there"}}`, claudePrompts, true},
		{"codex", `{"timestamp":"2026-11-28T12:00:02.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"[OFFICE] hello there"}]}}`, codexPrompts, true},
		{"codex, before", `{"timestamp":"2026-11-28T11:59:59.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"[OFFICE] hello there"}]}}`, codexPrompts, false},
		{"gemini", `{"id":"m1","timestamp":"2026-11-28T12:00:03.000Z","type":"user","content":"[OFFICE] hello there"}`, chatPrompts(geminiDecode), true},
		{"gemini, reply", `{"id":"m1","timestamp":"2026-11-28T12:00:03.000Z","type":"gemini","content":"[OFFICE] hello there"}`, chatPrompts(geminiDecode), false},
		{"qwen", `{"uuid":"u1","timestamp":"2026-11-28T12:00:03.000Z","type":"user","message":{"parts":[{"text":"[OFFICE] hello there"}]}}`, chatPrompts(qwenDecode), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.jsonl")
			if err := os.WriteFile(path, []byte(tt.lines+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := recordedIn(path, "[OFFICE] hello there", typed, tt.decode)
			if err != nil || got != tt.want {
				t.Errorf("recordedIn = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	if got, err := recordedIn(filepath.Join(t.TempDir(), "none.jsonl"), "x", typed, claudePrompts); got || err != nil {
		t.Errorf("missing file: %v, %v; want false, nil", got, err)
	}
}
