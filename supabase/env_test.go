package supabase

import (
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/supabase/supabasetest"
)

var testKey = supabasetest.Key

// testEnv is a stand-in Supabase project (supabasetest) and a Store on it.
type testEnv struct {
	url   string
	phx   *supabasetest.Phoenix
	store *Store
}

func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
	p := supabasetest.New(t)
	store, err := New(p.URL, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return &testEnv{url: p.URL, phx: p.Realtime, store: store}
}

// fastOptions are realtime options scaled down for tests.
func fastOptions() RealtimeOptions {
	return RealtimeOptions{
		// Long enough that a loaded machine does not miss one: a missed
		// heartbeat reconnects, and tests count joins and read Err.
		// TestRealtimeMissedHeartbeat sets its own.
		Heartbeat:        2 * time.Second,
		JoinTimeout:      2 * time.Second,
		MinBackoff:       10 * time.Millisecond,
		MaxBackoff:       200 * time.Millisecond,
		RateLimitBackoff: 300 * time.Millisecond,
		Logger:           quietLogger(),
	}
}

func (e *testEnv) feed(t testing.TB, o RealtimeOptions) *Realtime {
	t.Helper()
	f, err := NewRealtime(e.url, testKey, e.store, o)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestKeyFromEnv: the server takes SUPABASE_SECRET_KEY, else the legacy
// SUPABASE_SERVICE_ROLE_KEY; with both, the secret key wins and the other
// is named as ignored; a frontend key or no key is refused with the
// variable named and the key itself never shown.
func TestKeyFromEnv(t *testing.T) {
	for _, c := range []struct {
		name                   string
		env                    map[string]string
		key, from, ignored, in string // in: a word the error must hold
	}{
		{name: "secret key", env: map[string]string{EnvSecretKey: supabasetest.SecretKey},
			key: supabasetest.SecretKey, from: EnvSecretKey},
		{name: "legacy key", env: map[string]string{EnvServiceRoleKey: supabasetest.Key},
			key: supabasetest.Key, from: EnvServiceRoleKey},
		{name: "both", env: map[string]string{EnvSecretKey: supabasetest.SecretKey, EnvServiceRoleKey: supabasetest.Key},
			key: supabasetest.SecretKey, from: EnvSecretKey, ignored: EnvServiceRoleKey},
		{name: "secret key in the legacy variable", env: map[string]string{EnvServiceRoleKey: supabasetest.SecretKey},
			key: supabasetest.SecretKey, from: EnvServiceRoleKey},
		{name: "none", env: map[string]string{}, in: EnvSecretKey},
		{name: "publishable", env: map[string]string{EnvSecretKey: supabasetest.PublishableKey}, in: "publishable"},
		{name: "legacy anon", env: map[string]string{EnvServiceRoleKey: supabasetest.AnonKey}, in: `"anon"`},
		{name: "not a key", env: map[string]string{EnvServiceRoleKey: "sekrit-key"}, in: EnvServiceRoleKey},
		{name: "another sb_ key", env: map[string]string{EnvSecretKey: "sb_sekrit"}, in: "sb_secret_"},
	} {
		key, from, ignored, err := KeyFromEnv(func(k string) string { return c.env[k] })
		if c.in != "" {
			if office.ErrorCode(err) != office.EINVALID || !strings.Contains(err.Error(), c.in) ||
				strings.Contains(err.Error(), "sekrit") || strings.Contains(err.Error(), "StandIn") {
				t.Errorf("%s: %v; want EINVALID naming %s, without the key", c.name, err, c.in)
			}
			continue
		}
		if err != nil || key != c.key || from != c.from || ignored != c.ignored {
			t.Errorf("%s: %q from %s ignoring %q, %v; want %q from %s ignoring %q", c.name, key, from, ignored, err, c.key, c.from, c.ignored)
		}
	}
}

// TestFromEnv: the store and the feed from SUPABASE_URL and the key, the
// key in the Realtime URL as Supabase's gateway wants it (apikey=…).
func TestFromEnv(t *testing.T) {
	env := map[string]string{}
	get := func(k string) string { return env[k] }
	if _, _, err := FromEnv(get, nil); office.ErrorCode(err) != office.EINVALID || !strings.Contains(err.Error(), EnvURL) {
		t.Errorf("FromEnv with nothing set = %v", err)
	}
	env[EnvURL] = "https://abcd.supabase.co"
	env[EnvSecretKey] = supabasetest.SecretKey
	s, rt, err := FromEnv(get, nil)
	if err != nil || s == nil || rt == nil {
		t.Fatalf("FromEnv = %v", err)
	}
	if want := "wss://abcd.supabase.co/realtime/v1/websocket?apikey=" + supabasetest.SecretKey + "&vsn=1.0.0"; rt.wsURL != want {
		t.Errorf("Realtime URL %q; want %q", rt.wsURL, want)
	}
	delete(env, EnvURL)
	if _, _, err := FromEnv(get, nil); err == nil || strings.Contains(err.Error(), "StandIn") || !strings.Contains(err.Error(), EnvURL) {
		t.Errorf("FromEnv without URL = %v", err)
	}
}
