package anthropictest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// PrepareHome writes home/.claude.json so that Claude Code, started with HOME=home
// in workdir with API key key, shows none of its first-run dialogs: onboarding
// done, the key approved (by its last 20 characters), the working directory
// trusted. workdir must be the absolute path Claude Code will see as its cwd.
func PrepareHome(home, workdir, key string) error {
	approved := key
	if len(approved) > 20 {
		approved = approved[len(approved)-20:]
	}
	cfg := map[string]any{
		"hasCompletedOnboarding":        true,
		"lastOnboardingVersion":         "2.1.330",
		"numStartups":                   1,
		"bypassPermissionsModeAccepted": true,
		"customApiKeyResponses":         map[string]any{"approved": []string{approved}, "rejected": []string{}},
		"projects": map[string]any{
			workdir: map[string]any{
				"hasTrustDialogAccepted":        true,
				"hasCompletedProjectOnboarding": true,
				"allowedTools":                  []string{},
			},
		},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("encode .claude.json: %w", err)
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return fmt.Errorf("prepare home: %w", err)
	}
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), b, 0o600); err != nil {
		return fmt.Errorf("prepare home: %w", err)
	}
	return nil
}

// ProjectDir returns the directory under home where Claude Code keeps the
// transcripts of sessions started in workdir: every character of workdir that
// is not an ASCII letter or digit becomes '-' (two for a character outside
// the BMP: Claude Code replaces UTF-16 code units). Paths longer than 200
// characters get a hash suffix this function does not reproduce.
func ProjectDir(home, workdir string) string {
	var b strings.Builder
	for _, r := range workdir {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case r > 0xFFFF:
			b.WriteString("--")
		default:
			b.WriteByte('-')
		}
	}
	return filepath.Join(home, ".claude", "projects", b.String())
}

// TranscriptPath returns the JSONL transcript of session id started in workdir.
func TranscriptPath(home, workdir, id string) string {
	return filepath.Join(ProjectDir(home, workdir), id+".jsonl")
}
