package agents_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/office-server/office-server/agents"
	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
	"github.com/office-server/office-server/store/sqlite"
)

// TestScreenTextAcrossSessions runs a CLI agent through the production
// wiring, stops it and starts it again: the new session's screen text
// reuses the first session's chunk ID, and the office still takes it as a
// new message because the session says it was read off a screen
// (session.Text.Source, which the router reads as it is). The statuses say a CLI does not resume its
// conversation (Info.Resumes, which Router.HandleStatus takes as it is).
func TestScreenTextAcrossSessions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	data := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(data, "office.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var mu sync.Mutex
	var sources []session.Source
	var ids []string
	resumes := false
	r, sess, err := agents.New(engine.Config{Store: st, Feed: st, DataDir: data},
		agents.Options{StateDir: filepath.Join(data, "claude")},
		session.Options{
			OnText: func(x session.Text) {
				mu.Lock()
				sources, ids = append(sources, x.Source), append(ids, x.ID)
				mu.Unlock()
			},
			OnStatus: func(_ session.Key, _ session.Status, i session.Info) {
				mu.Lock()
				resumes = resumes || i.Resumes
				mu.Unlock()
			},
		})
	if err != nil {
		t.Fatal(err)
	}
	script := countingAgent(t)
	_, as, err := r.SyncOffice(ctx, engine.OfficeConfig{Office: office.Office{Name: "screen"}, Agents: []office.Agent{
		{Name: "cli", Launch: office.LaunchSpec{Kind: session.KindCommand, Command: script, PromptPattern: `^>\s*$`}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	a := as[0]
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
	step := func(want int) {
		t.Helper()
		waitStep(t, r, a, want, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), ids...) })
	}
	if err := r.StartAgent(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	step(1)
	if err := r.StopAgent(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := r.StartAgent(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	step(2)
	mu.Lock()
	defer mu.Unlock()
	if len(ids) < 2 || ids[0] != ids[len(ids)-1] {
		t.Errorf("text ids %v: want the second session to reuse the first one's", ids)
	}
	for _, s := range sources {
		if s != session.FromScreen {
			t.Errorf("source %v, want screen", s)
		}
	}
	if resumes {
		t.Error("a CLI agent's status says it resumes its conversation")
	}
}

// countingAgent writes an agent that prints "Step <n>/2: run <n>", n
// counting its starts, then its prompt, and waits.
func countingAgent(t *testing.T) string {
	dir := t.TempDir()
	script := filepath.Join(dir, "agent.sh")
	body := "#!/bin/sh\nn=$(cat " + dir + "/count 2>/dev/null || echo 0)\nn=$((n+1))\necho $n > " + dir + "/count\necho \"Step $n/2: run $n\"\nprintf '> '\nexec sleep 60\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

// waitStep waits up to 20 s for a's progress at step want; texts gives
// the text ids seen, for the failure.
func waitStep(t *testing.T, r *engine.Router, a office.Agent, want int, texts func() []string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for r.Progress(a.OfficeID, a.ID).Step != want {
		if time.Now().After(deadline) {
			t.Fatalf("step %d, want %d (texts %v)", r.Progress(a.OfficeID, a.ID).Step, want, texts())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
