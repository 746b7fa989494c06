package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/office-server/office-server/office"
)

// queue takes a session status change (session.Options.OnStatus):
// it records the session, wakes the agent's pump when it is ready, and
// fails the agent's open tasks when its session failed for good.
func (sw *statusWriter) queue(c statusChange) {
	switch c.Status {
	case office.SessionStarting:
		d := sw.desk(agentKey{c.OfficeID, c.AgentID})
		d.mu.Lock()
		d.epoch = uuid.NewString()
		d.mu.Unlock()
		d.release(0) // nothing more of a block held from the last process
	case office.SessionExited, office.SessionCrashed, office.SessionFailed, office.SessionStopped:
		sw.desk(agentKey{c.OfficeID, c.AgentID}).release(0)
	}
	sw.mu.Lock()
	// Recorded by one goroutine, in order: OnStatus must not block.
	sw.q = append(sw.q, c)
	sw.mu.Unlock()
	select {
	case sw.wake <- struct{}{}:
	default:
	}
}

// run applies queued status changes in order until ctx ends.
func (sw *statusWriter) run(ctx context.Context) {
	for {
		select {
		case sw.turn <- struct{}{}:
		case <-ctx.Done():
			return
		}
		sw.recordQueued(ctx)
		<-sw.turn
		select {
		case <-ctx.Done():
			return
		case <-sw.wake:
		}
	}
}

// flush writes every session status change reported so far, after
// the one being written now, with ctx; it returns ctx's error if ctx ends
// first. The server calls it after stopping the sessions at shutdown and
// before it ends Run's context, so that the final rows (stopped, pid 0) are
// written with a context that is still alive, bounded by ctx (the shutdown
// timeout).
func (sw *statusWriter) flush(ctx context.Context) error {
	select {
	case sw.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-sw.turn }()
	sw.recordQueued(ctx)
	return ctx.Err()
}

// settle makes the session rows of officeID true when this server takes
// the office: a row left starting, ready, busy, waiting or needs_attention
// by a server that stopped without writing its final status (SIGKILL, a
// lost node) names a process that is gone. Each such row whose agent has
// no session here is written stopped (pid 0) before the office's agents
// start, in the status writer's turn (one writer per row).
func (sw *statusWriter) settle(ctx context.Context, officeID string) {
	select {
	case sw.turn <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-sw.turn }()
	rows, err := sw.store.ListSessions(ctx, officeID)
	if err != nil {
		sw.log.Warn("read session rows to settle", "office", officeID, "err", err)
		return
	}
	for _, rec := range rows {
		switch rec.Status {
		case office.SessionStarting, office.SessionReady, office.SessionBusy, office.SessionWaiting, office.SessionNeedsAttention:
		default:
			continue
		}
		if sw.sess.Running(rec.OfficeID, rec.AgentID) {
			continue
		}
		detail := "its server stopped without recording the end of this session (found " + rec.Status + " when the office was taken)"
		pj, _ := json.Marshal(map[string]any{"pid": 0, "was": rec.Status, "was_pid": rec.PID, "detail": detail})
		// The process's end as the session layer would report it: one
		// conditional write of status, pid and detail with its event.
		_, ev, _, err := sw.store.SetSessionStatus(ctx, office.SessionStatus{OfficeID: rec.OfficeID, AgentID: rec.AgentID,
			Status: office.SessionStopped, Detail: detail, Process: true, EventKind: "session." + office.SessionStopped, EventPayload: pj})
		if err != nil {
			sw.events.auditFailures.Add(1)
			sw.log.Warn("settle session row", "agent", rec.AgentID, "err", err)
			continue
		}
		sw.events.publish(ev)
	}
}

// recordQueued records the queued status changes in order; the caller
// holds statusTurn.
func (sw *statusWriter) recordQueued(ctx context.Context) {
	sw.mu.Lock()
	q := sw.q
	sw.q = nil
	sw.mu.Unlock()
	for _, c := range q {
		sw.recordStatus(ctx, c)
	}
}

