// Package session runs one long-lived agent process per office agent in a
// pseudo-terminal, and turns what the agent writes into text lines for the
// protocol parser: from Claude Code's JSONL transcript (exact, with an
// identity per entry), or, for any other CLI agent, from a terminal screen
// model. It types untrusted input safely, tells when an agent is ready for
// input, restarts crashed agents with backoff, and fans the raw output out to
// viewers through bounded queues with a scrollback ring.
//
// Data flows: PTY bytes → scrollback + viewers (+ screen → lines, command
// agents); transcript file → lines (Claude Code); both → Options.OnText.
package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"
)

// Key identifies a session: one per office agent.
type Key struct{ OfficeID, AgentID string }

func (k Key) String() string { return k.OfficeID + "/" + k.AgentID }

// Status is a session's state.
type Status string

// Session statuses. starting → ready ↔ busy → stopped, exited or crashed;
// crashed → starting again after a backoff, or failed after too many crashes
// in the restart window. Any running status → needs_attention while the
// agent shows a dialog instead of its input prompt, and back when it is gone.
const (
	StatusStarting Status = "starting"
	StatusReady    Status = "ready"
	StatusBusy     Status = "busy"
	// StatusNeedsAttention: the agent shows a dialog (folder trust, API-key
	// approval, a permission prompt…); Info.Detail holds its text. Nothing
	// is typed into it; a person answers it (Session.Input).
	StatusNeedsAttention Status = "needs_attention"
	StatusStopped        Status = "stopped" // stopped on request
	StatusExited         Status = "exited"  // the agent exited by itself with status 0; not restarted
	StatusCrashed        Status = "crashed" // non-zero exit or killed by a signal; restarted after a backoff
	StatusFailed         Status = "failed"  // crashed too often; not restarted until Restart
)

// Kinds of launch spec.
const (
	KindClaude  = "claude"
	KindCommand = "command"
)

// Spec says what to run in a session.
type Spec struct {
	Kind    string   // "claude" (default) | "command"
	Command string   // executable; for claude, the claude binary path (default "claude")
	Args    []string // extra arguments
	Env     []string // KEY=VALUE added to a minimal inherited environment
	Dir     string   // working directory (created if missing)
	User    string   // OS user (name or uid) to run as; empty: the server's (see runAs)
	Cols    int      // default 200
	Rows    int      // default 50

	// Command kind.
	PromptPattern string        // regexp on the screen's last non-empty line → ready
	Quiescence    time.Duration // this long without output (+prompt) → ready; default 500ms

	// Claude kind.
	ConversationID     string // --session-id on the first start, --resume afterwards; generated when empty (see Info)
	Resume             bool   // start with --resume ConversationID (falls back to --session-id when no transcript exists yet)
	AppendSystemPrompt string
	PermissionMode     string
	Model              string
	Home               string // HOME for the agent; empty: the server's own
	// ConfigDir is Claude Code's configuration directory for this agent
	// (CLAUDE_CONFIG_DIR): its .claude.json is prepared there (onboarding
	// done, the API key approved, the working folder and its git root
	// trusted) and its transcripts are kept there. Empty: $HOME/.claude and
	// $HOME/.claude.json, left as they are.
	ConfigDir string
	// CredentialsDir is where Claude Code finds a logged-in user's
	// credentials (.credentials.json; CLAUDE_SECURESTORAGE_CONFIG_DIR), used
	// in place so a refreshed login is shared and nothing is copied. Empty:
	// ConfigDir.
	CredentialsDir string
	// TranscriptAfter is a resume cursor: the uuid of the last transcript
	// entry already consumed (the last Text.ID the caller acted on). Entries
	// up to and including it are not emitted again, so a restarted server
	// does not re-dispatch old messages. Empty: emit from the beginning.
	TranscriptAfter string
}

// Text is a chunk of the agent's words, for the protocol parser.
type Text struct {
	Key Key
	// Lines are in order; exactly what the agent wrote (transcript) or what
	// is seen on its screen (command agents).
	Lines []string
	// ID identifies the chunk. For claude it is the transcript entry uuid,
	// stable across server restarts (use it as the resume cursor
	// Spec.TranscriptAfter). For command agents it is "screen:<n>", unique
	// within the session's life.
	ID string
	// TurnEnd: the agent's turn ended after these lines; flush the parser.
	TurnEnd bool
	// Lost counts lines of a command agent's screen that were dropped before
	// these Lines because OnText did not keep up (the session holds at most
	// 1 MiB of undispatched lines; the PTY reader never waits). Zero for
	// claude sessions, whose transcript is durable.
	Lost int
}

