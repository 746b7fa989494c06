package engine

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/office-server/office-server/office"
)

// Hibernation (issue 33; docs/notes/hibernate.md). An agent idle for its
// launch spec's HibernateAfter — at its prompt, nothing queued for it, no
// permission request open, nothing typed to it — is stopped cleanly and
// its session row written hibernated; anything for it later (a message, an
// answer, a task, a result, a notice, a proxy request) starts it again with
// its conversation resumed, and the delivery round types the work once, as
// to a live agent (the typing marker and the record check keep it once
// across the stop: once.go, session/record.go).
//
// Both the sleep and the wake-up happen in the agent's desk's delivery
// loop, between rounds: nothing is typed into an agent while it is put to
// sleep, and two wake-ups of one agent are one loop's two iterations.
// Work that arrives while the agent goes to sleep kicks that loop; its next
// round finds the agent asleep with work due and wakes it.
//
// Config.MaxLive caps the live agents of this server: a wake-up that would
// exceed it waits in line (its session row says why), and the least
// recently used idle agents that may hibernate are put to sleep to make
// room; a few slots are kept free ahead of demand (spareSlots), and an
// operator's start takes a slot as a wake-up does (startSlot).

// Idler is a Sessions that tells whether an agent is idle and how many
// agents are live (agents.Sessions, cluster.Sessions). With a Sessions
// that is not one, no agent hibernates.
type Idler interface {
	// IdleSince reports whether the agent's session is live and idle now
	// (at its prompt, nothing queued), and since when.
	IdleSince(officeID, agentID string) (time.Time, bool)
	// Live is how many sessions are live on this server.
	Live() int
}

// Defaults of the hibernation.
const (
	// maxHibernateCheck bounds the time between two looks at the idle
	// agents; a shorter hibernate_after is looked at four times as often.
	maxHibernateCheck = 5 * time.Second
	minHibernateCheck = 100 * time.Millisecond
)

// hibernation puts idle agents to sleep and wakes them for work.
type hibernation struct {
	*base
	sess   Sessions
	idle   Idler // nil: nothing hibernates
	perms  *permissions
	status func(statusChange) // the status writer's queue
	desks  wakeDesks          // the deliverer

	mu       sync.Mutex
	watch    map[agentKey]watched   // agents started here that may hibernate
	asleep   map[agentKey]bool      // known hibernated or not; missing: the session row says
	going    map[agentKey]string    // being put to sleep: the detail of its hibernated row
	line     []agentKey             // wake-ups waiting for a live slot (MaxLive), in order
	told     map[agentKey]int       // the place in line last written to the session row
	reserved int                    // wake-ups let through whose session is not counted live yet
	convs    map[agentKey]string    // the conversation id last seen in each agent's row
	asked    map[agentKey]time.Time // when look last asked an agent to sleep
	wakeC    chan struct{}
	freed    chan struct{} // closed (and replaced) by served
}

// selfNamingKind is the kind whose CLI names its conversation itself.
const selfNamingKind = "codex"

// wakeDesks is what the hibernation asks of the deliverer, which holds
// it (parts call one way: docs/notes/engine.md): a round of the graceful
// stop's count, what is due to an agent, and a start of its session.
type wakeDesks interface {
	beginRound() bool
	endRound()
	readDue(ctx context.Context, a office.Agent) (due, error)
	retryErr(what string, err error) bool
	startSession(ctx context.Context, a office.Agent, restart bool) error
}

// watched is what the hibernation knows of a live agent.
type watched struct {
	after time.Duration // its HibernateAfter; 0: only MaxLive may put it to sleep
	may   bool          // it may hibernate at all (its kind resumes, or its spec says so)
}

func (h *hibernation) init() {
	h.watch, h.asleep, h.going, h.told = map[agentKey]watched{}, map[agentKey]bool{}, map[agentKey]string{}, map[agentKey]int{}
	h.convs, h.asked = map[agentKey]string{}, map[agentKey]time.Time{}
	h.wakeC, h.freed = make(chan struct{}, 1), make(chan struct{})
	h.idle, _ = h.sess.(Idler)
}

