package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
)

// screenSay feeds what a command agent showed, read off its screen, as one
// chunk ending a turn (a guess: the screen was still).
func (h *harness) screenSay(name, text string) {
	h.r.HandleText(session.Text{Key: session.Key{OfficeID: h.office.ID, AgentID: h.id(name)}, ID: fmt.Sprintf("screen:%d", h.seq.Add(1)),
		Source: session.FromScreen, Lines: strings.Split(text, "\n"), TurnEnd: true})
}

// TestScreenTurnEndHoldsOpenBlock: a turn read off the screen that ends
// within a block (the model paused after the tag line) leaves the block
// open for the rest of it: one question, no invalid block. Without the
// hold the tag line alone was an invalid ASK_USER and the question prose.
// Meanwhile nothing is typed into the agent: a person's message waits for
// the rest.
func TestScreenTurnEndHoldsOpenBlock(t *testing.T) {
	h := newHarness(t, nil)
	h.run("PO")
	h.screenSay("PO", "생각해 보니.\n[ASK_USER]")
	eventually(t, "the hold", func() bool { return h.r.desk(agentKey{h.office.ID, h.id("PO")}).holding() })
	if _, err := h.r.SendUserMessage(context.Background(), h.office.ID, h.id("PO"), "", "while it pauses"); err != nil {
		t.Fatal(err)
	}
	h.quiet("PO", 500*time.Millisecond)
	h.screenSay("PO", "질문: 계속할까요?\n타입: confirmation\n[/ASK_USER]\n끝.")
	h.typed("PO", "while it pauses")
	eventually(t, "the question", func() bool { return len(h.questions()) == 1 })
	if q := h.questions()[0]; q.Question != "계속할까요?" || q.QuestionType != "confirmation" {
		t.Errorf("question %q of type %q, want 계속할까요? (confirmation)", q.Question, q.QuestionType)
	}
	if n := h.eventKinds()["message.invalid"]; n != 0 {
		t.Errorf("%d invalid blocks recorded, want 0:\n%s", n, h.logText())
	}
}

// TestHeldBlockEnds: a block the agent left unclosed at the end of its
// turn is acted on as an unclosed block is at a turn end, once the hold
// runs out (heldBlockFor) or at once when the agent's process ends.
func TestHeldBlockEnds(t *testing.T) {
	h := newHarness(t, nil)
	h.run("PO")
	h.run("DEV")
	said := time.Now()
	h.screenSay("PO", "[ASK_USER]\nquestion: Which colour?")
	deadline := said.Add(heldBlockFor + 3*time.Second)
	for len(h.questions()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if len(h.questions()) != 1 {
		t.Fatalf("%d questions %v after an unclosed block, want 1 once the hold ran out", len(h.questions()), time.Since(said))
	}
	t.Logf("unclosed block acted on %v after the turn end (hold %v)", time.Since(said).Round(time.Millisecond), heldBlockFor)

	h.screenSay("DEV", "[ASK_USER]\nquestion: Which size?")
	time.Sleep(100 * time.Millisecond)
	h.r.HandleStatus(session.Key{OfficeID: h.office.ID, AgentID: h.id("DEV")}, office.SessionCrashed, session.Info{ExitCode: 1})
	eventually(t, "the crashed agent's held question", func() bool { return len(h.questions()) == 2 })
}
