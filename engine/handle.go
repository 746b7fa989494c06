package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/office-server/office-server/office"

	"github.com/google/uuid"
	"github.com/office-server/office-server/protocol"
	"github.com/office-server/office-server/proxy"
)

// handle acts on one parsed message exactly once: the message's event is
// appended with its dedupe key first, and only the caller that inserted it
// acts. A question, a task or a result (carried) is the exception: its
// event is appended by the write that stores the row, first in the same
// transaction (one request over Supabase), and the row's id, derived
// from the same key, makes a second handling write nothing; a path that
// stores no row (a refusal) appends the event first (recordMessage), and
// tells the agent nothing when it was stored before. Invalid blocks do
// not come here: parseText records them within bounds (onInvalid).
func (dp *dispatcher) handle(ctx context.Context, src source, m protocol.Message) error {
	kind := "message." + strings.ToLower(string(m.Kind))
	if carried(m.Kind) {
		payload, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("event %s: %w", kind, err)
		}
		src.msg = &pendingMessage{ev: office.Event{OfficeID: src.officeID, AgentID: src.agentID, Kind: kind, Payload: payload, Raw: m.Raw, DedupeKey: src.key}}
		err = dp.dispatch(ctx, src, m)
		// A path that neither stored a row nor refused (or failed before
		// either) records the message as handle records the others.
		if rerr := dp.events.recordMessage(ctx, &src); err == nil {
			err = rerr
		}
		return err
	}
	inserted, err := dp.events.event(ctx, src.officeID, src.agentID, kind, m, m.Raw, src.key)
	if err != nil {
		return err
	}
	if !inserted {
		// Seen before. A message whose first effect is a row (question,
		// invocation, result, dependency) is handled again in replay mode:
		// its rows have IDs derived from the message's key, so if the first
		// run got that far the create conflicts and nothing is done twice,
		// and if it crashed between the event and the row, the row is
		// written now. Nothing is typed in replay mode.
		switch m.Kind {
		case protocol.KindAskUser, protocol.KindUserQuestion, protocol.KindInvoke, protocol.KindDeliverResult, protocol.KindDependencyRequest, protocol.KindProxyRequest:
		default:
			return nil
		}
	}
	src.replay = !inserted
	return dp.dispatch(ctx, src, m)
}

// sourced is a parsed message and its source.
type sourced struct {
	src source
	m   protocol.Message
}

// progress reports whether a message of kind only reports progress (it
// changes no row: handle records it and sets the desk's progress).
func progress(kind protocol.Kind) bool {
	switch kind {
	case protocol.KindPhaseComplete, protocol.KindStep, protocol.KindStepComplete:
		return true
	}
	return false
}

// handleProgress handles progress messages an agent printed together, in
// order, as handle does, with their events appended in one write
// (office.Store AppendEvents: one request over Supabase): each message
// whose event was not stored before sets the progress.
func (dp *dispatcher) handleProgress(ctx context.Context, run []sourced) error {
	switch len(run) {
	case 0:
		return nil
	case 1:
		return dp.handle(ctx, run[0].src, run[0].m)
	}
	evs := make([]office.Event, len(run))
	for i, x := range run {
		payload, err := json.Marshal(x.m)
		if err != nil {
			return fmt.Errorf("event %s: %w", x.m.Kind, err)
		}
		evs[i] = office.Event{OfficeID: x.src.officeID, AgentID: x.src.agentID, Kind: "message." + strings.ToLower(string(x.m.Kind)),
			Payload: payload, Raw: x.m.Raw, DedupeKey: x.src.key}
	}
	stored, inserted, err := dp.store.AppendEvents(ctx, evs)
	if err != nil {
		dp.events.auditFailures.Add(1)
		return fmt.Errorf("append %d progress events: %w", len(evs), err)
	}
	for i, x := range run {
		if i < len(inserted) && inserted[i] {
			dp.events.publish(stored[i])
			dp.desk(agentKey{x.src.officeID, x.src.agentID}).onProgress(x.m)
		}
	}
	return nil
}

// carried reports whether a message of kind is appended by the write of
// the row it creates (handle).
func carried(kind protocol.Kind) bool {
	switch kind {
	case protocol.KindAskUser, protocol.KindUserQuestion, protocol.KindInvoke, protocol.KindDeliverResult:
		return true
	}
	return false
}

// recordMessage appends the event of the message src is handling unless
// it was (by the transition that carried it, or before): for a path that
// stores no row, before it acts. When the event was stored before (the
// message handled already) src becomes a replay: nothing is told.
func (el *eventLog) recordMessage(ctx context.Context, src *source) error {
	if src.msg == nil {
		return nil
	}
	if m := src.msg; !m.done {
		inserted, err := el.event(ctx, m.ev.OfficeID, m.ev.AgentID, m.ev.Kind, json.RawMessage(m.ev.Payload), m.ev.Raw, m.ev.DedupeKey)
		if err != nil {
			return err
		}
		m.done, m.inserted = true, inserted
	}
	src.replay = src.replay || !src.msg.inserted
	return nil
}