func (sw *statusWriter) recordStatus(ctx context.Context, c statusChange) {
	c = sw.hib.rewrite(c) // the stop of an agent put to sleep is hibernated
	officeID, agentID, status := c.OfficeID, c.AgentID, c.Status
	if !sw.roster.serves(officeID) {
		// The office was taken over: its row is the new owner's now.
		sw.log.Debug("session status not recorded: office run by another server", "office", officeID, "agent", agentID, "status", status)
		return
	}
	sw.logLifecycle(ctx, c, sw.lastStatus(agentID, status))
	payload := map[string]any{"pid": c.PID, "exit_code": c.ExitCode}
	if c.Detail != "" {
		payload["detail"] = c.Detail
	}
	if len(c.LastLines) > 0 {
		payload["last_lines"] = c.LastLines
	}
	pj, _ := json.Marshal(payload)
	change := office.SessionStatus{OfficeID: officeID, AgentID: agentID, Status: status, Detail: c.Detail,
		Process: true, PID: c.PID, ExitCode: c.ExitCode, Node: sw.cfg.Node, EventKind: "session." + status, EventPayload: pj}
	if status == office.SessionStarting {
		now := sw.now()
		change.StartedAt = &now
	}
	// One write: the row (kept waiting while the agent waits for a
	// person, see office.SessionStatus) and its event.
	if _, ev, _, err := sw.store.SetSessionStatus(ctx, change); err != nil {
		sw.events.auditFailures.Add(1)
		sw.log.Warn("record session status", "agent", agentID, "err", err)
	} else {
		sw.events.publish(ev)
	}
	sw.hib.keepConversation(ctx, c)
	k := agentKey{officeID, agentID}
	sw.onStatus(ctx, k, c)
	// A new process may be given what the last one held (requeue) and
	// takes what waits; otherwise a status brings nothing new to deliver
	// (what became due woke the delivery itself) unless the last round
	// left something it could not type: then try again now rather than
	// at its retry.
	d := sw.desk(k)
	d.mu.Lock()
	settled := d.settled
	d.mu.Unlock()
	if status == office.SessionStarting || !settled {
		sw.kick(k)
	}
}

// logLifecycle logs an agent's start, its first ready after a start, and
// its end (exited, stopped) at info level, with its and its office's
// names beside their ids: one line each. A crash or failure is logged by
// the session (session/process.go), with the screen and the backoff.
func (sw *statusWriter) logLifecycle(ctx context.Context, c statusChange, prev string) {
	var msg string
	switch {
	case c.Status == office.SessionStarting:
		msg = "agent starting"
	case c.Status == office.SessionReady && (prev == office.SessionStarting || prev == ""):
		msg = "agent ready"
	case c.Status == office.SessionExited, c.Status == office.SessionStopped && prev != office.SessionStopped:
		msg = "agent " + c.Status
	default:
		return
	}
	attrs := []any{"office", c.OfficeID}
	if off, err := sw.store.GetOffice(ctx, c.OfficeID); err == nil {
		attrs = append(attrs, "office_name", off.Name)
	}
	attrs = append(attrs, "agent", c.AgentID)
	if a, err := sw.store.GetAgent(ctx, c.AgentID); err == nil {
		kind := a.Launch.Kind
		if kind == "" {
			kind = "claude"
		}
		attrs = append(attrs, "agent_name", a.Name, "kind", kind)
	}
	if c.PID != 0 {
		attrs = append(attrs, "pid", c.PID)
	}
	if c.ExitCode != nil {
		attrs = append(attrs, "exit_code", *c.ExitCode)
	}
	sw.log.Info(msg, attrs...)
}

// lastStatus records status as agent's last and returns the one before
// ("" for none since this server started), for the lifecycle log.
func (sw *statusWriter) lastStatus(agentID, status string) string {
	prev, _ := sw.last.Swap(agentID, status)
	s, _ := prev.(string)
	return s
}

