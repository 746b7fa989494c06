package main

// One owner per office (docs/protocol.md, Guarantees): two servers must never run the same
// agents. How depends on the store:
//
//   - SQLite: the server holds an exclusive flock on <db>.lock for its
//     whole life; a second server on the same file refuses to start. The
//     kernel drops the lock when the process dies, however it dies.
//   - PostgreSQL: a session-level advisory lock per office, held on a
//     connection of its own. A server that cannot get an office's lock
//     waits for it (polling) and takes the office over when the owner goes
//     away: its connection closes, and its locks go with it.
//   - Supabase over REST: no lock primitive; a warning.
//
// docs/notes/postgres.md says why advisory locks and what a lease would
// change.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/agents"
	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
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

// ownerPoll is how often a server tries to take the offices it waits for,
// and checks that the connection holding its locks is alive.
const ownerPoll = 2 * time.Second

// owner decides which offices this server runs. With PostgreSQL (url set)
// it holds an advisory lock per office it runs; otherwise every office is
// this server's (SQLite: the file lock keeps other servers out).
type owner struct {
	log  *slog.Logger
	url  string
	poll time.Duration

	mu      sync.Mutex
	owned   map[string]bool
	waiting map[string]time.Time // since when; logged once
}

// newOwner returns the owner for c's store, warning where nothing protects
// an office from a second server.
func newOwner(c serveConfig, log *slog.Logger) *owner {
	w := &owner{log: log, poll: ownerPoll, owned: map[string]bool{}, waiting: map[string]time.Time{}}
	switch c.storeKind() {
	case "postgres":
		w.url = c.DatabaseURL
	case "supabase":
		log.Warn("with SUPABASE_URL and no DATABASE_URL nothing keeps a second server from running the same offices: run one server per Supabase project, or set DATABASE_URL (the project's direct connection) so that offices are locked")
	}
	return w
}

// owns is engine.Config.Owns: nil when every office is this server's.
func (w *owner) owns() func(officeID string) bool {
	if w.url == "" {
		return nil
	}
	return w.has
}

func (w *owner) has(officeID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.owned[officeID]
}

// run takes the offices this server may run, starting their agents with r,
// until ctx ends. With PostgreSQL it keeps polling for offices it waits
// for (and offices created later) and watches the connection holding the
// locks (see lost); when ctx ends it closes that connection, which
// releases the locks: end ctx only after the agents were stopped and their
// final statuses written.
func (w *owner) run(ctx context.Context, r officeRunner) {
	if w.url == "" {
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
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = conn.Close(cctx) // the server drops the session's locks with it
		}
	}()
	t := time.NewTicker(w.poll)
	defer t.Stop()
	for {
		conn = w.claim(ctx, conn, r)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// claim checks that conn (nil: none yet) still holds this server's locks
// and tries to lock every office not owned yet. It returns the connection
// to use next time (nil after a failure).
func (w *owner) claim(ctx context.Context, conn *pgx.Conn, r officeRunner) *pgx.Conn {
	if conn == nil {
		var err error
		if conn, err = w.connect(ctx); err != nil {
			if ctx.Err() == nil {
				w.log.Warn("office locks: connect", "err", err)
			}
			return nil
		}
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(qctx, "select 1"); err != nil {
		return w.lost(ctx, conn, err, r)
	}
	offices, err := r.store.ListOffices(qctx)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("office locks: list offices", "err", err)
		}
		return conn
	}
	for _, o := range offices {
		if w.has(o.ID) {
			continue
		}
		var got bool
		if err := conn.QueryRow(qctx, "select pg_try_advisory_lock($1)", officeLockKey(o.ID)).Scan(&got); err != nil {
			return w.lost(ctx, conn, err, r)
		}
		w.mu.Lock()
		since, waited := w.waiting[o.ID]
		if got {
			w.owned[o.ID] = true
			delete(w.waiting, o.ID)
		} else if !waited {
			w.waiting[o.ID] = time.Now()
		}
		w.mu.Unlock()
		switch {
		case got && waited:
			w.log.Info("took over office", "office", o.Name, "id", o.ID, "waited", time.Since(since).Round(time.Millisecond))
			r.take(ctx, o.ID)
		case got:
			w.log.Info("running office", "office", o.Name, "id", o.ID)
			r.take(ctx, o.ID)
		case !waited:
			w.log.Info(fmt.Sprintf("office %s is run by another server (%s); waiting", o.Name, w.holder(qctx, conn, o.ID)), "id", o.ID, "poll", w.poll)
		}
	}
	return conn
}

