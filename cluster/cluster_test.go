package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/office-server/office-server/cluster"
	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/migrations"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
)

// recorder is a cluster.Runner that records which offices run here.
type recorder struct {
	mu      sync.Mutex
	running map[string]bool
	takes   int
}

func (r *recorder) Take(_ context.Context, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running[id] = true
	r.takes++
}

func (r *recorder) Drop(_ context.Context, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, id)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.running)
}

func (r *recorder) has(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[id]
}

// database returns a migrated database with n offices and a pool on it.
func database(t *testing.T, n int) (*pgxpool.Pool, []string) {
	t.Helper()
	ctx := context.Background()
	url := testenv.NewDatabase(t)
	if _, err := migrations.ApplyURL(ctx, url); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var ids []string
	err = pool.QueryRow(ctx, `
		with o as (insert into public.offices (name) select 'office ' || i from generate_series(1, $1) i returning id)
		select array_agg(id::text) from o`, n).Scan(&ids)
	if err != nil {
		t.Fatal(err)
	}
	return pool, ids
}

type runningNode struct {
	node   *cluster.Node
	rec    *recorder
	cancel context.CancelFunc
	done   chan struct{}
}

func startNode(t *testing.T, pool *pgxpool.Pool, cfg cluster.Config) *runningNode {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	rn := &runningNode{node: cluster.New(pool, cfg), rec: &recorder{running: map[string]bool{}}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(rn.done)
		if err := rn.node.Run(ctx, rn.rec); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { rn.stop() })
	return rn
}

func (rn *runningNode) stop() {
	rn.cancel()
	<-rn.done
}

