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
	"sync"

	"github.com/office-server/office-server/agents"
	"github.com/office-server/office-server/migrations"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/server"
	"github.com/office-server/office-server/session"
	"github.com/office-server/office-server/store/postgres"
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

	mu    sync.Mutex
	addr  net.Addr
	ready chan struct{}
}

// Addr returns the listen address once the server listens.
func (m *Main) Addr() net.Addr {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addr
}

// Run starts everything, serves until ctx ends, then shuts down within
// Config.ShutdownTimeout: stop accepting, close viewers and streams, stop
// the office and the agents (with grace), close the store.
func (m *Main) Run(ctx context.Context) (err error) {
	c := m.Config
	var h slog.Handler = slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: c.LogLevel})
	if c.LogJSON {
		h = slog.NewJSONHandler(m.Stderr, &slog.HandlerOptions{Level: c.LogLevel})
	}
	log := slog.New(h)

	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if st, err := os.Stat(c.DataDir); err == nil && st.Mode().Perm()&0o066 != 0 {
		log.Warn("the data dir is readable or writable by other users (it holds the admin token and the database): chmod 700 it", "dir", c.DataDir, "mode", st.Mode().Perm().String())
	}
	token, tokenCreated := c.AdminToken, false
	if token != "" && len(token) < 16 {
		log.Warn("OFFICE_ADMIN_TOKEN is short: use at least 16 random characters")
	}
	if token == "" {
		if token, tokenCreated, err = secretFile(c.DataDir, "admin-token", func() string { return randomHex(24) }); err != nil {
			return fmt.Errorf("admin token: %w", err)
		}
	}
	if c.AgentBin == "" {
		if c.AgentBin, err = os.Executable(); err != nil {
			return fmt.Errorf("find own executable for builtin agents: %w", err)
		}
	}

	// The store and its change feed.
	var (
		store office.Store
		feed  office.ChangeFeed
	)
	switch c.storeKind() {
	case "postgres":
		if _, err := migrations.ApplyURL(ctx, c.DatabaseURL); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		pg, err := postgres.Open(ctx, c.DatabaseURL, postgres.Options{Logger: log})
		if err != nil {
			return fmt.Errorf("open postgres: %w", err)
		}
		store, feed = pg, pg
	case "supabase":
		sb, err := supabase.New(c.SupabaseURL, c.SupabaseKey)
		if err != nil {
			return fmt.Errorf("supabase: %w", err)
		}
		rt, err := supabase.NewRealtime(c.SupabaseURL, c.SupabaseKey, sb, supabase.RealtimeOptions{Logger: log})
		if err != nil {
			return fmt.Errorf("supabase realtime: %w", err)
		}
		store, feed = sb, rt
	default:
		db := filepath.Join(c.DataDir, "office.db")
		lock, err := lockSQLite(db) // one server per file (owner.go)
		if err != nil {
			return err
		}
		defer lock.Close()
		if err := privateFiles(db, db+"-wal", db+"-shm"); err != nil {
			return err
		}
		lite, err := sqlite.Open(ctx, db)
		if err != nil {
			return fmt.Errorf("open sqlite: %w", err)
		}
		store, feed = lite, lite
	}
	defer func() {
		if cerr := store.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close store: %w", cerr)
		}
	}()

	var secretsKey []byte
	switch {
	case c.SecretsKey != "":
		if secretsKey, err = office.ParseSecretsKey(c.SecretsKey); err != nil {
			return fmt.Errorf("OFFICE_SECRETS_KEY: %w", err)
		}
	case c.storeKind() == "sqlite":
		k, _, err := secretFile(c.DataDir, "secrets-key", func() string { return randomHex(32) })
		if err != nil {
			return fmt.Errorf("secrets key: %w", err)
		}
		if secretsKey, err = office.ParseSecretsKey(k); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(c.DataDir, "secrets-key"), err)
		}
	default:
		log.Warn("no OFFICE_SECRETS_KEY: api_key and env_variable dependency values will be refused")
	}

	own := newOwner(c, log.With("part", "owner"))
	keeper, err := keeperArgv()
	if err != nil {
		return fmt.Errorf("find own executable for the agents' keeper: %w", err)
	}

	// Sessions, the office, the server.
	router, sess, err := agents.New(office.Config{
		Store: store, Feed: feed, Logger: log.With("part", "office"),
		SecretsKey: secretsKey, DataDir: filepath.Join(c.DataDir, "agents"),
		InvocationTimeout: c.InvocationTimeout, Owns: own.owns(),
	}, agents.Options{AgentBin: c.AgentBin, StateDir: filepath.Join(c.DataDir, "claude")},
		session.Options{Logger: log.With("part", "session"), Keeper: keeper})
	if err != nil {
		return fmt.Errorf("office: %w", err)
	}
	mgr := sess.Manager()

	var officeAgents []office.Agent
	if c.OfficeFile != "" {
		o, agents, err := loadOfficeFile(c.OfficeFile)
		if err != nil {
			return err
		}
		off, synced, err := router.SyncOffice(ctx, office.OfficeConfig{Office: o, Agents: agents})
		if err != nil {
			return fmt.Errorf("sync office %s: %w", c.OfficeFile, err)
		}
		officeAgents = synced
		log.Info("office synced", "office", off.Name, "id", off.ID, "agents", len(synced))
	}

	srv, err := server.New(server.Config{
		Store: store, Office: serverOffice{r: router, store: store, sess: sess}, Terminals: terminals{mgr},
		Feed: feed, Token: token, Logger: log.With("part", "http"),
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", c.Addr, err)
	}
	srv.SetOrigins(append(server.OwnOrigins(ln.Addr()), c.Origins...))
	m.mu.Lock()
	m.addr = ln.Addr()
	m.mu.Unlock()
	hs := server.NewHTTPServer(srv.Handler(), log)

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	wg.Add(3)
	go func() { defer wg.Done(); errc <- router.Run(runCtx) }()
	go func() { defer wg.Done(); errc <- srv.Run(runCtx) }()
	// The office's own events wake the server's event tail at once.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for runCtx.Err() == nil {
			sub := router.Subscribe(256)
			for open := true; open; {
				select {
				case <-runCtx.Done():
					open = false
				case _, ok := <-sub.C():
					open = ok // closed: dropped for lagging; subscribe again
					srv.WakeEvents()
				}
			}
			sub.Close()
		}
	}()
	go func() {
		defer wg.Done()
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http: %w", err)
		}
	}()

	url := consoleURL(ln.Addr())
	if warn := exposure(ln.Addr()); warn != "" {
		log.Warn(warn)
		fmt.Fprintf(m.Stdout, "WARNING: %s.\n", warn)
	}
	if tokenCreated {
		// The only place the token is shown: stdout, once, on first start.
		fmt.Fprintf(m.Stdout, "office console: %s?token=%s\n(the token is kept in %s; it is not shown again)\n", url, token, filepath.Join(c.DataDir, "admin-token"))
	} else {
		fmt.Fprintf(m.Stdout, "office console: %s (open it with ?token=<OFFICE_ADMIN_TOKEN or the token in %s>)\n", url, filepath.Join(c.DataDir, "admin-token"))
	}
	log.Info("listening", "addr", ln.Addr().String(), "store", c.storeKind())

	// The offices this server runs, and their agents (owner.go). It
	// releases the offices when runCtx ends, after the final statuses.
	wg.Add(1)
	go func() {
		defer wg.Done()
		own.run(runCtx, officeRunner{router: router, store: store, mgr: mgr, declared: officeAgents, autostart: !c.NoAutostart, log: log})
	}()

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
		log.Error("stopping after failure", "err", runErr)
	}
	log.Info("shutting down", "timeout", c.ShutdownTimeout)
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), c.ShutdownTimeout)
	defer scancel()
	srv.Close() // viewers and event streams: hijacked or long-lived, not ended by Shutdown
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", "err", err)
		_ = hs.Close()
	}
	if err := mgr.Close(sctx); err != nil {
		log.Warn("stop sessions", "err", err)
	}
	// The sessions' last statuses (stopped, pid 0) are written before the
	// office's context ends, so the rows are final after SIGTERM.
	if err := router.FlushStatuses(sctx); err != nil {
		log.Warn("record final session statuses", "err", err)
	}
	cancel()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-sctx.Done():
		log.Warn("shutdown timed out")
	}
	log.Info("stopped")
	return runErr
}
