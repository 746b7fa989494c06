package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/office-server/office-server/agents"
	"github.com/office-server/office-server/cluster"
	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/migrations"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/server"
	"github.com/office-server/office-server/session"
	"github.com/office-server/office-server/store/metered"
	"github.com/office-server/office-server/store/postgres"
	"github.com/office-server/office-server/store/rostercache"
	"github.com/office-server/office-server/store/sqlite"
	"github.com/office-server/office-server/supabase"
)

func init() { commands["serve"] = serveCmd }

func serveCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	cfg, err := parseServeConfig(args, os.Getenv, stderr)
	if err != nil {
		return err
	}
	m := &Main{Config: cfg, Stdout: stdout, Stderr: stderr}
	return m.Run(ctx)
}

// Main is the serve command: configuration in, a running server out. Tests
// build one directly.
type Main struct {
	Config serveConfig
	Stdout io.Writer // the console URL, once
	Stderr io.Writer // logs

	mu   sync.Mutex
	addr net.Addr
}

// Addr returns the listen address once the server listens.
func (m *Main) Addr() net.Addr {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addr
}

// Run starts everything, serves until ctx ends, then shuts down within
// Config.ShutdownTimeout: stop accepting, close viewers and streams, stop
// the office and the agents (with grace), close the store. It only wires:
// what each part does is in its package (the store's, engine's, agents',
// server's).
func (m *Main) Run(ctx context.Context) (err error) {
	log := m.logger()
	if err := m.prepareDataDir(log); err != nil {
		return err
	}
	token, tokenCreated, err := m.adminToken(log)
	if err != nil {
		return err
	}
	c, err := m.resolvedConfig()
	if err != nil {
		return err
	}
	// The metrics first: the store's requests and its change feed are
	// measured from the start (docs/metrics.md).
	metrics := server.NewMetrics()
	store, feed, own, closeStore, err := m.openStore(ctx, log, metrics.FeedReconnected)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeStore(); cerr != nil && err == nil {
			err = fmt.Errorf("close store: %w", cerr)
		}
	}()
	// Rosters from memory: the engine and the API read them on every
	// delivery and start (store/rostercache).
	members, _ := store.(office.Members) // PostgreSQL and Supabase; SQLite has no members
	store = rostercache.New(metered.New(store, metrics.ObserveStore), rosterTTL(c.storeKind()))
	// Sessions, the office, the server.
	router, sess, err := m.newOffice(c, log, store, feed, own)
	if err != nil {
		return err
	}
	declared, err := m.syncOffice(ctx, router, log)
	if err != nil {
		return err
	}
	scfg := serverConfig(c, log, store, feed, router, sess, own, members, token)
	scfg.Metrics = metrics
	srv, err := server.New(scfg)
	if err != nil {
		return err
	}
	own.registerMetrics(metrics.Registry())
	registerInputMetrics(metrics.Registry())
	ln, err := m.listen(c, srv, own)
	if err != nil {
		return err
	}
	r := &running{log: log, router: router, srv: srv, mgr: sess.Manager(), hs: server.NewHTTPServer(srv.Handler(), log), drain: own.drain}
	r.start(ctx, ln)
	m.announce(ln.Addr(), token, tokenCreated, log)
	// The offices this server runs, and their agents (owner.go). It
	// releases the offices when the run ends, after the final statuses.
	r.goRun(func(ctx context.Context) {
		own.run(ctx, officeRunner{router: router, store: store, sess: sess, declared: declared, autostart: !c.NoAutostart, log: log})
	})
	return r.wait(ctx, c.ShutdownTimeout)
}

// prepareDataDir creates the data directory (mode 0700) and warns when
// other users can read or write an existing one. It fails only when the
// directory cannot be created.
func (m *Main) prepareDataDir(log *slog.Logger) error {
	dir := m.Config.DataDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if st, err := os.Stat(dir); err == nil && st.Mode().Perm()&0o066 != 0 {
		log.Warn("the data dir is readable or writable by other users (it holds the admin token and the database): chmod 700 it", "dir", dir, "mode", st.Mode().Perm().String())
	}
	return nil
}

// resolvedConfig returns a copy of Config with the defaults that need the
// environment filled in: AgentBin, when unset, is this executable (the
// builtin agents). It fails when the executable cannot be found.
func (m *Main) resolvedConfig() (serveConfig, error) {
	c := m.Config
	if c.AgentBin == "" {
		bin, err := os.Executable()
		if err != nil {
			return c, fmt.Errorf("find own executable for builtin agents: %w", err)
		}
		c.AgentBin = bin
	}
	return c, nil
}