func waitFor(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkOnce fails unless every office runs on exactly one node.
func checkOnce(t *testing.T, ids []string, nodes ...*runningNode) {
	t.Helper()
	for _, id := range ids {
		n := 0
		for _, rn := range nodes {
			if rn.rec.has(id) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("office %s runs on %d nodes", id, n)
		}
	}
}

// TestThousandOfficesOnThreeNodes is the load test: 1,000 offices, three
// nodes started together. Every office runs on exactly one node, the
// shares are fair, and the lease renewals cost one statement per node per
// period, whatever the number of offices: it states the writes per second.
// A stopped node's offices go to the two others at once (released).
func TestThousandOfficesOnThreeNodes(t *testing.T) {
	pool, ids := database(t, 1000)
	cfg := cluster.Config{Lease: 2 * time.Second, Renew: 500 * time.Millisecond}
	var nodes []*runningNode
	for range 3 {
		nodes = append(nodes, startNode(t, pool, cfg))
	}
	total := func() int { return nodes[0].rec.count() + nodes[1].rec.count() + nodes[2].rec.count() }
	waitFor(t, 30*time.Second, "1,000 offices placed, fairly", func() bool {
		for _, rn := range nodes {
			if c := rn.rec.count(); c < 330 || c > 340 {
				return false
			}
		}
		return total() == 1000
	})
	checkOnce(t, ids, nodes...)

	// Steady state: count the statements and the rows written.
	ctx := context.Background()
	var before, after [3]int64
	var upd0, upd1 int64
	rowsUpdated := func() int64 {
		var n int64
		if err := pool.QueryRow(ctx, `select pg_stat_get_tuples_updated('office_cluster.leases'::regclass) + pg_stat_get_xact_tuples_updated('office_cluster.leases'::regclass)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i, rn := range nodes {
		before[i] = rn.node.Stats().Renewals.Load() + rn.node.Stats().Takes.Load() + rn.node.Stats().Releases.Load()
	}
	upd0 = rowsUpdated()
	const span = 5 * time.Second
	time.Sleep(span)
	for i, rn := range nodes {
		after[i] = rn.node.Stats().Renewals.Load() + rn.node.Stats().Takes.Load() + rn.node.Stats().Releases.Load()
	}
	time.Sleep(time.Second) // statistics reach the collector late
	upd1 = rowsUpdated()
	var stmts int64
	for i := range nodes {
		stmts += after[i] - before[i]
	}
	perSec := float64(stmts) / span.Seconds()
	want := 3 / cfg.Renew.Seconds()
	t.Logf("1,000 offices on 3 nodes, renewal every %v: %.1f lease-writing statements/s (want %.1f: one per node per period), about %.0f lease rows updated/s",
		cfg.Renew, perSec, want, float64(upd1-upd0)/span.Seconds())
	if perSec > want*1.3 {
		t.Errorf("%.1f lease statements/s, want about %.1f", perSec, want)
	}
	checkOnce(t, ids, nodes...)

	// A node that stops hands its offices over: the others run them
	// within a period or two, not after the lease.
	had := nodes[2].rec.count()
	stopped := time.Now()
	nodes[2].stop()
	waitFor(t, 10*time.Second, "the stopped node's offices on the others", func() bool {
		return nodes[0].rec.count()+nodes[1].rec.count() == 1000
	})
	t.Logf("node stopped (SIGTERM path): its %d offices running on the others after %v", had, time.Since(stopped).Round(time.Millisecond))
	checkOnce(t, ids, nodes[0], nodes[1])
}

// TestCapacityAndNewNode: a node takes no more agents than its capacity;
// a node that comes later gets a fair share from the others.
func TestCapacityAndNewNode(t *testing.T) {
	pool, ids := database(t, 30)
	cfg := cluster.Config{Lease: 2 * time.Second, Renew: 300 * time.Millisecond}
	small := cfg
	small.Capacity = 4
	a := startNode(t, pool, small)
	waitFor(t, 10*time.Second, "the small node full", func() bool { return a.rec.count() == 4 })
	time.Sleep(2 * cfg.Lease)
	if c := a.rec.count(); c != 4 {
		t.Fatalf("a node of capacity 4 runs %d one-agent offices", c)
	}
	b := startNode(t, pool, cfg)
	waitFor(t, 10*time.Second, "every office placed", func() bool { return a.rec.count()+b.rec.count() == 30 })
	c := startNode(t, pool, cfg)
	waitFor(t, 20*time.Second, "the new node's share", func() bool {
		return c.rec.count() == 13 && b.rec.count() == 13 && a.rec.count() == 4
	})
	checkOnce(t, ids, a, b, c)
	t.Logf("capacity 4, then two nodes without a limit: %d, %d, %d", a.rec.count(), b.rec.count(), c.rec.count())

	// Draining hands b's offices to c (a is full) and takes none back.
	if err := b.node.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "b's offices on c", func() bool { return b.rec.count() == 0 && c.rec.count() == 26 })
	time.Sleep(3 * cfg.Renew)
	if b.rec.count() != 0 {
		t.Fatalf("a draining node took %d offices back", b.rec.count())
	}
	checkOnce(t, ids, a, c)
}

// TestFence: the database refuses what a node does for an office whose
// lease it does not hold (a session row, a delivery), and accepts it from
// the holder.
func TestFence(t *testing.T) {
	pool, ids := database(t, 1)
	ctx := context.Background()
	office := ids[0]
	var agent string
	if err := pool.QueryRow(ctx, `insert into public.office_agents (office_id, name, role) values ($1, 'po', 'po') returning id::text`, office).Scan(&agent); err != nil {
		t.Fatal(err)
	}
	write := func(node string) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `select set_config('office.node', $1, true)`, node); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `insert into public.agent_sessions (office_id, agent_id, node, status) values ($1, $2, $3, 'starting')
			on conflict (agent_id) do update set node = excluded.node`, office, agent, node); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	if _, err := pool.Exec(ctx, `insert into office_cluster.leases (office_id, node_id, expires_at) values ($1, 'a', now() + interval '1 hour')`, office); err != nil {
		t.Fatal(err)
	}
	if err := write("a"); err != nil {
		t.Fatalf("the holder's write was refused: %v", err)
	}
	err := write("b")
	if err == nil || !strings.Contains(err.Error(), "fenced") {
		t.Fatalf("another node's write: %v, want fenced", err)
	}
	t.Logf("refused: %v", err)
	if _, err := pool.Exec(ctx, `update office_cluster.leases set expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if err := write("a"); err == nil {
		t.Fatal("the holder of an expired lease could still write")
	}
	if err := write(""); err != nil {
		t.Fatalf("an unnamed connection (the frontend, a tool) was fenced: %v", err)
	}
}

// TestTranscriptTravels: a transcript followed on one node is in the
// database line by line, and restored on another where it is missing.
func TestTranscriptTravels(t *testing.T) {
	pool, ids := database(t, 1)
	ctx := context.Background()
	var agent string
	if err := pool.QueryRow(ctx, `insert into public.office_agents (office_id, name, role) values ($1, 'dev', 'dev') returning id::text`, ids[0]).Scan(&agent); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(t.TempDir(), "projects", "a", "conv.jsonl")
	if err := os.MkdirAll(filepath.Dir(old), 0o700); err != nil {
		t.Fatal(err)
	}
	tr := cluster.NewTranscripts(pool, nil)
	tr.Follow(ids[0], agent, "conv", old)
	var want strings.Builder
	f, err := os.Create(old)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		line := fmt.Sprintf(`{"type":"user","n":%d,"text":"질문 %d"}`, i, i)
		want.WriteString(line + "\n")
		if _, err := f.WriteString(line + "\n"); err != nil {
			t.Fatal(err)
		}
		tr.Sync(ctx, "")
	}
	if _, err := f.WriteString(`{"partial":`); err != nil { // not yet a line
		t.Fatal(err)
	}
	f.Close()
	tr.Forget(ctx, ids[0])

	tr2 := cluster.NewTranscripts(pool, nil)
	fresh := filepath.Join(t.TempDir(), "projects", "b", "conv.jsonl")
	restored, err := tr2.Restore(ctx, agent, "conv", fresh)
	if err != nil || !restored {
		t.Fatalf("restore: %v, %v", restored, err)
	}
	got, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want.String() {
		t.Fatalf("restored transcript:\n%s\nwant:\n%s", got, want.String())
	}
	if again, err := tr2.Restore(ctx, agent, "conv", fresh); err != nil || again {
		t.Fatalf("a complete local transcript was written again: %v, %v", again, err)
	}
}

// TestCrashedNodeOffices: a node that stops renewing (its database
// connections gone, nothing released) loses its offices to the others
// within lease + renew, whatever their shares (offices of one and of two
// agents, as in TestClusterFailover).
func TestCrashedNodeOffices(t *testing.T) {
	pool, ids := database(t, 4)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `insert into public.office_agents (office_id, name, role) select id, n, n from public.offices, unnest(array['a', 'b']) n where id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[1:] {
		if _, err := pool.Exec(ctx, `insert into public.office_agents (office_id, name, role) values ($1, 'c', 'c')`, id); err != nil {
			t.Fatal(err)
		}
	}
	cfg := cluster.Config{Lease: 3 * time.Second, Renew: time.Second}
	if testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	for round := range 4 {
		var nodes []*runningNode
		var pools []*pgxpool.Pool
		for range 3 {
			p, err := pgxpool.New(ctx, pool.Config().ConnString())
			if err != nil {
				t.Fatal(err)
			}
			pools = append(pools, p)
			nodes = append(nodes, startNode(t, p, cfg))
		}
		waitFor(t, 20*time.Second, "placed", func() bool {
			return nodes[0].rec.count()+nodes[1].rec.count()+nodes[2].rec.count() == 4 && nodes[0].rec.count() > 0 && nodes[1].rec.count() > 0 && nodes[2].rec.count() > 0
		})
		time.Sleep(3 * cfg.Renew)
		victim := round % 3
		lost := nodes[victim].rec.count()
		pools[victim].Close() // crash: no renewal, no release
		crashed := time.Now()
		nodes[victim].stop()
		var rest []*runningNode
		for i, rn := range nodes {
			if i != victim {
				rest = append(rest, rn)
			}
		}
		waitFor(t, 5*cfg.Lease, "the crashed node's offices elsewhere", func() bool { return rest[0].rec.count()+rest[1].rec.count() == 4 })
		took := time.Since(crashed)
		t.Logf("round %d: %d offices taken %v after the crash (bound %v)", round, lost, took.Round(time.Millisecond), cfg.Lease+cfg.Renew)
		// Lease + renew, and one more period for a loaded machine. It took
		// lease + 3 renew when the node under its share had given the office
		// away before the victim took it (TestGivenAwayThenOrphaned).
		if took > cfg.Lease+2*cfg.Renew {
			t.Errorf("round %d: taken after %v, want within %v", round, took, cfg.Lease+2*cfg.Renew)
		}
		for i, rn := range nodes {
			if i != victim {
				rn.stop()
			}
			pools[i].Close()
		}
		if _, err := pool.Exec(ctx, `delete from office_cluster.leases`); err != nil {
			t.Fatal(err)
		}
	}
}

// twoOfficesOnA starts node a (lease 4 s, renew 1 s) on a database of two
// offices without agents (each weighs 1) and waits until it runs both.
func twoOfficesOnA(t *testing.T) (*pgxpool.Pool, cluster.Config, *runningNode) {
	t.Helper()
	pool, _ := database(t, 2)
	cfg := cluster.Config{Lease: 4 * time.Second, Renew: time.Second}
	a := startNode(t, pool, cfg)
	waitFor(t, 10*time.Second, "both offices on a", func() bool { return a.rec.count() == 2 })
	return pool, cfg, a
}

// TestGivenAwayThenOrphaned: a node that gave an office away (it was
// above its share) takes it back as soon as it is free again if another
// node took it since and died, not three leases later. Node b is rows: a
// heartbeat that makes node a give one of its two offices, then a take of
// that office and no renewal (its heartbeat ages out as its lease ends).
func TestGivenAwayThenOrphaned(t *testing.T) {
	pool, cfg, a := twoOfficesOnA(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `insert into office_cluster.nodes (node_id, started_at) values ('b', now() - interval '1 minute')`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "one office given to b", func() bool { return a.rec.count() == 1 })
	tag, err := pool.Exec(ctx, `
		with hb as (update office_cluster.nodes set heartbeat = now() - interval '3 seconds' where node_id = 'b')
		update office_cluster.leases set node_id = 'b', token = token + 1, expires_at = now() + interval '1 second', taken_at = now()
		where expires_at <= now()`)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("b takes the office: %v, %v", tag, err)
	}
	gaveAt := time.Now()
	waitFor(t, 15*time.Second, "the office back on a", func() bool { return a.rec.count() == 2 })
	took := time.Since(gaveAt)
	t.Logf("b's office on a %v after b took it with a 1 s lease it never renewed", took.Round(time.Millisecond))
	// Its lease runs out after 1 s; a takes it at its next period.
	if took > 1*time.Second+2*cfg.Renew {
		t.Errorf("taken back after %v, want within %v: what a gave away was refused after another node held it", took, time.Second+2*cfg.Renew)
	}
}

// TestHandedToNodeThatNeverTakes: a node above its share hands an office
// to a node under it that never takes it (node b is a row: up a minute,
// one heartbeat, then nothing); the office is back on the node that gave
// it after two periods free, not three leases later, and b, silent
// since, is not handed it again. A node just started (c) is handed
// nothing: it may die before it takes.
func TestHandedToNodeThatNeverTakes(t *testing.T) {
	pool, cfg, a := twoOfficesOnA(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `insert into office_cluster.nodes (node_id) values ('c')`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * cfg.Renew)
	if n := a.rec.count(); n != 2 {
		t.Fatalf("a runs %d offices after a node just started came, want 2: handed to a node that may die before it takes", n)
	}
	if _, err := pool.Exec(ctx, `delete from office_cluster.nodes where node_id = 'c';
		insert into office_cluster.nodes (node_id, started_at) values ('b', now() - interval '1 minute')`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "one office handed to b", func() bool { return a.rec.count() == 1 })
	gave := time.Now()
	waitFor(t, 15*time.Second, "the office back on a", func() bool { return a.rec.count() == 2 })
	took := time.Since(gave)
	t.Logf("the office b never took back on a %v after it was handed over", took.Round(time.Millisecond))
	if took > 4*cfg.Renew {
		t.Errorf("back after %v, want within %v (two periods free, then a period): refused for three leases", took, 4*cfg.Renew)
	}
	time.Sleep(2 * cfg.Renew)
	if n := a.rec.count(); n != 2 {
		t.Errorf("a runs %d offices, want 2: handed again to b, which has not renewed for %v", n, time.Since(gave))
	}
}

// TestLostSignalled: what acts for an office (a Send waiting for its
// agent) is told as soon as the node sees the lease gone, and Owns says
// so; an office never held is lost from the start.
func TestLostSignalled(t *testing.T) {
	pool, ids := database(t, 1)
	cfg := cluster.Config{Lease: 3 * time.Second, Renew: 500 * time.Millisecond}
	rn := startNode(t, pool, cfg)
	waitFor(t, 10*time.Second, "the office taken", func() bool { return rn.rec.count() == 1 })
	lost := rn.node.Lost(ids[0])
	select {
	case <-lost:
		t.Fatal("lost while held")
	default:
	}
	select {
	case <-rn.node.Lost("00000000-0000-0000-0000-000000000000"):
	default:
		t.Fatal("an office never held is not lost")
	}
	if _, err := pool.Exec(context.Background(), `update office_cluster.leases set node_id = 'other', token = token + 1`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(3 * cfg.Renew):
		t.Fatal("the loss was not signalled within a renewal")
	}
	if rn.node.Owns(ids[0]) {
		t.Fatal("Owns after the loss")
	}
	waitFor(t, 5*time.Second, "the office dropped", func() bool { return rn.rec.count() == 0 })
}

// quietRecorder is a recorder whose offices end their turns only when
// told (cluster.Quieter).
type quietRecorder struct {
	*recorder
	turnEnds chan struct{}
}

func (q quietRecorder) Quiet(ctx context.Context, _ string) {
	select {
	case <-q.turnEnds:
	case <-ctx.Done():
	}
}

// TestHandOverWaitsForTheTurn: a draining node keeps the lease of an
// office whose agent is in its turn (nothing new is done for it: Owns is
// false, and no other node runs it), and hands it over once the turn ends.
func TestHandOverWaitsForTheTurn(t *testing.T) {
	pool, ids := database(t, 1)
	cfg := cluster.Config{Lease: 2 * time.Second, Renew: 300 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	a := &runningNode{node: cluster.New(pool, cfg), rec: &recorder{running: map[string]bool{}}, cancel: cancel, done: make(chan struct{})}
	q := quietRecorder{recorder: a.rec, turnEnds: make(chan struct{})}
	go func() {
		defer close(a.done)
		_ = a.node.Run(ctx, q)
	}()
	t.Cleanup(a.stop)
	waitFor(t, 10*time.Second, "a runs the office", func() bool { return a.rec.count() == 1 })
	b := startNode(t, pool, cfg)
	if err := a.node.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "Owns false while draining", func() bool { return !a.node.Owns(ids[0]) })
	time.Sleep(2 * cfg.Lease) // longer than a lease: a keeps renewing it
	if b.rec.count() != 0 || a.rec.count() != 1 {
		t.Fatalf("the office moved during its agent's turn (a %d, b %d)", a.rec.count(), b.rec.count())
	}
	close(q.turnEnds)
	waitFor(t, 5*time.Second, "the office on b", func() bool { return b.rec.count() == 1 && a.rec.count() == 0 })
}

// started records the agents the wrapped sessions were asked to start.
type started struct {
	engine.Sessions
	mu  sync.Mutex
	ids []string
}

func (s *started) Start(_ context.Context, spec engine.SessionSpec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, spec.AgentID)
	return nil
}

// TestMissingWorkingFolder: an agent that ran before, whose launch.dir is
// missing on the node that takes its office, is not started in an empty
// folder: its session is marked stopped with the reason. A first start
// (no conversation yet) goes ahead.
func TestMissingWorkingFolder(t *testing.T) {
	pool, ids := database(t, 1)
	rn := startNode(t, pool, cluster.Config{NodeID: "alone", Lease: 2 * time.Second, Renew: 500 * time.Millisecond})
	waitFor(t, 5*time.Second, "the office leased", func() bool { return rn.node.Owns(ids[0]) })
	type report struct {
		status session.Status
		info   session.Info
	}
	var reported []report
	inner := &started{}
	s := &cluster.Sessions{Sessions: inner, Node: rn.node, Transcripts: cluster.NewTranscripts(pool, nil),
		Report: func(_ session.Key, st session.Status, info session.Info) {
			reported = append(reported, report{st, info})
		}}
	dir := filepath.Join(t.TempDir(), "volume", "dev")
	spec := engine.SessionSpec{OfficeID: ids[0], AgentID: "a1", Launch: office.LaunchSpec{Kind: "command", Dir: dir}, Dir: dir, ConversationID: "c1", Resume: true}

	err := s.Start(context.Background(), spec)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("resume with the folder missing: %v, want an error naming the folder", err)
	}
	if len(reported) != 1 || reported[0].status != office.SessionStopped || !strings.Contains(reported[0].info.Detail, dir) {
		t.Fatalf("reported %+v, want one stopped status naming the folder", reported)
	}
	if len(inner.ids) != 0 {
		t.Fatalf("started %v in a missing folder", inner.ids)
	}

	spec.Resume = false // a first start: the folder is the agent's to create
	if err := s.Start(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	spec.Resume = true // the volume is there now
	if err := s.Start(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if len(inner.ids) != 2 || len(reported) != 1 {
		t.Fatalf("started %d times and reported %d, want 2 and 1", len(inner.ids), len(reported))
	}
}

// TestKindNotCarriedSaid: a Codex (Gemini CLI, Qwen Code) agent resumed on a
// node is said, once, not to carry its conversation from another node;
// a Claude Code or command agent is not.
func TestKindNotCarriedSaid(t *testing.T) {
	pool, ids := database(t, 1)
	var logs strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rn := startNode(t, pool, cluster.Config{NodeID: "alone", Lease: 2 * time.Second, Renew: 500 * time.Millisecond, Logger: logger})
	waitFor(t, 5*time.Second, "the office leased", func() bool { return rn.node.Owns(ids[0]) })
	s := &cluster.Sessions{Sessions: &started{}, Node: rn.node, Transcripts: cluster.NewTranscripts(pool, nil)}
	for _, kind := range []string{"codex", "codex", "command"} {
		spec := engine.SessionSpec{OfficeID: ids[0], AgentID: kind, Launch: office.LaunchSpec{Kind: kind}, Dir: t.TempDir(), ConversationID: "c1", Resume: true}
		if err := s.Start(context.Background(), spec); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	got := logs.String()
	mu.Unlock()
	if n := strings.Count(got, "not carried between nodes"); n != 1 || !strings.Contains(got, "kind=codex") {
		t.Errorf("said %d times (want once, for the codex agent):\n%s", n, got)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestCutOffNodeStopsFirst: a node that can no longer reach the database
// (a network partition, not a crash: it keeps running) gives its offices
// up on its own clock before their leases run out on the database's, so
// the node that takes them over never runs them at the same time.
func TestCutOffNodeStopsFirst(t *testing.T) {
	pool, ids := database(t, 2)
	ctx := context.Background()
	cfg := cluster.Config{Lease: 3 * time.Second, Renew: 500 * time.Millisecond}
	cut, err := pgxpool.New(ctx, pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	a := startNode(t, cut, cfg)
	waitFor(t, 10*time.Second, "a runs both offices", func() bool { return a.rec.count() == 2 })
	b := startNode(t, pool, cfg)
	time.Sleep(3 * cfg.Renew) // b is known, a keeps its offices (a fair share of 1 each moves one)
	type seen struct{ aGaveUp, bTook time.Time }
	at := map[string]*seen{}
	for _, id := range ids {
		if a.rec.has(id) {
			at[id] = &seen{}
		}
	}
	if len(at) == 0 {
		t.Fatal("a runs no office")
	}
	cut.Close() // a's renewals fail from now on
	cutAt := time.Now()
	waitFor(t, 3*cfg.Lease, "b runs a's offices", func() bool {
		done := true
		for id, s := range at {
			if s.aGaveUp.IsZero() && !a.node.Owns(id) && !a.rec.has(id) {
				s.aGaveUp = time.Now()
			}
			if s.bTook.IsZero() && b.rec.has(id) {
				s.bTook = time.Now()
			}
			done = done && !s.bTook.IsZero()
		}
		return done
	})
	for id, s := range at {
		t.Logf("office %s: a gave it up %v after the cut, b ran it %v after", id, s.aGaveUp.Sub(cutAt).Round(time.Millisecond), s.bTook.Sub(cutAt).Round(time.Millisecond))
		if s.aGaveUp.IsZero() || !s.aGaveUp.Before(s.bTook) {
			t.Errorf("office %s: b ran it while a still did (a gave up at %v, b took at %v after the cut)", id, s.aGaveUp.Sub(cutAt), s.bTook.Sub(cutAt))
		}
	}
}

// TestCapacityCountsLiveAgents: an office weighs its agents that are not
// hibernated, so a node of capacity 6 takes one office of four live agents
// and two whose four agents all hibernate.
func TestCapacityCountsLiveAgents(t *testing.T) {
	pool, ids := database(t, 3)
	ctx := context.Background()
	for i, id := range ids {
		var agents []string
		err := pool.QueryRow(ctx, `with a as (insert into public.office_agents (office_id, name)
			select $1, 'a' || i from generate_series(1, 4) i returning id) select array_agg(id::text) from a`, id).Scan(&agents)
		if err != nil {
			t.Fatal(err)
		}
		status := "hibernated"
		if i == 0 {
			status = "ready"
		}
		for _, a := range agents {
			if _, err := pool.Exec(ctx, `insert into public.agent_sessions (office_id, agent_id, status) values ($1, $2, $3)`, id, a, status); err != nil {
				t.Fatal(err)
			}
		}
	}
	small := cluster.Config{Lease: 2 * time.Second, Renew: 300 * time.Millisecond, Capacity: 6}
	a := startNode(t, pool, small)
	waitFor(t, 10*time.Second, "every office on the node", func() bool { return a.rec.count() == 3 })
	checkOnce(t, ids, a)
}
