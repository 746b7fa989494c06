package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/office-server/office-server/internal/reconnect"
	"github.com/office-server/office-server/office"

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
func (rt *Router) kick(k agentKey) {
	if !rt.roster.serves(k.officeID) {
		return
	}
	d := rt.desk(k)
	d.startDelivery()
	wake(d.deliverWake)
}

// notify queues a notice for a, typed as "[OFFICE] <text>".
func (rt *Router) notify(a office.Agent, text string) {
	rt.desk(agentKey{a.OfficeID, a.ID}).notify(text)
}

// deliver is the desk's delivery loop: a round at every wake-up, and what
// could not be delivered retried with a growing delay (a session coming
// back, a store answering again also wake it).
func (d *desk) deliver(ctx context.Context) {
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	tick := d.r.cfg.Tick
	delay := reconnect.Backoff(tick, min(30*time.Second, 64*tick))
	for {
		left := d.round(ctx)
		d.mu.Lock()
		d.settled = !left
		d.mu.Unlock()
		if !left {
			d.r.hib.sleepIfAsked(ctx, d)
		}
		if left {
			retry.Reset(delay.NextBackOff())
		} else {
			delay.Reset()
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
	// marked is the typing marker the round's read appended (or found)
	// for the row it types first, at markedAt; sendRow takes it for
	// that row.
	marked   office.Typing
	markedAt time.Time
}

// send types text into the agent; false when the session is down or did
// not take it (the round ends and is retried).
func (v *delivery) send(ctx context.Context, text string) bool {
	return v.sendSince(ctx, text, time.Time{})
}

// sendSince is send for a text an earlier typing, at since (zero: none),
// may have delivered: the session checks the agent's record first
// (SendSince).
func (v *delivery) sendSince(ctx context.Context, text string, since time.Time) bool {
	if !v.running || !v.r.roster.serves(v.a.OfficeID) {
		return false // not running, or the office was taken over mid-round
	}
	sctx, release, ok := v.r.delivery.quiet.send(ctx)
	if !ok {
		return false // the server is stopping
	}
	defer release()
	// Defused here, for everything typed (notices, answers, results,
	// tasks): no receiver may read any part of it as its own block, nor
	// find a control sequence in it (protocol.Defuse; the session
	// sanitises again).
	var err error
	if ss, ok := v.r.sess.(SendSince); ok {
		err = ss.SendSince(sctx, v.a.OfficeID, v.a.ID, protocol.Defuse(text), since)
	} else {
		err = v.r.sess.Send(sctx, v.a.OfficeID, v.a.ID, protocol.Defuse(text))
	}
	if err != nil {
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
	ns   []office.Notice
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
	if !o.roster.serves(k.officeID) {
		return false // another server runs the office now
	}
	if d.holding() {
		return false // within a block it may go on with; its end kicks (hold.go)
	}
	if !o.delivery.quiet.begin() {
		return false // the server is stopping
	}
	defer o.delivery.quiet.end()
	a, err := o.store.GetAgent(ctx, k.agentID)
	if err != nil {
		if !office.IsNotFound(err) && ctx.Err() == nil {
			o.log.Warn("deliver: get agent", "agent", k.agentID, "err", err)
			return true
		}
		return false
	}
	v := &delivery{r: o, a: a, running: o.sess.Running(a.OfficeID, a.ID)}
	if !v.running {
		if asleep, retry := o.hib.wakeIfDue(ctx, d, a); asleep {
			return retry // hibernate.go
		}
	}
	if !d.deliverNotices(ctx, v) {
		return true
	}
	items, err := o.delivery.readDueTyping(ctx, v)
	if err != nil {
		return o.delivery.retryErr("read what is due", err)
	}
	// One deliverer per kind of work, in this order: notices, dependency
	// outcomes, answers, results, people's messages, the next task.
	for _, deliver := range []func(context.Context, *delivery, due) outcome{
		d.deliverStoredNotices, o.delivery.deliverDependencies, o.delivery.deliverAnswers, o.delivery.deliverResults, o.delivery.deliverMessages, o.delivery.deliverNextTask,
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

// deliverNotices types the desk's notices in memory (those the store
// refused) in order; false when one could not be typed.
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

// deliverStoredNotices types the agent's stored notices in order, each
// marked delivered after its typing (its typing checked as any row's:
// once.go), then queues the count of those dropped, if any. An agent
// whose session is down keeps them (the rest of the round may start it).
func (d *desk) deliverStoredNotices(ctx context.Context, v *delivery, x due) outcome {
	if !v.running {
		return delivered // they wait for the session: its start wakes the delivery
	}
	dl := d.r.delivery
	for _, n := range x.ns {
		if !v.sendRow(ctx, rowKey("notice", n.ID), n.Text) {
			return again
		}
		if _, _, done := dl.markDelivered(ctx, v.a, office.Delivered{Kind: office.DeliveredNotice, ID: n.ID}, nil); !done {
			return again
		}
	}
	d.tellDropped()
	return delivered
}

// readDue reads everything due to a at once (one statement over the
// PostgreSQL stores, one request over Supabase). A row that changes
// meanwhile is safe: every mark is a conditional transition, and the
// change wakes the delivery for another round.
func (dl *deliverer) readDue(ctx context.Context, a office.Agent) (due, error) {
	w, err := dl.store.ListDue(ctx, a.OfficeID, a.ID)
	return due{ns: w.Notices, deps: w.Dependencies, qs: w.Answers, rs: w.Results, ms: w.Messages, invs: w.Tasks}, err
}

// readDueTyping is readDue for a round that types into v's running
// agent: the read also appends the typing marker of the row the round
// types first (office.TypingFirst; exactly once across stops, once.go),
// which v keeps for sendRow. A round that types into no running agent
// reads only.
func (dl *deliverer) readDueTyping(ctx context.Context, v *delivery) (due, error) {
	if !v.running || !dl.roster.serves(v.a.OfficeID) {
		return dl.readDue(ctx, v.a)
	}
	v.markedAt = dl.now()
	w, err := dl.store.ListDueTyping(ctx, v.a.OfficeID, v.a.ID, v.markedAt)
	if err != nil {
		return due{}, err
	}
	v.marked = w.Typing
	return due{ns: w.Notices, deps: w.Dependencies, qs: w.Answers, rs: w.Results, ms: w.Messages, invs: w.Tasks}, nil
}

func (dl *deliverer) deliverDependencies(ctx context.Context, v *delivery, x due) outcome {
	for _, d := range x.deps {
		if !dl.deliverDependency(ctx, v, d) {
			return again
		}
	}
	return delivered
}

func (dl *deliverer) deliverAnswers(ctx context.Context, v *delivery, x due) outcome {
	for _, q := range x.qs {
		if q.Category == office.QuestionPermission {
			// Decided, never typed (permission.go); unless its hook is
			// gone: then the agent is told the answer.
			if !dl.deliverInterruptedAnswer(ctx, v, q) {
				return again
			}
			continue
		}
		answer, verr := validAnswer(q)
		if verr != nil {
			dl.reask(ctx, v.a, q, verr)
			continue
		}
		if !v.sendRow(ctx, rowKey("question", q.ID), answerText(q, answer)) {
			return again
		}
		payload := map[string]any{"question_id": q.ID}
		if q.AnsweredAt != nil {
			payload["answered_at"] = q.AnsweredAt // the metrics' answer latency, without reading the question
		}
		if _, _, done := dl.markDelivered(ctx, v.a, office.Delivered{Kind: office.DeliveredQuestion, ID: q.ID, EventKind: "question.delivered", Busy: true}, payload); !done {
			return again
		}
	}
	return delivered
}

// markDelivered marks a row typed into a delivered, with its event (and,
// with d.Busy, the office's busy) in the same write (office.Store
// MarkDelivered: one request over Supabase). When that write fails, the
// parts are written one by one, so that an event the store refuses does
// not keep the row undelivered: the failure is then counted and logged
// with the event's kind (eventLog.record). done is false when the row
// could not be marked (the round is retried); ok reports that this
// caller marked it, at when.
func (dl *deliverer) markDelivered(ctx context.Context, a office.Agent, d office.Delivered, payload any) (at time.Time, ok, done bool) {
	d.OfficeID, d.AgentID = a.OfficeID, a.ID
	pj, _ := json.Marshal(payload)
	d.EventPayload = pj
	at, ev, ok, err := dl.store.MarkDelivered(ctx, d)
	if err == nil {
		if ok && ev.ID != 0 {
			dl.events.publish(ev)
		}
		return at, ok, true
	}
	if ctx.Err() != nil {
		return at, false, false
	}
	dl.log.Warn("deliver: mark delivered with its event; writing each part", "agent", a.Name, "kind", d.Kind, "err", err)
	switch d.Kind {
	case office.DeliveredTask:
		inv, ok2, err := dl.store.TransitionInvocation(ctx, d.ID, []string{office.InvocationPending}, office.InvocationInProgress, office.InvocationPatch{})
		if err != nil {
			dl.retryErr("start invocation", err)
			return at, false, false
		}
		ok = ok2
		if inv.StartedAt != nil {
			at = *inv.StartedAt
		}
	case office.DeliveredNotice:
		dl.retryErr("mark notice delivered", err) // no part to write on its own
		return at, false, false
	case office.DeliveredResult:
		if ok, err = dl.store.MarkResultDelivered(ctx, d.ID); err != nil {
			dl.retryErr("mark result delivered", err)
			return at, false, false
		}
	default:
		if ok, err = dl.store.MarkQuestionDelivered(ctx, d.ID); err != nil {
			dl.retryErr("mark question delivered", err)
			return at, false, false
		}
	}
	if !ok {
		return at, false, true
	}
	if at.IsZero() {
		at = dl.now()
	}
	if d.Busy {
		dl.setSessionStatus(ctx, a, office.SessionBusy, d.EventKind, payload)
	} else {
		dl.events.record(ctx, a.OfficeID, a.ID, d.EventKind, payload, "")
	}
	return at, true, true
}

// deliverInterruptedAnswer types the answer to a permission request
// whose hook no longer waits, then marks it delivered (a restart in
// between types it again rather than losing it); false when it could not
// be typed now.
func (dl *deliverer) deliverInterruptedAnswer(ctx context.Context, v *delivery, q office.Question) bool {
	text := dl.perms.interruptedAnswer(v.a, q)
	if text == "" {
		return true // its hook waits: the decider answers it
	}
	// Read again after the look at the waiting hooks: the decider forgets
	// a request only once it marked it delivered, so a question still
	// answered now is one no hook of this server decides.
	now, err := dl.store.GetQuestion(ctx, q.ID)
	if err != nil {
		dl.retryErr("read permission question", err)
		return false
	}
	if now.Status != office.QuestionAnswered {
		return true
	}
	if !v.sendRow(ctx, rowKey("question", q.ID), text) {
		return false
	}
	ok, err := dl.store.MarkQuestionDelivered(ctx, q.ID)
	if err != nil {
		dl.retryErr("mark permission answer delivered", err)
		return false
	}
	if ok {
		choice, _ := parsePermissionAnswer(q.Response)
		dl.events.record(ctx, v.a.OfficeID, v.a.ID, "permission.interrupted", map[string]string{"question_id": q.ID, "answer": choice, "reason": "answered while no hook waited"}, "")
	}
	return true
}

func (dl *deliverer) deliverResults(ctx context.Context, v *delivery, x due) outcome {
	for _, r := range x.rs {
		if !v.running {
			dl.ensureStarted(ctx, v.a)
			return again
		}
		if !v.sendRow(ctx, rowKey("result", r.ID), resultText(r, dl.roster.agentName(ctx, r.FromAgentID))) {
			return again
		}
		if _, _, done := dl.markDelivered(ctx, v.a, office.Delivered{Kind: office.DeliveredResult, ID: r.ID, EventKind: "result.delivered"}, map[string]string{"result_id": r.ID}); !done {
			return again
		}
	}
	return delivered
}

func (dl *deliverer) deliverMessages(ctx context.Context, v *delivery, x due) outcome {
	for _, m := range x.ms {
		if !v.sendRow(ctx, rowKey("message", m.ID), "[OFFICE] Message from a person in the office:\n"+quote(m.Content)) {
			return again
		}
		if ok, err := dl.store.MarkUserMessageDelivered(ctx, m.ID); err != nil {
			dl.retryErr("mark message delivered", err)
			return again
		} else if ok {
			dl.events.record(ctx, v.a.OfficeID, v.a.ID, "message.delivered", map[string]string{"message_id": m.ID}, "")
		}
	}
	return delivered
}

// deliverNextTask types the agent's oldest pending task unless it is busy
// with one: one task at a time, in order.
func (dl *deliverer) deliverNextTask(ctx context.Context, v *delivery, x due) outcome {
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
		dl.ensureStarted(ctx, v.a)
		return again
	}
	if !v.sendRow(ctx, rowKey("task", next.ID), taskText(*next, dl.roster.agentName(ctx, next.CallerAgentID))) {
		return again
	}
	started, ok, done := dl.markDelivered(ctx, v.a, office.Delivered{Kind: office.DeliveredTask, ID: next.ID, EventKind: "invocation.in_progress"}, map[string]string{"invocation_id": next.ID})
	if !done {
		return again
	}
	if ok {
		dl.timers.invocations.note(started.Add(dl.cfg.InvocationTimeout + time.Nanosecond))
	}
	return delivered
}

// beginRound counts a round outside the desks' own (the hibernation's)
// for the graceful stop; false once it began.
func (dl *deliverer) beginRound() bool { return dl.quiet.begin() }

// endRound ends a round beginRound counted.
func (dl *deliverer) endRound() { dl.quiet.end() }

func (dl *deliverer) retryErr(what string, err error) bool {
	dl.log.Warn("deliver: "+what, "err", err)
	return true
}

// ensureStarted starts a's session unless it is running or an operator
// switched the agent off.
func (dl *deliverer) ensureStarted(ctx context.Context, a office.Agent) {
	if a.Status == office.AgentDisabled || a.Status == office.AgentFailed || dl.sess.Running(a.OfficeID, a.ID) {
		return
	}
	if err := dl.startSession(ctx, a, false); err != nil {
		dl.log.Warn("start session", "agent", a.Name, "err", err)
	}
}

// sessionSpec builds what the session layer needs to run a: the launch
// spec, the workspace, the instructions, the values of provided api_key and
// env_variable dependencies, and Claude Code's conversation id (resumed
// when it exists).
func (dl *deliverer) sessionSpec(ctx context.Context, a office.Agent) (SessionSpec, error) {
	off, err := dl.store.GetOffice(ctx, a.OfficeID)
	if err != nil {
		return SessionSpec{}, fmt.Errorf("get office: %w", err)
	}
	roster, err := dl.roster.rosterText(ctx, a.OfficeID)
	if err != nil {
		return SessionSpec{}, err
	}
	// The launch spec as the agent gets it: its sealed values opened, the
	// server's environment in place of its ${NAME} references.
	launch, err := dl.sealer.OpenLaunchEnv(a.Launch)
	if err != nil {
		return SessionSpec{}, err
	}
	if launch, err = office.ExpandLaunch(launch, dl.cfg.LookupEnv); err != nil {
		return SessionSpec{}, err
	}
	spec := SessionSpec{
		OfficeID: a.OfficeID, AgentID: a.ID, OfficeName: off.Name, AgentName: a.Name, Launch: launch, Dir: dl.roster.workspace(a),
		SystemPrompt: roster.Instructions(off, a), PermissionTimeout: dl.perms.timeout(a),
	}
	deps, err := dl.store.ListDependencies(ctx, office.DependencyFilter{OfficeID: a.OfficeID, AgentID: a.ID, Status: []string{office.DependencyProvided}})
	if err != nil {
		return spec, fmt.Errorf("list dependencies: %w", err)
	}
	for _, d := range deps {
		if d.Type != protocol.DependencyAPIKey && d.Type != protocol.DependencyEnvVar {
			continue
		}
		v, err := dl.sealer.Open(d.Value)
		if err != nil {
			return spec, fmt.Errorf("dependency %s: %w", d.Name, err)
		}
		spec.Env = append(spec.Env, d.Name+"="+v)
	}
	rec, err := dl.store.GetSessionByAgent(ctx, a.ID)
	if err != nil && !office.IsNotFound(err) {
		return spec, fmt.Errorf("get session: %w", err)
	}
	if rec.AgentSessionID == "" && launch.Kind == selfNamingKind {
		// Codex names its conversation itself: the row records Codex's id
		// once its process reports it (hibernation.keepConversation).
		return spec, nil
	}
	if rec.AgentSessionID == "" {
		// A new conversation, recorded by the one writer of the row: only
		// the conversation (and this node) is written, the first one
		// recorded holds, and a start that raced this one is resumed.
		fresh := uuid.NewString()
		rec, _, _, err = dl.store.SetSessionStatus(ctx, office.SessionStatus{OfficeID: a.OfficeID, AgentID: a.ID, AgentSessionID: fresh, Node: dl.cfg.Node})
		if err != nil {
			return spec, fmt.Errorf("record session: %w", err)
		}
		if rec.AgentSessionID == fresh {
			spec.ConversationID = fresh
			return spec, nil
		}
	}
	spec.ConversationID, spec.Resume = rec.AgentSessionID, true
	spec.TranscriptAfter = dl.transcriptCursor(ctx, agentKey{a.OfficeID, a.ID}, rec.AgentSessionID)
	return spec, nil
}

func (dl *deliverer) startSession(ctx context.Context, a office.Agent, restart bool) error {
	if !dl.roster.serves(a.OfficeID) {
		return office.Errorf(office.EUNAVAILABLE, "office %s is run by another server", a.OfficeID)
	}
	spec, err := dl.sessionSpec(ctx, a)
	if err != nil {
		return err
	}
	if restart && dl.sess.Running(a.OfficeID, a.ID) {
		err = dl.sess.Restart(ctx, spec)
	} else {
		err = dl.sess.Start(ctx, spec)
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", a.Name, err)
	}
	dl.hib.started(a)
	if a.Status != office.AgentActive {
		if err := dl.store.SetAgentStatus(ctx, a.ID, office.AgentActive); err != nil {
			// The session runs; the row catches up at its next status.
			dl.log.Warn("record agent active", "agent", a.Name, "err", err)
		}
	}
	return nil
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

// reask handles an invalid answer written straight into the table (the
// frontend can write anything): the question is cancelled and asked again
// as a new pending question whose context says what was wrong, so the
// person sees it and the agent keeps waiting. Nothing invalid is typed.
func (dl *deliverer) reask(ctx context.Context, a office.Agent, q office.Question, why error) {
	ok, err := dl.store.CancelQuestion(ctx, q.ID)
	if err != nil {
		dl.log.Warn("cancel question to re-ask it", "question", q.ID, "err", err)
		return
	}
	if !ok {
		return // answered again, or cancelled, meanwhile
	}
	nq := q
	nq.ID, nq.Response, nq.AnsweredBy, nq.AnsweredAt = "", "", "", nil
	note := fmt.Sprintf("The previous answer was not accepted: %s.", office.ErrorMessage(why))
	if nq.Context != "" {
		nq.Context = note + "\n" + nq.Context
	} else {
		nq.Context = note
	}
	nq, err = dl.asks.ask(ctx, source{}, a, nq)
	if err != nil {
		dl.log.Warn("re-ask question", "err", err)
		return
	}
	dl.events.record(ctx, a.OfficeID, a.ID, "question.answer_invalid", map[string]string{"question_id": q.ID, "reason": office.ErrorMessage(why), "new_question_id": nq.ID}, "")
}

// deliverDependency tells v's agent about a provided, rejected or expired
// request. It reports false when it could not (the session is down).
func (dl *deliverer) deliverDependency(ctx context.Context, v *delivery, d office.DependencyRequest) bool {
	a := v.a
	var text string
	switch d.Status {
	case office.DependencyProvided:
		if d.Type == protocol.DependencyAPIKey || d.Type == protocol.DependencyEnvVar {
			// A running process's environment cannot change: restart with
			// the variable set and the conversation resumed.
			if err := dl.startSession(ctx, a, true); err != nil {
				dl.log.Warn("restart with dependency", "agent", a.Name, "err", err)
				return false
			}
			v.running = dl.sess.Running(a.OfficeID, a.ID)
			text = fmt.Sprintf("[DEPENDENCY_PROVIDED]\nname: %s\nstatus: provided\nvalue: (in your environment as $%s)\n[/DEPENDENCY_PROVIDED]", d.Name, d.Name)
		} else {
			v, err := dl.sealer.Open(d.Value)
			if err != nil {
				dl.log.Warn("open dependency value", "dependency", d.ID, "err", err)
				return false
			}
			text = fmt.Sprintf("[DEPENDENCY_PROVIDED]\nname: %s\nstatus: provided\nvalue: %s\n[/DEPENDENCY_PROVIDED]", d.Name, v)
		}
	default: // rejected or expired
		why := d.RejectionReason
		if d.Status == office.DependencyExpired {
			why = "nobody provided it in time"
		}
		if d.Required {
			if err := dl.work.failWork(ctx, a, fmt.Sprintf("required dependency %s was %s", d.Name, d.Status)); err != nil {
				dl.log.Warn("fail work", "agent", a.Name, "err", err)
			}
			text = fmt.Sprintf("[OFFICE] Your required dependency %s was %s (%s). The work that needs it cannot go on: stop it and say so.", d.Name, d.Status, why)
		} else {
			text = fmt.Sprintf("[DEPENDENCY_PROVIDED]\nname: %s\nstatus: %s\nvalue: %s\n[/DEPENDENCY_PROVIDED]\nIt was %s (%s); go on without it.", d.Name, d.Status, d.Default, d.Status, why)
		}
	}
	if !v.sendRow(ctx, rowKey("dependency", d.ID), text) {
		return false
	}
	if _, err := dl.store.MarkDependencyDelivered(ctx, d.ID); err != nil {
		dl.log.Warn("mark dependency delivered", "err", err)
		return false
	}
	dl.setSessionStatus(ctx, a, office.SessionBusy, "dependency.delivered", map[string]string{"dependency_id": d.ID, "status": d.Status})
	return true
}
