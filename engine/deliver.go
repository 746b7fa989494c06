package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/office-server/office-server/office"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/office-server/office-server/protocol"
)

// Delivery. Everything to type into an agent is either in the store
// (answers, results, user messages, dependency outcomes, tasks) or a
// notice on its desk; a round reads what is due to the agent and types it,
// in order, one Send at a time, and marks each store row delivered only
// after it was typed. So a server that dies mid-round types the item again
// after its restart rather than losing it.

// kick wakes k's delivery, starting its loop if needed.
func (o *Router) kick(k agentKey) {
	if !o.serves(k.officeID) {
		return
	}
	d := o.desk(k)
	d.startDelivery()
	wake(d.deliverWake)
}

// notify queues a notice for a, typed as "[OFFICE] <text>".
func (o *Router) notify(a office.Agent, text string) {
	o.desk(agentKey{a.OfficeID, a.ID}).notify(text)
}

// deliver is the desk's delivery loop: a round at every wake-up, and what
// could not be delivered retried with a growing delay (a session coming
// back, a store answering again also wake it).
func (d *desk) deliver(ctx context.Context) {
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	tick := d.r.cfg.Tick
	delay, maxDelay := tick, min(30*time.Second, 64*tick)
	for {
		if d.round(ctx) {
			retry.Reset(delay)
			delay = min(2*delay, maxDelay)
		} else {
			delay = tick
		}
		select {
		case <-ctx.Done():
			return
		case <-d.deliverWake:
		case <-retry.C:
		}
	}
}

// outcome is what a deliverer reports.
type outcome int

const (
	delivered outcome = iota // everything of its kind typed: the next kind's turn
	again                    // something could not be typed now: retry later
	hold                     // nothing more this round, nothing to retry
)

// delivery is one round's state: the agent as stored now and whether its
// session takes text.
type delivery struct {
	r       *Router
	a       office.Agent
	running bool
}

// send types text into the agent; false when the session is down or did
// not take it (the round ends and is retried).
func (v *delivery) send(ctx context.Context, text string) bool {
	if !v.running {
		return false
	}
	// Defused here, for everything typed (notices, answers, results,
	// tasks): no receiver may read any part of it as its own block, nor
	// find a control sequence in it (protocol.Defuse; the session
	// sanitises again).
	if err := v.r.sess.Send(ctx, v.a.OfficeID, v.a.ID, protocol.Defuse(text)); err != nil {
		if ctx.Err() == nil {
			v.r.log.Info("deliver: send failed; will retry", "agent", v.a.Name, "err", err)
		}
		v.running = false
		return false
	}
	return true
}

// due is everything in the store waiting for one agent.
type due struct {
	deps []office.DependencyRequest
	qs   []office.Question
	rs   []office.Result
	ms   []office.UserMessage
	invs []office.Invocation // its open tasks, oldest first
}

// round delivers what is due to the desk's agent; it reports whether
// something remains that it could not deliver now.
func (d *desk) round(ctx context.Context) (retry bool) {
	o, k := d.r, d.key
	if !o.serves(k.officeID) {
		return false // another server runs the office now
	}
	a, err := o.store.GetAgent(ctx, k.agentID)
	if err != nil {
		if !office.IsNotFound(err) && ctx.Err() == nil {
			o.log.Warn("deliver: get agent", "agent", k.agentID, "err", err)
			return true
		}
		return false
	}
	v := &delivery{r: o, a: a, running: o.sess.Running(a.OfficeID, a.ID)}
	if !d.deliverNotices(ctx, v) {
		return true
	}
	items, err := o.delivery.readDue(ctx, a)
	if err != nil {
		return o.delivery.retryErr("read what is due", err)
	}
	// One deliverer per kind of work, in this order: dependency outcomes,
	// answers, results, people's messages, the next task.
	for _, deliver := range []func(context.Context, *delivery, due) outcome{
		o.delivery.deliverDependencies, o.delivery.deliverAnswers, o.delivery.deliverResults, o.delivery.deliverMessages, o.delivery.deliverNextTask,
	} {
		switch deliver(ctx, v, items) {
		case again:
			return true
		case hold:
			return false
		}
	}
	return false
}

