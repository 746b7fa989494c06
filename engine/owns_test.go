package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
)

// While Config.Owns says another server runs the office, the router starts
// no agent, types nothing and records no session status for it; once the
// office is taken, CatchUp delivers what waited.
func TestOwnsGatesTheOffice(t *testing.T) {
	var owned atomic.Bool
	owned.Store(true)
	h := newHarness(t, func(c *Config) { c.Owns = func(string) bool { return owned.Load() } })
	ctx := context.Background()
	h.run("PO")
	h.say("PO", askBlock)
	eventually(t, "question", func() bool { return len(h.questions()) == 1 })

	owned.Store(false)
	if err := h.r.StartAgent(ctx, h.id("DEV")); office.ErrorCode(err) != office.EUNAVAILABLE {
		t.Errorf("StartAgent of an office run elsewhere: %v, want %s", err, office.EUNAVAILABLE)
	}
	if err := h.r.StopAgent(ctx, h.id("PO")); office.ErrorCode(err) != office.EUNAVAILABLE {
		t.Errorf("StopAgent of an office run elsewhere: %v, want %s", err, office.EUNAVAILABLE)
	}
	if _, err := h.r.AnswerQuestion(ctx, h.questions()[0].ID, "email", ""); err != nil {
		t.Fatal(err)
	}
	h.r.HandleStatus(session.Key{OfficeID: h.office.ID, AgentID: h.id("DEV")}, office.SessionReady, session.Info{PID: 7})
	h.quiet("PO", 100*time.Millisecond)
	if rec, err := h.st.GetSessionByAgent(ctx, h.id("DEV")); err == nil {
		t.Errorf("session row written for an office run elsewhere: %+v", rec)
	}
	h.ss.mu.Lock()
	starts := len(h.ss.starts[h.id("DEV")])
	h.ss.mu.Unlock()
	if starts != 0 {
		t.Error("DEV was started")
	}

	owned.Store(true)
	h.r.CatchUp(ctx, h.office.ID)
	h.typed("PO", "> email")
}
