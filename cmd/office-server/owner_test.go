package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/cluster"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/store/postgres"
	"github.com/office-server/office-server/store/sqlite"
)

// TestTwoServersSQLite runs the built binary twice on one data directory:
// the second refuses to start, naming the database and the first server's
// pid; the first keeps running its agents and nothing is doubled. After
// SIGTERM the session rows are final: stopped, pid 0.
func TestTwoServersSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildServer(t)
	data := t.TempDir()
	args := []string{"--office", "examples/demo-office.yaml", "--data-dir", data}
	first := launchServer(t, bin, nil, args...)
	first.waitHealthy(t)
	db := filepath.Join(data, "office.db")
	st, err := sqlite.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	o := waitOffice(t, st, first)

	second := launchServer(t, bin, nil, args...)
	select {
	case <-second.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("the second server still runs; logs:\n%s", second.stderr.String())
	}
	if second.err == nil {
		t.Fatalf("the second server exited with 0; logs:\n%s", second.stderr.String())
	}
	msg := second.stderr.String()
	t.Logf("second server (%v): %s", second.err, strings.TrimSpace(msg))
	for _, want := range []string{db, fmt.Sprintf("pid %d", first.cmd.Process.Pid)} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not name %q", want)
		}
	}

	// The first server runs on, alone: the same agents, one question.
	time.Sleep(2 * time.Second)
	first.waitHealthy(t)
	o.check(t, first)
	first.stop(t)
	o.final(t)
}

// TestTwoServersPostgres runs the built binary twice on one PostgreSQL
// database: the second runs none of the office's agents while the first
// holds its lease; when the first is killed (SIGKILL) the second takes the
// office over once the lease ran out (within lease + renew) and its agents
// run again; after the second's SIGTERM the session rows are final.
func TestTwoServersPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	url := testenv.NewDatabase(t)
	bin := buildServer(t)
	env := []string{"DATABASE_URL=" + url}
	first := launchServer(t, bin, env, "--office", "examples/demo-office.yaml", "--data-dir", t.TempDir())
	first.waitHealthy(t)
	st, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	o := waitOffice(t, st, first)

	second := launchServer(t, bin, env, "--office", "examples/demo-office.yaml", "--data-dir", t.TempDir())
	second.waitHealthy(t)
	waitUntil(t, 10*time.Second, "the second node up", func() bool {
		return strings.Contains(second.stderr.String(), "cluster node up")
	})
	time.Sleep(3 * cluster.DefaultRenew) // it places offices, and must leave this one
	o.check(t, first)
	if logs := second.stderr.String(); strings.Contains(logs, "took over office") || strings.Contains(logs, "running office") {
		t.Fatalf("the second server took the office while the first ran; logs:\n%s", logs)
	}

	// The owner dies without a word, at a random point of the second's
	// renewal cycle: the second takes over once the lease ran out.
	old := o.rows(t)
	time.Sleep(rand.N(cluster.DefaultRenew))
	killed := time.Now()
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	waitUntil(t, 30*time.Second, "the take-over", func() bool { return strings.Contains(second.stderr.String(), "took over office") })
	took := time.Since(killed)
	waitUntil(t, 30*time.Second, "the agents under the second server", func() bool {
		for _, r := range o.rows(t) {
			if r.PID == 0 || parentPID(r.PID) != second.cmd.Process.Pid {
				return false
			}
		}
		return true
	})
	running := time.Since(killed)
	waitUntil(t, 30*time.Second, "po's question under the second server", func() bool { return len(o.questions(t)) == 2 })
	asked := time.Since(killed)
	t.Logf("after SIGKILL of the owner: office taken in %v, agents running in %v, po asked again in %v (lease %v, renew %v)",
		took.Round(time.Millisecond), running.Round(time.Millisecond), asked.Round(time.Millisecond), cluster.DefaultLease, cluster.DefaultRenew)
	if limit := cluster.DefaultLease + cluster.DefaultRenew + 2*time.Second; took > limit {
		t.Errorf("the office was taken %v after the owner died, want within %v", took, limit)
	}
	for name, r := range old {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", r.PID)); err == nil && parentPID(r.PID) != 1 {
			t.Logf("note: %s's old process %d still exists", name, r.PID)
		}
	}

	second.stop(t)
	o.final(t)
}