// deliverNotices types the desk's notices in order; false when one could
// not be typed.
func (d *desk) deliverNotices(ctx context.Context, v *delivery) bool {
	for {
		d.mu.Lock()
		n, ok := d.nextNotice()
		d.mu.Unlock()
		if !ok {
			return true
		}
		if !v.send(ctx, n) {
			return false
		}
		d.mu.Lock()
		d.notices = d.notices[1:]
		d.mu.Unlock()
	}
}

// readDue reads everything due to a at once (five independent reads of
// the agent's own rows, one round trip). A row that changes meanwhile is
// safe: every mark is a conditional transition, and the change wakes the
// delivery for another round.
func (o *deliverer) readDue(ctx context.Context, a office.Agent) (due, error) {
	var (
		x    due
		errs [5]error
		wg   sync.WaitGroup
	)
	mine := office.Due{OfficeIDs: []string{a.OfficeID}, AgentID: a.ID}
	wg.Add(5)
	go func() { defer wg.Done(); x.deps, errs[0] = o.store.ListUndeliveredDependencies(ctx, mine) }()
	go func() { defer wg.Done(); x.qs, errs[1] = o.store.ListAnsweredUndelivered(ctx, mine) }()
	go func() {
		defer wg.Done()
		x.rs, errs[2] = o.store.ListResults(ctx, office.ResultFilter{OfficeID: a.OfficeID, ToAgentID: a.ID, Status: []string{office.ResultPending}})
	}()
	go func() { defer wg.Done(); x.ms, errs[3] = o.store.ListPendingUserMessages(ctx, mine) }()
	go func() {
		defer wg.Done()
		x.invs, errs[4] = o.store.ListInvocations(ctx, office.InvocationFilter{OfficeID: a.OfficeID, CalleeAgentID: a.ID, Status: []string{office.InvocationPending, office.InvocationInProgress}})
	}()
	wg.Wait()
	return x, errors.Join(errs[:]...)
}

func (o *deliverer) deliverDependencies(ctx context.Context, v *delivery, x due) outcome {
	for _, d := range x.deps {
		if !o.deliverDependency(ctx, v, d) {
			return again
		}
	}
	return delivered
}

func (o *deliverer) deliverAnswers(ctx context.Context, v *delivery, x due) outcome {
	for _, q := range x.qs {
		if q.Category == office.QuestionPermission {
			continue // decided, never typed (permission.go)
		}
		answer, verr := validAnswer(q)
		if verr != nil {
			o.reask(ctx, v.a, q, verr)
			continue
		}
		if !v.send(ctx, answerText(q, answer)) {
			return again
		}
		if ok, err := o.store.MarkQuestionDelivered(ctx, q.ID); err != nil {
			o.retryErr("mark question delivered", err)
			return again
		} else if ok {
			o.setSessionStatus(ctx, v.a, office.SessionBusy)
			o.record(ctx, v.a.OfficeID, v.a.ID, "question.delivered", map[string]string{"question_id": q.ID}, "")
		}
	}
	return delivered
}

func (o *deliverer) deliverResults(ctx context.Context, v *delivery, x due) outcome {
	for _, r := range x.rs {
		if !v.running {
			o.ensureStarted(ctx, v.a)
			return again
		}
		if !v.send(ctx, resultText(r, o.agentName(ctx, r.FromAgentID))) {
			return again
		}
		if ok, err := o.store.MarkResultDelivered(ctx, r.ID); err != nil {
			o.retryErr("mark result delivered", err)
			return again
		} else if ok {
			o.record(ctx, v.a.OfficeID, v.a.ID, "result.delivered", map[string]string{"result_id": r.ID}, "")
		}
	}
	return delivered
}

