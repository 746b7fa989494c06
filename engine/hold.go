package engine

import (
	"context"
	"time"

	"github.com/office-server/office-server/session"
)

// heldBlockFor is how long a block still open when a turn ends on the
// screen is kept open for the rest of it.
//
// A turn read off the screen (a command agent) ends on a guess: the
// screen was still for the quiescence period, with the prompt shown. A
// model that pauses within a block (a slow stream, a loaded machine) ends
// such a turn in the middle of the block, and ending the block there
// would decode what came so far ("[ASK_USER]" and no question: an
// invalid block) and take the rest for prose. So the open block is kept:
// the next lines go on with it, until its closing tag (or whatever else
// ends a block) or, if nothing ends it, until this long after the turn
// end, when it ends as an unclosed block does at a turn's end. Meanwhile
// nothing is typed into the agent, whose turn may go on. A turn
// read from a record (Claude Code, Codex, Gemini CLI, Qwen Code) ends for
// certain and ends its block at once.
const heldBlockFor = 5 * time.Second

// heldBlock is a desk's open block kept past a screen turn end: gen names
// the hold (0: none), id the chunk whose turn end it is. Guarded by
// desk.mu.
type heldBlock struct {
	gen, last uint64
	id        string
}

// holdOpenBlock reports whether t's turn end leaves the parser's open
// block open (heldBlockFor), once t's lines are fed; then it arms the
// hold's end. Any text ends the previous hold: its lines went on with the
// block, and a turn end after them holds again. Called by the intake
// goroutine.
func (d *desk) holdOpenBlock(t session.Text) bool {
	d.mu.Lock()
	was := d.held.gen != 0
	d.held.gen = 0
	hold := t.TurnEnd && t.Source == session.FromScreen && d.parser.InBlock()
	if hold {
		d.held.last++
		d.held.gen, d.held.id = d.held.last, t.ID
		gen := d.held.gen
		time.AfterFunc(heldBlockFor, func() { d.release(gen) })
	}
	d.mu.Unlock()
	if was && !hold {
		d.r.kick(d.key) // what waited for the hold's end (holding)
	}
	return hold
}

// holding reports whether a block is held open: the agent's turn may not
// have ended, and nothing is typed into it until the hold ends (what
// ends it kicks delivery).
func (d *desk) holding() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.held.gen != 0
}

// release queues the end of hold gen (0: whichever hold there is), if it
// still holds: the block ends in order with the agent's text. The agent's
// process ended or starts again (nothing more of the block can come), the
// server drains, or the hold ran out.
func (d *desk) release(gen uint64) {
	d.mu.Lock()
	if d.held.gen == 0 || gen != 0 && gen != d.held.gen {
		d.mu.Unlock()
		return
	}
	d.items = append(d.items, inboxItem{release: d.held.gen, size: lostItemSize})
	d.bytes += lostItemSize
	d.mu.Unlock()
	d.startIntake()
	wake(d.intakeWake)
}

// endHeld ends the held block gen, if no text came since: it is acted on
// as the turn end it was held past.
func (d *desk) endHeld(ctx context.Context, gen uint64) {
	d.mu.Lock()
	still := d.held.gen == gen
	id := d.held.id
	if still {
		d.held.gen = 0
	}
	d.mu.Unlock()
	if still {
		d.parseText(ctx, session.Text{ID: id + "/held", Source: session.FromScreen, TurnEnd: true}, true)
		d.r.kick(d.key)
	}
}
