package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/office-server/office-server/office"
)

// The sweeper expires what is past its deadline — pending questions
// (permission requests among them), pending dependency requests, tasks in
// progress past Config.InvocationTimeout, parked proxy requests — without
// asking the store when nothing can be due: an idle office costs its
// database (a hosted Supabase counts every request) almost nothing.
//
// It keeps, for each kind, the earliest deadline it knows of: learned from
// what the engine writes itself (a question asked, a dependency requested,
// a task typed), from the change feed (a pending question or dependency
// another process inserted: office.Change.ExpiresAt), and from the store
// when it does not know (after New, after an office is taken over, when a
// feed reports a pending row without its deadline, after a failed query,
// and every Config.SafetySweep as a safety net). A kind is queried only at
// a sweep (every Config.Sweep) at or after its earliest deadline, with one
// list query that both finds what is due and learns the next deadline, and
// one expiry statement when something is due.

// deadline is what the sweeper knows of one kind's earliest deadline.
type deadline struct {
	mu       sync.Mutex
	next     time.Time // earliest known deadline; zero: none known
	unknown  bool      // something may be due that next does not say: query
	sweeping bool      // a query is under way; notes meanwhile go to noted too
	noted    time.Time // the earliest note since the query began
}

// note records a deadline at t.
func (d *deadline) note(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.next = earlier(d.next, t)
	if d.sweeping {
		d.noted = earlier(d.noted, t)
	}
}

// forget says something may be due that the sweeper does not know of.
func (d *deadline) forget() {
	d.mu.Lock()
	d.unknown = true
	d.mu.Unlock()
}

// begin reports whether the kind must be queried at now (and no other
// query of it is under way); when it must, the query's result is given to
// end.
func (d *deadline) begin(now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sweeping || !d.unknown && (d.next.IsZero() || now.Before(d.next)) {
		return false
	}
	d.unknown, d.sweeping, d.noted = false, true, time.Time{}
	return true
}

// end records what a query begun by begin found: the earliest deadline
// still ahead (zero: none), or, when ok is false, that it failed (the next
// sweep queries again).
func (d *deadline) end(next time.Time, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sweeping = false
	if !ok {
		d.unknown = true
		return
	}
	d.next = earlier(next, d.noted)
}

// earlier returns the earlier of a and b, a zero time being none.
func earlier(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// timers is what the parts tell the sweeper: the deadlines they learn,
// the ERROR retries, whether proxy requests may be parked, and a wake-up.
// It holds no part: every part that sets a timer holds it, the sweeper
// reads it.
type timers struct {
	questions, dependencies, invocations deadline
	retries                              retryQueue
	parked                               parkHint      // whether the sweeper should look for parked requests
	wake                                 chan struct{} // sweep now
}

// forget makes every kind be queried, at once: an office was taken over
// (what its previous owner left may be overdue).
func (t *timers) forget() {
	t.questions.forget()
	t.dependencies.forget()
	t.invocations.forget()
	t.parked.more()
	wake(t.wake)
}

// expireNow makes the sweeper expire the pending questions now rather than
// at its next sweep: one is due (a permission request's timeout holds to
// the second).
func (t *timers) expireNow() { wake(t.wake) }

// handOver carries the parked proxy requests on now rather than at the
// next sweep: a proxy may have freed up (a task it keeps was closed, an
// invocation it had ended, its session is ready again). It costs nothing
// while none can be parked (parkHint: the last look found none and none
// was parked since).
func (t *timers) handOver() {
	if _, due := t.parked.check(); due {
		wake(t.wake)
	}
}

// sweeper runs the engine's timers: the ERROR retries (in memory, every
// Config.Tick) and the expiries in the store (deadline hints, every
// Config.Sweep). An expired permission question goes to permissions, a task
// past its timeout to work, parked proxy requests to proxyWork.
type sweeper struct {
	*base
	timers  *timers
	perms   *permissions
	work    *work
	proxies *proxyWork

	lastSafety time.Time // the last safety-net sweep
	feedUp     bool      // the change feed was connected at the last loop
}

// feedCameUp makes every kind be queried when the change feed has just
// connected or reconnected: a pending row inserted before it listened is
// reported by no notification and by no catch-up (office.ChangeFeed), so
// its deadline is learned from the store.
func (s *sweeper) feedCameUp() {
	if s.cfg.Feed == nil {
		return
	}
	up := s.cfg.Feed.Connected()
	if up && !s.feedUp {
		s.timers.questions.forget()
		s.timers.dependencies.forget()
		s.timers.invocations.forget()
	}
	s.feedUp = up
}

// noteChange learns from a change-feed report of a row another process
// inserted: a pending question or dependency request has a deadline. It
// reports whether the change was such a row (nothing to deliver).
func (s *sweeper) noteChange(c office.Change) bool {
	var d *deadline
	switch {
	case c.Table == office.TableQuestions && c.Status == office.QuestionPending:
		d = &s.timers.questions
	case c.Table == office.TableDependencies && c.Status == office.DependencyPending:
		d = &s.timers.dependencies
	default:
		return false
	}
	if !s.roster.serves(c.OfficeID) {
		return true
	}
	if c.ExpiresAt != nil {
		d.note(*c.ExpiresAt)
	} else {
		d.forget()
	}
	return true
}

// run fires ERROR retries every Tick and sweeps every Sweep, and at once
// when woken (forget), until ctx ends.
func (s *sweeper) run(ctx context.Context) {
	cfg := s.cfg
	t := time.NewTicker(cfg.Tick)
	defer t.Stop()
	var swept time.Time
	for {
		s.feedCameUp()
		if now := s.now(); now.Sub(swept) >= cfg.Sweep || now.Before(swept) {
			swept = now
			s.sweep(ctx, now)
		}
		s.fireRetries()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.timers.wake:
			swept = time.Time{}
		}
	}
}

