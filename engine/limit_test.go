package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestValidBlockFloodBounded (issue 12, break 5 with valid blocks): 500
// valid questions in one turn are acted on up to the per-minute bound; the
// rest make one summary event and one notice with the count; so do step
// updates beyond theirs. In the next window, blocks are acted on again.
func TestValidBlockFloodBounded(t *testing.T) {
	h := newHarness(t, nil)
	h.run("DEV")
	var b strings.Builder
	for i := 1; i <= 500; i++ {
		fmt.Fprintf(&b, "[ASK_USER]\nquestion: q%d?\n[/ASK_USER]\n", i)
	}
	for i := 1; i <= maxProgressPerMinute+50; i++ {
		fmt.Fprintf(&b, "Step 1/2: part %d\n", i)
	}
	h.say("DEV", b.String())
	// 10 000 messages take a few seconds under the race detector.
	deadline := time.Now().Add(60 * time.Second)
	for !h.ss.wasTyped(h.id("DEV"), "not acted on") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := h.typed("DEV", "not acted on")
	if !strings.Contains(got, "430 of your blocks were not acted on (ASK_USER: 380, STEP: 50)") {
		t.Errorf("notice: %q", got)
	}
	count := func(kind string) int {
		n := 0
		for _, k := range eventKinds(t, h.st) {
			if k == kind {
				n++
			}
		}
		return n
	}
	eventually(t, "the questions acted on", func() bool { return len(h.questions()) == maxBlocksPerMinute })
	if asks, steps, sums := count("message.ask_user"), count("message.step"), count("message.refused.summary"); asks != maxBlocksPerMinute || steps != maxProgressPerMinute || sums != 1 {
		t.Errorf("%d question events, %d step events, %d summaries; want %d, %d, 1", asks, steps, sums, maxBlocksPerMinute, maxProgressPerMinute)
	}
	h.clk.Add(blockWindow)
	h.say("DEV", "Step 1/2: again")
	eventually(t, "a step in the next window", func() bool { return count("message.step") == maxProgressPerMinute+1 })
}

// TestNoticeQueueBounded: notices for an agent that cannot take them yet
// are queued up to maxQueuedNotices; the rest are counted and told in one
// notice after the queue.
func TestNoticeQueueBounded(t *testing.T) {
	h := newHarness(t, nil)
	dev := h.agents["DEV"]
	for i := 0; i < 100; i++ {
		h.r.notify(dev, fmt.Sprintf("notice %d", i))
	}
	h.run("DEV")
	h.r.notify(dev, "notice 100") // wakes the pump
	got := h.typed("DEV", "more notices were not typed")
	if !strings.Contains(got, "81 more notices") {
		t.Errorf("count notice %q", got)
	}
	h.ss.mu.Lock()
	n := len(h.ss.typed[dev.ID])
	h.ss.mu.Unlock()
	if n != maxQueuedNotices+1 {
		t.Errorf("%d texts typed, want %d notices and the count", n, maxQueuedNotices)
	}
}

// wasTyped reports whether a text containing want was typed into agent id.
func (s *fakeSessions) wasTyped(id, want string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.typed[id] {
		if strings.Contains(t, want) {
			return true
		}
	}
	return false
}
