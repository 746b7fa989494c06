package agents_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/office-server/office-server/agents"
	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
	"github.com/office-server/office-server/store/sqlite"
)

// TestCrashBackoffAndReason runs an agent that always fails at start
// through the production wiring with the server's default restart
// settings: it is restarted after 1 s, 2 s, 4 s (starting it again from the
// office meanwhile does not bypass the backoff), each crash records its
// exit code and the last lines of its screen as an event, the sessions
// row and the session's Info; and a start that cannot launch answers with
// the reason, not an internal error, and its session row is failed with
// the reason.
func TestCrashBackoffAndReason(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	data := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(data, "office.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var mu sync.Mutex
	var starts []time.Time
	r, sess, err := agents.New(engine.Config{Store: st, Feed: st, DataDir: data},
		agents.Options{StateDir: filepath.Join(data, "claude")},
		session.Options{OnStatus: func(_ session.Key, s session.Status, _ session.Info) {
			if s == office.SessionStarting {
				mu.Lock()
				starts = append(starts, time.Now())
				mu.Unlock()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "broken.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'starting up'\necho 'fatal: config file missing' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, as, err := r.SyncOffice(ctx, engine.OfficeConfig{Office: office.Office{Name: "crashy"}, Agents: []office.Agent{
		{Name: "broken", Launch: office.LaunchSpec{Kind: session.KindCommand, Command: script}},
		{Name: "missing", Launch: office.LaunchSpec{Kind: session.KindCommand, Command: "/nonexistent/agent-cli"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = r.Run(runCtx); close(done) }()
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		_ = sess.Manager().Close(cctx)
		stop()
		<-done
	}()

	checkMissingCommand(t, r, st, as[1].ID)

	if err := r.StartAgent(ctx, as[0].ID); err != nil {
		t.Fatal(err)
	}
	// Meanwhile the office keeps asking for the agent (as deliveries do).
	go func() {
		for runCtx.Err() == nil {
			_ = r.StartAgent(runCtx, as[0].ID)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	checkBackoff(t, &mu, &starts)

	s, ok := sess.Manager().Get(session.Key{OfficeID: as[0].OfficeID, AgentID: as[0].ID})
	if !ok {
		t.Fatal("no session")
	}
	// Read while the agent is down after its fourth crash (an eight-second
	// backoff): the fourth start clears the detail, and its crash comes a
	// moment later, so a read right after the start may see neither.
	crashed := func() bool { return s.Status() == office.SessionCrashed }
	for deadline := time.Now().Add(5 * time.Second); !crashed() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	info := s.Info()
	if !strings.Contains(info.Detail, "exit status 3") || !strings.Contains(info.Detail, "fatal: config file missing") {
		t.Errorf("session detail %q: want the exit status and the last screen lines", info.Detail)
	}
	checkCrashEvents(t, st, as[0])
	checkRowReason(t, st, as[0].ID)
}

// checkMissingCommand: a start that cannot launch answers with the
// reason, not an internal error, and its session row is failed with the
// reason.
func checkMissingCommand(t *testing.T, r *engine.Router, st *sqlite.Store, agentID string) {
	ctx := context.Background()
	err := r.StartAgent(ctx, agentID)
	if office.ErrorCode(err) != office.EINVALID || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("start of a missing command: %v (code %s), want EINVALID with the reason", err, office.ErrorCode(err))
	}
	// Its session row says so too (as for no pseudo-terminal left).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		rec, err := st.GetSessionByAgent(ctx, agentID)
		if err == nil && rec.Status == office.SessionFailed && strings.Contains(rec.Detail, "no such file") {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("session row of the agent that could not start: %+v, %v; want failed with the reason", rec, err)
			break
		}
	}
}

// checkBackoff waits for four starts and checks the restarts came after
// about 1 s, 2 s and 4 s.
func checkBackoff(t *testing.T, mu *sync.Mutex, starts *[]time.Time) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := len(*starts)
		mu.Unlock()
		if n >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d starts in 20 s", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	got := slices((*starts)[:4])
	mu.Unlock()
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
	for i, d := range got {
		if d < want[i]-50*time.Millisecond || d > want[i]+time.Second {
			t.Errorf("restart %d after %v, want about %v (all: %v)", i+1, d, want[i], got)
		}
	}
	t.Logf("restart intervals %v", got)
}

// checkCrashEvents: each crash of a is an event with its exit code (3)
// and the last lines of its screen; at least three.
func checkCrashEvents(t *testing.T, st *sqlite.Store, a office.Agent) {
	ctx := context.Background()
	evs, err := st.ListEvents(ctx, office.EventFilter{OfficeID: a.OfficeID, AgentID: a.ID})
	if err != nil {
		t.Fatal(err)
	}
	crashes := 0
	for _, e := range evs {
		if e.Kind != "session.crashed" {
			continue
		}
		crashes++
		var p struct {
			ExitCode  *int     `json:"exit_code"`
			LastLines []string `json:"last_lines"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil || p.ExitCode == nil || *p.ExitCode != 3 || !strings.Contains(strings.Join(p.LastLines, "\n"), "fatal: config file missing") {
			t.Errorf("crash event %s: want exit code 3 and the last lines", e.Payload)
		}
	}
	if crashes < 3 {
		t.Errorf("%d crash events, want at least 3", crashes)
	}
}

// checkRowReason: the session row's detail gives the crash's reason.
func checkRowReason(t *testing.T, st *sqlite.Store, agentID string) {
	ctx := context.Background()
	var err error
	// The row is written after the status change: give it a moment.
	var rec office.SessionRecord
	for deadline := time.Now().Add(5 * time.Second); ; {
		rec, err = st.GetSessionByAgent(ctx, agentID)
		if err == nil && strings.Contains(rec.Detail, "fatal: config file missing") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || !strings.Contains(rec.Detail, "fatal: config file missing") {
		t.Errorf("session row detail %q (%v): want the reason", rec.Detail, err)
	}
}

func slices(ts []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(ts); i++ {
		out = append(out, ts[i].Sub(ts[i-1]))
	}
	return out
}
