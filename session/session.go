// Package session runs one long-lived agent process per office agent in a
// pseudo-terminal, and turns what the agent writes into text lines for the
// protocol parser: from Claude Code's JSONL transcript (exact, with an
// identity per entry), or, for any other CLI agent, from a terminal screen
// model. It types untrusted input safely, tells when an agent is ready for
// input, restarts crashed agents with backoff, and fans the raw output out to
// viewers through bounded queues, each starting from a snapshot of the screen.
//
// Data flows: PTY bytes → viewers' screen + viewers (+ screen → lines, command
// agents); transcript file → lines (Claude Code); both → Options.OnText.
//
// What differs between kinds of agent (launch, where the words come from,
// readiness and turn end, acknowledgement of typed text, resume) is a
// driver per kind, each in its own file and registered in kind.go; a
// Text says where it came from (Text.Source), so a consumer never needs to
// know the kind.
package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/office-server/office-server/session/screen"
)

// Key identifies a session: one per office agent.
type Key struct{ OfficeID, AgentID string }

func (k Key) String() string { return k.OfficeID + "/" + k.AgentID }

// Status is a session's state: one of the office's session statuses
// (office.Session*, the values of agent_sessions.status), those the
// session layer reports. starting → ready ↔ busy → stopped, exited or
// crashed; crashed → starting again after a backoff, or failed after too
// many crashes in the restart window (not restarted until Restart). Any
// running status → needs_attention while the agent shows a dialog instead
// of its input prompt (folder trust, API-key approval, a permission
// prompt…; Info.Detail holds its text, nothing is typed into it, a person
// answers it: Session.Input), and back when it is gone. exited is an exit
// with status 0 (not restarted); crashed a non-zero exit or a signal.
// waiting and hibernated are the office's own: the session layer never
// reports them.
type Status string

// Spec says what to run in a session.
type Spec struct {
	Kind    string   // KindClaude (the default), KindCommand or KindBuiltin: see Kinds
	Command string   // executable; for claude, the claude binary path (default "claude")
	Args    []string // extra arguments
	Env     []string // KEY=VALUE added to a minimal inherited environment
	Dir     string   // working directory (created if missing)
	Cols    int      // default 200
	Rows    int      // default 50
	User    string   // OS user (name or uid) to run as; empty: the server's (see runAs)
	// OfficeName and AgentName are logged beside the key's ids.
	OfficeName, AgentName string

	// Command and builtin kinds.
	PromptPattern string        // regexp on the screen's last non-empty line → ready
	Quiescence    time.Duration // this long without output (+prompt) → ready; default 500ms

	// Builtin kind: the scripted agent Command runs (`Command agent
	// --script Script Args...`).
	Script string

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
	// Permissions are Claude Code permission rules written into its
	// settings ("Bash(npm test:*)", "Edit", "WebFetch(domain:x.org)"):
	// Allow runs without asking, Deny is refused without asking, Ask
	// always asks. See docs/notes/permissions.md.
	Permissions PermissionRules
	// PermissionHookTimeout is the PermissionRequest hook's timeout in
	// Claude Code's settings; zero: 11 minutes. Set it above the office's
	// own timeout, so that the office's deny arrives first.
	PermissionHookTimeout time.Duration
}

// PermissionRules are Claude Code permission rules (settings.json
// "permissions").
type PermissionRules struct {
	Allow, Deny, Ask []string
}

// Text is a chunk of the agent's words, for the protocol parser.
type Text struct {
	Key Key
	// Lines are in order; exactly what the agent wrote (transcript) or what
	// is seen on its screen (command agents).
	Lines []string
	// ID identifies the chunk. From a transcript it is the entry's uuid,
	// stable across server restarts (use it as the resume cursor
	// Spec.TranscriptAfter). From the screen it is unique within the
	// process's life only.
	ID string
	// Source says where the lines were read.
	Source Source
	// TurnEnd: the agent's turn ended after these lines; flush the parser.
	TurnEnd bool
	// Lost counts lines of the screen that were dropped before these Lines
	// because OnText did not keep up (the session holds at most 1 MiB of
	// undispatched lines; the PTY reader never waits). Zero for text from a
	// transcript, which is durable.
	Lost int
}

// Source is where a Text was read.
type Source int

// Sources of text.
const (
	// FromTranscript: a durable transcript (Claude Code's JSONL file). IDs
	// are stable across restarts; nothing is lost.
	FromTranscript Source = iota + 1
	// FromScreen: the terminal screen (any other CLI). IDs are unique
	// within one process's life only; lines may be lost (Text.Lost).
	FromScreen
)

func (s Source) String() string {
	switch s {
	case FromTranscript:
		return "transcript"
	case FromScreen:
		return "screen"
	}
	return fmt.Sprintf("Source(%d)", int(s))
}