func (o *deliverer) deliverMessages(ctx context.Context, v *delivery, x due) outcome {
	for _, m := range x.ms {
		if !v.send(ctx, "[OFFICE] Message from a person in the office:\n"+quote(m.Content)) {
			return again
		}
		if ok, err := o.store.MarkUserMessageDelivered(ctx, m.ID); err != nil {
			o.retryErr("mark message delivered", err)
			return again
		} else if ok {
			o.record(ctx, v.a.OfficeID, v.a.ID, "message.delivered", map[string]string{"message_id": m.ID}, "")
		}
	}
	return delivered
}

// deliverNextTask types the agent's oldest pending task unless it is busy
// with one: one task at a time, in order.
func (o *deliverer) deliverNextTask(ctx context.Context, v *delivery, x due) outcome {
	var next *office.Invocation
	for i := range x.invs {
		if x.invs[i].Status == office.InvocationInProgress {
			return delivered // busy
		}
		if next == nil {
			next = &x.invs[i]
		}
	}
	if next == nil {
		return delivered
	}
	if v.a.Status == office.AgentDisabled || v.a.Status == office.AgentFailed {
		return hold // the selector should not have chosen it; wait for an operator
	}
	if !v.running {
		o.ensureStarted(ctx, v.a)
		return again
	}
	if !v.send(ctx, taskText(*next, o.agentName(ctx, next.CallerAgentID))) {
		return again
	}
	if inv, ok, err := o.store.TransitionInvocation(ctx, next.ID, []string{office.InvocationPending}, office.InvocationInProgress, office.InvocationPatch{}); err != nil {
		o.retryErr("start invocation", err)
		return again
	} else if ok {
		if inv.StartedAt != nil {
			o.sweep.invocations.note(inv.StartedAt.Add(o.cfg.InvocationTimeout + time.Nanosecond))
		} else {
			o.sweep.invocations.forget()
		}
		o.record(ctx, v.a.OfficeID, v.a.ID, "invocation.in_progress", map[string]string{"invocation_id": next.ID}, "")
	}
	return delivered
}

// agentName returns the name of the agent with id, for the forms typed
// into another agent; "" (logged) when it cannot be read.
func (o *roster) agentName(ctx context.Context, id string) string {
	a, err := o.store.GetAgent(ctx, id)
	if err != nil && ctx.Err() == nil {
		o.log.Warn("deliver: read the sender's name", "agent", id, "err", err)
	}
	return a.Name
}

func (o *deliverer) retryErr(what string, err error) bool {
	o.log.Warn("deliver: "+what, "err", err)
	return true
}

// ensureStarted starts a's session unless it is running or an operator
// switched the agent off.
func (o *deliverer) ensureStarted(ctx context.Context, a office.Agent) {
	if a.Status == office.AgentDisabled || a.Status == office.AgentFailed || o.sess.Running(a.OfficeID, a.ID) {
		return
	}
	if err := o.startSession(ctx, a, false); err != nil {
		o.log.Warn("start session", "agent", a.Name, "err", err)
	}
}

