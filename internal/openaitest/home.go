package openaitest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// QwenEnv returns the environment that points Qwen Code at the server: its
// OpenAI-compatible provider reads OPENAI_API_KEY, OPENAI_BASE_URL and
// OPENAI_MODEL (docs/notes/clis.md).
func (s *Server) QwenEnv(home string) []string {
	return []string{"HOME=" + home, "OPENAI_API_KEY=" + s.Key, "OPENAI_BASE_URL=" + s.URL, "OPENAI_MODEL=" + Model}
}

// QwenSide tells Qwen Code's side requests that offer tools from the main
// conversation (measured with 0.24.4; docs/notes/clis.md): its memory
// extraction subagent (its system prompt begins "You are now acting as")
// and its next-prompt suggestion after each reply (the last user message
// begins "[SUGGESTION MODE:"). Pass it to Server.Side.
func QwenSide(r Request) bool {
	return strings.HasPrefix(r.System, "You are now acting as") || r.Has("[SUGGESTION MODE:")
}

// PrepareQwen writes $HOME/.qwen/settings.json with what a person would
// set for privacy: usage statistics and update checks off (nothing leaves
// the machine). Pointing Qwen Code at the server is QwenEnv's; with it,
// Qwen Code 0.24.4 takes the key from the environment and shows no auth
// dialog, and its folder trust is off by default (docs/notes/clis.md):
// nothing here answers a dialog.
func PrepareQwen(home string) error {
	settings := map[string]any{
		"privacy": map[string]any{"usageStatisticsEnabled": false},
		"general": map[string]any{"disableAutoUpdate": true, "disableUpdateNag": true},
	}
	return writeJSONFile(filepath.Join(home, ".qwen", "settings.json"), settings)
}

// CodexEnv returns the environment that points Codex at the server through
// the provider PrepareCodex configures.
func (s *Server) CodexEnv(home string) []string {
	return []string{"HOME=" + home, "CODEX_HOME=" + filepath.Join(home, ".codex"), "OPENAITEST_KEY=" + s.Key}
}

// PrepareCodex writes $HOME/.codex/config.toml with what a person writes
// to use Codex with a provider of their own: a model provider "office" at
// the server (Responses API, key from OPENAITEST_KEY) and the model. No
// folder trust and no update setting: the office passes those itself
// (session/codex.go).
func (s *Server) PrepareCodex(home string) error {
	cfg := fmt.Sprintf(`model = %s
model_provider = "office"

[model_providers.office]
name = "office"
base_url = %s
env_key = "OPENAITEST_KEY"
wire_api = "responses"
`, strconv.Quote(Model), strconv.Quote(s.URL))
	dir := filepath.Join(home, ".codex")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600)
}

func writeJSONFile(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
