// Package agents runs an office's agents: it maps the office's launch specs
// onto sessions (Claude Code, any CLI, the built-in scripted agents),
// prepares each Claude Code agent's configuration, and wires the session
// manager and the office router to each other. It is the one wiring: the
// serve command and every test that runs agents use New.
package agents

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
)

// Options configure how agents are run.
type Options struct {
	// AgentBin is what "builtin" agents run (`<AgentBin> agent --script
	// NAME`): the office-server executable.
	AgentBin string
	// StateDir holds each Claude Code agent's own configuration directory,
	// StateDir/<office id>/<agent id>/claude (CLAUDE_CONFIG_DIR): its
	// .claude.json, prepared before every start, and its transcripts. The
	// user's own ~/.claude.json and ~/.claude are never written. Required
	// for Claude Code agents.
	StateDir string
	// CredentialsDir is where a logged-in `claude` keeps its
	// .credentials.json; the agents use it in place
	// (CLAUDE_SECURESTORAGE_CONFIG_DIR). Default: UserClaudeDir().
	CredentialsDir string
	// ClaudeBin is the claude executable for agents whose launch spec names
	// no command. Default "claude" (from PATH).
	ClaudeBin string
	// Wrap, if set, wraps the sessions the router calls (instrumentation,
	// such as timing every Send).
	Wrap func(engine.Sessions) engine.Sessions
}

// UserClaudeDir returns the server user's Claude Code configuration
// directory: $CLAUDE_CONFIG_DIR, else $HOME/.claude.
func UserClaudeDir() string {
	if d := os.Getenv("CLAUDE_CONFIG_DIR"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".claude")
}

// Sessions runs the office's agents in a session.Manager; it implements
// engine.Sessions.
type Sessions struct {
	m    *session.Manager
	opts Options
}

var _ engine.Sessions = (*Sessions)(nil)

// Manager returns the session manager the agents run in.
func (a *Sessions) Manager() *session.Manager { return a.m }

// Spec maps what the office asks for onto a session spec. The launch kind
// is the session's kind (session.Kinds); what each kind does with the
// spec is the session layer's. Here are only the server's own choices: the
// executable of builtin agents and Claude Code's, and where Claude Code
// keeps its configuration. A spec the kind cannot run is an EINVALID
// error.
func (a *Sessions) Spec(s engine.SessionSpec) (session.Spec, error) {
	l := s.Launch
	env := slices.Clone(s.Env)
	for _, k := range slices.Sorted(maps.Keys(l.Env)) {
		env = append(env, k+"="+l.Env[k])
	}
	sp := session.Spec{Kind: l.Kind, Command: absCommand(l.Command), Args: l.Args, Env: env, Dir: s.Dir, PromptPattern: l.PromptPattern, Script: l.Script, User: l.User,
		OfficeName: s.OfficeName, AgentName: s.AgentName}
	if _, set := l.Env["HOME"]; !set && a.opts.StateDir != "" {
		// A HOME of its own (issue 12, break 10): not the server's, where
		// the other agents' and the server's files are; the launch spec's
		// env may name another.
		sp.Home = AgentHome(a.opts.StateDir, s.OfficeID, s.AgentID)
		if err := os.MkdirAll(sp.Home, 0o700); err != nil {
			return sp, fmt.Errorf("agent home: %w", err)
		}
	}
	switch l.Kind {
	case session.KindBuiltin:
		sp.Command = a.opts.AgentBin
	case "", session.KindClaude:
		if a.opts.StateDir == "" {
			return sp, office.Errorf(office.EINVALID, "no state directory for Claude Code agents")
		}
		sp.Kind = session.KindClaude
		if sp.Command == "" {
			sp.Command = a.opts.ClaudeBin
		}
		sp.ConversationID, sp.Resume, sp.TranscriptAfter = s.ConversationID, s.Resume, s.TranscriptAfter
		sp.AppendSystemPrompt, sp.PermissionMode, sp.Model = s.SystemPrompt, l.PermissionMode, l.Model
		sp.ConfigDir = ClaudeConfigDir(a.opts.StateDir, s.OfficeID, s.AgentID)
		sp.CredentialsDir = a.opts.CredentialsDir
		if p := l.Permissions; p != nil {
			sp.Permissions = session.PermissionRules{Allow: p.Allow, Deny: p.Deny, Ask: p.Ask}
		}
		// The office denies first (its timeout); the hook's own is a
		// backstop, should the office not answer at all.
		if s.PermissionTimeout > 0 {
			sp.PermissionHookTimeout = s.PermissionTimeout + time.Minute
		}
	case session.KindCodex, session.KindGemini, session.KindQwen:
		// Its words come from its rollout file (Codex) or chat recording
		// (Gemini CLI, Qwen Code): resumable, with a cursor.
		sp.ConversationID, sp.Resume, sp.TranscriptAfter = s.ConversationID, s.Resume, s.TranscriptAfter
		sp.AppendSystemPrompt = s.SystemPrompt
		if s.PermissionTimeout > 0 {
			sp.PermissionHookTimeout = s.PermissionTimeout + time.Minute // Codex's hook, as for Claude Code
		}
	case session.KindCommand:
		// Taught through the CLI's instruction file where the session
		// knows it (Qwen Code, Gemini CLI run as command agents).
		sp.AppendSystemPrompt = s.SystemPrompt
	}
	if _, err := session.Check(sp); err != nil {
		return sp, office.Errorf(office.EINVALID, "launch: %v", err)
	}
	return sp, nil
}

