package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// PrepareClaudeConfig writes configDir/.claude.json, the file Claude Code
// reads when CLAUDE_CONFIG_DIR=configDir, so that it shows none of its
// first-run dialogs (docs/notes/screen.md): onboarding done, the API key
// approved by its last 20 characters (when key is not empty), the bypass
// confirmation accepted (bypassAccepted), and workdir trusted — under every
// name Claude Code may look it up by: the folder, its resolved path, and
// the root of the git checkout enclosing it (measured on 2.1.330: the trust
// dialog stores its answer for the git root). Settings already in the file
// (Claude Code's own bookkeeping) are kept.
func PrepareClaudeConfig(configDir, workdir, key string, bypassAccepted bool) error {
	if err := os.MkdirAll(configDir, 0o700); err != nil {
		return fmt.Errorf("prepare claude config: %w", err)
	}
	p := filepath.Join(configDir, ".claude.json")
	cfg := map[string]any{}
	if b, err := os.ReadFile(p); err == nil && len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &cfg); err != nil {
			return fmt.Errorf("prepare claude config: %s: %w", p, err)
		}
	}
	cfg["hasCompletedOnboarding"] = true
	if _, ok := cfg["numStartups"]; !ok {
		cfg["numStartups"] = 1
	}
	if bypassAccepted {
		cfg["bypassPermissionsModeAccepted"] = true
	}
	if key != "" {
		approveKey(cfg, key)
	}
	projects, _ := cfg["projects"].(map[string]any)
	if projects == nil {
		projects = map[string]any{}
	}
	for _, d := range trustDirs(workdir) {
		pr, _ := projects[d].(map[string]any)
		if pr == nil {
			pr = map[string]any{"allowedTools": []any{}}
		}
		pr["hasTrustDialogAccepted"] = true
		pr["hasCompletedProjectOnboarding"] = true
		projects[d] = pr
	}
	cfg["projects"] = projects
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("prepare claude config: %w", err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("prepare claude config: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("prepare claude config: %w", err)
	}
	return nil
}

// approveKey records key as approved in a .claude.json (by its last 20
// characters, as Claude Code does), so its "Detected a custom API key"
// dialog does not come up.
func approveKey(cfg map[string]any, key string) {
	tail := key
	if len(tail) > 20 {
		tail = tail[len(tail)-20:]
	}
	resp, _ := cfg["customApiKeyResponses"].(map[string]any)
	if resp == nil {
		resp = map[string]any{}
	}
	approved, _ := resp["approved"].([]any)
	if !slices.Contains(approved, any(tail)) {
		approved = append(approved, tail)
	}
	resp["approved"] = approved
	if rejected, _ := resp["rejected"].([]any); rejected != nil {
		resp["rejected"] = slices.DeleteFunc(rejected, func(v any) bool { return v == tail })
	} else {
		resp["rejected"] = []any{}
	}
	cfg["customApiKeyResponses"] = resp
}

// trustDirs returns the paths a folder's trust is looked up under: the
// folder, its resolved path, and the enclosing git checkout's root(s).
func trustDirs(workdir string) []string {
	var dirs []string
	add := func(d string) {
		if d != "" && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	add(workdir)
	if r, err := filepath.EvalSymlinks(workdir); err == nil {
		add(r)
	}
	for _, d := range slices.Clone(dirs) {
		add(gitRoot(d))
	}
	return dirs
}

// gitRoot returns the nearest directory at or above dir holding .git, or "".
func gitRoot(dir string) string {
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		up := filepath.Dir(d)
		if up == d {
			return ""
		}
		d = up
	}
}

func apiKey(env []string) string {
	key := os.Getenv("ANTHROPIC_API_KEY")
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "ANTHROPIC_API_KEY="); ok {
			key = v
		}
	}
	return key
}
