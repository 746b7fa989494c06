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

// Prepare writes $HOME/.gemini/settings.json with what a person sets to
// use the Gemini CLI with an API key: the auth type chosen (Gemini CLI asks
// for it in a dialog otherwise; the base URL from the environment still
// applies), the model, and, for privacy, usage statistics and update
// checks off (nothing leaves the machine). No folder trust: the office
// trusts the agent's folder itself (session/gemini.go).
func Prepare(home string) error {
	return PrepareAuth(home, "gemini-api-key")
}

// PrepareAuth is Prepare with the auth type given; "" leaves it unchosen,
// as on a new machine, where Gemini CLI asks for it.
func PrepareAuth(home, authType string) error {
	security := map[string]any{}
	if authType != "" {
		security["auth"] = map[string]any{"selectedType": authType}
	}
	settings := map[string]any{
		"security": security,
		"model":    map[string]any{"name": Model},
		"privacy":  map[string]any{"usageStatisticsEnabled": false},
		"general":  map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
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