// started is told that a's session was started (startSession): it is
// awake, and watched when it may hibernate.
func (h *hibernation) started(a office.Agent) {
	k := agentKey{a.OfficeID, a.ID}
	after := a.Launch.HibernateAfter
	w := watched{after: after, may: after > 0 || slices.Contains(office.ResumingKinds, a.Launch.Kind)}
	h.mu.Lock()
	h.asleep[k] = false
	delete(h.asked, k)
	if w.may {
		h.watch[k] = w
	} else {
		delete(h.watch, k)
	}
	h.mu.Unlock()
	if after > 0 {
		wake(h.wakeC) // look again with this agent's period
	}
}

// forgetOffice drops what is known of officeID's agents: the office was
// taken (TakeOffice), and the session rows say how they are.
func (h *hibernation) forgetOffice(officeID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range h.asleep {
		if k.officeID == officeID {
			delete(h.asleep, k)
		}
	}
}

// run looks at the live agents that may hibernate until ctx ends: at
// most every maxHibernateCheck, and four times per shortest
// hibernate_after. An office with no such agent costs nothing but the
// timer; a hibernated agent is not looked at.
func (h *hibernation) run(ctx context.Context) {
	if h.idle == nil {
		return
	}
	t := time.NewTimer(h.period())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.wakeC:
		}
		h.look(ctx)
		t.Reset(h.period())
	}
}

func (h *hibernation) period() time.Duration {
	p := maxHibernateCheck
	h.mu.Lock()
	for _, w := range h.watch {
		if w.after > 0 && w.after/4 < p {
			p = w.after / 4
		}
	}
	h.mu.Unlock()
	return max(p, minHibernateCheck)
}

// look asks every agent idle past its HibernateAfter to sleep, and makes
// room for the wake-ups waiting in line and the next ones (makeRoom).
func (h *hibernation) look(ctx context.Context) {
	now := h.now()
	h.mu.Lock()
	var due []agentKey
	var whys []string
	for k, w := range h.watch {
		if w.after <= 0 {
			continue
		}
		if at, ok := h.asked[k]; ok && now.Sub(at) < w.after {
			continue // asked, and it could not sleep (work came): not before another hibernate_after
		}
		if since, ok := h.idle.IdleSince(k.officeID, k.agentID); ok && now.Sub(since) >= w.after {
			h.asked[k] = now
			due = append(due, k)
			whys = append(whys, fmt.Sprintf("idle since %s (hibernate_after %s)", since.UTC().Format(time.RFC3339), w.after))
		}
	}
	h.mu.Unlock()
	for i, k := range due {
		h.ask(k, whys[i])
	}
	h.makeRoom(ctx)
}

// ask asks k's desk to put its agent to sleep after its current round.
func (h *hibernation) ask(k agentKey, why string) {
	d := h.desk(k)
	d.mu.Lock()
	d.sleep = why
	d.mu.Unlock()
	h.kick(k)
}

// sleepIfAsked puts the desk's agent to sleep if it was asked to and is
// still idle with nothing due; the desk's delivery loop calls it after a
// round that left nothing undelivered, so nothing is being typed.
func (h *hibernation) sleepIfAsked(ctx context.Context, d *desk) {
	d.mu.Lock()
	why, notices := d.sleep, len(d.notices)
	d.sleep = ""
	d.mu.Unlock()
	if why == "" || notices > 0 || h.idle == nil {
		return
	}
	k := d.key
	if !h.roster.serves(k.officeID) || !h.desks.beginRound() {
		return // not ours, or the server is stopping: its stop writes the row
	}
	defer h.desks.endRound()
	if _, ok := h.idle.IdleSince(k.officeID, k.agentID); !ok || h.perms.open(k) {
		return
	}
	a, err := h.store.GetAgent(ctx, k.agentID)
	if err != nil {
		return
	}
	items, err := h.desks.readDue(ctx, a)
	if err != nil || items.any() {
		return // work came meanwhile: it is delivered instead
	}
	h.mu.Lock()
	h.going[k] = why
	h.mu.Unlock()
	if err := h.sess.Stop(ctx, k.officeID, k.agentID); err != nil {
		h.mu.Lock()
		delete(h.going, k)
		h.mu.Unlock()
		h.log.Warn("hibernate: stop session", "agent", a.Name, "err", err)
		return
	}
	h.mu.Lock()
	h.asleep[k] = true
	delete(h.watch, k)
	h.mu.Unlock()
	h.log.Info("agent hibernated", "office", a.OfficeID, "agent", a.ID, "agent_name", a.Name, "why", why)
	h.served()
}

