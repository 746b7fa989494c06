package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/creack/pty"

	"github.com/office-server/office-server/office"
)

// Manager owns the sessions: one per Key.
type Manager struct {
	opts     Options
	mu       sync.Mutex
	sessions map[Key]*Session
	closed   bool
	perms    permRegistry // permission requests waiting for a decision

	watchOnce sync.Once
	watcher   *fileWatcher // nil where files cannot be watched

	// startPTY starts a command in a new PTY (pty.StartWithSize; tests
	// make it fail).
	startPTY func(*exec.Cmd, *pty.Winsize) (*os.File, error)
}

// fileWatcher returns the manager's file watcher, started on first use;
// nil when the platform has none or the manager is closed.
func (m *Manager) fileWatcher() *fileWatcher {
	m.watchOnce.Do(func() {
		m.mu.Lock()
		closed := m.closed
		m.mu.Unlock()
		if closed {
			return
		}
		w, err := newFileWatcher()
		if err != nil {
			m.opts.Logger.Warn("files are polled: no file watcher", "err", err)
			return
		}
		m.watcher = w
	})
	return m.watcher
}

// NewManager returns a Manager with opts, defaults filled in.
func NewManager(opts Options) *Manager {
	if opts.Scrollback <= 0 {
		opts.Scrollback = 2000
	}
	if opts.RestartBackoff <= 0 {
		opts.RestartBackoff = time.Second
	}
	if opts.MaxRestarts <= 0 {
		opts.MaxRestarts = 5
	}
	if opts.RestartWindow <= 0 {
		opts.RestartWindow = 5 * time.Minute
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 3 * time.Second
	}
	if opts.EnterDelay <= 0 {
		opts.EnterDelay = 250 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{opts: opts, sessions: make(map[Key]*Session), startPTY: pty.StartWithSize}
}

// Start starts a session for key. It fails with ErrExists if one is running
// (a session whose agent exited or failed is replaced), or when the first
// launch fails (the command cannot be started, ErrNoPTY, ErrNoProcess): then the status
// reported is failed, with the reason as Info.Err and Detail.
func (m *Manager) Start(ctx context.Context, key Key, spec Spec) (*Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	spec, err := Check(spec)
	if err != nil {
		return nil, fmt.Errorf("start session %s: %w", key, err)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, fmt.Errorf("start session %s: %w", key, ErrClosed)
	}
	if old, ok := m.sessions[key]; ok {
		if st := old.Status(); st != office.SessionExited && st != office.SessionFailed {
			m.mu.Unlock()
			return nil, fmt.Errorf("start session %s: %w", key, ErrExists)
		}
		// An agent that exited or failed has no process: replace it.
		m.mu.Unlock()
		if err := m.Stop(ctx, key); err != nil {
			return nil, fmt.Errorf("start session %s: %w", key, err)
		}
		m.mu.Lock()
		if _, ok := m.sessions[key]; ok {
			m.mu.Unlock()
			return nil, fmt.Errorf("start session %s: %w", key, ErrExists)
		}
	}
	s := newSession(m, key, spec)
	m.sessions[key] = s
	m.mu.Unlock()

	if err := s.launch(); err != nil {
		m.mu.Lock()
		delete(m.sessions, key)
		m.mu.Unlock()
		s.cleanup()
		// Whoever follows the statuses learns why: the agent did not
		// start (no pseudo-terminal left, the command not found).
		s.setStatus(office.SessionFailed)
		return nil, fmt.Errorf("start session %s: %w", key, err)
	}
	go s.run()
	return s, nil
}

// Get returns the session of key.
func (m *Manager) Get(key Key) (*Session, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[key]
	return s, ok
}

// List returns every session.
func (m *Manager) List() []*Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		out = append(out, s)
	}
	return out
}

// Stop stops the session of key (SIGHUP and SIGTERM, SIGKILL after the
// grace period) and waits until its process and goroutines are gone.
func (m *Manager) Stop(ctx context.Context, key Key) error {
	s, ok := m.Get(key)
	if !ok {
		return fmt.Errorf("stop session %s: %w", key, ErrNotFound)
	}
	if err := s.control(ctx, ctrlReq{op: opStop}); err != nil {
		return fmt.Errorf("stop session %s: %w", key, err)
	}
	return nil
}

// Restart stops the session's process and starts it again, with spec if not
// nil. A claude session resumes its conversation. Restart revives a failed
// session and resets its crash count.
func (m *Manager) Restart(ctx context.Context, key Key, spec *Spec) error {
	s, ok := m.Get(key)
	if !ok {
		return fmt.Errorf("restart session %s: %w", key, ErrNotFound)
	}
	req := ctrlReq{op: opRestart}
	if spec != nil {
		sp, err := Check(*spec)
		if err != nil {
			return fmt.Errorf("restart session %s: %w", key, err)
		}
		req.spec = &sp
	}
	if err := s.control(ctx, req); err != nil {
		return fmt.Errorf("restart session %s: %w", key, err)
	}
	return nil
}

// Close stops every session and waits for them. Start fails afterwards.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, s := range m.List() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Stop(ctx, s.key); err != nil && !errors.Is(err, ErrNotFound) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	m.watchOnce.Do(func() {}) // none starts from now on
	if m.watcher != nil {
		if err := m.watcher.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close file watcher: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) remove(s *Session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sessions[s.key] == s {
		delete(m.sessions, s.key)
	}
}
