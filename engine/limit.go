package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/protocol"
)

// Valid blocks amplify too (issue 12, break 5): each is an event row, and
// most a row of their own (a question, an invocation, a result), a notice,
// a change the frontend is sent. So an agent's valid blocks are bounded per
// minute: of those that act (all but progress), the first
// maxBlocksPerMinute of a window; of progress updates (steps, phases), which
// are one small event each, the first maxProgressPerMinute. The rest are
// not acted on: they are counted into one "message.refused.summary" event
// and one notice per window, at turn end or when the window is over. And
// the notices waiting to be typed into an agent are bounded: beyond
// maxQueuedNotices pending (in the store; in memory, those it refused)
// they are counted, and one notice with the count follows the queue.
const (
	maxBlocksPerMinute   = 120
	maxProgressPerMinute = 10000
	blockWindow          = time.Minute
	maxQueuedNotices     = 20
)

// blockTally counts one agent's valid blocks in the current window. It
// belongs to the inbox's reader goroutine.
type blockTally struct {
	since    time.Time
	n        int            // acting blocks in the window, acted on or not
	progress int            // progress updates in the window
	refused  int            // not acted on, not yet told
	kinds    map[string]int // of the refused: kind → count
}

// admit reports whether message m may be acted on: within the window's
// bound. A refused message is counted, not recorded.
func (dp *dispatcher) admit(bt *blockTally, m protocol.Message) bool {
	now := dp.now()
	if bt.n+bt.progress == 0 || now.Sub(bt.since) >= blockWindow {
		bt.since, bt.n, bt.progress = now, 0, 0
	}
	switch m.Kind {
	case protocol.KindStep, protocol.KindStepComplete, protocol.KindPhaseComplete:
		bt.progress++
		if bt.progress <= maxProgressPerMinute {
			return true
		}
	default:
		bt.n++
		if bt.n <= maxBlocksPerMinute {
			return true
		}
	}
	if bt.kinds == nil {
		bt.kinds = map[string]int{}
	}
	bt.refused++
	bt.kinds[string(m.Kind)]++
	return false
}

// flushRefused records and tells the refused blocks, if any, at turn end
// or once the window is over. key names the chunk that flushes (the
// summary's dedupe key).
func (dp *dispatcher) flushRefused(ctx context.Context, k agentKey, bt *blockTally, turnEnd bool, key string) error {
	if bt.refused == 0 || !turnEnd && dp.now().Sub(bt.since) < blockWindow {
		return nil
	}
	refused, kinds := bt.refused, bt.kinds
	bt.refused, bt.kinds = 0, nil
	inserted, err := dp.events.event(ctx, k.officeID, k.agentID, "message.refused.summary",
		map[string]any{"refused": refused, "kinds": kinds, "limit_per_minute": maxBlocksPerMinute, "progress_limit_per_minute": maxProgressPerMinute}, "", key+"#refused")
	if inserted {
		names := make([]string, 0, len(kinds))
		for n, c := range kinds {
			names = append(names, fmt.Sprintf("%s: %d", n, c))
		}
		sort.Strings(names)
		dp.notify(office.Agent{OfficeID: k.officeID, ID: k.agentID}, fmt.Sprintf(
			"%d of your blocks were not acted on (%s): the office acts on at most %d blocks (and %d step or phase updates) per agent per minute. Print again, later, only the ones you meant.",
			refused, strings.Join(names, ", "), maxBlocksPerMinute, maxProgressPerMinute))
	}
	return err
}

// queue adds a notice to d's queue in memory (the notices the store
// refused), or counts it when the queue is full. d.mu is held.
func (p *desk) queue(text string) {
	if len(p.notices) >= maxQueuedNotices {
		p.droppedNotices++
		return
	}
	p.notices = append(p.notices, text)
}

// nextNotice returns the notice in memory to type next. d.mu is held; the
// caller removes it after it was typed.
func (p *desk) nextNotice() (text string, ok bool) {
	if len(p.notices) == 0 {
		return "", false
	}
	return p.notices[0], true
}

// tellDropped queues one notice counting the notices that were dropped,
// once those queued before were typed (deliverStoredNotices). It is not
// bounded: one per round at most, it cannot flood, and a new flood cannot
// drop it.
func (p *desk) tellDropped() {
	p.mu.Lock()
	n := p.droppedNotices
	p.droppedNotices = 0
	p.mu.Unlock()
	if n > 0 {
		p.notifyBounded(fmt.Sprintf("[OFFICE] %d more notices were not typed: too many came at once. Look at what you printed last.", n), 0)
	}
}
