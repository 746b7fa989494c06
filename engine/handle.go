package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/office-server/office-server/office"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/office-server/office-server/protocol"
	"github.com/office-server/office-server/proxy"
)

// handle acts on one parsed message exactly once: the message's event is
// appended with its dedupe key first, and only the caller that inserted it
// acts. Invalid blocks do not come here: parseText records them within
// bounds (onInvalid).
func (o *dispatcher) handle(ctx context.Context, src source, m protocol.Message) error {
	inserted, err := o.event(ctx, src.officeID, src.agentID, "message."+strings.ToLower(string(m.Kind)), m, m.Raw, src.key)
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
	self, err := o.store.GetAgent(ctx, src.agentID)
	if err != nil {
		return fmt.Errorf("sender: %w", err)
	}
	switch m.Kind {
	case protocol.KindAskUser, protocol.KindUserQuestion:
		return o.asks.onQuestion(ctx, src, self, m)
	case protocol.KindInvoke:
		return o.work.onInvoke(ctx, src, self, m)
	case protocol.KindDeliverResult:
		return o.work.onResult(ctx, src, self, m)
	case protocol.KindDependencyRequest:
		return o.asks.onDependency(ctx, src, self, m)
	case protocol.KindError:
		return o.work.onError(ctx, src, self, m)
	case protocol.KindPhaseComplete, protocol.KindStep, protocol.KindStepComplete:
		o.desk(agentKey{self.OfficeID, self.ID}).onProgress(m)
		return nil
	case protocol.KindProxyRequest:
		return o.proxies.onProxy(ctx, src, self, m)
	}
	return nil
}

// rowNamespace derives the IDs of rows a message creates (source.rowID).
var rowNamespace = uuid.MustParse("6f0b1d8e-4c5a-4f43-9d0e-0ffce5e1a7d1")

// tell queues a notice unless the message is being replayed.
func (o *base) tell(src source, a office.Agent, text string) {
	if src.replay {
		return
	}
	o.notify(a, text)
}

// refuse tells the sender an action was refused and records why.
func (o *base) refuse(ctx context.Context, src source, self office.Agent, kind, why string) error {
	o.tell(src, self, fmt.Sprintf("Your %s was refused: %s", kind, why))
	_, err := o.event(ctx, self.OfficeID, self.ID, "refused", map[string]string{"kind": kind, "reason": why}, "", src.subKey("refused"))
	return err
}

// authorize checks the sender's allowed actions.
// It returns the refusal's error (recording it) when the action is not
// allowed, and ok=false.
func (o *base) authorize(ctx context.Context, src source, self office.Agent, action, kind string) (ok bool, err error) {
	if aerr := proxy.Authorize(toProxy(self, 0), action); aerr != nil {
		return false, o.refuse(ctx, src, self, kind, aerr.Error())
	}
	return true, nil
}

func (o *roster) ttl(ctx context.Context, officeID string) time.Duration {
	if off, err := o.store.GetOffice(ctx, officeID); err == nil && off.QuestionTTL > 0 {
		return off.QuestionTTL
	}
	return o.cfg.QuestionTTL
}

func (o *roster) sessionID(ctx context.Context, agentID string) string {
	if s, err := o.store.GetSessionByAgent(ctx, agentID); err == nil {
		return s.ID
	}
	return ""
}

// setSessionStatus records a session status the session layer does not
// know about (waiting for a person).
func (o *roster) setSessionStatus(ctx context.Context, a office.Agent, status string) {
	rec, err := o.store.GetSessionByAgent(ctx, a.ID)
	if err != nil {
		rec = office.SessionRecord{OfficeID: a.OfficeID, AgentID: a.ID}
	}
	switch rec.Status {
	case office.SessionNeedsAttention, office.SessionCrashed, office.SessionFailed, office.SessionStopped, office.SessionExited:
		// The session layer's word (a dialog is up, the process is gone)
		// is not overwritten by the office's view of the work.
		return
	}
	rec.Status, rec.Detail = status, ""
	if _, err := o.store.UpsertSession(ctx, rec); err != nil {
		o.log.Warn("update session status", "agent", a.Name, "err", err)
	}
}

func (o *asks) onQuestion(ctx context.Context, src source, self office.Agent, m protocol.Message) error {
	if ok, err := o.authorize(ctx, src, self, proxy.ActionAskUser, "question"); !ok {
		return err
	}
	q := m.Question
	if q == nil || strings.TrimSpace(q.Question) == "" {
		return o.refuse(ctx, src, self, "question", "it has no question")
	}
	_, err := o.ask(ctx, src, self, office.Question{
		QuestionType: q.Type, Category: q.Category, Question: q.Question, Options: q.Options,
		DefaultAnswer: q.Default, Context: q.Context, Required: q.Required,
	})
	return err
}

