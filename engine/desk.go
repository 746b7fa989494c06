package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/office-server/office-server/protocol"
	"github.com/office-server/office-server/session"
)

// desk is one agent's place in the router: everything the router keeps
// for that agent, and the agent's two loops.
//
//   - Intake: the agent's words wait in the inbox (bounded by
//     Config.InboxBytes, see HandleText) and one goroutine, intake, parses
//     them in order and acts on the messages they complete.
//   - Delivery: everything due to the agent waits in the store (notices
//     too; in memory only those the store refused); one goroutine,
//     deliver, types them one at a time (deliver.go).
//
// Both loops are started once, while Run runs, and Run waits for them.
type desk struct {
	r   *Router
	key agentKey

	mu sync.Mutex
	// The inbox: text and lost-line records in order, and their size
	// (with the item being handled).
	items   []inboxItem
	bytes   int
	peak    int  // the most bytes ever held (tests, diagnostics)
	dropped bool // dropping screen text: logged once per overflow
	// epoch prefixes screen-read chunk IDs; renewed at every session start.
	epoch string
	// notices the store refused wait here to be typed, before anything
	// from the store.
	notices []string
	// droppedNotices were not queued: the queue was full (limit.go).
	droppedNotices int
	progress       Progress
	held           heldBlock // an open block kept past a turn end (hold.go)
	crashed        bool      // crashed since its last ready (see remind)
	settled        bool      // the last delivery round delivered everything it found (see recordStatus)
	readyOnce      bool      // its session was ready in this server's life
	sleep          string    // asked to hibernate, and why (hibernate.go)
	cursor         cursor    // the newest transcript cursor known

	// Guarded by the router's mu: the loops run.
	intakeOn, deliverOn bool

	intakeWake  chan struct{}
	deliverWake chan struct{}

	// Owned by the intake goroutine.
	parser *protocol.Parser
	// cursorHeld: a message failed; no transcript cursor is recorded after
	// it for this server life.
	cursorHeld bool
	// invalid counts the current window's invalid blocks.
	invalid invalidTally
	// blocks counts the current window's valid blocks (limit.go).
	blocks blockTally
}

// inboxItem is a chunk of text, or (lost > 0) a record of text dropped at
// that point of the stream, or (release > 0) the end of a held block.
type inboxItem struct {
	t       session.Text
	size    int
	lost    int
	release uint64 // the hold's generation (hold.go)
}

// desk returns k's desk, making it when needed.
func (rt *Router) desk(k agentKey) *desk {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	d := rt.desks[k]
	if d == nil {
		d = &desk{r: rt, key: k, parser: protocol.NewParser(protocol.Options{}),
			intakeWake: make(chan struct{}, 1), deliverWake: make(chan struct{}, 1)}
		rt.desks[k] = d
	}
	return d
}

// allDesks returns every desk made so far.
func (rt *Router) allDesks() []*desk {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return slices.Collect(maps.Values(rt.desks))
}

// startIntake starts the desk's intake loop once, if Run runs (Run starts
// those of the desks made before it).
func (d *desk) startIntake() {
	d.r.mu.Lock()
	defer d.r.mu.Unlock()
	if !d.intakeOn && d.r.goLocked(d.intake) {
		d.intakeOn = true
	}
}

// startDelivery starts the desk's delivery loop once, if Run runs.
func (d *desk) startDelivery() {
	d.r.mu.Lock()
	defer d.r.mu.Unlock()
	if !d.deliverOn && d.r.goLocked(d.deliver) {
		d.deliverOn = true
	}
}

func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// textSize is what a chunk holds in memory, roughly.
func textSize(t session.Text) int {
	n := 64 + len(t.ID)
	for _, l := range t.Lines {
		n += 16 + len(l)
	}
	return n
}

// lostItemSize is what a record of lost lines counts for.
const lostItemSize = 64

// HandleText takes a chunk of an agent's words (session.Options.OnText). It
// never blocks: the chunk is queued on the agent's desk and parsed by the
// desk's intake goroutine, in order.
//
// The queue is bounded (Config.InboxBytes) so that a hung store cannot make
// memory grow for ever. Transcript text (Claude Code) is always queued: the
// session layer stops reading the transcript while Backlogged reports true
// (backpressure; the file is durable), so at most one poll's worth goes past
// the bound. Screen text (other CLIs) cannot wait: beyond the bound it is
// dropped, logged, and recorded in order as lost output (see intake).
//
// Screen-read chunk IDs (session.FromScreen) are unique only within one process's
// life; they are prefixed with an epoch renewed at every session start
// (HandleStatus "starting"), so a message read after a restart is never
// taken for one already acted on. Transcript IDs (Claude Code's entry
// uuids) are stable across restarts and used as they are.
func (rt *Router) HandleText(t session.Text) {
	d := rt.desk(agentKey{t.Key.OfficeID, t.Key.AgentID})
	screen := t.Source == session.FromScreen
	d.mu.Lock()
	if screen {
		if d.epoch == "" {
			d.epoch = uuid.NewString()
		}
		t.ID = d.epoch + "/" + t.ID
	}
	d.enqueue(t, screen)
	d.mu.Unlock()
	d.startIntake()
	wake(d.intakeWake)
}