// Info describes a session.
type Info struct {
	Key          Key
	Kind         string
	PID          int
	Status       Status
	StartedAt    time.Time // start of the current (or last) process
	LastOutputAt time.Time
	ExitCode     int // of the last process; -1 when killed by a signal
	Restarts     int // process starts after the first
	Cols, Rows   int
	// Resumes: the kind keeps the agent's conversation across restarts of
	// its process (Claude Code resumes it); other agents start blank.
	Resumes        bool
	ConversationID string // claude: the conversation id to persist (resume with it)
	Transcript     string // claude: the transcript file followed
	// Resumed: the current process resumed the agent's conversation
	// (Claude Code --resume), so it knows what it was told before.
	Resumed bool
	Notice  string // claude: last Notification hook message (e.g. a permission prompt)
	Err     string // last launch or exit error
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
	Scrollback     int           // rows of history kept per session for viewers joining late; default 2000
	RestartBackoff time.Duration // first delay after a crash, doubled per crash in the window; default 1s
	MaxRestarts    int           // crashes tolerated in RestartWindow before failed; default 5
	RestartWindow  time.Duration // default 5 min
	StopGrace      time.Duration // SIGHUP/SIGTERM → SIGKILL delay; default 3s
	EnterDelay     time.Duration // bound on the wait for a typed text to be taken before Enter, where no signal comes (awaitLanded); default 250ms
	// Keeper, when set, is the command line of a keeper (RunKeeper, e.g.
	// {"/path/to/office-server", "keeper"}) that every agent runs under,
	// so that its whole process tree ends with the session and with the
	// server (see keeper.go).
	Keeper   []string
	OnStatus func(Key, Status, Info) // every status change; must not block
	OnText   func(Text)              // from one goroutine per session, in order; must not block long
	Logger   *slog.Logger
	// Paused, when set, is asked before a claude session reads its
	// transcript: true means the consumer of OnText is behind, and the
	// transcript (durable) and hook signals are left unread until it
	// turns false (backpressure: nothing is lost, memory stays bounded).
	// Command sessions are never paused: a screen cannot wait, so their
	// undispatched lines are bounded and the excess counted (Text.Lost).
	// Called from the session's worker; must be quick.
	Paused func(Key) bool
	// Hook, when set, is the command line of the PermissionRequest hook
	// (RunPermissionHook, e.g. {"/path/to/office-server", "hook"}): Claude
	// Code agents then hand their tool-permission requests to
	// OnPermission instead of only drawing a dialog (permission.go).
	Hook []string
	// OnPermission gets each permission request; answer it with
	// Manager.DecidePermission. Called from a goroutine of its own per
	// request; it may block (the agent waits anyway).
	OnPermission func(PermissionRequest)
	// OnPermissionEnd is told when a request's hook went away before a
	// decision: answered is true when the dialog was answered in the
	// terminal (the tool ran or failed, the turn ended, a new prompt came),
	// false when the hook ended otherwise (the agent or its session ended).
	OnPermissionEnd func(key Key, id string, answered bool)
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

// Session is one agent process (restarted as needed) and its output. What
// differs between kinds of agent is its driver's (kind.go); the rest is
// here: the state (this file), the process and its worker (process.go),
// typing (typing.go) and the output fan-out (fanout.go).
type Session struct {
	m   *Manager
	key Key
	log *slog.Logger

	mu         sync.Mutex
	spec       Spec
	info       Info
	p          *proc
	drv        driver // the kind's strategy; set by launch, read under mu or by the worker
	drvKind    string // drv's kind
	modes      modeTracker
	lastOutput time.Time
	inputAt    time.Time
	statusAt   time.Time // when info.Status last changed (IdleSince)
	crashes    []time.Time
	sendQ      []*sendReq
	ended      bool // stopped for good

	// output fan-out
	outMu       sync.Mutex
	view        *screen.Screen // what every viewer's terminal shows (fanout.go)
	viewVersion uint64         // counts the changes of view (ScreenLines); from 1
	viewers     map[*Viewer]struct{}

	wake chan struct{}
	ctrl chan ctrlReq
	done chan struct{}

	// worker-owned
	ack     *pendingAck
	restart <-chan time.Time

	// Counters the tests read: the worker's wakes by its timer (no
	// event; an idle session has none, issue 17) and the PTY's reads.
	timerWakes atomic.Int64
	outputs    atomic.Int64
	// and the Enters pressed by what told it the text was taken
	// (awaitLanded), and the texts typed again.
	enters     [enterSignals]atomic.Int64
	typedAgain atomic.Int64
	// and the texts a command agent was taken to have received on a
	// bound (silentAck, queuedAck) rather than on the input queue.
	boundAcks atomic.Int64
}

func newSession(m *Manager, key Key, spec Spec) *Session {
	s := &Session{
		m:    m,
		key:  key,
		log:  m.opts.Logger.With("office", key.OfficeID, "office_name", spec.OfficeName, "agent", key.AgentID, "agent_name", spec.AgentName),
		spec: spec,
		wake: make(chan struct{}, 1),
		ctrl: make(chan ctrlReq),
		done: make(chan struct{}),
	}
	s.view = newView(spec.Cols, spec.Rows, m.opts.Scrollback)
	s.viewVersion = 1
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
	if s.drv == nil {
		return nil
	}
	return s.drv.screen()
}

// setStatusLocked changes the status under s.mu; the report it returns is
// to be made after unlocking.
func (s *Session) setStatusLocked(st Status) (func(), bool) {
	if s.info.Status == st {
		return func() {}, false
	}
	s.info.Status = st
	s.statusAt = time.Now()
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

// Resize changes the terminal size of the session (and of later restarts).
func (s *Session) Resize(cols, rows int) error {
	if cols <= 0 || rows <= 0 || cols > 1000 || rows > 1000 {
		return fmt.Errorf("resize session %s: bad size %dx%d", s.key, cols, rows)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spec.Cols, s.spec.Rows = cols, rows
	s.info.Cols, s.info.Rows = cols, rows
	if s.drv != nil {
		s.drv.resize(cols, rows)
	}
	s.resizeView(cols, rows)
	if s.p != nil {
		if err := setWinsize(s.p.pty, cols, rows); err != nil {
			return fmt.Errorf("resize session %s: %w", s.key, err)
		}
	}
	return nil
}