// sessionSpec builds what the session layer needs to run a: the launch
// spec, the workspace, the instructions, the values of provided api_key and
// env_variable dependencies, and Claude Code's conversation id (resumed
// when it exists).
func (o *deliverer) sessionSpec(ctx context.Context, a office.Agent) (SessionSpec, error) {
	off, err := o.store.GetOffice(ctx, a.OfficeID)
	if err != nil {
		return SessionSpec{}, fmt.Errorf("get office: %w", err)
	}
	roster, err := o.agents(ctx, a.OfficeID)
	if err != nil {
		return SessionSpec{}, err
	}
	spec := SessionSpec{
		OfficeID: a.OfficeID, AgentID: a.ID, Launch: a.Launch, Dir: o.workspace(a),
		SystemPrompt: office.Instructions(off, a, roster), PermissionTimeout: o.perms.timeout(a),
	}
	deps, err := o.store.ListDependencies(ctx, office.DependencyFilter{OfficeID: a.OfficeID, AgentID: a.ID, Status: []string{office.DependencyProvided}})
	if err != nil {
		return spec, fmt.Errorf("list dependencies: %w", err)
	}
	for _, d := range deps {
		if d.Type != protocol.DependencyAPIKey && d.Type != protocol.DependencyEnvVar {
			continue
		}
		v, err := o.sealer.Open(d.Value)
		if err != nil {
			return spec, fmt.Errorf("dependency %s: %w", d.Name, err)
		}
		spec.Env = append(spec.Env, d.Name+"="+v)
	}
	rec, err := o.store.GetSessionByAgent(ctx, a.ID)
	if err != nil && !office.IsNotFound(err) {
		return spec, fmt.Errorf("get session: %w", err)
	}
	if rec.AgentSessionID != "" {
		spec.ConversationID, spec.Resume = rec.AgentSessionID, true
		spec.TranscriptAfter = o.transcriptCursor(ctx, agentKey{a.OfficeID, a.ID}, rec.AgentSessionID)
	} else {
		spec.ConversationID = uuid.NewString()
		rec.OfficeID, rec.AgentID, rec.AgentSessionID = a.OfficeID, a.ID, spec.ConversationID
		if rec.Status == "" {
			rec.Status = office.SessionStarting
		}
		if _, err := o.store.UpsertSession(ctx, rec); err != nil {
			return spec, fmt.Errorf("record session: %w", err)
		}
	}
	return spec, nil
}

func (o *deliverer) startSession(ctx context.Context, a office.Agent, restart bool) error {
	if !o.serves(a.OfficeID) {
		return office.Errorf(office.EUNAVAILABLE, "office %s is run by another server", a.OfficeID)
	}
	spec, err := o.sessionSpec(ctx, a)
	if err != nil {
		return err
	}
	if restart && o.sess.Running(a.OfficeID, a.ID) {
		err = o.sess.Restart(ctx, spec)
	} else {
		err = o.sess.Start(ctx, spec)
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", a.Name, err)
	}
	if a.Status != office.AgentActive {
		if err := o.store.SetAgentStatus(ctx, a.ID, office.AgentActive); err != nil {
			// The session runs; the row catches up at its next status.
			o.log.Warn("record agent active", "agent", a.Name, "err", err)
		}
	}
	return nil
}

