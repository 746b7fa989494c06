package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/proxy"
)

func (ros *roster) sessionID(ctx context.Context, agentID string) string {
	if s, err := ros.store.GetSessionByAgent(ctx, agentID); err == nil {
		return s.ID
	}
	return ""
}

// setSessionStatus records a session status the session layer does not
// know about (busy when something was typed, waiting for a person), and,
// when kind is set, the event kind with payload in the same write. The
// session layer's word (a dialog is up, the process is gone) is not
// overwritten by the office's view of the work: the store checks.
func (b *base) setSessionStatus(ctx context.Context, a office.Agent, status, kind string, payload any) {
	c := office.SessionStatus{OfficeID: a.OfficeID, AgentID: a.ID, Status: status, EventKind: kind}
	if kind != "" && payload != nil {
		pj, err := json.Marshal(payload)
		if err != nil {
			b.log.Error("event payload", "kind", kind, "err", err)
			return
		}
		c.EventPayload = pj
	}
	_, ev, _, err := b.store.SetSessionStatus(ctx, c)
	switch {
	case err != nil && kind != "":
		b.events.auditFailures.Add(1)
		b.log.Error("audit event not recorded", "office", a.OfficeID, "agent", a.ID, "kind", kind, "err", err)
	case err != nil:
		b.log.Warn("update session status", "agent", a.Name, "err", err)
	case kind != "":
		b.events.publish(ev)
	}
}

// agents returns the office's agents.
func (ros *roster) agents(ctx context.Context, officeID string) ([]office.Agent, error) {
	as, err := ros.store.ListAgents(ctx, officeID)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	return as, nil
}

// rosterMemo is a store that keeps values derived from an office's roster
// as long as the roster is unchanged (store/rostercache).
type rosterMemo interface {
	Derived(ctx context.Context, officeID, key string, build func([]office.Agent) any) (any, error)
}

// rosterText returns the office's roster as the instructions list it:
// rendered once per roster where the store keeps it (an agent's start
// then costs a copy of it, not a sort and format of the whole office),
// else from a read.
func (ros *roster) rosterText(ctx context.Context, officeID string) (*office.RosterText, error) {
	if m, ok := ros.store.(rosterMemo); ok {
		v, err := m.Derived(ctx, officeID, "engine.rosterText", func(as []office.Agent) any { return office.NewRosterText(as) })
		if err != nil {
			return nil, fmt.Errorf("list agents: %w", err)
		}
		return v.(*office.RosterText), nil
	}
	as, err := ros.agents(ctx, officeID)
	if err != nil {
		return nil, err
	}
	return office.NewRosterText(as), nil
}

// registry builds the proxy selector's snapshot: agents with their load
// (open invocations they are the callee of, open proxy tasks they hold).
func (ros *roster) registry(ctx context.Context, officeID string) (*proxy.Registry, []office.Agent, error) {
	reg, as, _, err := ros.registryOpen(ctx, officeID)
	return reg, as, err
}

// registryOpen is registry that also returns the office's open invocations.
func (ros *roster) registryOpen(ctx context.Context, officeID string) (*proxy.Registry, []office.Agent, []office.Invocation, error) {
	var (
		agents     []office.Agent
		work       office.OpenWork
		errA, errW error
		wg         sync.WaitGroup
	)
	wg.Add(1)
	go func() { // the reads are independent: one round trip, not two
		defer wg.Done()
		work, errW = ros.store.ListOpenWork(ctx, officeID) // open invocations and proxy tasks at once
	}()
	agents, errA = ros.agents(ctx, officeID)
	wg.Wait()
	if errA != nil {
		return nil, nil, nil, errA
	}
	if errW != nil {
		return nil, nil, nil, fmt.Errorf("list open work: %w", errW)
	}
	invs, tasks := work.Invocations, work.ProxyTasks
	return registryFrom(agents, invs, tasks), agents, invs, nil
}

func (ros *roster) offices(ctx context.Context) ([]office.Office, error) {
	all, err := ros.store.ListOffices(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(of office.Office) bool { return !ros.serves(of.ID) }), nil
}

func (ros *roster) serves(officeID string) bool {
	if ros.cfg.Owns != nil && !ros.cfg.Owns(officeID) {
		return false
	}
	return len(ros.cfg.OfficeIDs) == 0 || slices.Contains(ros.cfg.OfficeIDs, officeID)
}

// workspace returns an agent's working directory (Workspace).
func (ros *roster) workspace(a office.Agent) string { return office.Workspace(ros.cfg.DataDir, a) }

// agentName returns the name of the agent with id, for the forms typed
// into another agent; "" (logged) when it cannot be read.
func (ros *roster) agentName(ctx context.Context, id string) string {
	a, err := ros.store.GetAgent(ctx, id)
	if err != nil && ctx.Err() == nil {
		ros.log.Warn("deliver: read the sender's name", "agent", id, "err", err)
	}
	return a.Name
}
