package supabase

import (
	"testing"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/store/storetest"
)

// TestConformance runs the persistence conformance suite against the
// Supabase store and Realtime feed, through pgrest (PostgREST's API over the
// real PostgreSQL with the real migrations) and the Phoenix stand-in.
func TestConformance(t *testing.T) {
	envs := map[office.Store]*testEnv{}
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) (office.Store, office.ChangeFeed) {
			e := newTestEnv(t)
			envs[e.store] = e
			return e.store, e.feed(t, fastOptions())
		},
		KillFeed: func(t *testing.T, s office.Store, f office.ChangeFeed) {
			// The suite kills a feed it saw Connected: its socket is joined.
			if conns, joined := envs[s].phx.Drop(); conns != 1 || joined != 1 {
				t.Errorf("KillFeed dropped %d connections, %d joined; want the feed's one joined socket", conns, joined)
			}
		},
	})
}
