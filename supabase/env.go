package supabase

import (
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/office-server/office-server/office"
)

// Environment variables FromEnv and KeyFromEnv read.
const (
	EnvURL = "SUPABASE_URL" // https://<project-ref>.supabase.co
	// EnvSecretKey is the project's secret API key (sb_secret_…, Project
	// Settings → API Keys): server-side only.
	EnvSecretKey = "SUPABASE_SECRET_KEY"
	// EnvServiceRoleKey is the legacy service_role key (a JWT), for
	// projects that still have one.
	EnvServiceRoleKey = "SUPABASE_SERVICE_ROLE_KEY"
)

// KeyFromEnv returns the server's API key and the variable it came from:
// SUPABASE_SECRET_KEY when set, else the legacy SUPABASE_SERVICE_ROLE_KEY.
// When both are set the secret key wins and ignored names the other.
// EINVALID: neither is set, or the key is the frontend's (a publishable key
// or the legacy anon key) or no key at all. The key never appears in an
// error.
func KeyFromEnv(getenv func(string) string) (key, from, ignored string, err error) {
	secret, legacy := getenv(EnvSecretKey), getenv(EnvServiceRoleKey)
	switch {
	case secret != "":
		key, from = secret, EnvSecretKey
		if legacy != "" {
			ignored = EnvServiceRoleKey
		}
	case legacy != "":
		key, from = legacy, EnvServiceRoleKey
	default:
		return "", "", "", office.Errorf(office.EINVALID, "supabase: set %s (sb_secret_…) or the legacy %s", EnvSecretKey, EnvServiceRoleKey)
	}
	if err := checkServerKey(key, from); err != nil {
		return "", "", "", err
	}
	return key, from, ignored, nil
}

// checkServerKey tells a key the server cannot work with from one it can,
// by its form: an sb_secret_ key, or a JWT whose role claim (read, not
// verified: the project verifies) is service_role.
func checkServerKey(key, from string) error {
	switch {
	case strings.HasPrefix(key, "sb_secret_"):
		return nil
	case strings.HasPrefix(key, "sb_publishable_"):
		return office.Errorf(office.EINVALID, "supabase: %s holds the publishable key, the frontend's; the server needs the secret key (sb_secret_…, Project Settings → API Keys)", from)
	case strings.HasPrefix(key, "sb_"):
		return office.Errorf(office.EINVALID, "supabase: %s is not a secret key: it should start with sb_secret_", from)
	}
	parts := strings.Split(key, ".")
	if len(parts) != 3 {
		return office.Errorf(office.EINVALID, "supabase: %s is neither a secret key (sb_secret_…) nor a legacy service_role key (a JWT)", from)
	}
	var claims struct {
		Role string `json:"role"`
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(b, &claims) != nil {
		return office.Errorf(office.EINVALID, "supabase: %s is neither a secret key (sb_secret_…) nor a legacy service_role key (a JWT)", from)
	}
	if claims.Role != "service_role" {
		return office.Errorf(office.EINVALID, "supabase: %s is a key of role %q; the server needs the secret key (sb_secret_…) or the legacy service_role key", from, claims.Role)
	}
	return nil
}

// FromEnv builds the Store and the Realtime feed from SUPABASE_URL and the
// key KeyFromEnv chooses, as getenv returns them (os.Getenv in main). It
// returns EINVALID naming what is missing; the key itself never appears in
// an error.
func FromEnv(getenv func(string) string, log *slog.Logger) (*Store, *Realtime, error) {
	url := getenv(EnvURL)
	key, from, ignored, err := KeyFromEnv(getenv)
	switch {
	case url == "" && err != nil:
		return nil, nil, office.Errorf(office.EINVALID, "supabase: %s and %s (or %s) are not set", EnvURL, EnvSecretKey, EnvServiceRoleKey)
	case url == "":
		return nil, nil, office.Errorf(office.EINVALID, "supabase: %s is not set", EnvURL)
	case err != nil:
		return nil, nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if ignored != "" {
		log.Info("supabase: both keys are set; using "+from, "ignored", ignored)
	}
	s, err := New(url, key)
	if err != nil {
		return nil, nil, err
	}
	rt, err := NewRealtime(url, key, s, RealtimeOptions{Logger: log})
	if err != nil {
		return nil, nil, err
	}
	return s, rt, nil
}