// enqueue adds t to the inbox, keeping only what fits of screen text; the
// caller holds d.mu.
func (d *desk) enqueue(t session.Text, screen bool) {
	limit := d.r.cfg.InboxBytes
	size := textSize(t)
	if t.Lost > 0 {
		d.addLost(t.Lost)
	}
	var lost int
	if screen && d.bytes+size > limit {
		// Keep what fits, in order; the rest is lost.
		keep, room := 0, limit-d.bytes-textSize(session.Text{ID: t.ID})-lostItemSize
		for keep < len(t.Lines) && room >= 16+len(t.Lines[keep]) {
			room -= 16 + len(t.Lines[keep])
			keep++
		}
		lost = len(t.Lines) - keep
		t.Lines = t.Lines[:keep]
		size = textSize(t)
		if !d.dropped {
			d.dropped = true
			d.r.log.Warn("agent output dropped: the office is not keeping up (store slow or down)", "office", d.key.officeID, "agent", d.key.agentID, "queued_bytes", d.bytes)
		}
	}
	if len(t.Lines) > 0 || (t.TurnEnd && lost == 0) {
		d.items = append(d.items, inboxItem{t: t, size: size})
		d.bytes += size
	}
	if lost > 0 {
		d.addLost(lost)
	}
	d.peak = max(d.peak, d.bytes)
}

// addLost records n lost lines at the end of the inbox; the caller holds
// d.mu.
func (d *desk) addLost(n int) {
	if l := len(d.items); l > 0 && d.items[l-1].lost > 0 {
		d.items[l-1].lost += n
		return
	}
	d.items = append(d.items, inboxItem{lost: n, size: lostItemSize})
	d.bytes += lostItemSize
}

// Backlogged reports whether the agent's text waiting to be acted on has
// reached Config.InboxBytes (wire it to session.Options.Paused).
func (rt *Router) Backlogged(officeID, agentID string) bool {
	rt.mu.Lock()
	d := rt.desks[agentKey{officeID, agentID}]
	rt.mu.Unlock()
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.bytes >= rt.cfg.InboxBytes
}

// next takes the inbox's first item; ok=false when it is empty.
func (d *desk) next() (it inboxItem, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.items) == 0 {
		d.dropped = false
		return it, false
	}
	it = d.items[0]
	d.items[0] = inboxItem{}
	d.items = d.items[1:]
	if len(d.items) == 0 {
		d.items = nil // let the backing array go
	}
	return it, true
}

// intake acts on the agent's text in order, one chunk at a time, until
// ctx ends; a chunk's bytes count against the bound until it has been
// handled.
func (d *desk) intake(ctx context.Context) {
	for ctx.Err() == nil {
		it, ok := d.next()
		if !ok {
			select {
			case <-ctx.Done():
			case <-d.intakeWake:
			}
			continue
		}
		if it.lost > 0 {
			d.outputLost(ctx, it.lost)
		} else if it.release > 0 {
			d.endHeld(ctx, it.release)
		} else {
			if !d.parseText(ctx, it.t, false) {
				// A message failed (the store refused it): the cursor
				// stays where it is for this server life, so a restart
				// reads that message again and retries it.
				d.cursorHeld = true
			}
			if it.t.TurnEnd && !d.cursorHeld && it.t.Source != session.FromScreen && ctx.Err() == nil {
				d.r.intake.recordCursor(ctx, d, it.t.ID)
			}
		}
		d.mu.Lock()
		d.bytes -= it.size
		d.mu.Unlock()
	}
}

// outputLost records that n lines of an agent's screen output were dropped
// and tells the agent, so it can print again what mattered. The parser
// starts afresh: a block cut in the middle must not swallow what follows.
func (d *desk) outputLost(ctx context.Context, n int) {
	k := d.key
	d.parser = protocol.NewParser(protocol.Options{})
	d.r.log.Warn("agent output lost", "office", k.officeID, "agent", k.agentID, "lines", n)
	if _, err := d.r.events.event(ctx, k.officeID, k.agentID, "output.lost", map[string]int{"lines": n}, "", ""); err != nil {
		d.r.log.Error("record lost output", "office", k.officeID, "agent", k.agentID, "err", err)
	}
	d.notify(fmt.Sprintf("%d lines of your output were lost (the office could not keep up). If they held protocol blocks, print those blocks again.", n))
}

