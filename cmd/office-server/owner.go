package main

// One owner per office (docs/protocol.md, Guarantees): two servers must never run the same
// agents. How depends on the store:
//
//   - SQLite: the server holds an exclusive flock on <db>.lock for its
//     whole life; a second server on the same file refuses to start. The
//     kernel drops the lock when the process dies, however it dies.
//   - PostgreSQL: the server is a cluster node: it holds a lease per office
//     it runs, renewed in one statement per period, with a fencing token
//     (package cluster, docs/notes/cluster.md). Any number of servers
//     share the offices.
//   - Supabase over REST: no lock primitive; a warning.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/office-server/office-server/agents"
	"github.com/office-server/office-server/cluster"
	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
	"github.com/office-server/office-server/store/rostercache"
)

// lockSQLite takes an exclusive lock on dbPath+".lock" and writes this
// process's pid into it; the lock is held until the returned file is
// closed or the process ends. When another process holds it, the error
// names the database and that process's pid.
func lockSQLite(dbPath string) (io.Closer, error) {
	path := dbPath + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := io.ReadAll(io.LimitReader(f, 64))
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		who := "another office-server"
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			who = fmt.Sprintf("another office-server (pid %d)", pid)
		}
		return nil, fmt.Errorf("%s already serves %s: stop it, or give this server another --data-dir (lock: %s)", who, dbPath, path)
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return f, nil
}

// owner decides which offices this server runs. With PostgreSQL it is a
// cluster node holding a lease per office (package cluster); otherwise
// every office is this server's (SQLite: the file lock keeps other servers
// out).
type owner struct {
	log         *slog.Logger
	node        *cluster.Node        // nil: every office is this server's
	transcripts *cluster.Transcripts // with node
	// router records the statuses of agents the node refuses to start
	// (cluster.Sessions.Report); set once the router exists.
	router atomic.Pointer[engine.Router]
}

// newOwner returns the owner for c's store, warning where nothing protects
// an office from a second server. With PostgreSQL, attach gives it the
// node once the store is open.
func newOwner(c serveConfig, log *slog.Logger) *owner {
	if c.storeKind() == "supabase" {
		log.Warn("with SUPABASE_URL and no DATABASE_URL nothing keeps a second server from running the same offices: run one server per Supabase project, or set DATABASE_URL (the project's direct connection) in place of the API key so that offices are leased (docs/deploy-supabase.md)")
	}
	return &owner{log: log}
}

// attach makes the owner a cluster node on pool.
func (w *owner) attach(pool *pgxpool.Pool, cfg cluster.Config) {
	cfg.Logger = w.log
	w.node = cluster.New(pool, cfg)
	w.transcripts = cluster.NewTranscripts(pool, w.log)
}

// registerMetrics adds the cluster node's lease metrics to reg (a
// cluster node only): the leases held now, gained and lost.
func (w *owner) registerMetrics(reg prometheus.Registerer) {
	if w.node == nil {
		return
	}
	st := w.node.Stats()
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "office_leases_held", Help: "Offices this node holds the lease of, and runs, now."},
			func() float64 { return float64(len(w.node.Owned())) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "office_leases_gained_total", Help: "Leases this node took: offices it started to run (at start, after a restart, taken over from a node that stopped)."},
			func() float64 { return float64(st.Gained.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "office_leases_lost_total", Help: "Leases this node lost: another node held the office when this one renewed, so its agents here were stopped."},
			func() float64 { return float64(st.Lost.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "office_leases_released_total", Help: "Lease release statements this node sent: offices handed over (placement, shutdown)."},
			func() float64 { return float64(st.Releases.Load()) }),
	)
}

// nodeName is the name this server records in agent_sessions.node: the
// cluster node's id, else c.Node (empty: a single server without a name).
func (w *owner) nodeName(c serveConfig) string {
	if w.node != nil {
		return w.node.ID()
	}
	return c.Node
}

// owns is engine.Config.Owns: nil when every office is this server's.
func (w *owner) owns() func(officeID string) bool {
	if w.node == nil {
		return nil
	}
	return w.node.Owns
}

