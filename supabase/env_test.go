package supabase

import (
	"testing"
	"time"

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
