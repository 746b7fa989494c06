package main

// One owner per office (docs/protocol.md, Guarantees): two servers must never run the same
// agents. The notion is ownership; how depends on the store, chosen once
// at start (openStore):
//
//   - SQLite: fileLock: the server holds an exclusive flock on <db>.lock
//     for its whole life; a second server on the same file refuses to
//     start. The kernel drops the lock when the process dies, however it
//     dies.
//   - PostgreSQL: leases: the server is a cluster node: it holds a lease
//     per office it runs, renewed in one statement per period, with a
//     fencing token (package cluster, docs/notes/cluster.md). Any number
//     of servers share the offices.
//   - Supabase over REST: fileLock without a lock (no lock primitive); a
//     warning.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/office-server/office-server/agents"
	"github.com/office-server/office-server/cluster"
	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/server"
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

// ownership is how this server owns the offices it runs, one owner per
// office, chosen once at start by the store (openStore): a file lock
// (fileLock: SQLite, a server alone) or leases (leases: PostgreSQL, a
// cluster node). Each wiring point asks it what it adds there.
type ownership interface {
	// run takes the offices this server may run (officeRunner.Take),
	// holds them until ctx ends, reports one it loses (officeRunner.Drop),
	// and releases them when ctx ends: end ctx only after the agents were
	// stopped and their final statuses written.
	run(ctx context.Context, r officeRunner)
	// drain hands the offices over before a shutdown, where another
	// server can take them; otherwise it does nothing.
	drain(ctx context.Context)
	// owns is engine.Config.Owns: nil when every office is this server's.
	owns() func(officeID string) bool
	// nodeName is what this server records in agent_sessions.node.
	nodeName() string
	// wrap is agents.Options.Wrap (nil: none); report records the status
	// of an agent the owner refuses to start.
	wrap(stateDir string, report func(session.Key, session.Status, session.Info)) func(engine.Sessions) engine.Sessions
	// owners is server.Config.Owners: nil when no other server runs offices.
	owners() server.Owners
	// listening tells the owner the address other servers reach it at.
	listening(addr string)
	// registerMetrics adds the owner's metrics to reg.
	registerMetrics(reg prometheus.Registerer)
	// Close lets go of what the owner holds for its whole life (the lock file).
	io.Closer
}

// fileLock is a server alone: every office is its own. The lock on the
// SQLite file keeps a second server out for the process's whole life; a
// Supabase store over REST has none (lock nil, a warning at start).
type fileLock struct {
	lock io.Closer // nil: nothing keeps a second server out
	node string    // --node, or empty
	log  *slog.Logger
}

var _ ownership = (*fileLock)(nil)

// run takes every office there is; nothing takes one away.
func (fl *fileLock) run(ctx context.Context, r officeRunner) {
	offices, err := r.store.ListOffices(ctx)
	if err != nil {
		fl.log.Warn("list offices: agents not started", "err", err)
		return
	}
	for _, o := range offices {
		r.take(ctx, o.ID)
	}
}

// drain does nothing: no other server could take the offices; the
// shutdown stops the agents here and marks them stopped.
func (fl *fileLock) drain(context.Context) {}

func (fl *fileLock) owns() func(string) bool { return nil }

func (fl *fileLock) nodeName() string { return fl.node }

func (fl *fileLock) wrap(string, func(session.Key, session.Status, session.Info)) func(engine.Sessions) engine.Sessions {
	return nil
}

func (fl *fileLock) owners() server.Owners { return nil }

func (fl *fileLock) listening(string) {}

func (fl *fileLock) registerMetrics(prometheus.Registerer) {}

func (fl *fileLock) Close() error {
	if fl.lock == nil {
		return nil
	}
	return fl.lock.Close()
}

// leases is a cluster node (package cluster): it holds a lease per office
// it runs, renewed in one statement per period, with a fencing token; any
// number of servers share the offices. The lock on its name's file keeps
// a second process from being the same node.
type leases struct {
	node        *cluster.Node
	transcripts *cluster.Transcripts
	nameLock    io.Closer
	log         *slog.Logger
}

var _ ownership = (*leases)(nil)

// newLeases makes this server the cluster node cfg names on pool.
func newLeases(pool *pgxpool.Pool, cfg cluster.Config, nameLock io.Closer, log *slog.Logger) *leases {
	cfg.Logger = log
	return &leases{node: cluster.New(pool, cfg), transcripts: cluster.NewTranscripts(pool, log), nameLock: nameLock, log: log}
}

// run renews the node's leases and places offices (cluster.Node.Run)
// until ctx ends, then releases them.
func (ls *leases) run(ctx context.Context, r officeRunner) {
	r.transcripts = ls.transcripts
	done := make(chan struct{})
	go func() { defer close(done); ls.transcripts.Run(ctx) }()
	if err := ls.node.Run(ctx, r); err != nil {
		ls.log.Error("cluster node", "err", err)
	}
	<-done
}

// drain hands this node's offices over (their agents end their turns
// first) and returns once it holds none, or when ctx ends. When no other
// node could take the offices it does nothing: the shutdown stops the
// agents here and marks them stopped.
func (ls *leases) drain(ctx context.Context) {
	if !ls.node.HasPeer(ctx) {
		ls.log.Info("no other node to hand the offices to: stopping their agents here")
		return
	}
	if err := ls.node.Drain(ctx); err != nil {
		ls.log.Warn("drain", "err", err)
		return
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for len(ls.node.Owned()) > 0 {
		select {
		case <-ctx.Done():
			ls.log.Warn("shutting down before every office was handed over", "left", len(ls.node.Owned()))
			return
		case <-t.C:
		}
	}
	ls.log.Info("offices handed over")
}

func (ls *leases) owns() func(string) bool { return ls.node.Owns }

// nodeName is the cluster node's id.
func (ls *leases) nodeName() string { return ls.node.ID() }

// wrap: nothing is started in or typed into an agent of an office the
// node does not hold, and Claude Code transcripts travel through the
// database.
func (ls *leases) wrap(stateDir string, report func(session.Key, session.Status, session.Info)) func(engine.Sessions) engine.Sessions {
	return func(s engine.Sessions) engine.Sessions {
		return &cluster.Sessions{Sessions: s, Node: ls.node, Transcripts: ls.transcripts, StateDir: stateDir, Report: report}
	}
}

// owners: terminals of agents on other nodes are proxied to them.
func (ls *leases) owners() server.Owners { return ls.node }

func (ls *leases) listening(addr string) { ls.node.SetAddr(addr) }

// registerMetrics adds the node's lease metrics: the leases held now,
// gained and lost.
func (ls *leases) registerMetrics(reg prometheus.Registerer) {
	st := ls.node.Stats()
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "office_leases_held", Help: "Offices this node holds the lease of, and runs, now."},
			func() float64 { return float64(len(ls.node.Owned())) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "office_leases_gained_total", Help: "Leases this node took: offices it started to run (at start, after a restart, taken over from a node that stopped)."},
			func() float64 { return float64(st.Gained.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "office_leases_lost_total", Help: "Leases this node lost: another node held the office when this one renewed, so its agents here were stopped."},
			func() float64 { return float64(st.Lost.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "office_leases_released_total", Help: "Lease release statements this node sent: offices handed over (placement, shutdown)."},
			func() float64 { return float64(st.Releases.Load()) }),
	)
}

// Close lets go of the node's name.
func (ls *leases) Close() error { return ls.nameLock.Close() }

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
		if s.Key().OfficeID == officeID && s.Status() == office.SessionBusy {
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