// sweep expires what is due at now, asking the store only about the kinds
// whose earliest deadline has come (or is unknown).
func (s *sweeper) sweep(ctx context.Context, now time.Time) {
	if now.Sub(s.lastSafety) >= s.cfg.SafetySweep || now.Before(s.lastSafety) {
		s.lastSafety = now
		s.timers.questions.forget()
		s.timers.dependencies.forget()
		s.timers.invocations.forget()
	}
	if s.cfg.Owns != nil && s.due(now) {
		// Expiring is store-wide and its notices go to the office's agents:
		// a server that runs no office leaves it to the owners (and learns
		// the deadlines again when it takes one: CatchUp).
		if offs, err := s.roster.offices(ctx); err != nil || len(offs) == 0 {
			if err == nil {
				s.drop()
			}
			return
		}
	}
	s.expireQuestions(ctx, now)
	s.expireDependencies(ctx, now)
	s.expireInvocations(ctx, now)
	s.proxies.proxyTick(ctx, now)
}

// due reports whether a sweep at now would query the store.
func (s *sweeper) due(now time.Time) bool {
	for _, d := range []*deadline{&s.timers.questions, &s.timers.dependencies, &s.timers.invocations} {
		d.mu.Lock()
		due := d.unknown || (!d.next.IsZero() && !now.Before(d.next))
		d.mu.Unlock()
		if due {
			return true
		}
	}
	_, parked := s.timers.parked.check()
	return parked
}

// drop forgets every deadline: this server runs no office now.
func (s *sweeper) drop() {
	for _, d := range []*deadline{&s.timers.questions, &s.timers.dependencies, &s.timers.invocations} {
		d.mu.Lock()
		d.next, d.unknown = time.Time{}, false
		d.mu.Unlock()
	}
}

// nextAfter returns the earliest of the deadlines after now, and whether
// one is at or before now.
func nextAfter(now time.Time, deadlines []time.Time) (next time.Time, due bool) {
	for _, t := range deadlines {
		if !t.After(now) {
			due = true
			continue
		}
		next = earlier(next, t)
	}
	return next, due
}

func (s *sweeper) expireQuestions(ctx context.Context, now time.Time) {
	if !s.timers.questions.begin(now) {
		return
	}
	pending, err := s.store.ListQuestions(ctx, office.QuestionFilter{Status: []string{office.QuestionPending}})
	if err != nil {
		s.timers.questions.end(time.Time{}, false)
		if ctx.Err() == nil {
			s.log.Warn("list pending questions", "err", err)
		}
		return
	}
	var at []time.Time
	var mine []string // nil: every office is this server's
	for _, q := range pending {
		if s.roster.serves(q.OfficeID) {
			at = append(at, q.ExpiresAt)
			if s.cfg.Owns != nil || len(s.cfg.OfficeIDs) > 0 {
				mine = append(mine, q.OfficeID)
			}
		}
	}
	slices.Sort(mine)
	mine = slices.Compact(mine)
	next, due := nextAfter(now, at)
	var qs []office.Question
	if due {
		// Only this server's offices: it alone tells their askers.
		if qs, err = s.store.ExpireQuestions(ctx, now, mine); err != nil {
			s.timers.questions.end(time.Time{}, false)
			if ctx.Err() == nil {
				s.log.Warn("expire questions", "err", err)
			}
			return
		}
	}
	s.timers.questions.end(next, true)
	for _, q := range qs {
		if s.roster.serves(q.OfficeID) {
			s.questionExpired(ctx, q)
		}
	}
}

