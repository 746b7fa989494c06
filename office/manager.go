package office

import (
	"context"
	"errors"
	"time"

	"github.com/office-server/office-server/session"
)

// ManagerSessions adapts a *session.Manager to Sessions. The server wires
// it (or NewManaged does):
//
//	ms := &office.ManagerSessions{}
//	mgr := session.NewManager(session.Options{OnText: ms.OnText(r), OnStatus: ms.OnStatus(r)})
type ManagerSessions struct {
	M *session.Manager
	// ClaudeBin is the claude binary for claude-kind agents whose launch
	// spec names no command.
	ClaudeBin string
	// Quiescence for command-kind agents (0: the session default).
	Quiescence time.Duration
}

var _ Sessions = (*ManagerSessions)(nil)

func key(officeID, agentID string) session.Key {
	return session.Key{OfficeID: officeID, AgentID: agentID}
}

func (ms *ManagerSessions) spec(s SessionSpec) session.Spec {
	l := s.Launch
	sp := session.Spec{
		Kind: l.Kind, Command: l.Command, Args: l.Args, Dir: s.Dir,
		PromptPattern: l.PromptPattern, Quiescence: ms.Quiescence,
		ConversationID: s.ConversationID, Resume: s.Resume, AppendSystemPrompt: s.SystemPrompt,
		PermissionMode: l.PermissionMode, Model: l.Model, Home: s.Home,
		TranscriptAfter: s.TranscriptAfter,
	}
	if sp.Kind == "" || sp.Kind == "builtin" {
		// "builtin" scripted agents are run as commands by the server's
		// wiring; an empty kind is Claude Code.
		if sp.Kind == "" {
			sp.Kind = session.KindClaude
		} else {
			sp.Kind = session.KindCommand
		}
	}
	if sp.Kind == session.KindClaude && sp.Command == "" {
		sp.Command = ms.ClaudeBin
	}
	for k, v := range l.Env {
		sp.Env = append(sp.Env, k+"="+v)
	}
	sp.Env = append(sp.Env, s.Env...)
	return sp
}

// Start starts the agent's session; a session that exists but failed is
// restarted with the new spec; a running one is left alone.
func (ms *ManagerSessions) Start(ctx context.Context, s SessionSpec) error {
	k := key(s.OfficeID, s.AgentID)
	if cur, ok := ms.M.Get(k); ok {
		if running(cur.Status()) {
			return nil
		}
		sp := ms.spec(s)
		return ms.M.Restart(ctx, k, &sp)
	}
	_, err := ms.M.Start(ctx, k, ms.spec(s))
	if errors.Is(err, session.ErrExists) {
		return nil
	}
	return err
}

// Restart restarts the session with spec (conversation resumed).
func (ms *ManagerSessions) Restart(ctx context.Context, s SessionSpec) error {
	k := key(s.OfficeID, s.AgentID)
	if _, ok := ms.M.Get(k); !ok {
		_, err := ms.M.Start(ctx, k, ms.spec(s))
		return err
	}
	sp := ms.spec(s)
	return ms.M.Restart(ctx, k, &sp)
}

// Stop stops the session; no session is not an error.
func (ms *ManagerSessions) Stop(ctx context.Context, officeID, agentID string) error {
	err := ms.M.Stop(ctx, key(officeID, agentID))
	if errors.Is(err, session.ErrNotFound) {
		return nil
	}
	return err
}

// Send types text into the session.
func (ms *ManagerSessions) Send(ctx context.Context, officeID, agentID, text string) error {
	s, ok := ms.M.Get(key(officeID, agentID))
	if !ok {
		return session.ErrNotFound
	}
	return s.Send(ctx, text)
}

// Running reports whether the agent has a live session (starting, ready,
// busy or crashed and about to restart).
func (ms *ManagerSessions) Running(officeID, agentID string) bool {
	s, ok := ms.M.Get(key(officeID, agentID))
	return ok && running(s.Status())
}

func running(st session.Status) bool {
	switch st {
	case session.StatusStopped, session.StatusExited, session.StatusFailed:
		return false
	}
	return true
}

// OnText returns the session.Options.OnText callback feeding r.
func (ms *ManagerSessions) OnText(r *Router) func(session.Text) {
	return func(t session.Text) {
		r.HandleText(Text{OfficeID: t.Key.OfficeID, AgentID: t.Key.AgentID, ID: t.ID, Lines: t.Lines, TurnEnd: t.TurnEnd, Lost: t.Lost})
	}
}

// Paused returns the session.Options.Paused callback: a session's
// transcript is left unread while r's inbox for it is full.
func (ms *ManagerSessions) Paused(r *Router) func(session.Key) bool {
	return func(k session.Key) bool { return r.Backlogged(k.OfficeID, k.AgentID) }
}

// OnStatus returns the session.Options.OnStatus callback feeding r.
func (ms *ManagerSessions) OnStatus(r *Router) func(session.Key, session.Status, session.Info) {
	return func(k session.Key, st session.Status, info session.Info) {
		var exit *int
		if st == session.StatusExited || st == session.StatusCrashed || st == session.StatusFailed {
			c := info.ExitCode
			exit = &c
		}
		r.HandleStatus(k.OfficeID, k.AgentID, string(st), info.PID, exit)
	}
}

// NewManaged builds a Router and the session.Manager it drives, wired both
// ways. opts' OnText and OnStatus, if set, are called too (after the
// router's). cfg.Sessions is ignored.
func NewManaged(cfg Config, opts session.Options, claudeBin string) (*Router, *session.Manager, error) {
	ms := &ManagerSessions{ClaudeBin: claudeBin}
	cfg.Sessions = ms
	r, err := New(cfg)
	if err != nil {
		return nil, nil, err
	}
	onText, onStatus := ms.OnText(r), ms.OnStatus(r)
	userText, userStatus := opts.OnText, opts.OnStatus
	opts.OnText = func(t session.Text) {
		onText(t)
		if userText != nil {
			userText(t)
		}
	}
	opts.OnStatus = func(k session.Key, st session.Status, info session.Info) {
		onStatus(k, st, info)
		if userStatus != nil {
			userStatus(k, st, info)
		}
	}
	if userPaused := opts.Paused; userPaused != nil {
		paused := ms.Paused(r)
		opts.Paused = func(k session.Key) bool { return paused(k) || userPaused(k) }
	} else {
		opts.Paused = ms.Paused(r)
	}
	ms.M = session.NewManager(opts)
	return r, ms.M, nil
}