// newOffice builds the office (engine router) and the agents' sessions on
// store and feed, with the secrets key, the keeper and hook commands and
// the content rules c names. It fails when any of them cannot be had.
func (m *Main) newOffice(c serveConfig, log *slog.Logger, store office.Store, feed office.ChangeFeed, own ownership) (*engine.Router, *agents.Sessions, error) {
	secretsKey, err := m.secretsKey(log)
	if err != nil {
		return nil, nil, err
	}
	keeper, err := keeperArgv()
	if err != nil {
		return nil, nil, fmt.Errorf("find own executable for the agents' keeper: %w", err)
	}
	hook, err := hookArgv()
	if err != nil {
		return nil, nil, fmt.Errorf("find own executable for the agents' permission hook: %w", err)
	}
	rules, err := contentRules(c.ContentRules)
	if err != nil {
		return nil, nil, err
	}
	stateDir, err := filepath.Abs(filepath.Join(c.DataDir, "claude"))
	if err != nil {
		return nil, nil, fmt.Errorf("agents state dir: %w", err)
	}
	// The owner reports the statuses of agents it refuses to start
	// (cluster.Sessions.Report) to the router, once there is one.
	var ref atomic.Pointer[engine.Router]
	report := func(k session.Key, st session.Status, info session.Info) {
		if r := ref.Load(); r != nil {
			r.HandleStatus(k, st, info)
		}
	}
	router, sess, err := agents.New(engine.Config{
		Store: store, Feed: feed, Logger: log.With("part", "office"),
		SecretsKey: secretsKey, DataDir: filepath.Join(c.DataDir, "agents"),
		InvocationTimeout: c.InvocationTimeout, Owns: own.owns(), Node: own.nodeName(),
		ProxyWait: c.ProxyWait, ContentRules: rules, MaxLive: c.MaxLive,
	}, agents.Options{AgentBin: c.AgentBin, StateDir: stateDir, Wrap: own.wrap(stateDir, report)},
		session.Options{Logger: log.With("part", "session"), Keeper: keeper, Hook: hook})
	if err != nil {
		return nil, nil, fmt.Errorf("office: %w", err)
	}
	ref.Store(router)
	return router, sess, nil
}

// serverConfig is the HTTP server's configuration: the API over store and
// router, terminals over sess, and, on a cluster node, terminals of other
// nodes' agents proxied to them. members is nil where the store has no
// members (SQLite).
func serverConfig(c serveConfig, log *slog.Logger, store office.Store, feed office.ChangeFeed, router *engine.Router, sess *agents.Sessions, own ownership, members office.Members, token string) server.Config {
	scfg := server.Config{
		Store: store, Office: serverOffice{r: router, store: store, sess: sess}, Terminals: terminals{sess.Manager()},
		Feed: feed, Token: token, Logger: log.With("part", "http"), AuditFailures: router.AuditFailures,
		EventPoll: eventPoll(c.storeKind()),
	}
	if scfg.Owners = own.owners(); scfg.Owners != nil { // terminals of agents on other nodes are proxied
		if c.AdminToken == "" {
			log.Info("with several servers on this database, give them all the same OFFICE_ADMIN_TOKEN: a terminal opened on one server is passed to the server running its agent, which checks the token again")
		}
	}
	scfg.Members = members
	if v := supabase.NewMemberTokens(memberAuth(c, log)); v != nil {
		scfg.MemberTokens = v
	}
	return scfg
}

// listen opens c.Addr, allows srv the listener's own origins and c's, and
// records the address (Addr; on a cluster node, the node's address unless
// c.NodeAddr names another). It fails when the address cannot be bound.
func (m *Main) listen(c serveConfig, srv *server.Server, own ownership) (net.Listener, error) {
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", c.Addr, err)
	}
	srv.SetOrigins(append(server.OwnOrigins(ln.Addr()), c.Origins...))
	m.mu.Lock()
	m.addr = ln.Addr()
	m.mu.Unlock()
	addr := c.NodeAddr
	if addr == "" {
		addr = ln.Addr().String()
	}
	own.listening(addr)
	return ln, nil
}