// rewrite is the status writer's look at a status change before it is
// written: the stop of an agent put to sleep is written hibernated, with
// why.
func (h *hibernation) rewrite(c statusChange) statusChange {
	k := agentKey{c.OfficeID, c.AgentID}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch c.Status {
	case office.SessionStopped:
		if why, ok := h.going[k]; ok {
			delete(h.going, k)
			c.Status, c.Detail, c.LastLines = office.SessionHibernated, why, nil
		}
	case office.SessionStarting:
		// Not the end of a sleep being made: a start queued before the
		// stop may be written after going was set (the stop's own status
		// always comes, before Stop returns).
		delete(h.told, k)
	}
	return c
}

// any reports whether something in x is to be typed into its agent: its
// open tasks count only when none is in progress (one at a time).
func (x due) any() bool {
	if len(x.ns)+len(x.deps)+len(x.qs)+len(x.rs)+len(x.ms) > 0 {
		return true
	}
	for _, inv := range x.invs {
		if inv.Status == office.InvocationInProgress {
			return false
		}
	}
	return len(x.invs) > 0
}

// sleeping reports whether k's agent is hibernated: as this server
// recorded it, else as its session row says.
func (h *hibernation) sleeping(ctx context.Context, k agentKey) bool {
	h.mu.Lock()
	v, ok := h.asleep[k]
	h.mu.Unlock()
	if ok {
		return v
	}
	rec, err := h.store.GetSessionByAgent(ctx, k.agentID)
	if err != nil && !office.IsNotFound(err) {
		return false // asked again at the next round
	}
	v = rec.Status == office.SessionHibernated
	h.mu.Lock()
	if _, ok := h.asleep[k]; !ok {
		h.asleep[k] = v
	}
	h.mu.Unlock()
	return v
}

// wakeIfDue is the round's look at an agent whose session does not run:
// asleep with work due, it is started with its conversation resumed (the
// round is retried; its ready status kicks the next one). It reports
// whether the agent is asleep (the round ends) and whether to retry.
func (h *hibernation) wakeIfDue(ctx context.Context, d *desk, a office.Agent) (asleep, retry bool) {
	k := d.key
	if !h.sleeping(ctx, k) {
		return false, false
	}
	d.mu.Lock()
	notices := len(d.notices)
	d.mu.Unlock()
	what := "a notice"
	if notices == 0 {
		items, err := h.desks.readDue(ctx, a)
		if err != nil {
			return true, h.desks.retryErr("read what is due", err)
		}
		if !items.any() {
			return true, false // asleep, nothing for it
		}
		what = items.what()
	}
	if a.Status == office.AgentDisabled || a.Status == office.AgentFailed {
		return true, false // an operator's matter
	}
	if !h.slot(ctx, k, true) {
		return true, true // waits for a live slot; served() kicks it
	}
	err := h.desks.startSession(ctx, a, false)
	h.release()
	if err != nil {
		h.log.Warn("wake hibernated agent", "agent", a.Name, "err", err)
		return true, true
	}
	h.log.Info("agent woken", "office", a.OfficeID, "agent", a.ID, "agent_name", a.Name, "for", what)
	h.events.record(ctx, a.OfficeID, a.ID, "session.woken", map[string]string{"for": what}, "")
	h.makeRoom(ctx) // a slot free for the next wake-up
	return true, true
}

// what names the first kind of work in x, for the logs.
func (x due) what() string {
	switch {
	case len(x.ns) > 0:
		return "a notice"
	case len(x.deps) > 0:
		return "a dependency"
	case len(x.qs) > 0:
		return "an answer"
	case len(x.rs) > 0:
		return "a result"
	case len(x.ms) > 0:
		return "a message"
	}
	return "a task"
}

