package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
	"github.com/office-server/office-server/store/postgres"
)

// TestInvalidBlockFloodPostgres: 1.1 MB of "[ASK_USER]" lines (100 000
// invalid blocks in one turn) through the office on PostgreSQL leave a
// handful of event rows, not one per block.
func TestInvalidBlockFloodPostgres(t *testing.T) {
	url := pgDB(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r, err := engine.New(engine.Config{Store: st, Sessions: nopSessions{}, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	off, agents, err := r.SyncOffice(ctx, engine.OfficeConfig{Office: office.Office{Name: "flood"}, Agents: []office.Agent{{Name: "dev"}}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = r.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	start := time.Now()
	flood := strings.Repeat("[ASK_USER]\n", 100000)
	r.HandleText(session.Text{Key: session.Key{OfficeID: off.ID, AgentID: agents[0].ID}, ID: "flood-1", Lines: strings.Split(flood, "\n"), TurnEnd: true})
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	count := func(kind string) (n int) {
		if err := conn.QueryRow(ctx, `select count(*) from office_events where office_id = $1 and kind like $2`, off.ID, kind).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor(t, "the summary event", 30*time.Second, func() bool { return count("message.invalid.summary") == 1 })
	took := time.Since(start)
	if n := count("message.invalid%"); n > 11 {
		t.Errorf("%d invalid-block event rows for one turn, want at most 11", n)
	}
	t.Logf("100 000 invalid blocks handled in %v: %d event rows", took, count("%"))
}