// lost handles the death of the lock connection: its locks are gone, or
// will be once the database notices, and another server may be taking the
// offices. On a new connection it locks each office again at once: an
// office it gets back was run by nobody meanwhile (a server holds an
// office's lock for as long as it runs it), so its agents run on; the
// agents of the others are stopped. It returns the new connection, nil if
// there is none.
func (w *owner) lost(ctx context.Context, conn *pgx.Conn, err error, r officeRunner) *pgx.Conn {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	_ = conn.Close(cctx)
	cancel()
	if ctx.Err() != nil {
		return nil // shutting down: the agents were stopped already
	}
	w.mu.Lock()
	ids := slices.Sorted(maps.Keys(w.owned))
	w.mu.Unlock()
	w.log.Warn("office locks: connection lost; locking this server's offices again", "offices", len(ids), "err", err)
	nc, err := w.connect(ctx)
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, id := range ids {
		got := false
		if err == nil {
			err = nc.QueryRow(qctx, "select pg_try_advisory_lock($1)", officeLockKey(id)).Scan(&got)
		}
		if got {
			w.log.Info("office lock taken again", "id", id)
			continue
		}
		// Not ours any more: from now on nothing is done or recorded for it.
		w.mu.Lock()
		delete(w.owned, id)
		w.mu.Unlock()
		why := "another session holds its lock"
		if err != nil {
			why = err.Error()
		}
		w.log.Error("office lost: stopping its agents", "id", id, "reason", why)
		r.drop(ctx, id)
	}
	if err != nil {
		if nc != nil {
			_ = nc.Close(qctx)
		}
		return nil
	}
	return nc
}

// connect opens the connection that holds the locks, named so that a
// waiting server can say who holds an office.
func (w *owner) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(w.url)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	cfg.RuntimeParams["application_name"] = fmt.Sprintf("office-server host=%s pid=%d", host, os.Getpid())
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, err
	}
	// A server that drops off the network keeps its locks until the
	// database notices its connection is dead: keepalives bound that to
	// about 25 s instead of the system's default (often 2 hours). Sent as
	// SET, not as startup parameters, which some poolers refuse.
	if _, err := conn.Exec(cctx, "set tcp_keepalives_idle = 10; set tcp_keepalives_interval = 5; set tcp_keepalives_count = 3"); err != nil {
		w.log.Debug("office locks: keepalives not set", "err", err)
	}
	return conn, nil
}

// holder describes the session holding officeID's lock, for the log.
func (w *owner) holder(ctx context.Context, conn *pgx.Conn, officeID string) string {
	var (
		pid     int
		app     string
		started time.Time
	)
	err := conn.QueryRow(ctx, `
		select a.pid, coalesce(a.application_name, ''), a.backend_start
		from pg_locks l join pg_stat_activity a on a.pid = l.pid
		where l.locktype = 'advisory' and l.granted and l.objsubid = 1
		  and l.database = (select oid from pg_database where datname = current_database())
		  and l.classid = (($1::bigint >> 32) & 4294967295)::oid
		  and l.objid = ($1::bigint & 4294967295)::oid`, officeLockKey(officeID)).Scan(&pid, &app, &started)
	if err != nil {
		return "holder unknown"
	}
	if app == "" {
		app = "unnamed session"
	}
	return fmt.Sprintf("%s, database backend %d, connected %s", app, pid, started.Format(time.RFC3339))
}

// officeLockKey is the advisory lock key of an office: stable across
// servers and versions, and namespaced so that it does not collide with
// other users of advisory locks by chance.
func officeLockKey(officeID string) int64 {
	h := sha256.Sum256([]byte("office-server/office/" + officeID))
	return int64(binary.BigEndian.Uint64(h[:8]))
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