// ask stores a question from agent a and marks its session waiting.
func (o *asks) ask(ctx context.Context, src source, a office.Agent, q office.Question) (office.Question, error) {
	if q.QuestionType == "" {
		q.QuestionType = office.QuestionText
		if len(q.Options) > 0 {
			q.QuestionType = office.QuestionSelection
		}
	}
	q.OfficeID, q.AgentID = a.OfficeID, a.ID
	q.SessionID = o.sessionID(ctx, a.ID)
	q.Status = office.QuestionPending
	q.ExpiresAt = o.now().Add(o.ttl(ctx, a.OfficeID))
	if q.Options == nil {
		q.Options = []string{}
	}
	if q.ID == "" {
		q.ID = src.rowID("question/" + q.Category)
	}
	q, err := o.store.CreateQuestion(ctx, q)
	if office.IsConflict(err) {
		return q, nil // asked already (a replayed message)
	}
	if err != nil {
		return q, fmt.Errorf("create question: %w", err)
	}
	o.sweep.questions.note(q.ExpiresAt)
	o.setSessionStatus(ctx, a, office.SessionWaiting)
	_, err = o.event(ctx, a.OfficeID, a.ID, "question.created", map[string]any{"question_id": q.ID, "question": q.Question, "type": q.QuestionType, "options": q.Options, "expires_at": q.ExpiresAt}, "", src.subKey("question/"+q.Category))
	return q, err
}

// agents returns the office's agents.
func (o *roster) agents(ctx context.Context, officeID string) ([]office.Agent, error) {
	as, err := o.store.ListAgents(ctx, officeID)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	return as, nil
}

// registry builds the proxy selector's snapshot: agents with their load
// (open invocations they are the callee of, open proxy tasks they hold).
func (o *roster) registry(ctx context.Context, officeID string) (*proxy.Registry, []office.Agent, error) {
	reg, as, _, err := o.registryOpen(ctx, officeID)
	return reg, as, err
}

