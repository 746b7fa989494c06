package anthropictest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

var nonAlnum = regexp.MustCompile(`[^a-zA-Z0-9]`)

// ProjectDir returns the directory under home where Claude Code keeps the
// transcripts of sessions started in workdir: every character of workdir that
// is not an ASCII letter or digit becomes '-'.
func ProjectDir(home, workdir string) string {
	return filepath.Join(home, ".claude", "projects", nonAlnum.ReplaceAllString(workdir, "-"))
}

// TranscriptPath returns the JSONL transcript of session id started in workdir.
func TranscriptPath(home, workdir, id string) string {
	return filepath.Join(ProjectDir(home, workdir), id+".jsonl")
}
