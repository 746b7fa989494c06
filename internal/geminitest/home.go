package geminitest

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// Env returns the environment that points the Gemini CLI at the server:
// GOOGLE_GEMINI_BASE_URL (the CLI then authenticates as a gateway) and the
// key.
func (s *Server) Env(home string) []string {
	return []string{"HOME=" + home, "GOOGLE_GEMINI_BASE_URL=" + s.URL, "GEMINI_API_KEY=" + s.Key}
}

// Prepare writes $HOME/.gemini/settings.json so that the Gemini CLI starts
// on its prompt with no dialog: the API-key auth type chosen (the base URL from the environment still applies), the model
// named, usage statistics, update checks and the folder-trust check off
// (nothing leaves the machine).
func Prepare(home string) error {
	settings := map[string]any{
		"security": map[string]any{
			"auth":        map[string]any{"selectedType": "gemini-api-key"},
			"folderTrust": map[string]any{"enabled": false},
		},
		"model":   map[string]any{"name": Model},
		"privacy": map[string]any{"usageStatisticsEnabled": false},
		"general": map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
	}
	path := filepath.Join(home, ".gemini", "settings.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