// dispatch acts on m for its sender.
func (dp *dispatcher) dispatch(ctx context.Context, src source, m protocol.Message) error {
	self, err := dp.store.GetAgent(ctx, src.agentID)
	if err != nil {
		return fmt.Errorf("sender: %w", err)
	}
	switch m.Kind {
	case protocol.KindAskUser, protocol.KindUserQuestion:
		return dp.asks.onQuestion(ctx, src, self, m)
	case protocol.KindInvoke:
		return dp.work.onInvoke(ctx, src, self, m)
	case protocol.KindDeliverResult:
		return dp.work.onResult(ctx, src, self, m)
	case protocol.KindDependencyRequest:
		return dp.asks.onDependency(ctx, src, self, m)
	case protocol.KindError:
		return dp.work.onError(ctx, src, self, m)
	case protocol.KindPhaseComplete, protocol.KindStep, protocol.KindStepComplete:
		dp.desk(agentKey{self.OfficeID, self.ID}).onProgress(m)
		return nil
	case protocol.KindProxyRequest:
		return dp.proxies.onProxy(ctx, src, self, m)
	}
	return nil
}

// rowNamespace derives the IDs of rows a message creates (source.rowID).
var rowNamespace = uuid.MustParse("6f0b1d8e-4c5a-4f43-9d0e-0ffce5e1a7d1")

// tell queues a notice unless the message is being replayed.
func (b *base) tell(src source, a office.Agent, text string) {
	if src.replay {
		return
	}
	b.notify(a, text)
}

// refuse tells the sender an action was refused and records why, after
// the message's own event (recordMessage).
func (b *base) refuse(ctx context.Context, src source, self office.Agent, kind, why string) error {
	if err := b.events.recordMessage(ctx, &src); err != nil {
		return err
	}
	b.tell(src, self, fmt.Sprintf("Your %s was refused: %s", kind, why))
	_, err := b.events.event(ctx, self.OfficeID, self.ID, "refused", map[string]string{"kind": kind, "reason": why}, "", src.subKey("refused"))
	return err
}

// authorize checks the sender's allowed actions.
// It returns the refusal's error (recording it) when the action is not
// allowed, and ok=false.
func (b *base) authorize(ctx context.Context, src source, self office.Agent, action, kind string) (ok bool, err error) {
	if aerr := proxy.Authorize(toProxy(self, 0), action); aerr != nil {
		return false, b.refuse(ctx, src, self, kind, aerr.Error())
	}
	return true, nil
}

// registryFrom counts every piece of work an agent holds as its load: the
// invocations it is the callee of and the proxy tasks it keeps for others
// (docs/notes/office.md, "The proxy protocol").
func registryFrom(as []office.Agent, open []office.Invocation, tasks []office.ProxyTask) *proxy.Registry {
	load := map[string]int{}
	for _, inv := range open {
		load[inv.CalleeAgentID]++
	}
	for _, t := range tasks {
		if t.ProxyAgentID != "" {
			load[t.ProxyAgentID]++
		}
	}
	pa := make([]proxy.Agent, len(as))
	for i, a := range as {
		pa[i] = toProxy(a, load[a.ID])
	}
	return proxy.New(pa)
}

func toProxy(a office.Agent, load int) proxy.Agent {
	return proxy.Agent{
		ID: a.ID, Name: a.Name, Role: a.Role, Capabilities: a.Capabilities, Priority: a.Priority,
		Expertise: a.Expertise, AllowedActions: a.AllowedActions, MaxLoad: a.MaxLoad, Load: load,
		Down: a.Status == office.AgentDisabled || a.Status == office.AgentFailed,
	}
}

// exists reports whether target names an agent, a role or a capability of
// the office, whatever their state.
func exists(as []office.Agent, target string) bool {
	for _, a := range as {
		if strings.EqualFold(a.Name, target) || strings.EqualFold(a.Role, target) || toProxy(a, 0).Has(target) {
			return true
		}
	}
	return false
}

func byID(as []office.Agent, id string) (office.Agent, bool) {
	for _, a := range as {
		if a.ID == id {
			return a, true
		}
	}
	return office.Agent{}, false
}

// waitPath returns the chain of agents from `from` to `to` along open
// invocations (an edge caller → callee: the caller waits on the callee), or
// nil when from does not wait on to.
func waitPath(open []office.Invocation, from, to string) []string {
	next := map[string][]string{}
	for _, inv := range open {
		next[inv.CallerAgentID] = append(next[inv.CallerAgentID], inv.CalleeAgentID)
	}
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var path []string
			for n := cur; n != ""; n = prev[n] {
				path = append([]string{n}, path...)
			}
			return path
		}
		for _, n := range next[cur] {
			if _, seen := prev[n]; !seen {
				prev[n] = cur
				queue = append(queue, n)
			}
		}
	}
	return nil
}

// insideDir checks that p (relative to dir, or absolute) stays inside dir.
func insideDir(dir, p string) error {
	p = strings.TrimSpace(p)
	if p == "" {
		return office.Errorf(office.EINVALID, "the file path is empty")
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	full := p
	if !filepath.IsAbs(p) {
		full = filepath.Join(absDir, p)
	}
	full = filepath.Clean(full)
	rel, err := filepath.Rel(absDir, full)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return office.Errorf(office.EINVALID, "the file path %q is outside your workspace", p)
	}
	// A symlink inside the workspace must not lead out of it.
	if real, err := filepath.EvalSymlinks(full); err == nil {
		realDir, _ := filepath.EvalSymlinks(absDir)
		if rel, err := filepath.Rel(realDir, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return office.Errorf(office.EINVALID, "the file path %q leads outside your workspace", p)
		}
	}
	return nil
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
