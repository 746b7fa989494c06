package postgres_test

import (
	"testing"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/store/postgres"
	"github.com/office-server/office-server/store/storetest"
)

// TestConformanceSimpleProtocol runs the suite with pgx's simple protocol
// (default_query_exec_mode=simple_protocol in the URL), which a PgBouncer-
// style transaction pooler (Supabase's port 6543) needs: parameters are then
// sent as text without server-side types, so a Go slice meant for a jsonb
// column would go out as an array literal. The feed has a URL of its own
// (Options.FeedURL), as it must with a real transaction pooler, where
// LISTEN does not work.
func TestConformanceSimpleProtocol(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) (office.Store, office.ChangeFeed) {
			_, url := open(t, postgres.Options{})
			s, err := postgres.Open(t.Context(), url+"&default_query_exec_mode=simple_protocol", postgres.Options{FeedURL: url})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s, s
		},
		KillFeed: func(t *testing.T, s office.Store, _ office.ChangeFeed) {
			killFeed(t, s.(*postgres.Store))
		},
	})
}