// TestOfficeHandoverOnSIGTERM stops the owner cleanly while a second
// server waits: the second takes the office as soon as the first has
// stopped its agents and released the office, and nothing the first wrote
// late overwrites the second's session rows.
func TestOfficeHandoverOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	url := testenv.NewDatabase(t)
	bin := buildServer(t)
	env := []string{"DATABASE_URL=" + url}
	first := launchServer(t, bin, env, "--office", "examples/demo-office.yaml", "--data-dir", t.TempDir())
	first.waitHealthy(t)
	st, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	o := waitOffice(t, st, first)
	second := launchServer(t, bin, env, "--office", "examples/demo-office.yaml", "--data-dir", t.TempDir())
	second.waitHealthy(t)
	waitUntil(t, 10*time.Second, "the second node up", func() bool {
		return strings.Contains(second.stderr.String(), "cluster node up")
	})

	time.Sleep(rand.N(cluster.DefaultRenew)) // a random point of the second's renewal cycle
	stopped := time.Now()
	first.stop(t)
	waitUntil(t, 30*time.Second, "the take-over", func() bool { return strings.Contains(second.stderr.String(), "took over office") })
	took := time.Since(stopped)
	mine := func() bool {
		for _, r := range o.rows(t) {
			if r.PID == 0 || parentPID(r.PID) != second.cmd.Process.Pid {
				return false
			}
		}
		return true
	}
	waitUntil(t, 30*time.Second, "the agents under the second server", mine)
	t.Logf("after SIGTERM of the owner: office taken in %v, agents running in %v (renew %v)", took.Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond), cluster.DefaultRenew)
	if limit := 2*cluster.DefaultRenew + 5*time.Second; took > limit {
		t.Errorf("the office was taken %v after SIGTERM, want within %v: a stopping server hands its offices over", took, limit)
	}
	time.Sleep(cluster.DefaultRenew)
	if !mine() {
		t.Errorf("session rows changed under the second server: %+v", o.rows(t))
	}
	second.stop(t)
	o.final(t)
}

// TestServerLosesOfficeLease takes a running server's lease away in the
// database (as a node that took the office over would): the server stops
// the office's agents at its next renewal and writes nothing more for the
// office (the database would refuse it); once the lease is free again it
// takes the office back and its agents run again.
func TestServerLosesOfficeLease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	url := testenv.NewDatabase(t)
	bin := buildServer(t)
	srv := launchServer(t, bin, []string{"DATABASE_URL=" + url}, "--office", "examples/demo-office.yaml", "--data-dir", t.TempDir())
	srv.waitHealthy(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	o := waitOffice(t, st, srv)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })

	before := o.rows(t)
	if _, err := conn.Exec(ctx, `update office_cluster.leases set node_id = 'thief', token = token + 1, expires_at = now() + interval '1 hour' where office_id = $1`, o.id); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 2*cluster.DefaultRenew+2*time.Second, "the server to give the office up", func() bool { return strings.Contains(srv.stderr.String(), "office lost") })
	waitUntil(t, 10*time.Second, "the agents to stop", func() bool {
		for _, r := range before {
			if parentPID(r.PID) == srv.cmd.Process.Pid {
				return false
			}
		}
		return true
	})
	time.Sleep(2 * cluster.DefaultRenew)
	if qs := o.questions(t); len(qs) != 1 {
		t.Errorf("po asked %d questions while the office was not the server's, want 1", len(qs))
	}
	for name, r := range o.rows(t) {
		if r.PID != before[name].PID {
			t.Errorf("%s's row was written (pid %d, status %s) while the office was not the server's", name, r.PID, r.Status)
		}
	}

	// The lease is free again: the server takes the office back.
	if _, err := conn.Exec(ctx, `update office_cluster.leases set expires_at = now() where office_id = $1`, o.id); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the office taken back", func() bool { return strings.Contains(srv.stderr.String(), "took over office") })
	waitUntil(t, 20*time.Second, "the agents running again", func() bool {
		rows := o.rows(t)
		for name, r := range rows {
			if r.PID == 0 || r.PID == before[name].PID || parentPID(r.PID) != srv.cmd.Process.Pid {
				return false
			}
		}
		return len(rows) == 2 && len(o.questions(t)) == 2
	})
	srv.stop(t)
	o.final(t)
}