func (m *Main) logger() *slog.Logger {
	c := m.Config
	var h slog.Handler = slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: c.LogLevel})
	if c.LogJSON {
		h = slog.NewJSONHandler(m.Stderr, &slog.HandlerOptions{Level: c.LogLevel})
	}
	return slog.New(h)
}

// adminToken returns the configured admin token, or the data directory's
// (made on first start: created reports it).
func (m *Main) adminToken(log *slog.Logger) (token string, created bool, err error) {
	token = m.Config.AdminToken
	if token != "" && len(token) < 16 {
		log.Warn("OFFICE_ADMIN_TOKEN is short: use at least 16 random characters")
	}
	if token != "" {
		return token, false, nil
	}
	token, created, err = secretFile(m.Config.DataDir, "admin-token", func() string { return randomHex(24) })
	if err != nil {
		return "", false, fmt.Errorf("admin token: %w", err)
	}
	return token, created, nil
}

// openStore opens the configured store and its change feed; closeStore
// closes what was opened.
// reconnected is called each time the change feed connects again.
// own is how this server owns its offices, chosen here by the store
// (owner.go); closeStore releases it too.
func (m *Main) openStore(ctx context.Context, log *slog.Logger, reconnected func()) (store office.Store, feed office.ChangeFeed, own ownership, closeStore func() error, err error) {
	olog := log.With("part", "owner")
	c := m.Config
	switch c.storeKind() {
	case "postgres":
		if err := m.migrate(ctx, log); err != nil {
			return nil, nil, nil, nil, err
		}
		// The server is a cluster node, named in its data directory (locked:
		// one process per name), so that a restart takes its offices back
		// at once. Its connections carry the name, so that the database
		// refuses what it does for an office it lost.
		lock, err := lockSQLite(filepath.Join(c.DataDir, "node"))
		if err != nil {
			return nil, nil, nil, nil, err
		}
		node := c.Node
		if node == "" {
			node, _, err = secretFile(c.DataDir, "node-id", cluster.NewNodeID)
			if err != nil {
				lock.Close()
				return nil, nil, nil, nil, fmt.Errorf("node id: %w", err)
			}
		}
		pg, err := postgres.Open(ctx, c.DatabaseURL, postgres.Options{Logger: log, Node: node, Reconnected: reconnected})
		if err != nil {
			lock.Close()
			return nil, nil, nil, nil, fmt.Errorf("open postgres: %w", err)
		}
		own := newLeases(pg.Pool(), cluster.Config{NodeID: node, Capacity: c.Capacity, Lease: c.Lease, Renew: c.LeaseRenew}, lock, olog)
		return pg, pg, own, func() error { return errors.Join(pg.Close(), own.Close()) }, nil
	case "supabase":
		log.Info("supabase: API key from "+c.SupabaseKeyFrom, "ignored", c.SupabaseKeyIgnored)
		sb, err := supabase.New(c.SupabaseURL, c.SupabaseKey)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("supabase: %w", err)
		}
		rt, err := supabase.NewRealtime(c.SupabaseURL, c.SupabaseKey, sb, supabase.RealtimeOptions{Logger: log, Reconnected: reconnected})
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("supabase realtime: %w", err)
		}
		olog.Warn("with SUPABASE_URL and no DATABASE_URL nothing keeps a second server from running the same offices: run one server per Supabase project, or set DATABASE_URL (the project's direct connection) in place of the API key so that offices are leased (docs/deploy-supabase.md)")
		return sb, rt, &fileLock{node: c.Node, log: olog}, sb.Close, nil
	}
	db := filepath.Join(c.DataDir, "office.db")
	lock, err := lockSQLite(db) // one server per file (owner.go)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if err := privateFiles(db, db+"-wal", db+"-shm"); err != nil {
		lock.Close()
		return nil, nil, nil, nil, err
	}
	lite, err := sqlite.Open(ctx, db)
	if err != nil {
		lock.Close()
		return nil, nil, nil, nil, fmt.Errorf("open sqlite: %w", err)
	}
	own = &fileLock{lock: lock, node: c.Node, log: olog}
	return lite, lite, own, func() error { return errors.Join(lite.Close(), own.Close()) }, nil
}