// CheckLaunch reports what is wrong with a launch spec before it is saved:
// an unknown kind, a field its kind needs (a command for "command", a
// script for "builtin"), a prompt pattern that is not a regular
// expression. The error is an EINVALID one.
func CheckLaunch(l office.LaunchSpec) error {
	sp := session.Spec{Kind: l.Kind, Command: l.Command, Script: l.Script, PromptPattern: l.PromptPattern}
	if l.Kind == session.KindBuiltin {
		sp.Command = "office-server" // the server's own executable, set at start
	}
	if _, err := session.Check(sp); err != nil {
		return office.Errorf(office.EINVALID, "%v", err)
	}
	if err := office.CheckHibernateAfter(l.HibernateAfter); err != nil {
		return err
	}
	return l.Permissions.Check()
}

// AgentHome returns the HOME of an agent under stateDir.
func AgentHome(stateDir, officeID, agentID string) string {
	return filepath.Join(stateDir, officeID, agentID, "home")
}

// ClaudeConfigDir returns the Claude Code configuration directory of an
// agent under stateDir.
func ClaudeConfigDir(stateDir, officeID, agentID string) string {
	return filepath.Join(stateDir, officeID, agentID, "claude")
}

// absCommand makes a relative command path with a directory in it
// ("node_modules/.bin/claude") absolute from the server's working
// directory: the agent runs in its own directory, where it would not
// resolve. Bare names are left to PATH.
func absCommand(c string) string {
	if c == "" || filepath.IsAbs(c) || !strings.ContainsRune(c, filepath.Separator) {
		return c
	}
	if abs, err := filepath.Abs(c); err == nil {
		return abs
	}
	return c
}

// live reports whether a session has a process or will have one without
// anybody's help: a crashed session waits out its restart backoff, and
// starting it again would bypass the backoff.
func live(s *session.Session) bool {
	switch s.Status() {
	case office.SessionStopped, office.SessionExited, office.SessionFailed:
		return false
	}
	return true
}

// Start starts the agent's session. A live one (running, or crashed and
// waiting for its restart) is left alone; a stopped, exited or failed one
// is started again with the new spec. A launch that fails (the command is
// not found) is an EINVALID error carrying the reason.
func (a *Sessions) Start(ctx context.Context, s engine.SessionSpec) error {
	sp, err := a.Spec(s)
	if err != nil {
		return err
	}
	key := session.Key{OfficeID: s.OfficeID, AgentID: s.AgentID}
	if cur, ok := a.m.Get(key); ok {
		if live(cur) {
			return nil
		}
		return launchErr(a.m.Restart(ctx, key, &sp))
	}
	_, err = a.m.Start(ctx, key, sp)
	if errors.Is(err, session.ErrExists) {
		return nil
	}
	return launchErr(err)
}

// Restart restarts the session with spec (a Claude Code conversation is
// resumed); it is an operator's act, so a failed session comes back and
// its crash count starts again.
func (a *Sessions) Restart(ctx context.Context, s engine.SessionSpec) error {
	sp, err := a.Spec(s)
	if err != nil {
		return err
	}
	key := session.Key{OfficeID: s.OfficeID, AgentID: s.AgentID}
	if _, ok := a.m.Get(key); !ok {
		_, err = a.m.Start(ctx, key, sp)
		return launchErr(err)
	}
	return launchErr(a.m.Restart(ctx, key, &sp))
}

// launchErr turns a launch failure (exec: not found, permission denied;
// no pseudo-terminal left, which is the machine's state, not the
// request's fault) into an error the API shows with its reason.
func launchErr(err error) error {
	var pe *os.PathError
	var ee *exec.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, session.ErrNoPTY), errors.Is(err, session.ErrNoProcess):
		return office.Errorf(office.EUNAVAILABLE, "%v", err)
	case errors.As(err, &pe), errors.As(err, &ee):
		return office.Errorf(office.EINVALID, "%v", err)
	}
	return err
}