// Info describes a session.
type Info struct {
	Key            Key
	Kind           string
	PID            int
	Status         Status
	StartedAt      time.Time // start of the current (or last) process
	LastOutputAt   time.Time
	ExitCode       int // of the last process; -1 when killed by a signal
	Restarts       int // process starts after the first
	Cols, Rows     int
	ConversationID string // claude: the conversation id to persist (resume with it)
	Transcript     string // claude: the transcript file followed
	Notice         string // claude: last Notification hook message (e.g. a permission prompt)
	Err            string // last launch or exit error
	// Detail says why the session is in its status: the dialog's text
	// (needs_attention), or how the last process ended ("exit status 1")
	// followed by the last lines of its screen (exited, crashed, failed).
	Detail string
	// LastLines are the last non-empty lines of the screen when the last
	// process ended: the reason a crash shows only in the terminal.
	LastLines []string
}

// Options configure a Manager.
type Options struct {
	Scrollback     int                     // bytes of scrollback per session; default 1 MiB
	RestartBackoff time.Duration           // first delay after a crash, doubled per crash in the window; default 1s
	MaxRestarts    int                     // crashes tolerated in RestartWindow before failed; default 5
	RestartWindow  time.Duration           // default 5 min
	StopGrace      time.Duration           // SIGHUP/SIGTERM → SIGKILL delay; default 3s
	EnterDelay     time.Duration           // pause between typed text and Enter; default 250ms
	OnStatus       func(Key, Status, Info) // every status change; must not block
	OnText         func(Text)              // from one goroutine per session, in order; must not block long
	Logger         *slog.Logger
	// Paused, when set, is asked before a claude session reads its
	// transcript: true means the consumer of OnText is behind, and the
	// transcript (durable) and hook signals are left unread until it
	// turns false (backpressure: nothing is lost, memory stays bounded).
	// Command sessions are never paused: a screen cannot wait, so their
	// undispatched lines are bounded and the excess counted (Text.Lost).
	// Called from the session's worker; must be quick.
	Paused func(Key) bool
	// Keeper, when set, is the command line of a keeper (RunKeeper, e.g.
	// {"/path/to/office-server", "keeper"}) that every agent runs under,
	// so that its whole process tree ends with the session and with the
	// server (see keeper.go).
	Keeper []string
}

// Errors.
var (
	ErrExists   = errors.New("session already exists")
	ErrNotFound = errors.New("session not found")
	ErrStopped  = errors.New("session stopped")
	ErrFailed   = errors.New("session failed")
	ErrEmpty    = errors.New("empty input")
	ErrExited   = errors.New("agent exited")
	ErrClosed   = errors.New("manager closed")
	// ErrNotReceived: text was typed but the agent never acknowledged it
	// (Claude Code: no user entry in its transcript), after the retries.
	ErrNotReceived = errors.New("typed text not received by the agent")
)

// Manager owns the sessions: one per Key.
type Manager struct {
	opts     Options
	mu       sync.Mutex
	sessions map[Key]*Session
	closed   bool
}