// registryOpen is registry that also returns the office's open invocations.
func (o *roster) registryOpen(ctx context.Context, officeID string) (*proxy.Registry, []office.Agent, []office.Invocation, error) {
	var (
		agents           []office.Agent
		invs             []office.Invocation
		tasks            []office.ProxyTask
		errA, errI, errT error
		wg               sync.WaitGroup
	)
	wg.Add(2)
	go func() { // the reads are independent: one round trip, not three
		defer wg.Done()
		invs, errI = o.store.ListInvocations(ctx, office.InvocationFilter{OfficeID: officeID, Status: []string{office.InvocationPending, office.InvocationInProgress}})
	}()
	go func() {
		defer wg.Done()
		tasks, errT = o.store.ListProxyTasks(ctx, office.ProxyTaskFilter{OfficeID: officeID, Status: office.ProxyTaskOpen})
	}()
	agents, errA = o.agents(ctx, officeID)
	wg.Wait()
	if errA != nil {
		return nil, nil, nil, errA
	}
	if errI != nil {
		return nil, nil, nil, fmt.Errorf("list invocations: %w", errI)
	}
	if errT != nil {
		return nil, nil, nil, fmt.Errorf("list proxy tasks: %w", errT)
	}
	return registryFrom(agents, invs, tasks), agents, invs, nil
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

func (o *work) onInvoke(ctx context.Context, src source, self office.Agent, m protocol.Message) error {
	if ok, err := o.authorize(ctx, src, self, proxy.ActionInvoke, "INVOKE"); !ok {
		return err
	}
	task, context_ := "", ""
	if m.Invoke != nil {
		task, context_ = m.Invoke.Task, m.Invoke.Context
	}
	_, err := o.invoke(ctx, src, self, m.Target, task, context_)
	return err
}

// invoke creates an invocation from caller to the agent target resolves to,
// or a rejected one (the caller is told why).
func (o *work) invoke(ctx context.Context, src source, caller office.Agent, target, task, ctxText string) (office.Invocation, error) {
	reject := func(why string, callee string) (office.Invocation, error) {
		// Stored even with no callee and no task, so that the frontend
		// sees every refusal and why (docs/frontend.md).
		reason := task
		if strings.TrimSpace(reason) == "" {
			reason = "(no task) INVOKE:" + target
		}
		inv, err := o.store.CreateInvocation(ctx, office.Invocation{ID: src.rowID("invocation"), OfficeID: caller.OfficeID, CallerAgentID: caller.ID, CalleeAgentID: callee, Reason: reason, Context: ctxText, Status: office.InvocationRejected, Error: why})
		if office.IsConflict(err) {
			return inv, nil // rejected already (a replayed message)
		}
		if err != nil {
			o.log.Warn("record rejected invocation", "err", err)
		}
		o.tell(src, caller, fmt.Sprintf("Your INVOKE:%s was rejected: %s", target, why))
		o.record(ctx, caller.OfficeID, caller.ID, "invocation.rejected", map[string]string{"invocation_id": inv.ID, "target": target, "reason": why}, src.subKey("rejected"))
		return inv, nil
	}
	if src.replay {
		if inv, err := o.store.GetInvocation(ctx, src.rowID("invocation")); err == nil {
			return inv, nil // handled in full the first time
		}
	}
	if strings.TrimSpace(task) == "" {
		return reject("the task is empty; write the task as the block's text", "")
	}
	if err := proxy.ValidateContent(task+"\n"+ctxText, o.cfg.MaxContent); err != nil {
		return reject(err.Error(), "")
	}
	reg, agents, open, err := o.registryOpen(ctx, caller.OfficeID)
	if err != nil {
		return office.Invocation{}, err
	}
	if a, ok := reg.ByName(target); ok && a.ID == caller.ID {
		return reject("an agent cannot invoke itself", caller.ID)
	}
	d := reg.Select(proxy.Request{Target: target, Exclude: []string{caller.ID}})
	var callee proxy.Agent
	switch d.Outcome {
	case proxy.Assign:
		callee = d.Agent
	case proxy.Park:
		// Parked in the store: a pending invocation waits in the callee's
		// FIFO queue until it is free.
		callee = d.Waiting[0]
		for _, w := range d.Waiting {
			if w.Load < callee.Load {
				callee = w
			}
		}
	default:
		// The end of the fallback chain: when agents for the target exist
		// but none can ever take it now (all disabled or failed), a person
		// is asked as well; a target naming nobody is the caller's mistake.
		if exists(agents, target) {
			if _, err := o.asks.ask(ctx, src, caller, office.Question{QuestionType: office.QuestionText, Category: "routing", Required: false,
				Question: fmt.Sprintf("%s wants to give %q a task, but no agent can take it (%s). Please start or enable an agent, or handle it.", caller.Name, target, d.Reason),
				Context:  task}); err != nil {
				o.log.Warn("ask a person to route a task", "agent", caller.Name, "err", err)
			}
		}
		return reject(d.Reason, "")
	}

	parent, why := o.chain(caller, callee, agents, open)
	if why != "" {
		return reject(why, callee.ID)
	}
	depth := parent.Depth + 1
	inv, err := o.store.CreateInvocation(ctx, office.Invocation{
		ID: src.rowID("invocation"), OfficeID: caller.OfficeID, CallerAgentID: caller.ID, CalleeAgentID: callee.ID,
		ParentInvocationID: parent.ID, Depth: depth, Reason: task, Context: ctxText, Status: office.InvocationPending,
	})
	if office.IsConflict(err) {
		return inv, nil // created already (a replayed message); Run's catch-up delivers it
	}
	if err != nil {
		return inv, fmt.Errorf("create invocation: %w", err)
	}
	o.kick(agentKey{caller.OfficeID, callee.ID}) // before the event: the task's latency matters
	_, err = o.event(ctx, caller.OfficeID, caller.ID, "invocation.created", map[string]any{"invocation_id": inv.ID, "caller": caller.Name, "callee": callee.Name, "depth": depth, "selection": d.String()}, "", src.subKey("invocation"))
	return inv, err
}

// chain returns the task a new invocation from caller to callee is a
// child of (the one the caller works on, if any), or why the invocation
// may not be: the call chain would be too deep, or callee already waits
// on caller.
func (o *work) chain(caller office.Agent, callee proxy.Agent, agents []office.Agent, open []office.Invocation) (parent office.Invocation, why string) {
	for _, inv := range open {
		if inv.Status == office.InvocationInProgress && inv.CalleeAgentID == caller.ID && (parent.ID == "" || inv.CreatedAt.After(parent.CreatedAt)) {
			parent = inv
		}
	}
	if depth := parent.Depth + 1; depth > o.cfg.DepthLimit {
		return parent, fmt.Sprintf("the call chain would be %d deep, over the limit of %d", depth, o.cfg.DepthLimit)
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

func (o *work) onResult(ctx context.Context, src source, self office.Agent, m protocol.Message) error {
	if ok, err := o.authorize(ctx, src, self, proxy.ActionDeliver, "DELIVER_RESULT"); !ok {
		return err
	}
	if m.Result == nil {
		return o.refuse(ctx, src, self, "DELIVER_RESULT:"+m.Target, "it has no content")
	}
	_, err := o.deliverResult(ctx, src, self, m.Target, *m.Result)
	return err
}

// deliverResult stores a result from sender for target, completes the open
// invocation from target to sender, and queues the result for target.
func (o *work) deliverResult(ctx context.Context, src source, sender office.Agent, target string, r protocol.DeliverResult) (office.Result, error) {
	kind := "DELIVER_RESULT:" + target
	reg, _, err := o.registry(ctx, sender.OfficeID)
	if err != nil {
		return office.Result{}, err
	}
	to, why, err := o.recipient(ctx, reg, sender, target)
	if err != nil {
		return office.Result{}, err
	}
	if why != "" {
		if strings.TrimSpace(target) == "" {
			kind = "DELIVER_RESULT"
		}
		return office.Result{}, o.refuse(ctx, src, sender, kind, why)
	}
	if why := o.badResult(sender, r); why != "" {
		return office.Result{}, o.refuse(ctx, src, sender, kind, why)
	}
	if r.Type == "" {
		r.Type = protocol.ResultMessage
	}
	if r.ContentType == "" {
		r.ContentType = "text/plain"
	}
	var inv office.Invocation
	if found, err := o.store.FindOpenInvocation(ctx, sender.OfficeID, to.ID, sender.ID); err == nil {
		inv = found
	} else if !office.IsNotFound(err) {
		return office.Result{}, fmt.Errorf("find invocation: %w", err)
	}
	res, err := o.store.CreateResult(ctx, office.Result{
		ID: src.rowID("result"), OfficeID: sender.OfficeID, InvocationID: inv.ID, FromAgentID: sender.ID, ToAgentID: to.ID,
		ResultType: r.Type, ContentType: r.ContentType, Content: r.Content, Status: office.ResultPending,
	})
	if office.IsConflict(err) {
		// Stored already (a replayed message): finish what the first run
		// may not have, with the stored row.
		if res, err = o.store.GetResult(ctx, src.rowID("result")); err != nil {
			return res, fmt.Errorf("get result: %w", err)
		}
		if res.InvocationID != "" {
			if inv, err = o.store.GetInvocation(ctx, res.InvocationID); err != nil && !office.IsNotFound(err) {
				return res, fmt.Errorf("get invocation: %w", err)
			}
		} else {
			inv = office.Invocation{}
		}
	} else if err != nil {
		return res, fmt.Errorf("create result: %w", err)
	}
	if inv.ID != "" {
		if _, ok, err := o.store.TransitionInvocation(ctx, inv.ID, []string{office.InvocationPending, office.InvocationInProgress}, office.InvocationCompleted, office.InvocationPatch{ResultID: res.ID}); err != nil {
			return res, fmt.Errorf("complete invocation: %w", err)
		} else if ok {
			o.record(ctx, sender.OfficeID, sender.ID, "invocation.completed", map[string]string{"invocation_id": inv.ID, "result_id": res.ID}, src.subKey("completed"))
		}
	}
	_, err = o.event(ctx, sender.OfficeID, sender.ID, "result.created", map[string]string{"result_id": res.ID, "to": to.Name, "invocation_id": inv.ID, "type": r.Type}, "", src.subKey("result"))
	o.kick(agentKey{sender.OfficeID, to.ID})
	o.kick(agentKey{sender.OfficeID, sender.ID}) // its next task, if any
	return res, err
}

// recipient resolves a result's target: an agent by name, by role or
// capability, or (no target) whoever gave the sender its current task. why
// says why there is none.
func (o *work) recipient(ctx context.Context, reg *proxy.Registry, sender office.Agent, target string) (to proxy.Agent, why string, err error) {
	if to, ok := reg.ByName(target); ok {
		return to, "", nil
	}
	if strings.TrimSpace(target) == "" {
		open, err := o.store.ListInvocations(ctx, office.InvocationFilter{OfficeID: sender.OfficeID, CalleeAgentID: sender.ID, Status: []string{office.InvocationInProgress}})
		if err != nil {
			return to, "", fmt.Errorf("list invocations: %w", err)
		}
		ok := false
		for _, inv := range open {
			to, ok = reg.ByID(inv.CallerAgentID)
		}
		if !ok {
			return to, "it names no agent and you have no task in progress; open the block with DELIVER_RESULT:<agent> in square brackets", nil
		}
		return to, "", nil
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
func (o *work) badResult(sender office.Agent, r protocol.DeliverResult) string {
	if err := proxy.ValidateContent(r.Content, o.cfg.MaxContent); err != nil {
		return err.Error()
	}
	switch r.Type {
	case protocol.ResultJSON:
		if !json.Valid([]byte(r.Content)) {
			return "its content is not valid JSON"
		}
	case protocol.ResultFilePath:
		if err := insideDir(o.workspace(sender), r.Content); err != nil {
			return err.Error()
		}
	}
	return ""
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

func (o *work) onError(ctx context.Context, src source, self office.Agent, m protocol.Message) error {
	e := m.Error
	if e == nil {
		return nil
	}
	switch e.Recovery {
	case protocol.RecoveryPauseAndRetry:
		o.sweep.retries.add(retry{at: o.now().Add(o.cfg.RetryBackoff), agent: self, message: e.Message})
		return nil
	case protocol.RecoveryNotifyUser:
		q := "Agent " + self.Name + " reports an error: " + e.Message
		_, err := o.asks.ask(ctx, src, self, office.Question{QuestionType: office.QuestionText, Category: "error", Question: q, Context: e.Details, Required: true})
		return err
	default: // checkpoint_and_fail, fatal
		if err := o.failWork(ctx, self, "fatal error: "+e.Message); err != nil {
			return err
		}
		if err := o.sess.Stop(ctx, self.OfficeID, self.ID); err != nil {
			o.log.Warn("stop after fatal error", "agent", self.Name, "err", err)
		} else if err := o.status.stopped(ctx, self); err != nil {
			o.log.Warn("agent idle after fatal error", "agent", self.Name, "err", err)
		}
		return nil
	}
}

// failWork fails every open invocation a is the callee of and tells the
// callers why.
func (o *work) failWork(ctx context.Context, a office.Agent, why string) error {
	open, err := o.store.ListInvocations(ctx, office.InvocationFilter{OfficeID: a.OfficeID, CalleeAgentID: a.ID, Status: []string{office.InvocationPending, office.InvocationInProgress}})
	if err != nil {
		return fmt.Errorf("list invocations: %w", err)
	}
	for _, inv := range open {
		if err := o.failInvocation(ctx, inv, why); err != nil {
			return err
		}
	}
	return nil
}

func (o *work) failInvocation(ctx context.Context, inv office.Invocation, why string) error {
	_, ok, err := o.store.TransitionInvocation(ctx, inv.ID, []string{office.InvocationPending, office.InvocationInProgress}, office.InvocationFailed, office.InvocationPatch{Error: why})
	if err != nil || !ok {
		return err
	}
	callee, _ := o.store.GetAgent(ctx, inv.CalleeAgentID)
	if caller, err := o.store.GetAgent(ctx, inv.CallerAgentID); err == nil {
		// why may hold the callee's own words (an ERROR message, a
		// dependency name): forwarded as quoted data, like a result.
		o.notify(caller, fmt.Sprintf("Task %s that you gave %s failed:\n%s", inv.ID, callee.Name, quote(why)))
	}
	_, err = o.event(ctx, inv.OfficeID, inv.CalleeAgentID, "invocation.failed", map[string]string{"invocation_id": inv.ID, "reason": why}, "", "")
	return err
}

func (o *asks) onDependency(ctx context.Context, src source, self office.Agent, m protocol.Message) error {
	if ok, err := o.authorize(ctx, src, self, proxy.ActionDependency, "DEPENDENCY_REQUEST"); !ok {
		return err
	}
	d := m.Dependency
	if d == nil || d.Name == "" {
		return o.refuse(ctx, src, self, "DEPENDENCY_REQUEST", "it has no name")
	}
	dep, err := o.store.CreateDependency(ctx, office.DependencyRequest{
		ID: src.rowID("dependency"), OfficeID: self.OfficeID, AgentID: self.ID, SessionID: o.sessionID(ctx, self.ID),
		Type: d.Type, Name: d.Name, Description: d.Description, Required: d.Required, Default: d.Default,
		Status: office.DependencyPending, ExpiresAt: o.now().Add(o.cfg.DependencyTTL),
	})
	if office.IsConflict(err) {
		return nil // requested already (a replayed message)
	}
	if err != nil {
		return fmt.Errorf("create dependency: %w", err)
	}
	o.sweep.dependencies.note(dep.ExpiresAt)
	o.setSessionStatus(ctx, self, office.SessionWaiting)
	_, err = o.event(ctx, self.OfficeID, self.ID, "dependency.requested", map[string]any{"dependency_id": dep.ID, "type": dep.Type, "name": dep.Name, "required": dep.Required}, "", src.subKey("dependency"))
	return err
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
