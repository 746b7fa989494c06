package supabase

import (
	"log/slog"

	"github.com/office-server/office-server/office"
)

// Environment variables FromEnv reads.
const (
	EnvURL            = "SUPABASE_URL"              // https://<project-ref>.supabase.co
	EnvServiceRoleKey = "SUPABASE_SERVICE_ROLE_KEY" // secret: server-side only
)

// FromEnv builds the Store and the Realtime feed from SUPABASE_URL and
// SUPABASE_SERVICE_ROLE_KEY as getenv returns them (os.Getenv in main). It
// returns EINVALID naming what is missing; the key itself never appears in
// an error.
func FromEnv(getenv func(string) string, log *slog.Logger) (*Store, *Realtime, error) {
	url, key := getenv(EnvURL), getenv(EnvServiceRoleKey)
	switch {
	case url == "" && key == "":
		return nil, nil, office.Errorf(office.EINVALID, "supabase: %s and %s are not set", EnvURL, EnvServiceRoleKey)
	case url == "":
		return nil, nil, office.Errorf(office.EINVALID, "supabase: %s is not set", EnvURL)
	case key == "":
		return nil, nil, office.Errorf(office.EINVALID, "supabase: %s is not set", EnvServiceRoleKey)
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
