package office

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/office-server/office-server/protocol"
)

// pump is one agent's delivery loop. Everything to type into the agent is
// either in the store (answers, results, user messages, dependency
// outcomes, tasks) or a notice in memory; a round reads the store and types
// what is due, in order, one Send at a time, and marks each store row
// delivered only after it was typed. So a server that dies mid-round types
// the item again after its restart rather than losing it.
type pump struct {
	wake    chan struct{}
	mu      sync.Mutex
	notices []string
	started bool
	// droppedNotices were not queued: the queue was full (limit.go).
	droppedNotices int
}

// kick wakes k's pump, starting it if needed.
func (o *Router) kick(k agentKey) {
	if !o.serves(k.officeID) {
		return
	}
	o.mu.Lock()
	p := o.pumps[k]
	if p == nil {
		p = &pump{wake: make(chan struct{}, 1)}
		o.pumps[k] = p
	}
	start := !p.started && o.runCtx != nil && o.runCtx.Err() == nil
	if start {
		p.started = true
	}
	o.mu.Unlock()
	if start {
		o.goOwned(func(ctx context.Context) { o.runPump(ctx, k, p) })
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// notify queues a notice for a, typed as "[OFFICE] <text>".
func (o *Router) notify(a Agent, text string) {
	k := agentKey{a.OfficeID, a.ID}
	o.mu.Lock()
	p := o.pumps[k]
	if p == nil {
		p = &pump{wake: make(chan struct{}, 1)}
		o.pumps[k] = p
	}
	o.mu.Unlock()
	p.mu.Lock()
	if !strings.HasPrefix(text, "[") {
		text = "[OFFICE] " + text
	}
	p.queue(text)
	p.mu.Unlock()
	o.kick(k)
}

func (o *Router) runPump(ctx context.Context, k agentKey, p *pump) {
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	// What could not be delivered is retried with a growing delay (a
	// session coming back, a store answering again also wake the pump).
	delay := o.cfg.Tick
	maxDelay := min(30*time.Second, 64*o.cfg.Tick)
	for {
		if o.round(ctx, k, p) {
			retry.Reset(delay)
			delay = min(2*delay, maxDelay)
		} else {
			delay = o.cfg.Tick
		}
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-retry.C:
		}
	}
}

// round delivers what is due to one agent; it reports whether something
// remains that it could not deliver now.
func (o *Router) round(ctx context.Context, k agentKey, p *pump) (again bool) {
	if !o.serves(k.officeID) {
		return false // another server runs the office now
	}
	a, err := o.store.GetAgent(ctx, k.agentID)
	if err != nil {
		if !IsNotFound(err) && ctx.Err() == nil {
			o.log.Warn("pump: get agent", "agent", k.agentID, "err", err)
			return true
		}
		return false
	}
	running := o.sess.Running(a.OfficeID, a.ID)
	send := func(text string) bool {
		if !running {
			return false
		}
		// Defused here, for everything typed (notices, answers, results,
		// tasks): no receiver may read any part of it as its own block, nor
		// find a control sequence in it (protocol.Defuse; the session
		// sanitises again).
		if err := o.sess.Send(ctx, a.OfficeID, a.ID, protocol.Defuse(text)); err != nil {
			if ctx.Err() == nil {
				o.log.Info("deliver: send failed; will retry", "agent", a.Name, "err", err)
			}
			running = false
			return false
		}
		return true
	}

	// Notices first: they answer what the agent just did.
	for {
		p.mu.Lock()
		n, ok := p.nextNotice()
		p.mu.Unlock()
		if !ok {
			break
		}
		if !send(n) {
			return true
		}
		p.mu.Lock()
		p.notices = p.notices[1:]
		p.mu.Unlock()
	}

	// Everything due is read at once (five independent reads, one round
	// trip) and then delivered in order: dependency outcomes, answers,
	// results, people's messages, the next task. A row that changes
	// meanwhile is safe: every mark is a conditional transition, and the
	// change wakes the pump for another round.
	var (
		deps []DependencyRequest
		qs   []Question
		rs   []Result
		ms   []UserMessage
		invs []Invocation
		errs [5]error
		wg   sync.WaitGroup
	)
	offices := []string{a.OfficeID}
	wg.Add(5)
	go func() { defer wg.Done(); deps, errs[0] = o.store.ListUndeliveredDependencies(ctx, offices) }()
	go func() { defer wg.Done(); qs, errs[1] = o.store.ListAnsweredUndelivered(ctx, offices) }()
	go func() {
		defer wg.Done()
		rs, errs[2] = o.store.ListResults(ctx, ResultFilter{OfficeID: a.OfficeID, ToAgentID: a.ID, Status: []string{ResultPending}})
	}()
	go func() { defer wg.Done(); ms, errs[3] = o.store.ListPendingUserMessages(ctx, offices) }()
	go func() {
		defer wg.Done()
		invs, errs[4] = o.store.ListInvocations(ctx, InvocationFilter{OfficeID: a.OfficeID, AgentID: a.ID, Status: []string{InvocationPending, InvocationInProgress}})
	}()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return o.retryErr("read what is due", err)
		}
	}
	for _, d := range deps {
		if d.AgentID != a.ID {
			continue
		}
		if !o.deliverDependency(ctx, a, d, &running, send) {
			return true
		}
	}
	// Answers.
	for _, q := range qs {
		if q.AgentID != a.ID {
			continue
		}
		answer, verr := validAnswer(q)
		if verr != nil {
			o.reask(ctx, a, q, verr)
			continue
		}
		if !send(answerText(q, answer)) {
			return true
		}
		if ok, err := o.store.MarkQuestionDelivered(ctx, q.ID); err != nil {
			return o.retryErr("mark question delivered", err)
		} else if ok {
			o.setSessionStatus(ctx, a, SessionBusy)
			_, _ = o.event(ctx, a.OfficeID, a.ID, "question.delivered", map[string]string{"question_id": q.ID}, "", "")
		}
	}
	// Results.
	for _, r := range rs {
		if !running {
			o.ensureStarted(ctx, a)
			return true
		}
		from, _ := o.store.GetAgent(ctx, r.FromAgentID)
		if !send(resultText(r, from.Name)) {
			return true
		}
		if ok, err := o.store.MarkResultDelivered(ctx, r.ID); err != nil {
			return o.retryErr("mark result delivered", err)
		} else if ok {
			_, _ = o.event(ctx, a.OfficeID, a.ID, "result.delivered", map[string]string{"result_id": r.ID}, "", "")
		}
	}
	// Messages from people.
	for _, m := range ms {
		if m.AgentID != a.ID {
			continue
		}
		if !send("[OFFICE] Message from a person in the office:\n" + quote(m.Content)) {
			return true
		}
		if ok, err := o.store.MarkUserMessageDelivered(ctx, m.ID); err != nil {
			return o.retryErr("mark message delivered", err)
		} else if ok {
			_, _ = o.event(ctx, a.OfficeID, a.ID, "message.delivered", map[string]string{"message_id": m.ID}, "", "")
		}
	}
	// The next task, one at a time in order.
	var next *Invocation
	busy := false
	slices.SortStableFunc(invs, func(x, y Invocation) int { return x.CreatedAt.Compare(y.CreatedAt) })
	for i := range invs {
		inv := invs[i]
		if inv.CalleeAgentID != a.ID {
			continue
		}
		if inv.Status == InvocationInProgress {
			busy = true
		} else if next == nil {
			next = &invs[i]
		}
	}
	if next != nil && !busy {
		if a.Status == AgentDisabled || a.Status == AgentFailed {
			return false // the selector should not have chosen it; wait for an operator
		}
		if !running {
			o.ensureStarted(ctx, a)
			return true
		}
		caller, _ := o.store.GetAgent(ctx, next.CallerAgentID)
		if !send(taskText(*next, caller.Name)) {
			return true
		}
		if _, ok, err := o.store.TransitionInvocation(ctx, next.ID, []string{InvocationPending}, InvocationInProgress, InvocationPatch{}); err != nil {
			return o.retryErr("start invocation", err)
		} else if ok {
			_, _ = o.event(ctx, a.OfficeID, a.ID, "invocation.in_progress", map[string]string{"invocation_id": next.ID}, "", "")
		}
	}
	return false
}

