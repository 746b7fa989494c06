package main

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/cluster"
	"github.com/office-server/office-server/internal/anthropictest"
	"github.com/office-server/office-server/internal/testenv"
)

// TestClusterHibernatedFailover runs two built servers on one PostgreSQL
// with an office of one real Claude Code agent (hibernate_after 3s,
// scripted model). The agent answers a message and hibernates on the
// node that runs its office; that node is killed (SIGKILL). The other
// node takes the office and leaves the agent asleep (no work for it);
// the next message wakes it there, with its conversation (resumed from
// the transcript kept in the database), and reaches the model once.
func TestClusterHibernatedFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs Claude Code")
	}
	url := testenv.NewDatabase(t)
	claude := testenv.ClaudeBin(t)
	model := anthropictest.New(t)
	model.Reply(func(anthropictest.Request) anthropictest.Response { return anthropictest.Response{Text: "OK"} })
	ctx := context.Background()
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	c := &clusterRun{t: t, bin: buildServer(t), db: db, model: model, agent: map[string]string{},
		env: []string{"DATABASE_URL=" + url, "OFFICE_ADMIN_TOKEN=" + clusterToken, "LANG=C.UTF-8",
			"ANTHROPIC_BASE_URL=" + model.URL, "ANTHROPIC_API_KEY=" + model.Key, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1"}}
	for range 2 {
		c.launchNode()
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, n := range c.nodes {
				t.Logf("node %d (%s) log:\n%s", i, n.base, n.stderr.String())
			}
		}
		for _, n := range c.live() {
			n.stop(t)
		}
	})
	a := c.nodes[0]
	var o struct{ ID string }
	if st := c.api(a, "POST", "/api/offices", map[string]any{"name": "sleepy cluster office"}, &o); st >= 300 {
		t.Fatalf("create office: %d", st)
	}
	if st := c.api(a, "POST", "/api/offices/"+o.ID+"/agents", map[string]any{"name": "po", "role": "Product owner",
		"launch": map[string]any{"kind": "claude", "command": claude, "dir": filepath.Join(t.TempDir(), "po"), "hibernate_after": "3s"}}, nil); st >= 300 {
		t.Fatalf("create agent: %d", st)
	}
	waitUntil(t, 3*cluster.DefaultRenew+5*time.Second, "the office placed", func() bool { return c.owner(o.ID) != nil })
	c.api(a, "POST", "/api/offices/"+o.ID+"/agents/po/start", nil, nil)
	status := func() (st string, pid int) {
		_ = db.QueryRow(ctx, `select status, coalesce(pid, 0) from agent_sessions where office_id = $1`, o.ID).Scan(&st, &pid)
		return st, pid
	}
	waitUntil(t, 90*time.Second, "po ready", func() bool { st, _ := status(); return st == "ready" })
	c.api(a, "POST", "/api/offices/"+o.ID+"/messages", map[string]any{"agent": "po", "content": "Note m-6d1."}, nil)
	waitUntil(t, 90*time.Second, "the first message at the model", func() bool { return countLast(model, "m-6d1") >= 1 })
	waitUntil(t, 60*time.Second, "po hibernated", func() bool { st, _ := status(); return st == "hibernated" })

	victim := c.owner(o.ID)
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.exited
	var taker *serverProc
	waitUntil(t, failoverBound, "the office on the other node", func() bool {
		taker = c.owner(o.ID)
		return taker != nil && taker != victim
	})
	time.Sleep(3 * time.Second) // an autostart would have begun by now
	if st, _ := status(); st != "hibernated" {
		t.Errorf("po is %q on the new owner with no work for it, want hibernated", st)
	}
	c.api(taker, "POST", "/api/offices/"+o.ID+"/messages", map[string]any{"agent": "po", "content": "Note m-7e2."}, nil)
	waitUntil(t, 120*time.Second, "the second message at the model", func() bool { return countLast(model, "m-7e2") >= 1 })
	if !c.runningUnder(o.ID, taker) {
		st, pid := status()
		t.Errorf("po (%s, pid %d) is not a process of the new owner", st, pid)
	}
	time.Sleep(2 * time.Second) // a second typing would show by now
	checkOnceResumed(t, model, "m-6d1", "m-7e2")
}

// checkOnceResumed: the model got first and second each once as a new
// prompt, and the request with second carries first (the conversation
// was resumed).
func checkOnceResumed(t *testing.T, model *anthropictest.Server, first, second string) {
	for _, tok := range []string{first, second} {
		if n := countLast(model, tok); n != 1 {
			t.Errorf("the model got %s as a new prompt %d times, want 1", tok, n)
		}
	}
	resumed := false
	for _, r := range model.MainRequests() {
		if strings.Contains(r.LastUserText(), second) {
			resumed = carries(r, first)
		}
	}
	if !resumed {
		t.Error("the request after the failover does not carry the first message: the conversation was not resumed")
	}
}