// migrate applies the migrations DatabaseURL lacks, or with NoMigrate
// (a schema managed elsewhere) fails naming those it lacks.
func (m *Main) migrate(ctx context.Context, log *slog.Logger) error {
	c := m.Config
	if !c.NoMigrate {
		applied, err := migrations.ApplyURL(ctx, c.DatabaseURL)
		for _, r := range applied {
			log.Info("applied migration", "file", r.Name)
		}
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		return nil
	}
	missing, err := migrations.PendingURL(ctx, c.DatabaseURL)
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	if len(missing) > 0 {
		names := make([]string, len(missing))
		for i, r := range missing {
			names[i] = r.Name
		}
		return fmt.Errorf("--no-migrate: the database lacks %d of this server's migrations: %s; "+
			"apply them (supabase db push with this version's migrations/, or office-server migrate) or start without --no-migrate",
			len(missing), strings.Join(names, ", "))
	}
	return nil
}

// secretsKey returns the key sealing dependency values: the configured
// one, the data directory's for SQLite (made on first start), else none.
func (m *Main) secretsKey(log *slog.Logger) ([]byte, error) {
	c := m.Config
	switch {
	case c.SecretsKey != "":
		k, err := office.ParseSecretsKey(c.SecretsKey)
		if err != nil {
			return nil, fmt.Errorf("OFFICE_SECRETS_KEY: %w", err)
		}
		return k, nil
	case c.storeKind() == "sqlite":
		s, _, err := secretFile(c.DataDir, "secrets-key", func() string { return randomHex(32) })
		if err != nil {
			return nil, fmt.Errorf("secrets key: %w", err)
		}
		k, err := office.ParseSecretsKey(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(c.DataDir, "secrets-key"), err)
		}
		return k, nil
	}
	log.Warn("no OFFICE_SECRETS_KEY: api_key and env_variable dependency values will be refused")
	return nil, nil
}

// syncOffice makes the store match the office file, if any, and returns
// its agents as stored.
func (m *Main) syncOffice(ctx context.Context, router *engine.Router, log *slog.Logger) ([]office.Agent, error) {
	path := m.Config.OfficeFile
	if path == "" {
		return nil, nil
	}
	o, agents, err := loadOfficeFile(path)
	if err != nil {
		return nil, err
	}
	off, synced, err := router.SyncOffice(ctx, engine.OfficeConfig{Office: o, Agents: agents})
	if err != nil {
		return nil, fmt.Errorf("sync office %s: %w", path, err)
	}
	log.Info("office synced", "office", off.Name, "id", off.ID, "agents", len(synced))
	return synced, nil
}

// announce prints where the console is (and, on first start only, the
// admin token) and warns when the address is reachable from elsewhere.
func (m *Main) announce(addr net.Addr, token string, tokenCreated bool, log *slog.Logger) {
	url := consoleURL(addr)
	if warn := exposure(addr); warn != "" {
		log.Warn(warn)
		fmt.Fprintf(m.Stdout, "WARNING: %s.\n", warn)
	}
	tokenFile := filepath.Join(m.Config.DataDir, "admin-token")
	switch {
	case m.Config.AdminToken != "":
		// The operator chose the token: it is not written anywhere.
		fmt.Fprintf(m.Stdout, "office console: %s?token=<the value of OFFICE_ADMIN_TOKEN>\n", url)
	case tokenCreated:
		// The only place the token is shown: stdout, once, on first start.
		fmt.Fprintf(m.Stdout, "office console: %s?token=%s\n(the token is kept in %s; it is not shown again)\n", url, token, tokenFile)
	default:
		fmt.Fprintf(m.Stdout, "office console: %s?token=<the token in %s>\n", url, tokenFile)
	}
	log.Info("listening", "addr", addr.String(), "store", m.Config.storeKind())
}

// running is the serve command's goroutines, from start to shutdown: the
// router, the server's background work, the HTTP server, and the wake-up
// of the event tail by the office's own events. They run with a context of
// their own (runCtx) that ends only after the agents were stopped and
// their final statuses written.
type running struct {
	log    *slog.Logger
	router *engine.Router
	srv    *server.Server
	mgr    *session.Manager
	hs     *http.Server
	// drain, when set, hands the offices over before the shutdown (a
	// cluster node): their agents end their turns first.
	drain func(ctx context.Context)

	runCtx context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errc   chan error
}

// start starts the goroutines; ctx's values, not its end, carry over.
func (r *running) start(ctx context.Context, ln net.Listener) {
	r.runCtx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.errc = make(chan error, 3)
	r.goRun(func(ctx context.Context) { r.errc <- r.router.Run(ctx) })
	r.goRun(func(ctx context.Context) { r.errc <- r.srv.Run(ctx) })
	r.goRun(r.wakeEvents)
	r.goRun(func(context.Context) {
		if err := r.hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			r.errc <- fmt.Errorf("http: %w", err)
		}
	})
}