// NewManager returns a Manager with opts, defaults filled in.
func NewManager(opts Options) *Manager {
	if opts.Scrollback == 0 {
		opts.Scrollback = 1 << 20
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
	return &Manager{opts: opts, sessions: make(map[Key]*Session)}
}

// Start starts a session for key. It fails with ErrExists if one is running
// (a session whose agent exited or failed is replaced), or when the first
// launch fails (the command cannot be started).
func (m *Manager) Start(ctx context.Context, key Key, spec Spec) (*Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	spec, err := normalize(spec)
	if err != nil {
		return nil, fmt.Errorf("start session %s: %w", key, err)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, fmt.Errorf("start session %s: %w", key, ErrClosed)
	}
	if old, ok := m.sessions[key]; ok {
		if st := old.Status(); st != StatusExited && st != StatusFailed {
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
		sp, err := normalize(*spec)
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
	return errors.Join(errs...)
}

func (m *Manager) remove(s *Session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sessions[s.key] == s {
		delete(m.sessions, s.key)
	}
}

func normalize(spec Spec) (Spec, error) {
	if spec.Kind == "" {
		spec.Kind = KindClaude
	}
	switch spec.Kind {
	case KindClaude:
		if spec.Command == "" {
			spec.Command = "claude"
		}
		if spec.Quiescence <= 0 {
			spec.Quiescence = 300 * time.Millisecond
		}
	case KindCommand:
		if spec.Command == "" {
			return spec, errors.New("command spec without a command")
		}
		if spec.Quiescence <= 0 {
			spec.Quiescence = 500 * time.Millisecond
		}
		if spec.PromptPattern != "" {
			if _, err := regexp.Compile(spec.PromptPattern); err != nil {
				return spec, fmt.Errorf("prompt pattern: %w", err)
			}
		}
	default:
		return spec, fmt.Errorf("unknown session kind %q", spec.Kind)
	}
	if spec.Cols <= 0 {
		spec.Cols = 200
	}
	if spec.Rows <= 0 {
		spec.Rows = 50
	}
	if spec.Dir != "" {
		d, err := absDir(spec.Dir)
		if err != nil {
			return spec, err
		}
		spec.Dir = d
	}
	return spec, nil
}

// proc is one run of the agent's process.
type proc struct {
	cmd        *exec.Cmd
	pty        *os.File
	exited     chan struct{} // closed after Wait
	readerDone chan struct{}
	waitErr    error
	started    time.Time
}

type ctrlOp int

const (
	opStop ctrlOp = iota
	opRestart
)

type ctrlReq struct {
	op   ctrlOp
	spec *Spec
	done chan error
}

type sendReq struct {
	text  string
	taken bool
	tries int // times typed
	done  chan error
}

// pendingAck is text typed into the agent that it has not acknowledged yet
// (worker-owned). Send returns only once the agent has it: Claude Code
// writes the prompt into its transcript as a user entry; another CLI
// writes something to its terminal after the Enter (its echo at least).
type pendingAck struct {
	r       *sendReq
	p       *proc
	typedAt time.Time // typing began
}

// Session is one agent process (restarted as needed) and its output.
type Session struct {
	m   *Manager
	key Key
	log *slog.Logger

	mu          sync.Mutex
	spec        Spec
	prompt      *regexp.Regexp
	info        Info
	p           *proc
	lines       *screenLines // command kind
	term        screenModel  // claude: the screen, for readiness and dialogs
	attnFrom    Status       // the status a dialog interrupted (needs_attention)
	keys        keyLine      // command kind: a person's keystrokes
	turnEndAt   time.Time    // command kind: the live area was last read
	modes       modeTracker
	lastOutput  time.Time
	inputAt     time.Time
	turnEnded   bool // claude: transcript said end_turn since the last input
	awaitSubmit bool // claude: typed, UserPromptSubmit not seen yet
	reEntered   bool // claude: Enter was repeated for this input
	crashes     []time.Time
	sendQ       []*sendReq
	ended       bool // stopped for good

	// output fan-out
	outMu   sync.Mutex
	ring    ring
	viewers map[*Viewer]struct{}

	wake chan struct{}
	ctrl chan ctrlReq
	done chan struct{}

	// worker-owned
	ack     *pendingAck
	claude  *claudeState
	textSeq int
	restart <-chan time.Time
}

func newSession(m *Manager, key Key, spec Spec) *Session {
	s := &Session{
		m:    m,
		key:  key,
		log:  m.opts.Logger.With("office", key.OfficeID, "agent", key.AgentID),
		spec: spec,
		wake: make(chan struct{}, 1),
		ctrl: make(chan ctrlReq),
		done: make(chan struct{}),
	}
	s.ring.limit = m.opts.Scrollback
	s.info = Info{Key: key, Kind: spec.Kind, Cols: spec.Cols, Rows: spec.Rows}
	return s
}

// Key returns the session's key.
func (s *Session) Key() Key { return s.key }

// Status returns the session's status.
func (s *Session) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info.Status
}

// Info returns a snapshot of the session's state.
func (s *Session) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.infoLocked()
}

func (s *Session) infoLocked() Info {
	i := s.info
	i.LastOutputAt = s.lastOutput
	return i
}

// Done is closed when the session has ended for good (stopped).
func (s *Session) Done() <-chan struct{} { return s.done }

// Screen returns the visible rows of the agent's screen as a person sees
// them (nil before the first start).
func (s *Session) Screen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.screenRowsLocked()
}

func (s *Session) screenRowsLocked() []string {
	switch {
	case s.term != nil:
		return s.term.Lines()
	case s.lines != nil:
		return s.lines.scr.Lines()
	}
	return nil
}

// setStatus changes the status under s.mu and reports it after unlocking.
func (s *Session) setStatusLocked(st Status) (func(), bool) {
	if s.info.Status == st {
		return func() {}, false
	}
	s.info.Status = st
	info := s.infoLocked()
	return func() {
		s.log.Debug("session status", "status", st)
		if f := s.m.opts.OnStatus; f != nil {
			f(s.key, st, info)
		}
	}, true
}

func (s *Session) setStatus(st Status) {
	s.mu.Lock()
	report, _ := s.setStatusLocked(st)
	s.mu.Unlock()
	report()
}

