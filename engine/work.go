package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/protocol"
	"github.com/office-server/office-server/proxy"
)

func (wk *work) onInvoke(ctx context.Context, src source, self office.Agent, m protocol.Message) error {
	if ok, err := wk.authorize(ctx, src, self, proxy.ActionInvoke, "INVOKE"); !ok {
		return err
	}
	task, context_ := "", ""
	if m.Invoke != nil {
		task, context_ = m.Invoke.Task, m.Invoke.Context
	}
	_, err := wk.invoke(ctx, src, self, m.Target, task, context_)
	return err
}

// invoke creates an invocation from caller to the agent target resolves to,
// or a rejected one (the caller is told why).
func (wk *work) invoke(ctx context.Context, src source, caller office.Agent, target, task, ctxText string) (office.Invocation, error) {
	r := invokeReq{src: src, caller: caller, target: target, task: task, ctxText: ctxText}
	if strings.TrimSpace(task) == "" {
		return wk.reject(ctx, r, "the task is empty; write the task as the block's text", "")
	}
	if err := proxy.ValidateContent(task+"\n"+ctxText, wk.cfg.MaxContent); err != nil {
		return wk.reject(ctx, r, err.Error(), "")
	}
	reg, agents, open, err := wk.roster.registryOpen(ctx, caller.OfficeID)
	if err != nil {
		return office.Invocation{}, err
	}
	if a, ok := reg.ByName(target); ok && a.ID == caller.ID {
		return wk.reject(ctx, r, "an agent cannot invoke itself", caller.ID)
	}
	d := reg.Select(proxy.Request{Target: target, Exclude: []string{caller.ID}})
	callee, ok := wk.callee(ctx, r, d, agents)
	if !ok {
		return wk.reject(ctx, r, d.Reason, "")
	}
	parent, why := wk.chain(caller, callee, agents, open)
	if why != "" {
		return wk.reject(ctx, r, why, callee.ID)
	}
	depth := parent.Depth + 1
	id := src.rowID("invocation")
	if id == "" {
		id = uuid.NewString() // not from a message with a key: nothing to handle again
	}
	payload, _ := json.Marshal(map[string]any{"invocation_id": id, "caller": caller.Name, "callee": callee.Name, "depth": depth, "selection": d.String()})
	// One write: the message's event, the task and its event (office.Store
	// Invoke).
	inv, events, created, err := wk.store.Invoke(ctx, office.Invoke{
		Invocation: office.Invocation{ID: id, OfficeID: caller.OfficeID, CallerAgentID: caller.ID, CalleeAgentID: callee.ID,
			ParentInvocationID: parent.ID, Depth: depth, Reason: task, Context: ctxText},
		EventKind: "invocation.created", EventPayload: payload, EventDedupeKey: src.subKey("invocation"),
		Message: src.message(),
	})
	if err != nil {
		return inv, fmt.Errorf("create invocation: %w", err)
	}
	src.carried(events)
	for _, ev := range events {
		wk.events.publish(ev)
	}
	if !created {
		return inv, nil // created already (a replayed message); Run's catch-up delivers it
	}
	wk.kick(agentKey{caller.OfficeID, callee.ID})
	return inv, nil
}

// invokeReq is an INVOKE being handled: who asked whom for what.
type invokeReq struct {
	src                   source
	caller                office.Agent
	target, task, ctxText string
}

// callee returns the agent the selector's decision d gives the task to: the
// one assigned, or the least loaded of those it would wait for (a pending
// invocation waits in the callee's FIFO queue until it is free). ok is
// false at the end of the fallback chain: when agents for the target exist
// but none can ever take it now (all disabled or failed), a person is asked
// as well; a target naming nobody is the caller's mistake.
func (wk *work) callee(ctx context.Context, r invokeReq, d proxy.Decision, agents []office.Agent) (callee proxy.Agent, ok bool) {
	switch d.Outcome {
	case proxy.Assign:
		return d.Agent, true
	case proxy.Park:
		callee = d.Waiting[0]
		for _, w := range d.Waiting {
			if w.Load < callee.Load {
				callee = w
			}
		}
		return callee, true
	}
	if exists(agents, r.target) {
		if _, err := wk.asks.ask(ctx, r.src, r.caller, office.Question{QuestionType: office.QuestionText, Category: "routing", Required: false,
			Question: fmt.Sprintf("%s wants to give %q a task, but no agent can take it (%s). Please start or enable an agent, or handle it.", r.caller.Name, r.target, d.Reason),
			Context:  r.task}); err != nil {
			wk.log.Warn("ask a person to route a task", "agent", r.caller.Name, "err", err)
		}
	}
	return proxy.Agent{}, false
}