// questionExpired tells the asker that q expired (a permission request's
// decider, when it is one).
func (s *sweeper) questionExpired(ctx context.Context, q office.Question) {
	if q.Category == office.QuestionPermission {
		s.perms.expiredPermission(ctx, q)
		return
	}
	a, err := s.store.GetAgent(ctx, q.AgentID)
	if err != nil {
		return
	}
	msg := fmt.Sprintf("Question %s expired without an answer: %q.", q.ID, q.Question)
	if q.DefaultAnswer != "" {
		msg += " Go on with the default answer: " + q.DefaultAnswer
	} else {
		msg += " Decide yourself, or ask again later."
	}
	s.notify(a, msg)
	s.setSessionStatus(ctx, a, office.SessionBusy, "question.expired", map[string]string{"question_id": q.ID, "default": q.DefaultAnswer})
}

func (s *sweeper) expireDependencies(ctx context.Context, now time.Time) {
	if !s.timers.dependencies.begin(now) {
		return
	}
	pending, err := s.store.ListDependencies(ctx, office.DependencyFilter{Status: []string{office.DependencyPending}})
	if err != nil {
		s.timers.dependencies.end(time.Time{}, false)
		if ctx.Err() == nil {
			s.log.Warn("list pending dependencies", "err", err)
		}
		return
	}
	var at []time.Time
	for _, d := range pending {
		if s.roster.serves(d.OfficeID) {
			at = append(at, d.ExpiresAt)
		}
	}
	next, due := nextAfter(now, at)
	var ds []office.DependencyRequest
	if due {
		if ds, err = s.store.ExpireDependencies(ctx, now); err != nil {
			s.timers.dependencies.end(time.Time{}, false)
			if ctx.Err() == nil {
				s.log.Warn("expire dependencies", "err", err)
			}
			return
		}
	}
	s.timers.dependencies.end(next, true)
	for _, d := range ds {
		s.kick(agentKey{d.OfficeID, d.AgentID})
	}
}

func (s *sweeper) expireInvocations(ctx context.Context, now time.Time) {
	if !s.timers.invocations.begin(now) {
		return
	}
	timeout := s.cfg.InvocationTimeout
	invs, err := s.store.ListInvocations(ctx, office.InvocationFilter{Status: []string{office.InvocationInProgress}})
	if err != nil {
		s.timers.invocations.end(time.Time{}, false)
		if ctx.Err() == nil {
			s.log.Warn("list invocations", "err", err)
		}
		return
	}
	var next time.Time
	for _, inv := range invs {
		if inv.StartedAt == nil || !s.roster.serves(inv.OfficeID) {
			continue
		}
		if now.Sub(*inv.StartedAt) <= timeout {
			next = earlier(next, inv.StartedAt.Add(timeout+time.Nanosecond))
			continue
		}
		if err := s.work.failInvocation(ctx, inv, fmt.Sprintf("timed out after %s", timeout)); err != nil {
			s.log.Warn("time out invocation", "err", err)
		}
		s.kick(agentKey{inv.OfficeID, inv.CalleeAgentID})
	}
	s.timers.invocations.end(next, true)
}

// retry is an ERROR pause_and_retry waiting for its backoff.
type retry struct {
	at      time.Time
	agent   office.Agent
	message string
}

// retryQueue holds the ERROR retries waiting for their backoff (in
// memory: a restart forgets them, as the agent's pause is over anyway).
type retryQueue struct {
	mu      sync.Mutex
	waiting []retry
}

func (q *retryQueue) add(r retry) {
	q.mu.Lock()
	q.waiting = append(q.waiting, r)
	q.mu.Unlock()
}

// take removes and returns the retries due at now.
func (q *retryQueue) take(now time.Time) []retry {
	q.mu.Lock()
	defer q.mu.Unlock()
	var due []retry
	keep := q.waiting[:0]
	for _, r := range q.waiting {
		if now.Before(r.at) {
			keep = append(keep, r)
		} else {
			due = append(due, r)
		}
	}
	q.waiting = keep
	return due
}

// fireRetries tells the agents whose ERROR pause is over to retry.
func (s *sweeper) fireRetries() {
	for _, r := range s.timers.retries.take(s.now()) {
		s.notify(r.agent, fmt.Sprintf("You reported a recoverable error (%s). The pause is over: retry now.", r.message))
	}
}
