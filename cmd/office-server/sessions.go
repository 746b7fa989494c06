package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/server"
	"github.com/office-server/office-server/session"
)

// builtinPrompt is the ready pattern of the built-in scripted agents: they
// print "> " when they wait for a line.
const builtinPrompt = `^>\s*$`

// officeSessions adapts the session.Manager to office.Sessions: it maps the
// office's launch specs onto session specs. Kind "builtin" runs this
// executable (agentBin) as `agent --script NAME`.
type officeSessions struct {
	m        *session.Manager
	agentBin string
}

func (a *officeSessions) spec(s office.SessionSpec) (session.Spec, error) {
	l := s.Launch
	env := slices.Clone(s.Env)
	for _, k := range slices.Sorted(maps.Keys(l.Env)) {
		env = append(env, k+"="+l.Env[k])
	}
	sp := session.Spec{Args: l.Args, Env: env, Dir: s.Dir, PromptPattern: l.PromptPattern}
	switch l.Kind {
	case "builtin":
		if l.Script == "" {
			return sp, office.Errorf(office.EINVALID, "builtin agent without a script")
		}
		sp.Kind, sp.Command = session.KindCommand, a.agentBin
		sp.Args = append([]string{"agent", "--script", l.Script}, l.Args...)
		if sp.PromptPattern == "" {
			sp.PromptPattern = builtinPrompt
		}
	case "command":
		sp.Kind, sp.Command = session.KindCommand, absCommand(l.Command)
	case "", "claude":
		sp.Kind, sp.Command = session.KindClaude, absCommand(l.Command)
		sp.ConversationID, sp.Resume, sp.TranscriptAfter = s.ConversationID, s.Resume, s.TranscriptAfter
		sp.AppendSystemPrompt, sp.PermissionMode, sp.Model, sp.Home = s.SystemPrompt, l.PermissionMode, l.Model, s.Home
	default:
		return sp, office.Errorf(office.EINVALID, "unknown launch kind %q", l.Kind)
	}
	return sp, nil
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

func running(s *session.Session) bool {
	switch s.Status() {
	case session.StatusStarting, session.StatusReady, session.StatusBusy:
		return true
	}
	return false
}

// Start starts the agent's session; an already running one is left alone,
// a stopped one is started again with the new spec.
func (a *officeSessions) Start(ctx context.Context, s office.SessionSpec) error {
	sp, err := a.spec(s)
	if err != nil {
		return err
	}
	key := session.Key{OfficeID: s.OfficeID, AgentID: s.AgentID}
	if cur, ok := a.m.Get(key); ok {
		if running(cur) {
			return nil
		}
		return a.m.Restart(ctx, key, &sp)
	}
	_, err = a.m.Start(ctx, key, sp)
	if errors.Is(err, session.ErrExists) {
		return nil
	}
	return err
}

func (a *officeSessions) Restart(ctx context.Context, s office.SessionSpec) error {
	sp, err := a.spec(s)
	if err != nil {
		return err
	}
	key := session.Key{OfficeID: s.OfficeID, AgentID: s.AgentID}
	if _, ok := a.m.Get(key); !ok {
		_, err = a.m.Start(ctx, key, sp)
		return err
	}
	return a.m.Restart(ctx, key, &sp)
}

func (a *officeSessions) Stop(ctx context.Context, officeID, agentID string) error {
	err := a.m.Stop(ctx, session.Key{OfficeID: officeID, AgentID: agentID})
	if errors.Is(err, session.ErrNotFound) {
		return nil
	}
	return err
}

func (a *officeSessions) Send(ctx context.Context, officeID, agentID, text string) error {
	s, ok := a.m.Get(session.Key{OfficeID: officeID, AgentID: agentID})
	if !ok || !running(s) {
		return office.Errorf(office.EUNAVAILABLE, "agent has no running session")
	}
	return s.Send(ctx, text)
}

func (a *officeSessions) Running(officeID, agentID string) bool {
	s, ok := a.m.Get(session.Key{OfficeID: officeID, AgentID: agentID})
	return ok && running(s)
}

// terminals adapts the session.Manager to server.Terminals.
type terminals struct{ m *session.Manager }

func (t terminals) Terminal(officeID, agentID string) (server.Terminal, bool) {
	s, ok := t.m.Get(session.Key{OfficeID: officeID, AgentID: agentID})
	if !ok {
		return nil, false
	}
	return sessionTerminal{s}, true
}

type sessionTerminal struct{ s *session.Session }

func (t sessionTerminal) Attach(queue int) server.Viewer { return t.s.Attach(queue) }
func (t sessionTerminal) Input(p []byte) error           { return t.s.Input(p) }
func (t sessionTerminal) Resize(cols, rows int) error    { return t.s.Resize(cols, rows) }
func (t sessionTerminal) Status() string                 { return string(t.s.Status()) }

// serverOffice adapts the office.Router (and the store, for plain row
// edits) to server.Office.
type serverOffice struct {
	r     *office.Router
	store office.Store
	sess  *officeSessions
}

func (o serverOffice) AnswerQuestion(ctx context.Context, id, response, by string) (office.Question, error) {
	return o.r.AnswerQuestion(ctx, id, response, by)
}

func (o serverOffice) SendUserMessage(ctx context.Context, m office.UserMessage) (office.UserMessage, error) {
	return o.r.SendUserMessage(ctx, m.OfficeID, m.AgentID, m.UserID, m.Content)
}

func (o serverOffice) ProvideDependency(ctx context.Context, id, value string) (office.DependencyRequest, error) {
	return o.r.ProvideDependency(ctx, id, value)
}

func (o serverOffice) RejectDependency(ctx context.Context, id, reason string) (office.DependencyRequest, error) {
	return o.r.RejectDependency(ctx, id, reason)
}

func (o serverOffice) StartAgent(ctx context.Context, _, agentID string) error {
	return o.r.StartAgent(ctx, agentID)
}

func (o serverOffice) StopAgent(ctx context.Context, _, agentID string) error {
	return o.r.StopAgent(ctx, agentID)
}

func (o serverOffice) RestartAgent(ctx context.Context, _, agentID string) error {
	return o.r.RestartAgent(ctx, agentID)
}

func (o serverOffice) SendInput(ctx context.Context, officeID, agentID, text string) error {
	return o.sess.Send(ctx, officeID, agentID, text)
}

func (o serverOffice) CallGraph(ctx context.Context, officeID string) (any, error) {
	return o.r.CallGraph(ctx, officeID, false)
}

func (o serverOffice) SaveOffice(ctx context.Context, off office.Office) (office.Office, error) {
	return o.store.UpsertOffice(ctx, off)
}

func (o serverOffice) SaveAgent(ctx context.Context, a office.Agent) (office.Agent, error) {
	switch a.Launch.Kind {
	case "", "claude", "command", "builtin":
	default:
		return a, office.Errorf(office.EINVALID, "launch.kind %q: want claude, command or builtin", a.Launch.Kind)
	}
	if a.Status == "" {
		a.Status = office.AgentIdle
	}
	for _, s := range []*[]string{&a.Capabilities, &a.Expertise, &a.AllowedActions} {
		if *s == nil {
			*s = []string{}
		}
	}
	return o.store.UpsertAgent(ctx, a)
}

func (o serverOffice) DeleteAgent(ctx context.Context, _, agentID string) error {
	if err := o.r.StopAgent(ctx, agentID); err != nil && !office.IsNotFound(err) {
		return fmt.Errorf("stop agent: %w", err)
	}
	return o.store.DeleteAgent(ctx, agentID)
}

// routerRef lets the session callbacks reach the router built after the
// manager.
type routerRef struct{ p atomic.Pointer[office.Router] }

func (r *routerRef) onText(t session.Text) {
	if o := r.p.Load(); o != nil {
		o.HandleText(office.Text{OfficeID: t.Key.OfficeID, AgentID: t.Key.AgentID, ID: t.ID, Lines: t.Lines, TurnEnd: t.TurnEnd, Lost: t.Lost})
	}
}

// paused tells a Claude Code session to leave its transcript unread while
// the office is backlogged (the store is slow or down): the transcript is
// durable, so waiting loses nothing and keeps memory bounded.
func (r *routerRef) paused(k session.Key) bool {
	o := r.p.Load()
	return o != nil && o.Backlogged(k.OfficeID, k.AgentID)
}

func (r *routerRef) onStatus(k session.Key, st session.Status, info session.Info) {
	o := r.p.Load()
	if o == nil {
		return
	}
	var code *int
	switch st {
	case session.StatusExited, session.StatusCrashed, session.StatusFailed, session.StatusStopped:
		c := info.ExitCode
		code = &c
	}
	o.HandleStatus(k.OfficeID, k.AgentID, string(st), info.PID, code)
}