func (s *Session) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Session) control(ctx context.Context, r ctrlReq) error {
	r.done = make(chan error, 1)
	select {
	case s.ctrl <- r:
	case <-s.done:
		if r.op == opStop {
			return nil
		}
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-r.done:
		if r.op == opStop {
			<-s.done
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// launch starts the agent's process in a new PTY.
func (s *Session) launch() error {
	s.mu.Lock()
	spec := s.spec
	s.mu.Unlock()
	if spec.Dir != "" {
		if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
			return fmt.Errorf("create working directory: %w", err)
		}
	}
	var (
		args []string
		env  []string
		err  error
	)
	switch spec.Kind {
	case KindClaude:
		if s.claude == nil || s.claude.id != spec.ConversationID || spec.ConversationID == "" {
			old := s.claude
			s.claude, err = newClaudeState(spec, old)
			if err != nil {
				return err
			}
			if old != nil {
				old.cleanup()
			}
			s.mu.Lock()
			s.spec.ConversationID = s.claude.id // a generated id is kept for restarts
			s.mu.Unlock()
		}
		args, env, err = s.claude.prepare(spec)
		if err != nil {
			return err
		}
	default:
		args = spec.Args
		env = buildEnv(spec, false)
	}
	cmd := exec.Command(spec.Command, args...)
	cmd.Env = env
	cmd.Dir = spec.Dir
	cred, err := runAs(cmd, spec)
	if err == nil {
		err = keep(cmd, s.m.opts.Keeper, s.m.opts.StopGrace, cred)
	}
	if err != nil {
		s.mu.Lock()
		s.info.Err = err.Error()
		s.mu.Unlock()
		return fmt.Errorf("launch %s: %w", spec.Command, err)
	}
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(spec.Cols), Rows: uint16(spec.Rows)})
	if err != nil {
		s.mu.Lock()
		s.info.Err = err.Error()
		s.mu.Unlock()
		return fmt.Errorf("launch %s: %w", spec.Command, err)
	}
	p := &proc{cmd: cmd, pty: ptmx, exited: make(chan struct{}), readerDone: make(chan struct{}), started: time.Now()}
	s.mu.Lock()
	s.p = p
	s.modes = modeTracker{}
	s.turnEnded = false
	s.awaitSubmit, s.reEntered = false, false
	s.keys = keyLine{}
	s.inputAt = time.Time{}
	s.lastOutput = time.Time{}
	if spec.Kind == KindCommand {
		s.lines = &screenLines{scr: newScreen(spec.Cols, spec.Rows), cols: spec.Cols}
		if spec.PromptPattern != "" {
			s.prompt = regexp.MustCompile(spec.PromptPattern)
		} else {
			s.prompt = nil
		}
		s.term = nil
	} else {
		s.lines = nil
		s.term = newScreen(spec.Cols, spec.Rows)
	}
	s.info.PID = cmd.Process.Pid
	s.info.StartedAt = p.started
	s.info.ExitCode = 0
	s.info.Err = ""
	s.info.Detail, s.info.LastLines = "", nil
	s.info.Cols, s.info.Rows = spec.Cols, spec.Rows
	s.info.Kind = spec.Kind
	if s.claude != nil && spec.Kind == KindClaude {
		s.info.ConversationID = s.claude.id
		s.info.Transcript = s.claude.tr.path
	}
	report, _ := s.setStatusLocked(StatusStarting)
	s.mu.Unlock()
	report()
	go s.read(p)
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
		s.poke()
	}()
	return nil
}

// read copies the PTY's output to the scrollback, the viewers and the
// screen. It never waits for a consumer.
func (s *Session) read(p *proc) {
	defer close(p.readerDone)
	buf := make([]byte, 16<<10)
	for {
		n, err := p.pty.Read(buf)
		if n > 0 {
			chunk := make([]byte, n)
			copy(chunk, buf[:n])
			s.broadcast(chunk)
			s.mu.Lock()
			if s.p == p {
				s.lastOutput = time.Now()
				s.modes.write(chunk)
				if s.lines != nil {
					s.lines.write(chunk)
				}
				if s.term != nil {
					_, _ = s.term.Write(chunk)
					_ = s.term.TakeScrolledRows() // only the visible rows matter
				}
			}
			s.mu.Unlock()
			s.poke()
		}
		if err != nil {
			return
		}
	}
}

// terminate ends p: SIGHUP and SIGTERM to its process group, SIGKILL after
// the grace period; then it closes the PTY and waits for the reader.
func (s *Session) terminate(p *proc) {
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGHUP)
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	grace := s.m.opts.StopGrace
	if len(s.m.opts.Keeper) > 0 {
		grace += time.Second // the keeper kills the tree after StopGrace
	}
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.exited
	}
	s.reap(p)
}

// reap releases what is left of an exited process: any of its process
// group still holding the terminal is killed, the PTY closed and the
// reader awaited.
func (s *Session) reap(p *proc) {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	// Let the reader drain what the process wrote last (its reason for
	// exiting, often): with every holder of the terminal gone it ends by
	// itself. Closing the PTY first would drop that output.
	select {
	case <-p.readerDone:
	case <-time.After(500 * time.Millisecond):
	}
	_ = p.pty.Close()
	<-p.readerDone
}