func (o *Router) retryErr(what string, err error) bool {
	o.log.Warn("deliver: "+what, "err", err)
	return true
}

// ensureStarted starts a's session unless it is running or an operator
// switched the agent off.
func (o *Router) ensureStarted(ctx context.Context, a Agent) {
	if a.Status == AgentDisabled || a.Status == AgentFailed || o.sess.Running(a.OfficeID, a.ID) {
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
func (o *Router) sessionSpec(ctx context.Context, a Agent) (SessionSpec, error) {
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
		SystemPrompt: Instructions(off, a, roster),
	}
	deps, err := o.store.ListDependencies(ctx, DependencyFilter{OfficeID: a.OfficeID, AgentID: a.ID, Status: []string{DependencyProvided}})
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
	if err != nil && !IsNotFound(err) {
		return spec, fmt.Errorf("get session: %w", err)
	}
	if rec.AgentSessionID != "" {
		spec.ConversationID, spec.Resume = rec.AgentSessionID, true
		if resumes(a) {
			spec.TranscriptAfter = o.transcriptCursor(ctx, agentKey{a.OfficeID, a.ID}, rec.AgentSessionID)
		}
	} else {
		spec.ConversationID = uuid.NewString()
		rec.OfficeID, rec.AgentID, rec.AgentSessionID = a.OfficeID, a.ID, spec.ConversationID
		if rec.Status == "" {
			rec.Status = SessionStarting
		}
		if _, err := o.store.UpsertSession(ctx, rec); err != nil {
			return spec, fmt.Errorf("record session: %w", err)
		}
	}
	return spec, nil
}

func (o *Router) startSession(ctx context.Context, a Agent, restart bool) error {
	if !o.serves(a.OfficeID) {
		return Errorf(EUNAVAILABLE, "office %s is run by another server", a.OfficeID)
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
	if a.Status != AgentActive {
		_ = o.store.SetAgentStatus(ctx, a.ID, AgentActive)
	}
	return nil
}

// HandleStatus takes a session status change (session.Options.OnStatus):
// it records the session, wakes the agent's pump when it is ready, and
// fails the agent's open tasks when its session failed for good.
func (o *Router) HandleStatus(c StatusChange) {
	o.mu.Lock()
	if c.Status == SessionStarting {
		o.epochs[agentKey{c.OfficeID, c.AgentID}] = uuid.NewString()
	}
	// Recorded by one goroutine, in order: OnStatus must not block.
	o.statusQ = append(o.statusQ, c)
	o.mu.Unlock()
	select {
	case o.statusWake <- struct{}{}:
	default:
	}
}

// recordStatuses applies queued status changes in order until ctx ends.
func (o *Router) recordStatuses(ctx context.Context) {
	for {
		select {
		case o.statusTurn <- struct{}{}:
		case <-ctx.Done():
			return
		}
		o.recordQueued(ctx)
		<-o.statusTurn
		select {
		case <-ctx.Done():
			return
		case <-o.statusWake:
		}
	}
}

// FlushStatuses writes every session status change reported so far, after
// the one being written now, with ctx; it returns ctx's error if ctx ends
// first. The server calls it after stopping the sessions at shutdown and
// before it ends Run's context, so that the final rows (stopped, pid 0) are
// written with a context that is still alive, bounded by ctx (the shutdown
// timeout).
func (o *Router) FlushStatuses(ctx context.Context) error {
	select {
	case o.statusTurn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-o.statusTurn }()
	o.recordQueued(ctx)
	return ctx.Err()
}

// recordQueued records the queued status changes in order; the caller
// holds statusTurn.
func (o *Router) recordQueued(ctx context.Context) {
	o.mu.Lock()
	q := o.statusQ
	o.statusQ = nil
	o.mu.Unlock()
	for _, c := range q {
		o.recordStatus(ctx, c)
	}
}

func (o *Router) recordStatus(ctx context.Context, c StatusChange) {
	officeID, agentID, status := c.OfficeID, c.AgentID, c.Status
	if !o.serves(officeID) {
		// The office was taken over: its row is the new owner's now.
		o.log.Debug("session status not recorded: office run by another server", "office", officeID, "agent", agentID, "status", status)
		return
	}
	rec, err := o.store.GetSessionByAgent(ctx, agentID)
	if err != nil {
		rec = SessionRecord{OfficeID: officeID, AgentID: agentID}
	}
	if status == SessionStarting {
		now := o.now()
		rec.StartedAt = &now
	}
	if !(rec.Status == SessionWaiting && (status == SessionReady || status == SessionBusy)) {
		rec.Status = status
		rec.Detail = c.Detail
	}
	if status == SessionStarting || status == SessionReady || status == SessionBusy {
		rec.Detail = c.Detail
	}
	rec.PID = c.PID // 0 once the process is gone (stopped, exited, crashed, failed)
	rec.ExitCode = c.ExitCode
	if _, err := o.store.UpsertSession(ctx, rec); err != nil {
		o.log.Warn("record session status", "agent", agentID, "err", err)
	}
	k := agentKey{officeID, agentID}
	switch status {
	case SessionFailed:
		if err := o.store.SetAgentStatus(ctx, agentID, AgentFailed); err != nil {
			o.log.Warn("record agent failed", "agent", agentID, "err", err)
		}
		if a, err := o.store.GetAgent(ctx, agentID); err == nil {
			if err := o.failWork(ctx, a, "its session failed for good: "+c.Detail); err != nil {
				o.log.Warn("fail work", "agent", a.Name, "err", err)
			}
		}
	case SessionCrashed:
		o.mu.Lock()
		o.crashed[k] = true
		o.mu.Unlock()
	case SessionExited:
		// Not stopped: see (*Router).stopped.
		if err := o.store.SetAgentStatus(ctx, agentID, AgentIdle); err != nil {
			o.log.Warn("record agent idle", "agent", agentID, "err", err)
		}
	case SessionStarting, SessionReady:
		a, err := o.store.GetAgent(ctx, agentID)
		if err == nil && (a.Status == AgentIdle || a.Status == "") {
			if err := o.store.SetAgentStatus(ctx, agentID, AgentActive); err != nil {
				o.log.Warn("record agent active", "agent", agentID, "err", err)
			}
		}
		if err == nil && status == SessionStarting && !resumes(a) {
			o.requeue(ctx, a)
		}
		if err == nil && status == SessionReady && resumes(a) {
			o.mu.Lock()
			was := o.crashed[k]
			delete(o.crashed, k)
			o.mu.Unlock()
			if was {
				o.remind(ctx, a)
			}
		}
	}
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

// remind tells an agent whose process crashed and came back with its
// conversation resumed (Claude Code) which tasks it holds: the task is in
// its conversation, but a resumed agent waits for a prompt.
func (o *Router) remind(ctx context.Context, a Agent) {
	invs, err := o.store.ListInvocations(ctx, InvocationFilter{OfficeID: a.OfficeID, AgentID: a.ID, Status: []string{InvocationInProgress}})
	if err != nil {
		o.log.Warn("remind of tasks", "agent", a.Name, "err", err)
		return
	}
	for _, inv := range invs {
		if inv.CalleeAgentID != a.ID {
			continue
		}
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

// resumes reports whether a's agent keeps its conversation across process
// restarts (Claude Code resumes it); other CLIs start blank.
func resumes(a Agent) bool { return a.Launch.Kind == "" || a.Launch.Kind == KindClaude }

// requeue puts the tasks a new process of a cannot know about (in progress
// in the process that died) back in its queue, so they are typed again.
func (o *Router) requeue(ctx context.Context, a Agent) {
	invs, err := o.store.ListInvocations(ctx, InvocationFilter{OfficeID: a.OfficeID, AgentID: a.ID, Status: []string{InvocationInProgress}})
	if err != nil {
		o.log.Warn("requeue tasks", "agent", a.Name, "err", err)
		return
	}
	for _, inv := range invs {
		if inv.CalleeAgentID != a.ID {
			continue
		}
		if _, ok, err := o.store.TransitionInvocation(ctx, inv.ID, []string{InvocationInProgress}, InvocationPending, InvocationPatch{}); err == nil && ok {
			_, _ = o.event(ctx, a.OfficeID, a.ID, "invocation.requeued", map[string]string{"invocation_id": inv.ID}, "", "")
		}
	}
}

// ticker expires questions, dependencies and invocations, fires ERROR
// retries, and re-routes parked proxy requests.
func (o *Router) ticker(ctx context.Context) {
	t := time.NewTicker(o.cfg.Tick)
	defer t.Stop()
	for {
		o.expire(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (o *Router) expire(ctx context.Context) {
	if o.cfg.Owns != nil {
		// Expiring is store-wide and its notices go to the office's agents:
		// a server that runs no office leaves it to the owners.
		if offs, err := o.offices(ctx); err != nil || len(offs) == 0 {
			return
		}
	}
	now := o.now()
	qs, err := o.store.ExpireQuestions(ctx, now)
	if err != nil && ctx.Err() == nil {
		o.log.Warn("expire questions", "err", err)
	}
	for _, q := range qs {
		if !o.serves(q.OfficeID) {
			continue
		}
		a, err := o.store.GetAgent(ctx, q.AgentID)
		if err != nil {
			continue
		}
		msg := fmt.Sprintf("Question %s expired without an answer: %q.", q.ID, q.Question)
		if q.DefaultAnswer != "" {
			msg += " Go on with the default answer: " + q.DefaultAnswer
		} else {
			msg += " Decide yourself, or ask again later."
		}
		o.notify(a, msg)
		o.setSessionStatus(ctx, a, SessionBusy)
		_, _ = o.event(ctx, q.OfficeID, q.AgentID, "question.expired", map[string]string{"question_id": q.ID, "default": q.DefaultAnswer}, "", "")
	}
	ds, err := o.store.ExpireDependencies(ctx, now)
	if err != nil && ctx.Err() == nil {
		o.log.Warn("expire dependencies", "err", err)
	}
	for _, d := range ds {
		o.kick(agentKey{d.OfficeID, d.AgentID})
	}
	invs, err := o.store.ListInvocations(ctx, InvocationFilter{Status: []string{InvocationInProgress}})
	if err != nil && ctx.Err() == nil {
		o.log.Warn("list invocations", "err", err)
	}
	for _, inv := range invs {
		if inv.StartedAt != nil && now.Sub(*inv.StartedAt) > o.cfg.InvocationTimeout && o.serves(inv.OfficeID) {
			if err := o.failInvocation(ctx, inv, fmt.Sprintf("timed out after %s", o.cfg.InvocationTimeout)); err != nil {
				o.log.Warn("time out invocation", "err", err)
			}
			o.kick(agentKey{inv.OfficeID, inv.CalleeAgentID})
		}
	}
	o.mu.Lock()
	var due []retry
	o.retries = slices.DeleteFunc(o.retries, func(r retry) bool {
		if !now.Before(r.at) {
			due = append(due, r)
			return true
		}
		return false
	})
	parked := o.parked
	o.parked = nil
	o.mu.Unlock()
	for _, r := range due {
		o.notify(r.agent, fmt.Sprintf("You reported a recoverable error (%s). The pause is over: retry now.", r.message))
	}
	var still []parkedProxy
	for _, p := range parked {
		if err := o.routeProxy(ctx, p, true); err == errParked {
			still = append(still, p)
		}
	}
	if len(still) > 0 {
		o.mu.Lock()
		o.parked = append(still, o.parked...)
		o.mu.Unlock()
	}
}

// The forms typed into an agent. Content from someone else is framed by
// protocol.Quote: escaped so that no receiver can read any part of it as a
// block (see docs/notes/protocol.md, "Forwarded text"), and quoted with "> "
// so that it reads as information.
func quote(s string) string { return protocol.Quote(s) }

func answerText(q Question, answer string) string {
	return fmt.Sprintf("[OFFICE] Answer to question %s (%q):\n%s", q.ID, q.Question, quote(answer))
}

func resultText(r Result, from string) string {
	head := fmt.Sprintf("[OFFICE] Result from %s", from)
	if r.InvocationID != "" {
		head += " for task " + r.InvocationID
	}
	return fmt.Sprintf("%s (%s):\n%s", head, r.ResultType, quote(r.Content))
}

func taskText(inv Invocation, caller string) string {
	s := fmt.Sprintf("[OFFICE] Task %s from %s:\n%s", inv.ID, caller, quote(inv.Reason))
	if inv.Context != "" {
		s += "\nContext:\n" + quote(inv.Context)
	}
	return s + fmt.Sprintf("\nWhen you are done, deliver the result to %s with a DELIVER_RESULT block naming %s.", caller, caller)
}

func newShortID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
