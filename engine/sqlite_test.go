package engine_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/agentstest"

	"github.com/google/uuid"

	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
	"github.com/office-server/office-server/store/postgres"
	"github.com/office-server/office-server/store/sqlite"
)

// TestChainSQLite runs the core chain on the embedded default store (its
// in-process change feed) with real PTY sessions.
func TestChainSQLite(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "office.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec := &lines{}
	r, mgr, err := agentstest.NewManaged(engine.Config{Store: st, Feed: st, Tick: 50 * time.Millisecond, DataDir: t.TempDir()},
		session.Options{EnterDelay: 5 * time.Millisecond, StopGrace: 500 * time.Millisecond, OnText: rec.add})
	if err != nil {
		t.Fatal(err)
	}
	po := launch(script(t, "po", poScript), "po")
	po.Dir = t.TempDir()
	dev := launch(script(t, "dev", devScript), "dev")
	dev.Dir = t.TempDir()
	off, agents, err := r.SyncOffice(ctx, engine.OfficeConfig{Office: office.Office{Name: "lite"}, Agents: []office.Agent{{Name: "PO", Launch: po}, {Name: "DEV", Launch: dev}}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = r.Run(runCtx); close(done) }()
	defer func() {
		cancel()
		<-done
		cctx, c2 := context.WithTimeout(context.Background(), 10*time.Second)
		defer c2()
		_ = mgr.Close(cctx)
	}()
	if err := r.StartAgent(ctx, agents[0].ID); err != nil {
		t.Fatal(err)
	}
	var q office.Question
	waitFor(t, "the question", 10*time.Second, func() bool {
		qs, _ := st.ListQuestions(ctx, office.QuestionFilter{OfficeID: off.ID})
		if len(qs) == 1 {
			q = qs[0]
		}
		return len(qs) == 1
	})
	// A person answers through the store (as the server's API does for the
	// embedded store); the in-process feed wakes the router.
	if _, ok, err := st.AnswerQuestion(ctx, q.ID, "email", ""); err != nil || !ok {
		t.Fatalf("answer: %v %v", ok, err)
	}
	rec.wait(t, agents[0].ID, "po got answer: email", 10*time.Second)
	rec.wait(t, agents[0].ID, "po got result: Login done: Implement email login.", 15*time.Second)
	waitFor(t, "completed", 5*time.Second, func() bool {
		is, _ := st.ListInvocations(ctx, office.InvocationFilter{OfficeID: off.ID, Status: []string{office.InvocationCompleted}})
		return len(is) == 1
	})
}

// The router relies on a duplicate row ID being ECONFLICT (replayed
// messages create rows with IDs derived from the message): check it on the
// real stores.
func TestStoresConflictOnDuplicateID(t *testing.T) {
	ctx := context.Background()
	lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "office.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	pg, err := postgres.Open(ctx, pgDB(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	for name, st := range map[string]office.Store{"sqlite": lite, "postgres": pg} {
		off, err := st.UpsertOffice(ctx, office.Office{Name: "dup"})
		if err != nil {
			t.Fatal(err)
		}
		a, err := st.UpsertAgent(ctx, office.Agent{OfficeID: off.ID, Name: "PO", Status: office.AgentIdle, Capabilities: []string{}, Expertise: []string{}, AllowedActions: []string{}})
		if err != nil {
			t.Fatal(err)
		}
		id := uuid.NewString()
		q := office.Question{ID: id, OfficeID: off.ID, AgentID: a.ID, QuestionType: "text", Question: "?", Options: []string{}, Status: office.QuestionPending, ExpiresAt: time.Now().Add(time.Hour)}
		if _, err := st.CreateQuestion(ctx, q); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := st.CreateQuestion(ctx, q); !office.IsConflict(err) {
			t.Errorf("%s: duplicate question id: %v, want ECONFLICT", name, err)
		}
		inv := office.Invocation{ID: id, OfficeID: off.ID, CallerAgentID: a.ID, CalleeAgentID: a.ID, Reason: "x", Status: office.InvocationPending, Depth: 1}
		if _, err := st.CreateInvocation(ctx, inv); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := st.CreateInvocation(ctx, inv); !office.IsConflict(err) {
			t.Errorf("%s: duplicate invocation id: %v, want ECONFLICT", name, err)
		}
		r := office.Result{ID: id, OfficeID: off.ID, FromAgentID: a.ID, ToAgentID: a.ID, ResultType: "message", ContentType: "text/plain", Content: "c", Status: office.ResultPending}
		if _, err := st.CreateResult(ctx, r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := st.CreateResult(ctx, r); !office.IsConflict(err) {
			t.Errorf("%s: duplicate result id: %v, want ECONFLICT", name, err)
		}
		d := office.DependencyRequest{ID: id, OfficeID: off.ID, AgentID: a.ID, Type: "file", Name: "f", Status: office.DependencyPending, ExpiresAt: time.Now().Add(time.Hour)}
		if _, err := st.CreateDependency(ctx, d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := st.CreateDependency(ctx, d); !office.IsConflict(err) {
			t.Errorf("%s: duplicate dependency id: %v, want ECONFLICT", name, err)
		}
	}
}