// Stop stops the session; no session is not an error.
func (a *Sessions) Stop(ctx context.Context, officeID, agentID string) error {
	err := a.m.Stop(ctx, session.Key{OfficeID: officeID, AgentID: agentID})
	if errors.Is(err, session.ErrNotFound) {
		return nil
	}
	return err
}

// StopOffice stops every session of the office without touching the
// agents' rows: this server no longer runs the office, and its next owner
// starts them. Failures are joined; a session gone meanwhile is not one.
func (a *Sessions) StopOffice(ctx context.Context, officeID string) error {
	var errs []error
	for _, s := range a.m.List() {
		if s.Key().OfficeID != officeID {
			continue
		}
		if err := a.m.Stop(ctx, s.Key()); err != nil && !errors.Is(err, session.ErrNotFound) {
			errs = append(errs, fmt.Errorf("stop agent %s: %w", s.Key().AgentID, err))
		}
	}
	return errors.Join(errs...)
}

// Send types text into the agent and returns once the agent has it.
func (a *Sessions) Send(ctx context.Context, officeID, agentID, text string) error {
	s, ok := a.m.Get(session.Key{OfficeID: officeID, AgentID: agentID})
	if !ok || !live(s) {
		return office.Errorf(office.EUNAVAILABLE, "agent has no running session")
	}
	return s.Send(ctx, text)
}

// SendSince is Send for a text an earlier typing (at since) may have
// delivered already: when the agent's CLI records its prompts, the record
// is checked first and the text is not typed twice (session.SendSince).
func (a *Sessions) SendSince(ctx context.Context, officeID, agentID, text string, since time.Time) error {
	s, ok := a.m.Get(session.Key{OfficeID: officeID, AgentID: agentID})
	if !ok || !live(s) {
		return office.Errorf(office.EUNAVAILABLE, "agent has no running session")
	}
	return s.SendSince(ctx, text, since)
}

// DecidePermission sends a decision to the agent's waiting permission
// hook (engine.Decider); session.ErrNoRequest when none waits.
func (a *Sessions) DecidePermission(officeID, agentID, id string, d session.PermissionDecision) error {
	return a.m.DecidePermission(session.Key{OfficeID: officeID, AgentID: agentID}, id, d)
}

// Running reports whether the agent has a live session.
func (a *Sessions) Running(officeID, agentID string) bool {
	s, ok := a.m.Get(session.Key{OfficeID: officeID, AgentID: agentID})
	return ok && live(s)
}

// New builds the office router and the session manager it drives, wired
// both ways: the sessions' words, statuses and permission requests go to
// the router, the router's Send and Start reach the sessions. The router
// is built first (it calls nothing of its Sessions until it runs), then
// the manager with the router's handlers. sopts' own OnText, OnStatus and
// Paused, if set, are called as well (after the router's). cfg.Sessions
// and cfg.Decider are set here.
func New(cfg engine.Config, opts Options, sopts session.Options) (*engine.Router, *Sessions, error) {
	if opts.ClaudeBin == "" {
		opts.ClaudeBin = "claude"
	}
	if opts.CredentialsDir == "" {
		opts.CredentialsDir = UserClaudeDir()
	}
	if opts.StateDir != "" {
		d, err := filepath.Abs(opts.StateDir)
		if err != nil {
			return nil, nil, fmt.Errorf("agents state dir: %w", err)
		}
		opts.StateDir = d
	}
	sess := &Sessions{opts: opts}
	cfg.Sessions, cfg.Decider = sess, sess
	if opts.Wrap != nil {
		cfg.Sessions = opts.Wrap(sess)
	}
	r, err := engine.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	sess.m = session.NewManager(handledBy(r, sopts))
	return r, sess, nil
}

// handledBy returns sopts with the router's handlers, each followed by
// sopts' own where it has one.
func handledBy(r *engine.Router, sopts session.Options) session.Options {
	userText, userStatus, userPaused := sopts.OnText, sopts.OnStatus, sopts.Paused
	sopts.OnPermission = r.HandlePermission
	sopts.OnPermissionEnd = func(k session.Key, id string, answered bool) {
		r.PermissionEnded(k.OfficeID, k.AgentID, id, answered)
	}
	sopts.OnText = r.HandleText
	if userText != nil {
		sopts.OnText = func(t session.Text) { r.HandleText(t); userText(t) }
	}
	sopts.OnStatus = r.HandleStatus
	if userStatus != nil {
		sopts.OnStatus = func(k session.Key, st session.Status, info session.Info) {
			r.HandleStatus(k, st, info)
			userStatus(k, st, info)
		}
	}
	// A Claude Code transcript is left unread while the office is
	// backlogged (the store is slow or down): it is durable, so waiting
	// loses nothing and keeps memory bounded.
	sopts.Paused = func(k session.Key) bool {
		return r.Backlogged(k.OfficeID, k.AgentID) || (userPaused != nil && userPaused(k))
	}
	return sopts
}