// slot reports whether k may start now under Config.MaxLive; if not, k
// waits in line (with tell, its session row says so) and idle agents are
// asked to make room. A true slot is held until release.
func (h *hibernation) slot(ctx context.Context, k agentKey, tell bool) bool {
	limit := h.cfg.MaxLive
	if limit <= 0 || h.idle == nil {
		h.mu.Lock()
		h.reserved++
		h.mu.Unlock()
		return true
	}
	h.mu.Lock()
	pos := slices.Index(h.line, k)
	if pos < 0 {
		h.line = append(h.line, k)
		pos = len(h.line) - 1
	}
	live := h.idle.Live() + h.reserved
	if pos < limit-live {
		h.line = slices.Delete(h.line, pos, pos+1)
		h.reserved++
		delete(h.told, k)
		h.mu.Unlock()
		return true
	}
	tell = tell && h.told[k] != pos+1
	h.told[k] = pos + 1
	h.mu.Unlock()
	if tell {
		// The reason, where members and the API read it: the row stays
		// hibernated, its detail says why it waits.
		h.status(statusChange{OfficeID: k.officeID, AgentID: k.agentID, Status: office.SessionHibernated,
			Detail: fmt.Sprintf("waiting to wake: %d of max_live %d agents are live on this server; %d wake-up(s) ahead of it", live, limit, pos)})
	}
	h.makeRoom(ctx)
	return false
}

// release ends a slot's hold: the session started (and counts as live)
// or did not.
func (h *hibernation) release() {
	h.mu.Lock()
	h.reserved--
	h.mu.Unlock()
}

// makeRoom asks the least recently used idle agents that may hibernate
// to sleep: as many as the wake-ups in line need beyond the free slots,
// and then, among agents idle at least minSpareIdle, as many as keep
// spareSlots(MaxLive) slots free, so that the next wake-up starts at once
// instead of first waiting for another agent's graceful stop.
func (h *hibernation) makeRoom(ctx context.Context) {
	limit := h.cfg.MaxLive
	if limit <= 0 || h.idle == nil {
		return
	}
	type idleAgent struct {
		k     agentKey
		since time.Time
	}
	now := h.now()
	h.mu.Lock()
	free := limit - h.idle.Live() - h.reserved
	need := len(h.line) - free - len(h.going)
	spare := need + spareSlots(limit)
	var idle []idleAgent
	for k, w := range h.watch {
		if _, ok := h.going[k]; ok || !w.may || slices.Contains(h.line, k) {
			continue
		}
		if since, ok := h.idle.IdleSince(k.officeID, k.agentID); ok {
			idle = append(idle, idleAgent{k, since})
		}
	}
	h.mu.Unlock()
	if free > 0 {
		h.served() // room already: the line goes on
	}
	if spare <= 0 {
		return
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].since.Before(idle[j].since) })
	for i, c := range idle[:min(spare, len(idle))] {
		why := "hibernated to make room for a wake-up"
		if i >= need {
			if now.Sub(c.since) < minSpareIdle {
				break // the rest are idle even less long
			}
			why = "hibernated to keep a live slot free for the next wake-up"
		}
		h.ask(c.k, fmt.Sprintf("idle since %s, %s (max_live %d)", c.since.UTC().Format(time.RFC3339), why, limit))
	}
}

// minSpareIdle is how long an agent has been idle before it may be put to
// sleep only to keep a slot free (not for a wake-up waiting now).
const minSpareIdle = 5 * time.Second

// spareSlots is how many of maxLive slots the server keeps free by putting
// its least recently used idle agents to sleep ahead of demand: a tenth,
// rounded up, from a cap of 3; none below (the cap is then the room).
func spareSlots(maxLive int) int {
	if maxLive < 3 {
		return 0
	}
	return (maxLive + 9) / 10
}

// served kicks the wake-ups waiting in line, and the operators' starts
// waiting in startSlot: a slot may be free.
func (h *hibernation) served() {
	h.mu.Lock()
	line := slices.Clone(h.line)
	close(h.freed)
	h.freed = make(chan struct{})
	h.mu.Unlock()
	for _, k := range line {
		h.kick(k)
	}
}

// maxStartWait bounds how long an operator's start waits for a live slot.
const maxStartWait = 30 * time.Second