// onStatus acts on a recorded status: a failed session fails the agent's
// work, a crash is remembered (remind), an exit makes the agent idle, a
// start or ready makes it active and re-queues or reminds of its tasks.
func (sw *statusWriter) onStatus(ctx context.Context, k agentKey, c statusChange) {
	agentID, status := k.agentID, c.Status
	if status == office.SessionStarting {
		if !c.Resumed {
			// A fresh conversation: "allow for this session" ends with the
			// one before it. A resumed one keeps its grants.
			sw.perms.endGrants(ctx, k)
		}
		// A request the previous process left waiting is gone with it.
		sw.perms.sweepPermissions(ctx, k.officeID, k.agentID)
	}
	switch status {
	case office.SessionFailed:
		if err := sw.store.SetAgentStatus(ctx, agentID, office.AgentFailed); err != nil {
			sw.log.Warn("record agent failed", "agent", agentID, "err", err)
		}
		if a, err := sw.store.GetAgent(ctx, agentID); err == nil {
			if err := sw.failer.failWork(ctx, a, "its session failed for good: "+c.Detail); err != nil {
				sw.log.Warn("fail work", "agent", a.Name, "err", err)
			}
		}
	case office.SessionCrashed:
		d := sw.desk(k)
		d.mu.Lock()
		d.crashed = true
		d.mu.Unlock()
	case office.SessionExited:
		// Not stopped: see (*Router).stopped.
		if err := sw.store.SetAgentStatus(ctx, agentID, office.AgentIdle); err != nil {
			sw.log.Warn("record agent idle", "agent", agentID, "err", err)
		}
	case office.SessionStarting, office.SessionReady:
		a, err := sw.store.GetAgent(ctx, agentID)
		if err == nil && (a.Status == office.AgentIdle || a.Status == "") {
			if err := sw.store.SetAgentStatus(ctx, agentID, office.AgentActive); err != nil {
				sw.log.Warn("record agent active", "agent", agentID, "err", err)
			}
		}
		// A process that did not resume a conversation (a kind without
		// one, or one whose conversation is not on this machine: the
		// office moved to another node) knows nothing of its tasks.
		if err == nil && status == office.SessionStarting && !(c.Resumes && c.Resumed) {
			sw.requeue(ctx, a)
		}
		if err == nil && status == office.SessionReady {
			d := sw.desk(k)
			d.mu.Lock()
			// The first ready in this server's life is a process that
			// replaced one an earlier server ran: its turn was cut short
			// as by a crash.
			was := d.crashed || !d.readyOnce
			d.crashed, d.readyOnce = false, true
			d.mu.Unlock()
			// A fresh conversation after a crash (nothing to resume) is
			// given back what it had not received by the session itself.
			if was && c.Resumed {
				sw.remind(ctx, a)
			}
			// A proxy whose session is back may take a parked request.
			sw.timers.handOver()
		}
	}
}

// remind tells an agent whose process crashed and came back with its
// conversation resumed (Claude Code) which tasks it holds: the task is in
// its conversation, but a resumed agent waits for a prompt.
func (sw *statusWriter) remind(ctx context.Context, a office.Agent) {
	invs, err := sw.store.ListInvocations(ctx, office.InvocationFilter{OfficeID: a.OfficeID, CalleeAgentID: a.ID, Status: []string{office.InvocationInProgress}})
	if err != nil {
		sw.log.Warn("remind of tasks", "agent", a.Name, "err", err)
		return
	}
	for _, inv := range invs {
		caller, err := sw.store.GetAgent(ctx, inv.CallerAgentID)
		if err != nil {
			continue
		}
		sw.notify(a, fmt.Sprintf("Your process ended unexpectedly and was restarted; your conversation was resumed. You were working on task %s from %s. Continue it and deliver its result with a DELIVER_RESULT block naming %s.", inv.ID, caller.Name, caller.Name))
		if _, err := sw.events.event(ctx, a.OfficeID, a.ID, "invocation.reminded", map[string]string{"invocation_id": inv.ID}, "", ""); err != nil {
			sw.log.Warn("record reminder", "agent", a.Name, "err", err)
		}
	}
}

// requeue puts the tasks a new process of a cannot know about (in progress
// in the process that died, or in a conversation left on another node)
// back in its queue, so they are typed again.
func (sw *statusWriter) requeue(ctx context.Context, a office.Agent) {
	invs, err := sw.store.ListInvocations(ctx, office.InvocationFilter{OfficeID: a.OfficeID, CalleeAgentID: a.ID, Status: []string{office.InvocationInProgress}})
	if err != nil {
		sw.log.Warn("requeue tasks", "agent", a.Name, "err", err)
		return
	}
	for _, inv := range invs {
		_, ok, err := sw.store.TransitionInvocation(ctx, inv.ID, []string{office.InvocationInProgress}, office.InvocationPending, office.InvocationPatch{})
		if err != nil {
			sw.log.Warn("requeue task", "agent", a.Name, "invocation", inv.ID, "err", err)
			continue
		}
		if ok {
			sw.events.record(ctx, a.OfficeID, a.ID, "invocation.requeued", map[string]string{"invocation_id": inv.ID}, "")
		}
	}
}

// stopped makes a, whose session was stopped on request, idle: after the
// statuses reported before (a "ready" recorded later would make it active
// again). An agent whose session the server stops for its own shutdown
// stays active, so that the next start (or the next owner) runs it.
func (sw *statusWriter) stopped(ctx context.Context, a office.Agent) error {
	if err := sw.flush(ctx); err != nil {
		return err
	}
	if a.Status == office.AgentDisabled || a.Status == office.AgentIdle {
		return nil
	}
	return sw.store.SetAgentStatus(ctx, a.ID, office.AgentIdle)
}