// wrap is agents.Options.Wrap: on a node, nothing is started in or typed
// into an agent of an office the node does not hold, and Claude Code
// transcripts travel through the database.
func (w *owner) wrap(stateDir string) func(engine.Sessions) engine.Sessions {
	if w.node == nil {
		return nil
	}
	return func(s engine.Sessions) engine.Sessions {
		report := func(c engine.StatusChange) {
			if r := w.router.Load(); r != nil {
				r.HandleStatus(c)
			}
		}
		return &cluster.Sessions{Sessions: s, Node: w.node, Transcripts: w.transcripts, StateDir: stateDir, Report: report}
	}
}

// drain hands this node's offices over (their agents end their turns
// first) and returns once it holds none, or when ctx ends. Without a node,
// or when no other node could take the offices, it does nothing: the
// shutdown stops the agents here and marks them stopped.
func (w *owner) drain(ctx context.Context) {
	if w.node == nil {
		return
	}
	if !w.node.HasPeer(ctx) {
		w.log.Info("no other node to hand the offices to: stopping their agents here")
		return
	}
	if err := w.node.Drain(ctx); err != nil {
		w.log.Warn("drain", "err", err)
		return
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for len(w.node.Owned()) > 0 {
		select {
		case <-ctx.Done():
			w.log.Warn("shutting down before every office was handed over", "left", len(w.node.Owned()))
			return
		case <-t.C:
		}
	}
	w.log.Info("offices handed over")
}

// run takes the offices this server may run, starting their agents with r,
// until ctx ends. On a node it renews its leases and places offices
// (cluster.Node.Run); when ctx ends it releases them: end ctx only after
// the agents were stopped and their final statuses written.
func (w *owner) run(ctx context.Context, r officeRunner) {
	if w.node == nil {
		offices, err := r.store.ListOffices(ctx)
		if err != nil {
			w.log.Warn("list offices: agents not started", "err", err)
			return
		}
		for _, o := range offices {
			r.take(ctx, o.ID)
		}
		return
	}
	r.transcripts = w.transcripts
	done := make(chan struct{})
	go func() { defer close(done); w.transcripts.Run(ctx) }()
	if err := w.node.Run(ctx, r); err != nil {
		w.log.Error("cluster node", "err", err)
	}
	<-done
}

// officeRunner starts an office's agents when this server takes it, and
// stops them when it loses it; the policy is the router's (TakeOffice).
type officeRunner struct {
	router    *engine.Router
	store     office.Store
	sess      *agents.Sessions
	declared  []office.Agent // the office file's agents
	autostart bool
	log       *slog.Logger

	transcripts *cluster.Transcripts // on a node
}

// Take is cluster.Runner's: the office is this server's now.
func (r officeRunner) Take(ctx context.Context, officeID string) { r.take(ctx, officeID) }

// Drop is cluster.Runner's: the office is not this server's any more; its
// agents are stopped and their transcripts' last lines kept.
func (r officeRunner) Drop(ctx context.Context, officeID string) {
	r.drop(ctx, officeID)
	if r.transcripts != nil {
		r.transcripts.Forget(ctx, officeID)
	}
}

// Quiet is cluster.Quieter's: it waits until none of the office's agents
// is in the middle of a turn (or ctx ends), so that a hand-over cuts no
// turn short. Nothing new is delivered meanwhile: the office is no longer
// this server's to act for.
func (r officeRunner) Quiet(ctx context.Context, officeID string) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for r.busy(officeID) {
		select {
		case <-ctx.Done():
			r.log.Warn("handing an office over with an agent still in its turn", "office", officeID)
			return
		case <-t.C:
		}
	}
}

func (r officeRunner) busy(officeID string) bool {
	for _, s := range r.sess.Manager().List() {
		if s.Key().OfficeID == officeID && s.Status() == session.StatusBusy {
			return true
		}
	}
	return false
}

func (r officeRunner) take(ctx context.Context, officeID string) {
	if c, ok := r.store.(*rostercache.Store); ok {
		c.Invalidate() // what the previous owner wrote is read afresh
	}
	r.router.TakeOffice(ctx, officeID, r.declared, r.autostart)
}

// drop stops the office's sessions without changing the agents' status,
// so that the next owner starts them; their session rows are the next
// owner's to write.
func (r officeRunner) drop(ctx context.Context, officeID string) {
	if err := r.sess.StopOffice(ctx, officeID); err != nil {
		r.log.Warn("stop agents of a lost office", "office", officeID, "err", err)
	}
}