// startSlot holds a live slot for an operator's start of k (StartAgent,
// the console's "open terminal"): a session that runs needs none; else
// the start takes its place in the wake-ups' line and the least recently
// used idle agents are put to sleep to make room, as for a wake-up. It
// returns the slot's release, or why there is none after maxStartWait.
func (h *hibernation) startSlot(ctx context.Context, k agentKey) (func(), error) {
	if h.cfg.MaxLive <= 0 || h.idle == nil || h.sess.Running(k.officeID, k.agentID) {
		return func() {}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, maxStartWait)
	defer cancel()
	for {
		h.mu.Lock()
		freed := h.freed
		h.mu.Unlock()
		if h.slot(ctx, k, false) {
			return h.release, nil
		}
		select {
		case <-freed:
		case <-ctx.Done():
			h.mu.Lock()
			h.line = slices.DeleteFunc(h.line, func(x agentKey) bool { return x == k })
			delete(h.told, k)
			h.mu.Unlock()
			return nil, office.Errorf(office.EUNAVAILABLE, "max_live %d agents are live on this server and none became idle to make room (waited %s)", h.cfg.MaxLive, maxStartWait)
		}
	}
}

// full reports whether this server runs Config.MaxLive agents already.
func (h *hibernation) full() bool {
	if h.cfg.MaxLive <= 0 || h.idle == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.idle.Live()+h.reserved >= h.cfg.MaxLive
}

// skipStart reports whether the autostart of a (TakeOffice) leaves it
// asleep: it is hibernated, or this server is at its MaxLive (it is then
// written hibernated: the first work for it wakes it).
func (h *hibernation) skipStart(ctx context.Context, a office.Agent) bool {
	k := agentKey{a.OfficeID, a.ID}
	if h.sleeping(ctx, k) {
		return true
	}
	if !h.full() {
		return false
	}
	h.mu.Lock()
	h.asleep[k] = true
	h.mu.Unlock()
	h.status(statusChange{OfficeID: a.OfficeID, AgentID: a.ID, Status: office.SessionHibernated,
		Detail: fmt.Sprintf("not started: max_live %d agents are live on this server; the first work for it starts it", h.cfg.MaxLive)})
	return true
}

// stoppedOnRequest is told that an operator stopped a (StopAgent): a
// hibernated agent is stopped now, and work for it no longer wakes it.
func (h *hibernation) stoppedOnRequest(ctx context.Context, a office.Agent) {
	k := agentKey{a.OfficeID, a.ID}
	if !h.sleeping(ctx, k) {
		return
	}
	h.mu.Lock()
	h.asleep[k] = false
	delete(h.going, k)
	h.line = slices.DeleteFunc(h.line, func(x agentKey) bool { return x == k })
	h.mu.Unlock()
	h.status(statusChange{OfficeID: a.OfficeID, AgentID: a.ID, Status: office.SessionStopped, Detail: "stopped on request while hibernated"})
}

// keepConversation writes the conversation a session reports into its
// row when the row has none: Codex names its conversation itself (the
// office makes none up for it: deliverer.sessionSpec), and a process
// started later — after a hibernation, or by the next server — resumes
// the conversation the row names. The status writer calls it.
func (h *hibernation) keepConversation(ctx context.Context, c statusChange) {
	if c.ConversationID == "" {
		return
	}
	k := agentKey{c.OfficeID, c.AgentID}
	h.mu.Lock()
	known := h.convs[k] == c.ConversationID
	h.mu.Unlock()
	if known {
		return
	}
	// Through the row's one writer: the conversation is written when the
	// row has none (the first one recorded holds).
	rec, _, _, err := h.store.SetSessionStatus(ctx, office.SessionStatus{OfficeID: c.OfficeID, AgentID: c.AgentID, AgentSessionID: c.ConversationID, Node: h.cfg.Node})
	if err != nil {
		h.log.Warn("record the agent's conversation", "agent", c.AgentID, "err", err)
		return // asked again at the next status
	}
	if rec.AgentSessionID != c.ConversationID {
		h.log.Debug("the agent's row keeps another conversation", "agent", c.AgentID, "row", rec.AgentSessionID, "reported", c.ConversationID)
	}
	h.mu.Lock()
	h.convs[k] = c.ConversationID
	h.mu.Unlock()
}

// open reports whether a permission request of k's agent waits for a
// decision here.
func (pm *permissions) open(k agentKey) bool {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	for _, lp := range pm.live {
		if lp.key == k {
			return true
		}
	}
	return false
}
