package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/office-server/office-server/agents"
	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
	"github.com/office-server/office-server/store/postgres"
)

// timedSessions wraps Sessions and reports when a text containing a watched
// marker has been typed (Send returned: the bytes are in the PTY).
type timedSessions struct {
	engine.Sessions
	mu       sync.Mutex
	watch    map[string]chan time.Time
	sendTime []time.Duration // how long each Send took (the session layer's share)
}

func (ts *timedSessions) expect(marker string) chan time.Time {
	ch := make(chan time.Time, 1)
	ts.mu.Lock()
	ts.watch[marker] = ch
	ts.mu.Unlock()
	return ch
}

func (ts *timedSessions) Send(ctx context.Context, officeID, agentID, text string) error {
	start := time.Now()
	err := ts.Sessions.Send(ctx, officeID, agentID, text)
	ts.mu.Lock()
	ts.sendTime = append(ts.sendTime, time.Since(start))
	ts.mu.Unlock()
	now := time.Now()
	ts.mu.Lock()
	for m, ch := range ts.watch {
		if strings.Contains(text, m) {
			ch <- now
			delete(ts.watch, m)
		}
	}
	ts.mu.Unlock()
	return err
}

// benchOffice is a Router on the real Postgres store driving real PTY
// sessions of two line agents, PO and DEV.
type benchOffice struct {
	c   *chain
	r   *engine.Router
	st  *postgres.Store
	ts  *timedSessions
	mgr *session.Manager
}

const lineAgent = `
echo "%[1]s>"
while IFS= read -r line; do echo "%[1]s>"; done
`

func newBenchOffice(b *testing.B) *benchOffice {
	b.Helper()
	c := &chain{url: pgDB(b), rec: &lines{}, userID: uuid.NewString()}
	ctx := context.Background()
	st, err := postgres.Open(ctx, c.url, postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	var ts *timedSessions
	data := b.TempDir()
	r, sess, err := agents.New(engine.Config{Store: st, Feed: st, Tick: 100 * time.Millisecond, DataDir: data,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))},
		agents.Options{StateDir: filepath.Join(data, "claude"), Wrap: func(s engine.Sessions) engine.Sessions {
			ts = &timedSessions{Sessions: s, watch: map[string]chan time.Time{}}
			return ts
		}},
		session.Options{}) // the server's defaults (EnterDelay bounds the wait for the echo)
	if err != nil {
		b.Fatal(err)
	}
	mgr := sess.Manager()
	mk := func(name string) office.Agent {
		p := filepath.Join(b.TempDir(), name+".sh")
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+fmt.Sprintf(lineAgent, strings.ToLower(name))), 0o755); err != nil {
			b.Fatal(err)
		}
		return office.Agent{Name: name, Launch: launch(p, strings.ToLower(name))}
	}
	off, agents, err := r.SyncOffice(ctx, engine.OfficeConfig{Office: office.Office{Name: "bench"}, Agents: []office.Agent{mk("PO"), mk("DEV")}})
	if err != nil {
		b.Fatal(err)
	}
	c.officeID, c.po, c.dev = off.ID, agents[0], agents[1]
	c.exec(b, `insert into auth.users (id, email) values ($1, 'member@example.com')`, c.userID)
	c.exec(b, `insert into office_members (office_id, user_id) values ($1, $2)`, c.officeID, c.userID)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = r.Run(runCtx); close(done) }()
	b.Cleanup(func() {
		cancel()
		<-done
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = mgr.Close(ctx)
	})
	bo := &benchOffice{c: c, r: r, st: st, ts: ts, mgr: mgr}
	for _, a := range agents {
		if err := r.StartAgent(ctx, a.ID); err != nil {
			b.Fatal(err)
		}
		bo.waitReady(b, a.ID)
	}
	return bo
}

func (bo *benchOffice) waitReady(b *testing.B, agentID string) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if s, ok := bo.mgr.Get(session.Key{OfficeID: bo.c.officeID, AgentID: agentID}); ok && s.Status() == office.SessionReady {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("agent %s not ready", agentID)
		}
		time.Sleep(time.Millisecond)
	}
}

func report(b *testing.B, d []time.Duration, ts *timedSessions) {
	ts.mu.Lock()
	st := slices.Clone(ts.sendTime)
	ts.mu.Unlock()
	slices.Sort(st)
	if len(st) > 0 {
		b.ReportMetric(float64(st[len(st)/2].Microseconds())/1000, "send-p50-ms")
	}
	slices.Sort(d)
	pct := func(p float64) float64 {
		return float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op") // the percentiles are the figures
}

// BenchmarkAnswerToPTY: a member's answer committed (SQL UPDATE under RLS,
// as the frontend writes it) → the LISTEN/NOTIFY feed → the router → the
// answer typed into the agent's PTY (Session.Send returned).
func BenchmarkAnswerToPTY(b *testing.B) {
	bo := newBenchOffice(b)
	ctx := context.Background()
	var lat []time.Duration
	for b.Loop() {
		b.StopTimer()
		q, err := bo.st.CreateQuestion(ctx, office.Question{OfficeID: bo.c.officeID, AgentID: bo.c.po.ID, QuestionType: office.QuestionText, Question: "Go?", Options: []string{}, Status: office.QuestionPending, ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			b.Fatal(err)
		}
		bo.waitReady(b, bo.c.po.ID)
		typed := bo.ts.expect(q.ID)
		b.StartTimer()
		bo.c.answerAsMember(b, q.ID, "yes")
		t0 := time.Now()
		select {
		case t1 := <-typed:
			lat = append(lat, t1.Sub(t0))
		case <-time.After(10 * time.Second):
			b.Fatal("answer not typed")
		}
	}
	report(b, lat, bo.ts)
}

// BenchmarkInvokeToPTY: the caller's words holding an INVOKE reach the
// router (HandleText, as the session layer calls it) → the invocation row →
// the task typed into the idle target's PTY (Session.Send returned).
func BenchmarkInvokeToPTY(b *testing.B) {
	bo := newBenchOffice(b)
	ctx := context.Background()
	var lat []time.Duration
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		bo.waitReady(b, bo.c.dev.ID)
		marker := fmt.Sprintf("bench task %d", i)
		typed := bo.ts.expect(marker)
		b.StartTimer()
		t0 := time.Now()
		bo.r.HandleText(session.Text{Key: session.Key{OfficeID: bo.c.officeID, AgentID: bo.c.po.ID}, ID: uuid.NewString(), TurnEnd: true,
			Lines: []string{"[INVOKE:DEV]", marker, "[/INVOKE:DEV]"}})
		select {
		case t1 := <-typed:
			lat = append(lat, t1.Sub(t0))
		case <-time.After(10 * time.Second):
			b.Fatal("task not typed")
		}
		b.StopTimer()
		// Close it so the next task is not queued behind it.
		var open []office.Invocation
		for len(open) == 0 {
			open, _ = bo.st.ListInvocations(ctx, office.InvocationFilter{OfficeID: bo.c.officeID, Status: []string{office.InvocationInProgress}})
			time.Sleep(time.Millisecond)
		}
		for _, inv := range open {
			if _, _, err := bo.st.TransitionInvocation(ctx, inv.ID, []string{office.InvocationInProgress}, office.InvocationCompleted, office.InvocationPatch{}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	report(b, lat, bo.ts)
}