// run is the session's worker: it owns the process lifecycle, readiness,
// typing and text dispatch. It ends when the session is stopped.
func (s *Session) run() {
	defer close(s.done)
	tick := time.NewTimer(pollBusy)
	defer tick.Stop()
	for {
		var exited chan struct{}
		s.mu.Lock()
		if s.p != nil {
			exited = s.p.exited
		}
		// Poll often while something is expected (start-up, a turn, queued
		// input); an idle session only wakes now and then (output, Send
		// and exits wake it at once).
		d := pollIdle
		if st := s.info.Status; st == StatusStarting || st == StatusBusy || len(s.sendQ) > 0 {
			d = pollBusy
		}
		s.mu.Unlock()
		tick.Reset(d)
		select {
		case <-exited:
			s.onExit()
		case <-s.restart:
			s.restart = nil
			s.relaunch()
		case r := <-s.ctrl:
			if s.handle(r) {
				return
			}
		case <-s.wake:
		case <-tick.C:
		}
		s.step()
	}
}

// Worker poll intervals: hooks and the transcript are files.
const (
	pollBusy = 100 * time.Millisecond
	pollIdle = 500 * time.Millisecond
)

// handle serves a control request; it reports whether the session ended.
func (s *Session) handle(r ctrlReq) bool {
	s.mu.Lock()
	p := s.p
	s.mu.Unlock()
	if p != nil {
		s.terminate(p)
		s.step() // dispatch what the agent wrote last
		s.mu.Lock()
		s.p = nil
		s.mu.Unlock()
		s.recordExit(p)
	}
	s.restart = nil
	if a := s.ack; a != nil {
		if r.op == opStop {
			s.ack = nil
			a.r.done <- ErrStopped
		} else {
			s.unacked(a.r, ErrExited)
		}
	}
	switch r.op {
	case opStop:
		s.setStatus(StatusStopped)
		s.finish(ErrStopped)
		r.done <- nil
		return true
	default:
		s.mu.Lock()
		if r.spec != nil {
			s.spec = *r.spec
		}
		if s.spec.Kind == KindClaude && s.claude != nil && (r.spec == nil || r.spec.ConversationID == "" || r.spec.ConversationID == s.claude.id) {
			s.spec.ConversationID = s.claude.id
			s.spec.Resume = true
		}
		s.crashes = nil
		s.info.Restarts++
		s.mu.Unlock()
		err := s.launch()
		if err != nil {
			s.crashed(err)
		}
		r.done <- err
		return false
	}
}

// failSends fails every queued Send with err.
func (s *Session) failSends(err error) {
	s.mu.Lock()
	q := s.sendQ
	s.sendQ = nil
	s.mu.Unlock()
	for _, r := range q {
		r.done <- err
	}
}

// finish ends the session for good.
func (s *Session) finish(err error) {
	s.mu.Lock()
	s.ended = true
	q := s.sendQ
	s.sendQ = nil
	s.mu.Unlock()
	for _, r := range q {
		r.done <- err
	}
	s.closeViewers()
	s.cleanup()
	s.m.remove(s)
}

func (s *Session) cleanup() {
	if s.claude != nil {
		s.claude.cleanup()
	}
}

// recordExit keeps how p ended and what its screen showed last: for an
// agent that fails at start (not logged in, refused flags), the reason is
// only on its screen.
func (s *Session) recordExit(p *proc) {
	code := p.cmd.ProcessState.ExitCode()
	s.mu.Lock()
	s.info.ExitCode = code
	s.info.PID = 0
	how := "exit status 0"
	if p.waitErr != nil {
		s.info.Err = p.waitErr.Error()
		how = s.info.Err
	}
	s.info.LastLines = lastLines(s.screenRowsLocked(), exitLines)
	s.info.Detail = cutText(strings.Join(append([]string{how}, s.info.LastLines...), "\n"), maxDialogText)
	s.mu.Unlock()
}

// exitLines is how many of the last screen lines an exit records.
const exitLines = 12

// onExit handles an exit nobody asked for.
func (s *Session) onExit() {
	s.mu.Lock()
	p := s.p
	s.mu.Unlock()
	if p == nil {
		return
	}
	s.reap(p)
	s.step()
	s.flushScreen() // the agent's last words
	s.mu.Lock()
	s.p = nil
	s.mu.Unlock()
	s.recordExit(p)
	if p.cmd.ProcessState.ExitCode() == 0 {
		if a := s.ack; a != nil {
			s.ack = nil
			a.r.done <- ErrExited
		}
		s.setStatus(StatusExited)
		s.failSends(ErrExited)
		return
	}
	if a := s.ack; a != nil {
		s.unacked(a.r, ErrExited) // typed again into the restarted agent
	}
	s.crashed(p.waitErr)
}