// reject records r as a rejected invocation (stored even with no callee
// and no task, so that the frontend sees every refusal and why:
// docs/frontend.md) and tells the caller why.
func (wk *work) reject(ctx context.Context, r invokeReq, why, callee string) (office.Invocation, error) {
	if err := wk.events.recordMessage(ctx, &r.src); err != nil {
		return office.Invocation{}, err
	}
	reason := r.task
	if strings.TrimSpace(reason) == "" {
		reason = "(no task) INVOKE:" + r.target
	}
	caller := r.caller
	inv, err := wk.store.CreateInvocation(ctx, office.Invocation{ID: r.src.rowID("invocation"), OfficeID: caller.OfficeID, CallerAgentID: caller.ID, CalleeAgentID: callee, Reason: reason, Context: r.ctxText, Status: office.InvocationRejected, Error: why})
	if office.IsConflict(err) {
		return inv, nil // rejected already (a replayed message)
	}
	if err != nil {
		wk.log.Warn("record rejected invocation", "err", err)
	}
	wk.tell(r.src, caller, fmt.Sprintf("Your INVOKE:%s was rejected: %s", r.target, why))
	wk.events.record(ctx, caller.OfficeID, caller.ID, "invocation.rejected", map[string]string{"invocation_id": inv.ID, "target": r.target, "reason": why}, r.src.subKey("rejected"))
	return inv, nil
}

// chain returns the task a new invocation from caller to callee is a
// child of (the one the caller works on, if any), or why the invocation
// may not be: the call chain would be too deep, or callee already waits
// on caller.
func (wk *work) chain(caller office.Agent, callee proxy.Agent, agents []office.Agent, open []office.Invocation) (parent office.Invocation, why string) {
	for _, inv := range open {
		if inv.Status == office.InvocationInProgress && inv.CalleeAgentID == caller.ID && (parent.ID == "" || inv.CreatedAt.After(parent.CreatedAt)) {
			parent = inv
		}
	}
	if depth := parent.Depth + 1; depth > wk.cfg.DepthLimit {
		return parent, fmt.Sprintf("the call chain would be %d deep, over the limit of %d", depth, wk.cfg.DepthLimit)
	}
	if path := waitPath(open, callee.ID, caller.ID); path != nil {
		names := make([]string, len(path))
		for i, id := range path {
			a, _ := byID(agents, id)
			names[i] = a.Name
		}
		return parent, fmt.Sprintf("%s is already waiting on you (%s): this would be a cycle", callee.Name, strings.Join(names, " → "))
	}
	return parent, ""
}

func (wk *work) onResult(ctx context.Context, src source, self office.Agent, m protocol.Message) error {
	if ok, err := wk.authorize(ctx, src, self, proxy.ActionDeliver, "DELIVER_RESULT"); !ok {
		return err
	}
	if m.Result == nil {
		return wk.refuse(ctx, src, self, "DELIVER_RESULT:"+m.Target, "it has no content")
	}
	_, err := wk.deliverResult(ctx, src, self, m.Target, *m.Result)
	return err
}

// deliverResult stores a result from sender for target, completes the open
// invocation from target to sender, and queues the result for target.
func (wk *work) deliverResult(ctx context.Context, src source, sender office.Agent, target string, r protocol.DeliverResult) (office.Result, error) {
	kind := "DELIVER_RESULT:" + target
	to, why, err := wk.recipient(ctx, sender, target)
	if err != nil {
		return office.Result{}, err
	}
	if why != "" {
		if strings.TrimSpace(target) == "" {
			kind = "DELIVER_RESULT"
		}
		return office.Result{}, wk.refuse(ctx, src, sender, kind, why)
	}
	if why := wk.badResult(sender, r); why != "" {
		return office.Result{}, wk.refuse(ctx, src, sender, kind, why)
	}
	if r.Type == "" {
		r.Type = protocol.ResultMessage
	}
	if r.ContentType == "" {
		r.ContentType = "text/plain"
	}
	// One write: the message's event, the result, the task it answers
	// completed, their events (office.Store DeliverResult). A message
	// handled again finishes what the first run may not have, with the
	// stored row.
	id := src.rowID("result")
	if id == "" {
		id = uuid.NewString() // not from a message with a key: nothing to handle again
	}
	out, err := wk.store.DeliverResult(ctx, office.ResultDelivery{
		Result: office.Result{ID: id, OfficeID: sender.OfficeID, FromAgentID: sender.ID, ToAgentID: to.ID,
			ResultType: r.Type, ContentType: r.ContentType, Content: r.Content},
		ToName: to.Name, EventKind: "result.created", EventDedupeKey: src.subKey("result"),
		CompletedEventKind: "invocation.completed", CompletedDedupeKey: src.subKey("completed"),
		Message: src.message(),
	})
	if err != nil {
		return out.Result, fmt.Errorf("deliver result: %w", err)
	}
	src.carried(out.Events)
	for _, ev := range out.Events {
		wk.events.publish(ev)
	}
	if out.Completed {
		wk.timers.handOver() // the sender may be a proxy a request waits for
	}
	wk.kick(agentKey{sender.OfficeID, to.ID})
	if out.NextTask {
		wk.kick(agentKey{sender.OfficeID, sender.ID}) // its next task
	}
	return out.Result, nil
}

