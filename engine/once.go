package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/office-server/office-server/office"
)

// Exactly once across stops (issue 32; docs/notes/engine.md, "Exactly
// once across stops"). A store row is marked delivered only after its
// text was typed and the agent acknowledged it, so a stop between the
// typing and the mark leaves a row that looks undelivered although the
// agent may have it. Before each typing of a row the engine appends a
// "delivery.typing" event whose dedupe key names the row: the first
// typing inserts it; any later typing (in this server's life or the
// next's) finds it, and the session is asked to check the agent's record
// of prompts since that first typing before typing again (SendSince).

// SendSince is a Sessions that can check an agent's record of prompts
// before typing a text an earlier typing, at since, may have delivered
// (agents.Sessions, cluster.Sessions). A Sessions without it types again.
type SendSince interface {
	SendSince(ctx context.Context, officeID, agentID, text string, since time.Time) error
}

// Event kinds of the typing marker.
const (
	// EventTyping marks a row's first typing (dedupe key "typed:<row>").
	// The round's first row gets its marker with the round's read
	// (office.Store ListDueTyping: one request over Supabase).
	EventTyping = office.EventTyping
	// EventTypingAgain records a row typed once more after a typing whose
	// acknowledgement was never recorded (the record is checked first
	// where the agent's CLI keeps one).
	EventTypingAgain = "delivery.typing_again"
)

type typingMark struct {
	Row string    `json:"row"`
	At  time.Time `json:"at"`
}

// typing records that row is about to be typed into a and returns when it
// was first typed before (zero: this is its first typing).
func (dl *deliverer) typing(ctx context.Context, a office.Agent, row string) (time.Time, error) {
	now := dl.now()
	p, _ := json.Marshal(typingMark{Row: row, At: now})
	ev, inserted, err := dl.store.AppendEvent(ctx, office.Event{OfficeID: a.OfficeID, AgentID: a.ID, Kind: EventTyping, Payload: p, DedupeKey: office.TypingKey(row)})
	if err != nil {
		dl.events.auditFailures.Add(1)
		return time.Time{}, fmt.Errorf("record typing of %s: %w", row, err)
	}
	return dl.typed(ctx, a, row, ev, inserted, now), nil
}

// typed returns when row was first typed into a before this typing,
// from its marker ev (zero: inserted now, this is its first typing), and
// records that it is typed again otherwise.
func (dl *deliverer) typed(ctx context.Context, a office.Agent, row string, ev office.Event, inserted bool, now time.Time) time.Time {
	if inserted {
		dl.events.publish(ev)
		return time.Time{}
	}
	var m typingMark
	if json.Unmarshal(ev.Payload, &m) != nil || m.At.IsZero() {
		m.At = ev.CreatedAt // a store that lost the payload: its own stamp
	}
	if m.At.IsZero() {
		m.At = now.Add(-24 * time.Hour) // nothing says when: check the whole recent record
	}
	dl.events.record(ctx, a.OfficeID, a.ID, EventTypingAgain, typingMark{Row: row, At: m.At}, "")
	return m.At
}

// sendRow types the text that delivers row (rowKey) into the agent: the
// first time as send does; after an earlier typing of the same row, only
// if the agent's record does not show it arrived.
func (v *delivery) sendRow(ctx context.Context, row, text string) bool {
	if !v.running || !v.r.roster.serves(v.a.OfficeID) {
		return false
	}
	var since time.Time
	var err error
	if t := v.marked; t.Row == row {
		// Marked by the round's read (readDueTyping).
		v.marked = office.Typing{}
		since = v.r.delivery.typed(ctx, v.a, row, t.Event, t.Inserted, v.markedAt)
	} else {
		since, err = v.r.delivery.typing(ctx, v.a, row)
	}
	if err != nil {
		if ctx.Err() == nil {
			v.r.log.Warn("deliver: mark typing; will retry", "agent", v.a.Name, "err", err)
		}
		return false
	}
	return v.sendSince(ctx, text, since)
}

// rowKey names a delivered row in its typing marker.
func rowKey(kind, id string) string { return office.TypingRow(kind, id) }

// quiesce is the graceful stop's part of the delivery: no round starts
// once it is stopping, the Sends not typed yet are withdrawn, and the
// rounds in flight (a text typed and awaiting its acknowledgement, then
// its mark) are waited for.
type quiesce struct {
	mu       sync.Mutex
	stopping bool
	rounds   sync.WaitGroup
	sends    map[*context.CancelFunc]struct{}
}

// begin registers a round; false once stopping.
func (q *quiesce) begin() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopping {
		return false
	}
	q.rounds.Add(1)
	return true
}

func (q *quiesce) end() { q.rounds.Done() }

// send returns a context for one Send that the stop cancels (a Send not
// typed yet then returns; one typed waits for its acknowledgement), and
// its release; ok false once stopping.
func (q *quiesce) send(ctx context.Context) (context.Context, func(), bool) {
	sctx, cancel := context.WithCancel(ctx)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopping {
		cancel()
		return nil, nil, false
	}
	if q.sends == nil {
		q.sends = map[*context.CancelFunc]struct{}{}
	}
	q.sends[&cancel] = struct{}{}
	return sctx, func() {
		q.mu.Lock()
		delete(q.sends, &cancel)
		q.mu.Unlock()
		cancel()
	}, true
}

// stop stops new rounds and typing and waits for the rounds in flight,
// until ctx ends.
func (q *quiesce) stop(ctx context.Context) error {
	q.mu.Lock()
	q.stopping = true
	for c := range q.sends {
		(*c)()
	}
	q.mu.Unlock()
	done := make(chan struct{})
	go func() { q.rounds.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Quiesce ends the delivery for a graceful stop: no new text is typed,
// and what was typed is waited for until its acknowledgement and its
// mark, bounded by ctx. Call it before the sessions are stopped. A text
// still unconfirmed when ctx ends keeps its typing marker, so the next
// server checks the agent's record before typing it again.
func (rt *Router) Quiesce(ctx context.Context) error {
	if err := rt.delivery.quiet.stop(ctx); err != nil {
		return fmt.Errorf("wait for typed texts to be acknowledged: %w", err)
	}
	return nil
}

// Drain waits, for a graceful stop, until the words every agent wrote
// before its session stopped have been acted on: call it after the
// sessions are stopped (their last words, such as a command agent's
// screen, are queued then) and before Run's context ends. A block acted
// on here (a result delivered just before the stop) is not lost with the
// process that printed it; a command agent, which keeps no record, would
// otherwise be given its task again. Bounded by ctx; without Run there is
// nobody to act and it returns at once.
func (rt *Router) Drain(ctx context.Context) error {
	for _, d := range rt.allDesks() {
		d.release(0) // a block held past a turn end ends now (hold.go)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if rt.running() == nil || rt.inboxesEmpty() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("act on the agents' last words: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// inboxesEmpty reports whether every desk's inbox is empty, the chunk
// being handled included (its bytes count until it is).
func (rt *Router) inboxesEmpty() bool {
	for _, d := range rt.allDesks() {
		d.mu.Lock()
		n := d.bytes
		d.mu.Unlock()
		if n > 0 {
			return false
		}
	}
	return true
}