// crashed records a crash and schedules a restart, or fails the session.
func (s *Session) crashed(err error) {
	now := time.Now()
	o := s.m.opts
	s.mu.Lock()
	if err != nil {
		s.info.Err = err.Error()
	}
	keep := s.crashes[:0]
	for _, t := range s.crashes {
		if now.Sub(t) < o.RestartWindow {
			keep = append(keep, t)
		}
	}
	s.crashes = append(keep, now)
	n := len(s.crashes)
	s.mu.Unlock()
	if n > o.MaxRestarts {
		s.mu.Lock()
		s.info.Detail = cutText(fmt.Sprintf("crashed %d times in %s; not restarted until an operator restarts it. Last: %s", n, o.RestartWindow, s.info.Detail), maxDialogText)
		s.mu.Unlock()
		s.log.Error("agent failed: too many crashes", "crashes", n, "window", o.RestartWindow, "err", err)
		s.setStatus(StatusFailed)
		s.failSends(ErrFailed)
		return
	}
	s.setStatus(StatusCrashed)
	d := o.RestartBackoff << (n - 1)
	if d > o.RestartWindow || d <= 0 {
		d = o.RestartWindow
	}
	s.mu.Lock()
	screen := strings.Join(s.info.LastLines, " | ")
	s.mu.Unlock()
	s.log.Warn("agent crashed; restarting", "err", err, "in", d, "crashes", n, "screen", screen)
	s.restart = time.After(d)
}

func (s *Session) relaunch() {
	s.mu.Lock()
	if s.spec.Kind == KindClaude && s.claude != nil {
		s.spec.ConversationID = s.claude.id
		s.spec.Resume = true
	}
	s.info.Restarts++
	s.mu.Unlock()
	if err := s.launch(); err != nil {
		s.crashed(err)
	}
}

// step does the worker's periodic work: follow signals and the transcript,
// detect readiness and turn ends, dispatch text, type queued input.
func (s *Session) step() {
	now := time.Now()
	s.mu.Lock()
	kind := s.spec.Kind
	st := s.info.Status
	s.mu.Unlock()

	var texts []Text
	var prompts []string
	var report func()
	if kind == KindClaude && s.claude != nil {
		texts, report = s.claudeStep(now, st)
		prompts = s.claude.tr.takePrompts()
	} else {
		texts, report = s.screenStep(now, st)
	}
	if f := s.m.opts.OnText; f != nil {
		for _, t := range texts {
			f(t)
		}
	}
	// Status after the texts: whoever reacts to "ready" has the turn's
	// words already.
	report()
	s.checkAck(now, prompts)
	s.typeNext()
}

// screenStep dispatches scrolled-off lines and detects turn end on the
// screen of a command agent.
func (s *Session) screenStep(now time.Time, st Status) ([]Text, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	texts := s.screenTexts(now, st)
	if len(texts) > 0 && texts[len(texts)-1].TurnEnd {
		report, _ := s.setStatusLocked(StatusReady)
		return texts, report
	}
	return texts, func() {}
}

func (s *Session) screenTexts(now time.Time, st Status) []Text {
	var texts []Text
	if s.lines == nil || s.p == nil {
		return nil
	}
	if l, lost := s.lines.take(); len(l) > 0 || lost > 0 {
		texts = append(texts, s.newScreenText(l, lost, false))
	}
	switch st {
	case StatusStarting, StatusBusy:
	case StatusReady:
		// Output nobody asked for (a background job finishing): read it
		// once it settles behind a prompt. Only with a prompt pattern: the
		// prompt row, which may hold what a person is typing, is skipped.
		if s.prompt == nil || !s.lastOutput.After(s.turnEndAt) {
			return texts
		}
	default:
		return texts
	}
	q := s.spec.Quiescence
	if now.Sub(s.lastOutput) < q || now.Sub(s.p.started) < q {
		return texts
	}
	// After typing, wait for the program to react (its echo at least),
	// unless it stays silent much longer than the quiescence period.
	if !s.inputAt.IsZero() && !s.lastOutput.After(s.inputAt) && now.Sub(s.inputAt) < 10*q {
		return texts
	}
	var skip func(string) bool
	if s.prompt != nil {
		last := ""
		rows := s.lines.scr.Lines()
		for i := len(rows) - 1; i >= 0; i-- {
			if r := trimRight(rows[i]); r != "" {
				last = r
				break
			}
		}
		if !s.prompt.MatchString(last) {
			return texts
		}
		skip = s.prompt.MatchString
	}
	s.lines.turnEnd(skip)
	s.turnEndAt = now
	if l, lost := s.lines.take(); len(l) > 0 || lost > 0 || st != StatusReady {
		texts = append(texts, s.newScreenText(l, lost, true))
	}
	return texts
}

// flushScreen dispatches the live area of a command agent that exited.
func (s *Session) flushScreen() {
	s.mu.Lock()
	if s.lines == nil {
		s.mu.Unlock()
		return
	}
	s.lines.turnEnd(nil)
	l, lost := s.lines.take()
	t := s.newScreenText(l, lost, true)
	s.mu.Unlock()
	if f := s.m.opts.OnText; f != nil && (len(t.Lines) > 0 || t.Lost > 0) {
		f(t)
	}
}