// queue takes a session status change (session.Options.OnStatus):
// it records the session, wakes the agent's pump when it is ready, and
// fails the agent's open tasks when its session failed for good.
func (o *statusWriter) queue(c StatusChange) {
	if c.Status == office.SessionStarting {
		d := o.desk(agentKey{c.OfficeID, c.AgentID})
		d.mu.Lock()
		d.epoch = uuid.NewString()
		d.mu.Unlock()
	}
	o.mu.Lock()
	// Recorded by one goroutine, in order: OnStatus must not block.
	o.q = append(o.q, c)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// run applies queued status changes in order until ctx ends.
func (o *statusWriter) run(ctx context.Context) {
	for {
		select {
		case o.turn <- struct{}{}:
		case <-ctx.Done():
			return
		}
		o.recordQueued(ctx)
		<-o.turn
		select {
		case <-ctx.Done():
			return
		case <-o.wake:
		}
	}
}

// flush writes every session status change reported so far, after
// the one being written now, with ctx; it returns ctx's error if ctx ends
// first. The server calls it after stopping the sessions at shutdown and
// before it ends Run's context, so that the final rows (stopped, pid 0) are
// written with a context that is still alive, bounded by ctx (the shutdown
// timeout).
func (o *statusWriter) flush(ctx context.Context) error {
	select {
	case o.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-o.turn }()
	o.recordQueued(ctx)
	return ctx.Err()
}

// recordQueued records the queued status changes in order; the caller
// holds statusTurn.
func (o *statusWriter) recordQueued(ctx context.Context) {
	o.mu.Lock()
	q := o.q
	o.q = nil
	o.mu.Unlock()
	for _, c := range q {
		o.recordStatus(ctx, c)
	}
}

func (o *statusWriter) recordStatus(ctx context.Context, c StatusChange) {
	officeID, agentID, status := c.OfficeID, c.AgentID, c.Status
	if !o.serves(officeID) {
		// The office was taken over: its row is the new owner's now.
		o.log.Debug("session status not recorded: office run by another server", "office", officeID, "agent", agentID, "status", status)
		return
	}
	rec, err := o.store.GetSessionByAgent(ctx, agentID)
	if err != nil {
		rec = office.SessionRecord{OfficeID: officeID, AgentID: agentID}
	}
	if status == office.SessionStarting {
		now := o.now()
		rec.StartedAt = &now
	}
	if !(rec.Status == office.SessionWaiting && (status == office.SessionReady || status == office.SessionBusy)) {
		rec.Status = status
		rec.Detail = c.Detail
	}
	if status == office.SessionStarting || status == office.SessionReady || status == office.SessionBusy {
		rec.Detail = c.Detail
	}
	rec.PID = c.PID // 0 once the process is gone (stopped, exited, crashed, failed)
	rec.ExitCode = c.ExitCode
	if _, err := o.store.UpsertSession(ctx, rec); err != nil {
		o.log.Warn("record session status", "agent", agentID, "err", err)
	}
	k := agentKey{officeID, agentID}
	o.onStatus(ctx, k, c)
	payload := map[string]any{"pid": c.PID, "exit_code": c.ExitCode}
	if c.Detail != "" {
		payload["detail"] = c.Detail
	}
	if len(c.LastLines) > 0 {
		payload["last_lines"] = c.LastLines
	}
	if _, err := o.event(ctx, officeID, agentID, "session."+status, payload, "", ""); err != nil {
		o.log.Warn("record session event", "agent", agentID, "err", err)
	}
	o.kick(k)
}

// onStatus acts on a recorded status: a failed session fails the agent's
// work, a crash is remembered (remind), an exit makes the agent idle, a
// start or ready makes it active and re-queues or reminds of its tasks.
func (o *statusWriter) onStatus(ctx context.Context, k agentKey, c StatusChange) {
	agentID, status := k.agentID, c.Status
	switch status {
	case office.SessionStopped, office.SessionExited, office.SessionFailed:
		o.perms.endGrants(k) // "allow for this session" ends with it
	case office.SessionStarting:
		// A request the previous process left waiting is gone with it.
		o.perms.sweepPermissions(ctx, k.officeID, k.agentID)
	}
	switch status {
	case office.SessionFailed:
		if err := o.store.SetAgentStatus(ctx, agentID, office.AgentFailed); err != nil {
			o.log.Warn("record agent failed", "agent", agentID, "err", err)
		}
		if a, err := o.store.GetAgent(ctx, agentID); err == nil {
			if err := o.work.failWork(ctx, a, "its session failed for good: "+c.Detail); err != nil {
				o.log.Warn("fail work", "agent", a.Name, "err", err)
			}
		}
	case office.SessionCrashed:
		d := o.desk(k)
		d.mu.Lock()
		d.crashed = true
		d.mu.Unlock()
	case office.SessionExited:
		// Not stopped: see (*Router).stopped.
		if err := o.store.SetAgentStatus(ctx, agentID, office.AgentIdle); err != nil {
			o.log.Warn("record agent idle", "agent", agentID, "err", err)
		}
	case office.SessionStarting, office.SessionReady:
		a, err := o.store.GetAgent(ctx, agentID)
		if err == nil && (a.Status == office.AgentIdle || a.Status == "") {
			if err := o.store.SetAgentStatus(ctx, agentID, office.AgentActive); err != nil {
				o.log.Warn("record agent active", "agent", agentID, "err", err)
			}
		}
		if err == nil && status == office.SessionStarting && !c.Resumes {
			o.requeue(ctx, a)
		}
		if err == nil && status == office.SessionReady {
			d := o.desk(k)
			d.mu.Lock()
			was := d.crashed
			d.crashed = false
			d.mu.Unlock()
			// A fresh conversation after a crash (nothing to resume) is
			// given back what it had not received by the session itself.
			if was && c.Resumed {
				o.remind(ctx, a)
			}
		}
	}
}

// remind tells an agent whose process crashed and came back with its
// conversation resumed (Claude Code) which tasks it holds: the task is in
// its conversation, but a resumed agent waits for a prompt.
func (o *statusWriter) remind(ctx context.Context, a office.Agent) {
	invs, err := o.store.ListInvocations(ctx, office.InvocationFilter{OfficeID: a.OfficeID, CalleeAgentID: a.ID, Status: []string{office.InvocationInProgress}})
	if err != nil {
		o.log.Warn("remind of tasks", "agent", a.Name, "err", err)
		return
	}
	for _, inv := range invs {
		caller, err := o.store.GetAgent(ctx, inv.CallerAgentID)
		if err != nil {
			continue
		}
		o.notify(a, fmt.Sprintf("Your process ended unexpectedly and was restarted; your conversation was resumed. You were working on task %s from %s. Continue it and deliver its result with a DELIVER_RESULT block naming %s.", inv.ID, caller.Name, caller.Name))
		if _, err := o.event(ctx, a.OfficeID, a.ID, "invocation.reminded", map[string]string{"invocation_id": inv.ID}, "", ""); err != nil {
			o.log.Warn("record reminder", "agent", a.Name, "err", err)
		}
	}
}

// requeue puts the tasks a new process of a cannot know about (in progress
// in the process that died) back in its queue, so they are typed again.
func (o *statusWriter) requeue(ctx context.Context, a office.Agent) {
	invs, err := o.store.ListInvocations(ctx, office.InvocationFilter{OfficeID: a.OfficeID, CalleeAgentID: a.ID, Status: []string{office.InvocationInProgress}})
	if err != nil {
		o.log.Warn("requeue tasks", "agent", a.Name, "err", err)
		return
	}
	for _, inv := range invs {
		_, ok, err := o.store.TransitionInvocation(ctx, inv.ID, []string{office.InvocationInProgress}, office.InvocationPending, office.InvocationPatch{})
		if err != nil {
			o.log.Warn("requeue task", "agent", a.Name, "invocation", inv.ID, "err", err)
			continue
		}
		if ok {
			o.record(ctx, a.OfficeID, a.ID, "invocation.requeued", map[string]string{"invocation_id": inv.ID}, "")
		}
	}
}

// The forms typed into an agent. Content from someone else is framed by
// protocol.Quote: escaped so that no receiver can read any part of it as a
// block (see docs/notes/protocol.md, "Forwarded text"), and quoted with "> "
// so that it reads as information.
func quote(s string) string { return protocol.Quote(s) }

func answerText(q office.Question, answer string) string {
	return fmt.Sprintf("[OFFICE] Answer to question %s (%q):\n%s", q.ID, q.Question, quote(answer))
}

func resultText(r office.Result, from string) string {
	head := fmt.Sprintf("[OFFICE] Result from %s", from)
	if r.InvocationID != "" {
		head += " for task " + r.InvocationID
	}
	return fmt.Sprintf("%s (%s):\n%s", head, r.ResultType, quote(r.Content))
}

func taskText(inv office.Invocation, caller string) string {
	s := fmt.Sprintf("[OFFICE] Task %s from %s:\n%s", inv.ID, caller, quote(inv.Reason))
	if inv.Context != "" {
		s += "\nContext:\n" + quote(inv.Context)
	}
	return s + fmt.Sprintf("\nWhen you are done, deliver the result to %s with a DELIVER_RESULT block naming %s.", caller, caller)
}