// parseText feeds t to the parser and acts on the messages it completes,
// ordered by priority (docs/protocol.md; stable, so equal ranks keep their
// order). Each message is named by the chunk's ID and its index among the
// chunk's messages: that name is the event's dedupe key, so a re-rendered
// or re-read chunk is never acted on twice. Invalid blocks are recorded
// and told within bounds (see onInvalid). It reports false when a message
// could not be handled. At t's turn end the parser's open block and phase
// end, unless the block is held (hold.go); released: t ends a hold.
func (d *desk) parseText(ctx context.Context, t session.Text, released bool) bool {
	k := d.key
	var msgs []protocol.Message
	for _, l := range t.Lines {
		msgs = append(msgs, d.parser.Feed(l)...)
	}
	if held := !released && d.holdOpenBlock(t); t.TurnEnd && !held {
		msgs = append(msgs, d.parser.Flush()...)
	}
	idx := make([]int, len(msgs))
	for i := range idx {
		idx[i] = i
	}
	ok := true
	sort.SliceStable(idx, func(a, b int) bool { return msgs[idx[a]].Priority() > msgs[idx[b]].Priority() })
	// Progress blocks next to each other are recorded together (one
	// write: handleProgress), the others one by one, in order.
	var run []sourced
	flush := func() {
		if err := d.r.intake.handleProgress(ctx, run); err != nil {
			d.r.log.Error("handle message", "office", k.officeID, "agent", k.agentID, "kind", "progress", "err", err)
			ok = false
		}
		run = run[:0]
	}
	for _, i := range idx {
		src := source{officeID: k.officeID, agentID: k.agentID, key: fmt.Sprintf("%s#%d", t.ID, i)}
		var err error
		if msgs[i].Kind == protocol.KindInvalid {
			flush()
			err = d.r.intake.onInvalid(ctx, src, &d.invalid, msgs[i])
		} else if d.r.intake.admit(&d.blocks, msgs[i]) {
			if progress(msgs[i].Kind) {
				run = append(run, sourced{src, msgs[i]})
				continue
			}
			flush()
			err = d.r.intake.handle(ctx, src, msgs[i])
		}
		if err != nil {
			d.r.log.Error("handle message", "office", k.officeID, "agent", k.agentID, "kind", msgs[i].Kind, "err", err)
			ok = false
		}
	}
	flush()
	if err := d.r.intake.flushInvalid(ctx, k, &d.invalid, t.TurnEnd, t.ID); err != nil {
		d.r.log.Error("record invalid blocks", "office", k.officeID, "agent", k.agentID, "err", err)
		ok = false
	}
	if err := d.r.intake.flushRefused(ctx, k, &d.blocks, t.TurnEnd, t.ID); err != nil {
		d.r.log.Error("record refused blocks", "office", k.officeID, "agent", k.agentID, "err", err)
		ok = false
	}
	return ok
}

// notify queues a notice, typed as "[OFFICE] <text>", and wakes delivery.
// The notice is stored (office.Notices: a stop of the server before its
// typing loses nothing, and its typing is checked as any row's, once.go)
// under the bound of maxQueuedNotices pending notices; one beyond it is
// counted (limit.go). When the store refuses the write, it waits in
// memory, as do those after it while any waits there (their order kept).
func (d *desk) notify(text string) { d.notifyBounded(text, maxQueuedNotices) }

// notifyBounded is notify under a bound of limit pending notices (0: none).
func (d *desk) notifyBounded(text string, limit int) {
	if !strings.HasPrefix(text, "[") {
		text = "[OFFICE] " + text
	}
	d.mu.Lock()
	inMemory := len(d.notices) > 0
	d.mu.Unlock()
	if inMemory || !d.storeNotice(text, limit) {
		d.mu.Lock()
		d.queue(text)
		d.mu.Unlock()
	}
	d.r.kick(d.key)
}

// noticeWriteTimeout bounds a notice's write: past it, the notice waits in
// memory.
const noticeWriteTimeout = 10 * time.Second

// storeNotice stores text as the agent's pending notice, or counts it
// when the agent has limit pending; false when the store refused it
// (logged).
func (d *desk) storeNotice(text string, limit int) bool {
	k := d.key
	// Not the server's run context: a notice queued while the server stops
	// is still written, for the next start to type.
	ctx, cancel := context.WithTimeout(context.Background(), noticeWriteTimeout)
	defer cancel()
	n, err := d.r.store.AddNotices(ctx, k.officeID, k.agentID, []string{text}, limit)
	if err != nil {
		d.r.log.Error("store a notice; it waits in memory", "office", k.officeID, "agent", k.agentID, "err", err)
		return false
	}
	if n == 0 {
		d.mu.Lock()
		d.droppedNotices++
		d.mu.Unlock()
	}
	return true
}

// Progress returns an agent's last reported phase and step.
func (rt *Router) Progress(officeID, agentID string) Progress {
	rt.mu.Lock()
	d := rt.desks[agentKey{officeID, agentID}]
	rt.mu.Unlock()
	if d == nil {
		return Progress{}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.progress
}

// onProgress applies a PHASE_COMPLETE, STEP or STEP_COMPLETE.
func (d *desk) onProgress(m protocol.Message) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := &d.progress
	switch {
	case m.Phase != nil:
		p.Phase, p.PhaseName = m.Phase.Number, m.Phase.Name
	case m.Step != nil:
		p.Step, p.Steps, p.StepName = m.Step.Current, m.Step.Total, m.Step.Name
	case m.StepComplete != nil && p.Step > 0 && p.Step < p.Steps:
		p.Step++
	}
}