// watchedOffice is the demo office as a test reads it from the store.
type watchedOffice struct {
	st     office.Store
	id     string
	agents map[string]string // id → name
	po     string
}

// waitOffice waits until srv runs the demo office's agents and po has
// asked its question.
func waitOffice(t *testing.T, st office.Store, srv *serverProc) *watchedOffice {
	t.Helper()
	ctx := context.Background()
	o := &watchedOffice{st: st, agents: map[string]string{}}
	waitUntil(t, 30*time.Second, "the demo office", func() bool {
		offs, err := st.ListOffices(ctx)
		if err != nil || len(offs) != 1 {
			return false
		}
		agents, err := st.ListAgents(ctx, offs[0].ID)
		if err != nil || len(agents) != 2 {
			return false
		}
		o.id = offs[0].ID
		for _, a := range agents {
			o.agents[a.ID] = a.Name
			if a.Name == "po" {
				o.po = a.ID
			}
		}
		return true
	})
	waitUntil(t, 30*time.Second, "po's question and both agents running", func() bool {
		rows := o.rows(t)
		if len(rows) != 2 || len(o.questions(t)) != 1 {
			return false
		}
		for _, r := range rows {
			if r.PID == 0 || parentPID(r.PID) != srv.cmd.Process.Pid {
				return false
			}
		}
		return true
	})
	return o
}

// rows returns the office's session rows by agent name.
func (o *watchedOffice) rows(t *testing.T) map[string]office.SessionRecord {
	t.Helper()
	recs, err := o.st.ListSessions(context.Background(), o.id)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]office.SessionRecord{}
	for _, r := range recs {
		m[o.agents[r.AgentID]] = r
	}
	return m
}

// questions returns the questions po asked.
func (o *watchedOffice) questions(t *testing.T) []office.Question {
	t.Helper()
	qs, err := o.st.ListQuestions(context.Background(), office.QuestionFilter{OfficeID: o.id, AgentID: o.po})
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

// check says that srv alone runs the office: one question from po, every
// agent's row a live process of srv's.
func (o *watchedOffice) check(t *testing.T, srv *serverProc) {
	t.Helper()
	if qs := o.questions(t); len(qs) != 1 {
		t.Errorf("po asked %d questions, want 1 (one po)", len(qs))
	}
	rows := o.rows(t)
	if len(rows) != 2 {
		t.Errorf("%d session rows, want 2", len(rows))
	}
	for name, r := range rows {
		if r.PID == 0 || parentPID(r.PID) != srv.cmd.Process.Pid {
			t.Errorf("%s: session %s pid %d, not a process of the server (pid %d)", name, r.Status, r.PID, srv.cmd.Process.Pid)
		}
	}
}

// final says that every session row is final after a clean stop.
func (o *watchedOffice) final(t *testing.T) {
	t.Helper()
	for name, r := range o.rows(t) {
		if r.Status != office.SessionStopped || r.PID != 0 {
			t.Errorf("%s after SIGTERM: status %s pid %d, want stopped and 0", name, r.Status, r.PID)
		}
	}
}

// parentPID returns the parent of process pid, 0 when there is none.
func parentPID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // state, ppid, …
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func waitUntil(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
