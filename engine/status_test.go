package engine

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
)

// At shutdown the server stops the sessions, then FlushStatuses, then ends
// Run's context: the rows end stopped with pid 0 although the context ends
// right after, and the agents stay active (the next start runs them).
// StopAgent, a stop on request, makes the agent idle.
func TestSessionRowsFinalAtShutdown(t *testing.T) {
	clk := &clock{t: time.Now()}
	st, ss := newTestStore(t), newFakeSessions()
	r, err := New(Config{Store: st, Sessions: ss, Now: clk.Now, DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	off, as, err := r.SyncOffice(ctx, OfficeConfig{Office: office.Office{Name: "s"}, Agents: []office.Agent{{Name: "PO"}, {Name: "DEV"}}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = r.Run(runCtx); close(done) }()
	for i, a := range as {
		if err := r.StartAgent(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
		r.HandleStatus(session.Key{OfficeID: off.ID, AgentID: a.ID}, office.SessionStarting, session.Info{PID: 100 + i})
		r.HandleStatus(session.Key{OfficeID: off.ID, AgentID: a.ID}, office.SessionReady, session.Info{PID: 100 + i})
	}
	row := func(id string) office.SessionRecord {
		rec, _ := st.GetSessionByAgent(ctx, id)
		return rec
	}
	eventually(t, "ready rows", func() bool {
		return row(as[0].ID).Status == office.SessionReady && row(as[1].ID).Status == office.SessionReady
	})

	// DEV is stopped on request: idle.
	if err := r.StopAgent(ctx, as[1].ID); err != nil {
		t.Fatal(err)
	}
	r.HandleStatus(session.Key{OfficeID: off.ID, AgentID: as[1].ID}, office.SessionStopped, session.Info{}) // what the session layer reports
	if a, _ := st.GetAgent(ctx, as[1].ID); a.Status != office.AgentIdle {
		t.Errorf("DEV stopped on request is %s, want idle", a.Status)
	}

	// Shutdown: PO's session stops, its status is flushed, Run's context ends.
	r.HandleStatus(session.Key{OfficeID: off.ID, AgentID: as[0].ID}, office.SessionStopped, session.Info{})
	sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
	defer scancel()
	if err := r.FlushStatuses(sctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	for _, a := range as {
		if rec := row(a.ID); rec.Status != office.SessionStopped || rec.PID != 0 {
			t.Errorf("%s's row after shutdown: status %s pid %d, want stopped and 0", a.Name, rec.Status, rec.PID)
		}
	}
	if a, _ := st.GetAgent(ctx, as[0].ID); a.Status != office.AgentActive {
		t.Errorf("PO stopped by the shutdown is %s, want active", a.Status)
	}
}
