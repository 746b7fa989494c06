package engine

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/office-server/office-server/office"

	"github.com/office-server/office-server/protocol"
)

// Invalid blocks are bounded per agent and window (a turn, or a minute when a
// turn runs longer): the first maxInvalidEvents are recorded one event each,
// with their text; the rest are counted into one "message.invalid.summary"
// event; and the agent gets one notice per window with the counts, however
// many blocks failed. So 1 MB of "[ASK_USER]" lines costs a few rows and one
// notice, not one of each per line, and the agent is still told what was
// wrong (docs/notes/engine.md).
const (
	maxInvalidEvents  = 10
	maxInvalidReasons = 3
	invalidWindow     = time.Minute
)

// invalidTally counts one window's invalid blocks. It belongs to the
// inbox's reader goroutine.
type invalidTally struct {
	n          int            // invalid blocks in the window
	unrecorded int            // of which not recorded one by one
	kinds      map[string]int // what each tried to be → count
	first      string         // what the first block tried to be
	reasons    []string       // the first few distinct reasons
	fresh      bool           // an event of the window was new (not a replay)
	since      time.Time      // the window's first invalid block
}

// onInvalid records an invalid block within the window's bounds.
func (dp *dispatcher) onInvalid(ctx context.Context, src source, tl *invalidTally, m protocol.Message) error {
	what, why := "a block", "it could not be read"
	if m.Invalid != nil {
		what, why = string(m.Invalid.Kind), m.Invalid.Reason
	}
	if tl.n == 0 {
		tl.since, tl.first = dp.now(), what
		tl.kinds = map[string]int{}
	}
	tl.n++
	tl.kinds[what]++
	if len(tl.reasons) < maxInvalidReasons && !slices.Contains(tl.reasons, why) {
		tl.reasons = append(tl.reasons, why)
	}
	if tl.n > maxInvalidEvents {
		tl.unrecorded++
		return nil
	}
	inserted, err := dp.events.event(ctx, src.officeID, src.agentID, "message.invalid", m, m.Raw, src.key)
	if inserted {
		tl.fresh = true
	}
	return err
}

// flushInvalid closes the window if it holds anything and the turn ended
// or the window is over a minute old: the blocks not recorded one by one
// become one event, and the agent gets one notice. key names the chunk
// that closes the window (the summary's dedupe key).
func (dp *dispatcher) flushInvalid(ctx context.Context, k agentKey, tl *invalidTally, turnEnd bool, key string) error {
	if tl.n == 0 || !turnEnd && dp.now().Sub(tl.since) < invalidWindow {
		return nil
	}
	w := *tl
	*tl = invalidTally{}
	var err error
	if w.unrecorded > 0 {
		var inserted bool
		inserted, err = dp.events.event(ctx, k.officeID, k.agentID, "message.invalid.summary",
			map[string]any{"invalid": w.n, "not_recorded_one_by_one": w.unrecorded, "kinds": w.kinds}, "", key+"#invalid")
		w.fresh = w.fresh || inserted
	}
	if w.fresh {
		dp.notify(office.Agent{OfficeID: k.officeID, ID: k.agentID}, invalidNotice(w))
	}
	return err
}

// invalidNotice tells an agent what it printed that was not accepted.
func invalidNotice(w invalidTally) string {
	if w.n == 1 {
		return fmt.Sprintf("Your %s block was not accepted: %s\nFix it and print it again.", w.first, w.reasons[0])
	}
	kinds := make([]string, 0, len(w.kinds))
	for k := range w.kinds {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for i, k := range kinds {
		kinds[i] = fmt.Sprintf("%s: %d", k, w.kinds[k])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of your blocks were not accepted (%s). Why:", w.n, strings.Join(kinds, ", "))
	for _, r := range w.reasons {
		b.WriteString("\n- " + r)
	}
	b.WriteString("\nFix them and print again only the ones you meant.")
	return b.String()
}
