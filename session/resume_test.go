package session

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestResumeOnlyAConversation: a launch resumes (--resume) only a
// transcript holding a user or assistant entry. Claude Code 2.1.330 killed
// while its first request was in flight leaves a file of metadata lines
// only; --resume of it exits with "No conversation found" (crash-looping
// the agent to failed), so such a file is removed and the id started afresh
// (--session-id), and the session does not report Resumed.
func TestResumeOnlyAConversation(t *testing.T) {
	const id = "0d565058-9310-4ac2-a086-cf765316d37e"
	meta := `{"type":"mode","mode":"normal","sessionId":"` + id + `"}
{"type":"permission-mode","permissionMode":"auto","sessionId":"` + id + `"}
`
	long := `{"type":"user","message":{"role":"user","content":"` + strings.Repeat("x", 200<<10) + `"}}` + "\n"
	for _, c := range []struct {
		name       string
		content    *string
		wantResume bool
	}{
		{"no file", nil, false},
		{"metadata only", &meta, false},
		{"metadata, no newline at the end", ptr(strings.TrimSuffix(meta, "\n")), false},
		{"a user entry", ptr(meta + `{"parentUuid":null,"type":"user","message":{"role":"user","content":"hi"}}` + "\n"), true},
		{"a long first entry", ptr(meta + long), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := Spec{Kind: KindClaude, ConversationID: id, ConfigDir: t.TempDir(), Dir: t.TempDir()}
			st, err := newClaudeState(spec, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.cleanup()
			path := TranscriptPath(st.configDir, st.dir, id)
			if c.content != nil {
				if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(*c.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			args, _, err := st.prepare(spec, nil)
			if err != nil {
				t.Fatal(err)
			}
			resumed := slices.Contains(args, "--resume")
			fresh := slices.Contains(args, "--session-id")
			if resumed != c.wantResume || fresh == c.wantResume || st.resumed != c.wantResume {
				t.Fatalf("args %q, resumed %v; want resume %v", args, st.resumed, c.wantResume)
			}
			_, statErr := os.Stat(path)
			if exists := statErr == nil; exists != c.wantResume {
				t.Errorf("transcript exists = %v after prepare, want %v (an empty one is removed)", exists, c.wantResume)
			}
		})
	}
}

func ptr(s string) *string { return &s }