func (s *Session) newScreenText(lines []string, lost int, turnEnd bool) Text {
	s.textSeq++
	if lost > 0 {
		s.log.Warn("agent output lost: the session's consumer did not keep up", "lines", lost)
	}
	return Text{Key: s.key, Lines: lines, ID: fmt.Sprintf("screen:%d", s.textSeq), TurnEnd: turnEnd, Lost: lost}
}

// Send types text into the agent when it is ready for input: FIFO, one turn
// at a time. The text is untrusted and is sanitised first (see Sanitize).
// Multi-line text (or text with a tab) goes as a bracketed paste when the
// program enabled mode 2004; Enter follows as a separate write. Send
// returns once the text was typed, or with ctx's error (the text is then
// not typed), ErrEmpty (nothing left after sanitising), ErrStopped,
// ErrFailed or ErrExited. Text queued while the agent restarts after a
// crash waits for it.
func (s *Session) Send(ctx context.Context, text string) error {
	text = trimNewlines(Sanitize(text))
	if text == "" {
		return ErrEmpty
	}
	r := &sendReq{text: text, done: make(chan error, 1)}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return ErrStopped
	}
	switch s.info.Status {
	case StatusFailed:
		s.mu.Unlock()
		return ErrFailed
	case StatusExited:
		s.mu.Unlock()
		return ErrExited
	}
	s.sendQ = append(s.sendQ, r)
	s.mu.Unlock()
	s.poke()
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
	}
	s.mu.Lock()
	if !r.taken {
		for i, q := range s.sendQ {
			if q == r {
				s.sendQ = append(s.sendQ[:i], s.sendQ[i+1:]...)
				break
			}
		}
		s.mu.Unlock()
		return ctx.Err()
	}
	s.mu.Unlock()
	return <-r.done
}

// typeNext types the head of the send queue if the agent is ready and the
// text typed before was acknowledged.
func (s *Session) typeNext() {
	s.mu.Lock()
	if s.ack != nil || len(s.sendQ) == 0 || s.info.Status != StatusReady || s.p == nil || isClosed(s.p.exited) {
		s.mu.Unlock()
		return
	}
	r := s.sendQ[0]
	s.sendQ = s.sendQ[1:]
	r.taken = true
	r.tries++
	p := s.p
	paste := s.modes.paste
	if s.lines != nil {
		s.lines.typed(r.text)
	}
	s.inputAt = time.Now()
	s.turnEnded = false
	s.awaitSubmit, s.reEntered = s.spec.Kind == KindClaude, false
	report, _ := s.setStatusLocked(StatusBusy)
	s.mu.Unlock()
	report()
	typedAt := time.Now()
	if err := s.typeText(p, r.text, paste); err != nil {
		if isClosed(p.exited) {
			s.unacked(r, ErrExited) // typed into a process that died: again after the restart
			return
		}
		r.done <- err
		return
	}
	s.ack = &pendingAck{r: r, p: p, typedAt: typedAt}
	s.poke()
}

// Acknowledgement bounds.
const (
	// maxTries bounds how often one text is typed when it was not
	// acknowledged (the agent crashed first, or its prompt lost it).
	maxTries = 3
	// claudeAckTimeout: a prompt typed into Claude Code that has no user
	// entry in the transcript this long after its Enter was not received.
	claudeAckTimeout = 30 * time.Second
	// silentAck: a CLI that prints nothing after a line was typed (no echo,
	// no reaction) but keeps running is taken to have read it after this.
	silentAck = 3 * time.Second
)

// checkAck resolves the pending acknowledgement: prompts are the user
// entries Claude Code's transcript gained since the last check.
func (s *Session) checkAck(now time.Time, prompts []string) {
	a := s.ack
	if a == nil {
		return
	}
	s.mu.Lock()
	kind, lastOut, st := s.spec.Kind, s.lastOutput, s.info.Status
	s.mu.Unlock()
	if kind == KindClaude {
		for _, p := range prompts {
			if samePrompt(p, a.r.text) {
				s.acked()
				return
			}
		}
		if now.Sub(a.typedAt) > claudeAckTimeout {
			if st == StatusReady || st == StatusBusy {
				s.log.Warn("typed text not received: no user entry in the transcript", "after", now.Sub(a.typedAt).Round(time.Millisecond))
			}
			s.unacked(a.r, ErrNotReceived)
		}
		return
	}
	if lastOut.After(a.typedAt) || now.Sub(a.typedAt) > silentAck {
		s.acked()
	}
}

func (s *Session) acked() {
	r := s.ack.r
	s.ack = nil
	r.done <- nil
}

// unacked takes r back: it is typed again when the agent is ready (first in
// line), up to maxTries; then Send fails with err.
func (s *Session) unacked(r *sendReq, err error) {
	if s.ack != nil && s.ack.r == r {
		s.ack = nil
	}
	s.mu.Lock()
	if r.tries < maxTries && !s.ended {
		r.taken = false // a Send given up meanwhile may take it out again
		s.sendQ = append([]*sendReq{r}, s.sendQ...)
		s.mu.Unlock()
		s.poke()
		return
	}
	s.mu.Unlock()
	r.done <- fmt.Errorf("%w (typed %d times): %w", ErrNotReceived, r.tries, err)
}