// recipient resolves a result's target: an agent by name, by role or
// capability, or (no target) whoever gave the sender its current task. why
// says why there is none. An agent named, or none, needs the roster only; the
// agents' load (open invocations and proxy tasks, two reads) is read for
// a role or a capability, where the selector weighs it.
func (wk *work) recipient(ctx context.Context, sender office.Agent, target string) (to proxy.Agent, why string, err error) {
	agents, err := wk.roster.agents(ctx, sender.OfficeID)
	if err != nil {
		return to, "", err
	}
	roster := registryFrom(agents, nil, nil)
	if to, ok := roster.ByName(target); ok {
		return to, "", nil
	}
	if strings.TrimSpace(target) == "" {
		open, err := wk.store.ListInvocations(ctx, office.InvocationFilter{OfficeID: sender.OfficeID, CalleeAgentID: sender.ID, Status: []string{office.InvocationInProgress}})
		if err != nil {
			return to, "", fmt.Errorf("list invocations: %w", err)
		}
		ok := false
		for _, inv := range open {
			to, ok = roster.ByID(inv.CallerAgentID)
		}
		if !ok {
			return to, "it names no agent and you have no task in progress; open the block with DELIVER_RESULT:<agent> in square brackets", nil
		}
		return to, "", nil
	}
	reg, _, err := wk.roster.registry(ctx, sender.OfficeID)
	if err != nil {
		return to, "", err
	}
	d := reg.Select(proxy.Request{Target: target, Exclude: []string{sender.ID}})
	switch d.Outcome {
	case proxy.AskUser:
		return to, fmt.Sprintf("no agent is named %q (%s)", target, d.Reason), nil
	case proxy.Assign:
		return d.Agent, "", nil
	}
	return d.Waiting[0], "", nil
}

// badResult says why a result's content is refused ("" when it is not).
func (wk *work) badResult(sender office.Agent, r protocol.DeliverResult) string {
	if err := proxy.ValidateContent(r.Content, wk.cfg.MaxContent); err != nil {
		return err.Error()
	}
	switch r.Type {
	case protocol.ResultJSON:
		if !json.Valid([]byte(r.Content)) {
			return "its content is not valid JSON"
		}
	case protocol.ResultFilePath:
		if err := insideDir(wk.roster.workspace(sender), r.Content); err != nil {
			return err.Error()
		}
	}
	return ""
}

func (wk *work) onError(ctx context.Context, src source, self office.Agent, m protocol.Message) error {
	e := m.Error
	if e == nil {
		return nil
	}
	switch e.Recovery {
	case protocol.RecoveryPauseAndRetry:
		wk.timers.retries.add(retry{at: wk.now().Add(wk.cfg.RetryBackoff), agent: self, message: e.Message})
		return nil
	case protocol.RecoveryNotifyUser:
		q := "Agent " + self.Name + " reports an error: " + e.Message
		_, err := wk.asks.ask(ctx, src, self, office.Question{QuestionType: office.QuestionText, Category: "error", Question: q, Context: e.Details, Required: true})
		return err
	default: // checkpoint_and_fail, fatal
		if err := wk.failWork(ctx, self, "fatal error: "+e.Message); err != nil {
			return err
		}
		if err := wk.sess.Stop(ctx, self.OfficeID, self.ID); err != nil {
			wk.log.Warn("stop after fatal error", "agent", self.Name, "err", err)
		} else if err := wk.status.stopped(ctx, self); err != nil {
			wk.log.Warn("agent idle after fatal error", "agent", self.Name, "err", err)
		}
		return nil
	}
}

// failWork fails every open invocation a is the callee of and tells the
// callers why.
func (wk *work) failWork(ctx context.Context, a office.Agent, why string) error {
	open, err := wk.store.ListInvocations(ctx, office.InvocationFilter{OfficeID: a.OfficeID, CalleeAgentID: a.ID, Status: []string{office.InvocationPending, office.InvocationInProgress}})
	if err != nil {
		return fmt.Errorf("list invocations: %w", err)
	}
	for _, inv := range open {
		if err := wk.failInvocation(ctx, inv, why); err != nil {
			return err
		}
	}
	return nil
}

func (wk *work) failInvocation(ctx context.Context, inv office.Invocation, why string) error {
	_, ok, err := wk.store.TransitionInvocation(ctx, inv.ID, []string{office.InvocationPending, office.InvocationInProgress}, office.InvocationFailed, office.InvocationPatch{Error: why})
	if err != nil || !ok {
		return err
	}
	wk.timers.handOver() // its callee may be a proxy a request waits for
	callee, _ := wk.store.GetAgent(ctx, inv.CalleeAgentID)
	if caller, err := wk.store.GetAgent(ctx, inv.CallerAgentID); err == nil {
		// why may hold the callee's own words (an ERROR message, a
		// dependency name): forwarded as quoted data, like a result.
		wk.notify(caller, fmt.Sprintf("Task %s that you gave %s failed:\n%s", inv.ID, callee.Name, quote(why)))
	}
	_, err = wk.events.event(ctx, inv.OfficeID, inv.CalleeAgentID, "invocation.failed", map[string]string{"invocation_id": inv.ID, "reason": why}, "", "")
	return err
}