func (r *running) goRun(f func(ctx context.Context)) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f(r.runCtx)
	}()
}

// wakeEvents hands the server's event tail the office's own events at
// once.
func (r *running) wakeEvents(ctx context.Context) {
	for ctx.Err() == nil {
		sub := r.router.Subscribe(256)
		for open := true; open; {
			select {
			case <-ctx.Done():
				open = false
			case ev, ok := <-sub.C():
				open = ok // closed: dropped for lagging; subscribe again
				if ok {
					r.srv.OfferEvent(ctx, ev)
				} else {
					r.srv.OfferEvent(ctx, office.Event{}) // id 0: read what was missed
				}
			}
		}
		sub.Close()
	}
}

// wait serves until ctx ends or a part fails, then shuts down within
// timeout: viewers and streams, HTTP, the typing, the sessions, what
// they wrote last, their final statuses, and last the goroutines'
// context. It returns the part's failure.
func (r *running) wait(ctx context.Context, timeout time.Duration) error {
	defer r.cancel()
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-r.errc:
		r.log.Error("stopping after failure", "err", runErr)
	}
	r.log.Info("shutting down", "timeout", timeout)
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer scancel()
	if r.drain != nil && runErr == nil {
		dctx, dcancel := context.WithTimeout(sctx, timeout/2)
		r.drain(dctx)
		dcancel()
	}
	r.srv.Close() // viewers and event streams: hijacked or long-lived, not ended by Shutdown
	if err := r.hs.Shutdown(sctx); err != nil {
		r.log.Warn("http shutdown", "err", err)
		_ = r.hs.Close()
	}
	// Texts already typed get their acknowledgement and their mark before
	// the agents stop (half the time left); what stays unconfirmed keeps
	// its typing marker, and the next start checks before typing it again.
	qctx, qcancel := context.WithTimeout(sctx, remaining(sctx)/2)
	if err := r.router.Quiesce(qctx); err != nil {
		r.log.Warn("stop typing", "err", err)
	}
	qcancel()
	if err := r.mgr.Close(sctx); err != nil {
		r.log.Warn("stop sessions", "err", err)
	}
	// What the agents wrote before they stopped is acted on (half the
	// time left): a result a command agent printed just before the stop
	// is recorded, not asked of it again.
	dctx, dcancel := context.WithTimeout(sctx, remaining(sctx)/2)
	if err := r.router.Drain(dctx); err != nil {
		r.log.Warn("stop: the agents' last words", "err", err)
	}
	dcancel()
	// The sessions' last statuses (stopped, pid 0) are written before the
	// office's context ends, so the rows are final after SIGTERM.
	if err := r.router.FlushStatuses(sctx); err != nil {
		r.log.Warn("record final session statuses", "err", err)
	}
	r.cancel()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-sctx.Done():
		r.log.Warn("shutdown timed out")
	}
	r.log.Info("stopped")
	return runErr
}

// rosterTTL is how long the server keeps an office's roster before reading
// it again, so that agents written by someone else (SQL by hand, another
// server) are seen. Over Supabase's REST API (one server per project) only
// a person editing the table in the dashboard does that, and each read is
// a request to the hosted project: 30 s. Elsewhere a read is a query:
// rostercache.DefaultTTL.
func rosterTTL(storeKind string) time.Duration {
	if storeKind == "supabase" {
		return 30 * time.Second
	}
	return rostercache.DefaultTTL
}

// remaining is the time left before ctx's deadline.
func remaining(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return time.Until(d)
}

// eventPoll is how often the server's event tail reads the store when
// nothing wakes it. The office's own events wake it at once (wakeEvents),
// so the poll is only for events other processes write. On PostgreSQL
// other nodes write the events of the offices they run, which this node's
// console shows within a second. Over Supabase's REST API (one server per
// project) nobody else writes them and each read is a request to the
// hosted project, so the poll is a safety net every 5 minutes (0.2
// requests a minute); on the embedded store a read costs nothing.
func eventPoll(storeKind string) time.Duration {
	switch storeKind {
	case "postgres":
		return time.Second
	case "supabase":
		return 5 * time.Minute
	}
	return 30 * time.Second
}