// samePrompt reports whether a user entry of Claude Code's transcript is
// the text typed: compared with whitespace runs folded (a paste may be
// re-indented), by its first 200 characters.
func samePrompt(entry, typed string) bool {
	e, t := foldSpace(entry), foldSpace(typed)
	if e == t {
		return true
	}
	if len(t) > 200 {
		t = cutText(t, 200)
	}
	return t != "" && strings.Contains(e, t)
}

func foldSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

func (s *Session) typeText(p *proc, text string, paste bool) error {
	write := func(b string) error {
		_ = p.pty.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, err := p.pty.Write([]byte(b))
		if err != nil {
			return fmt.Errorf("type into session %s: %w", s.key, err)
		}
		return nil
	}
	var body string
	switch {
	case paste && (containsNewline(text) || strings.IndexByte(text, '\t') >= 0):
		// A tab typed as a key may complete or switch modes; pasted, it is
		// text.
		body = "\x1b[200~" + text + "\x1b[201~"
	case !containsNewline(text):
		body = text
	case paste:
		body = "\x1b[200~" + text + "\x1b[201~"
	default:
		body = replaceNewlines(text, "\r")
	}
	if err := write(body); err != nil {
		return err
	}
	select {
	case <-time.After(s.m.opts.EnterDelay):
	case <-p.exited:
		return fmt.Errorf("type into session %s: %w", s.key, errors.New("agent exited"))
	}
	return write("\r")
}

// Input writes raw keystrokes from the console's controlling viewer. On a
// command agent's screen the echo of what the person types is not the
// agent's words either: the keystrokes are followed into a line (printable
// characters, backspace; escape sequences ignored) that the echo filter
// drops when it shows up on screen.
func (s *Session) Input(p []byte) error {
	s.mu.Lock()
	pr := s.p
	if pr != nil && s.lines != nil {
		if s.keys.feed(p, s.lines) {
			s.inputAt = time.Now()
			report, _ := s.setStatusLocked(StatusBusy)
			defer report()
		}
	}
	s.mu.Unlock()
	if pr == nil {
		return fmt.Errorf("input to session %s: %w", s.key, errors.New("no running agent"))
	}
	_ = pr.pty.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := pr.pty.Write(p); err != nil {
		return fmt.Errorf("input to session %s: %w", s.key, err)
	}
	return nil
}

// keyLine follows a person's keystrokes into the line being typed.
type keyLine struct {
	line []rune
	esc  int // 0 none, 1 after ESC, 2 in CSI/SS3
	utf  []byte
}

// feed takes keystrokes; each completed line (Enter) is registered as
// typed text with x. It reports whether a line was completed.
func (k *keyLine) feed(p []byte, x *screenLines) bool {
	entered := false
	for _, c := range p {
		switch k.esc {
		case 1:
			if c == '[' || c == 'O' {
				k.esc = 2
			} else {
				k.esc = 0
			}
			continue
		case 2:
			if c >= 0x40 && c <= 0x7e {
				k.esc = 0
			}
			continue
		}
		if len(k.utf) > 0 || c >= 0x80 {
			k.utf = append(k.utf, c)
			if utf8.FullRune(k.utf) {
				r, _ := utf8.DecodeRune(k.utf)
				k.utf = k.utf[:0]
				k.line = append(k.line, r)
			}
			continue
		}
		switch c {
		case 0x1b:
			k.esc = 1
		case '\r', '\n':
			x.typed(string(k.line))
			k.line = k.line[:0]
			entered = true
		case 0x7f, 0x08:
			if len(k.line) > 0 {
				k.line = k.line[:len(k.line)-1]
			}
		case 0x15: // Ctrl-U
			k.line = k.line[:0]
		default:
			if c >= 0x20 {
				k.line = append(k.line, rune(c))
			}
		}
	}
	return entered
}

// Resize changes the terminal size of the session (and of later restarts).
func (s *Session) Resize(cols, rows int) error {
	if cols <= 0 || rows <= 0 || cols > 1000 || rows > 1000 {
		return fmt.Errorf("resize session %s: bad size %dx%d", s.key, cols, rows)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spec.Cols, s.spec.Rows = cols, rows
	s.info.Cols, s.info.Rows = cols, rows
	if s.lines != nil {
		s.lines.resized(cols, rows)
	}
	if s.term != nil {
		s.term.Resize(cols, rows)
	}
	if s.p != nil {
		if err := pty.Setsize(s.p.pty, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}); err != nil {
			return fmt.Errorf("resize session %s: %w", s.key, err)
		}
	}
	return nil
}
