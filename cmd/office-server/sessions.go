package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/office-server/office-server/agents"
	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/server"
	"github.com/office-server/office-server/session"
)

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
func (t sessionTerminal) Detail() string                 { return t.s.Info().Detail }
func (t sessionTerminal) ScreenLines(since uint64) ([]string, uint64) {
	return t.s.ScreenLines(since)
}
func (t sessionTerminal) Size() (cols, rows int) {
	i := t.s.Info()
	return i.Cols, i.Rows
}

// serverOffice adapts the engine.Router (and the store, for plain row
// edits) to server.Office.
type serverOffice struct {
	r     *engine.Router
	store office.Store
	sess  *agents.Sessions
}

func (so serverOffice) AnswerQuestion(ctx context.Context, id, response, by string) (office.Question, error) {
	return so.r.AnswerQuestion(ctx, id, response, by)
}

func (so serverOffice) SendUserMessage(ctx context.Context, m office.UserMessage) (office.UserMessage, error) {
	return so.r.SendUserMessage(ctx, m.OfficeID, m.AgentID, m.UserID, m.Content)
}

func (so serverOffice) ProvideDependency(ctx context.Context, id, value string) (office.DependencyRequest, error) {
	return so.r.ProvideDependency(ctx, id, value)
}

func (so serverOffice) RejectDependency(ctx context.Context, id, reason string) (office.DependencyRequest, error) {
	return so.r.RejectDependency(ctx, id, reason)
}

func (so serverOffice) StartAgent(ctx context.Context, _, agentID string) error {
	return launchError(so.r.StartAgent(ctx, agentID))
}

// launchError gives a failed start its reason: an error from launching the
// agent's process (an executable not found, a directory missing) carries no
// office code and would reach the person as "internal error", while the
// person who asked to start the agent is the one who can fix it.
func launchError(err error) error {
	if err == nil || office.ErrorCode(err) != office.EINTERNAL || errors.Is(err, context.Canceled) {
		return err
	}
	return office.Errorf(office.EUNAVAILABLE, "%v", err)
}

func (so serverOffice) StopAgent(ctx context.Context, _, agentID string) error {
	return so.r.StopAgent(ctx, agentID)
}

func (so serverOffice) RestartAgent(ctx context.Context, _, agentID string) error {
	return launchError(so.r.RestartAgent(ctx, agentID))
}

func (so serverOffice) SendInput(ctx context.Context, officeID, agentID, text string) error {
	return so.sess.Send(ctx, officeID, agentID, text)
}

func (so serverOffice) CallGraph(ctx context.Context, officeID string) (any, error) {
	return so.r.CallGraph(ctx, officeID, false)
}

func (so serverOffice) SaveOffice(ctx context.Context, off office.Office) (office.Office, error) {
	return so.store.UpsertOffice(ctx, off)
}

func (so serverOffice) SaveAgent(ctx context.Context, a office.Agent) (office.Agent, error) {
	if err := agents.CheckLaunch(a.Launch); err != nil {
		return a, err
	}
	var prev office.LaunchSpec
	if a.ID != "" {
		if cur, err := so.store.GetAgent(ctx, a.ID); err == nil {
			prev = cur.Launch
		}
	}
	sealed, err := so.r.SealLaunch(a.Launch, prev)
	if err != nil {
		return a, err
	}
	a.Launch = sealed
	return so.store.UpsertAgent(ctx, a.WithDefaults())
}

func (so serverOffice) DeleteAgent(ctx context.Context, _, agentID string) error {
	if err := so.r.StopAgent(ctx, agentID); err != nil && !office.IsNotFound(err) {
		return fmt.Errorf("stop agent: %w", err)
	}
	return so.store.DeleteAgent(ctx, agentID)
}

// registerInputMetrics exports the sessions' input counters
// (session.InputCounters) on /metrics: what made each Enter after a typed
// text be pressed, and the texts typed again. The load driver reads them.
func registerInputMetrics(reg *prometheus.Registry) {
	for _, c := range []struct {
		name, help string
		get        func(session.InputCounts) int64
	}{
		{"office_enter_canonical_total", "Enters pressed at once after a typed text: the terminal was in canonical mode.", func(c session.InputCounts) int64 { return c.EnterCanonical }},
		{"office_enter_on_read_total", "Enters pressed once the program had read the typed text (its terminal's input queue empty) and was reading its terminal again.", func(c session.InputCounts) int64 { return c.EnterOnRead }},
		{"office_enter_on_echo_total", "Enters pressed once the program showed the typed text.", func(c session.InputCounts) int64 { return c.EnterOnEcho }},
		{"office_enter_on_bound_total", "Enters pressed after the EnterDelay bound: no signal came.", func(c session.InputCounts) int64 { return c.EnterOnBound }},
		{"office_typed_again_total", "Texts typed again because the agent had not received them.", func(c session.InputCounts) int64 { return c.TypedAgain }},
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help},
			func() float64 { return float64(c.get(session.InputCounters())) }))
	}
}
