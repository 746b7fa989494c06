package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

// sinceSessions is fakeSessions that can check a record (SendSince): the
// first Send of a text fails as a stop between typing and acknowledgement
// would, and each SendSince's time is kept.
type sinceSessions struct {
	*fakeSessions
	mu     sync.Mutex
	failed map[string]bool
	since  []time.Time
}

func (s *sinceSessions) Send(ctx context.Context, officeID, agentID, text string) error {
	s.mu.Lock()
	first := !s.failed[text]
	s.failed[text] = true
	s.mu.Unlock()
	if first {
		return errors.New("typed, then the agent went away before acknowledging it")
	}
	return s.fakeSessions.Send(ctx, officeID, agentID, text)
}

func (s *sinceSessions) SendSince(ctx context.Context, officeID, agentID, text string, since time.Time) error {
	if since.IsZero() {
		return s.Send(ctx, officeID, agentID, text)
	}
	s.mu.Lock()
	s.since = append(s.since, since)
	s.mu.Unlock()
	return s.fakeSessions.Send(ctx, officeID, agentID, text)
}

// TestTypedAgainSince: a row whose first typing was never acknowledged is
// handed to the session again with the time of that first typing (so the
// agent's record is checked first), a delivery.typing_again event says
// so, and the row is then marked delivered once.
func TestTypedAgainSince(t *testing.T) {
	var ss *sinceSessions
	h := newHarness(t, func(c *Config) {
		ss = &sinceSessions{fakeSessions: c.Sessions.(*fakeSessions), failed: map[string]bool{}}
		c.Sessions = ss
	})
	first := h.clk.Now()
	h.run("DEV")
	ctx := context.Background()
	m, err := h.r.SendUserMessage(ctx, h.office.ID, h.id("DEV"), "", "Ship it.")
	if err != nil {
		t.Fatal(err)
	}
	h.typed("DEV", "Ship it.")
	eventually(t, "the message delivered", func() bool {
		ms, _ := h.st.ListPendingUserMessages(ctx, office.Due{AgentID: h.id("DEV")})
		return len(ms) == 0
	})
	ss.mu.Lock()
	since := append([]time.Time(nil), ss.since...)
	ss.mu.Unlock()
	if len(since) != 1 || !since[0].Equal(first) {
		t.Errorf("SendSince times %v; want one, %v (the first typing)", since, first)
	}
	// The row is marked before its event is appended: wait for the event.
	kinds := map[string]int{}
	eventually(t, "the message.delivered event", func() bool {
		evs, err := h.st.ListEvents(ctx, office.EventFilter{OfficeID: h.office.ID, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		kinds = map[string]int{}
		for _, e := range evs {
			var p typingMark
			_ = json.Unmarshal(e.Payload, &p)
			if p.Row == rowKey("message", m.ID) || strings.Contains(string(e.Payload), m.ID) {
				kinds[e.Kind]++
			}
		}
		return kinds["message.delivered"] > 0
	})
	if kinds[EventTyping] != 1 || kinds[EventTypingAgain] != 1 || kinds["message.delivered"] != 1 {
		t.Errorf("events for the message: %v; want one each of %s, %s, message.delivered", kinds, EventTyping, EventTypingAgain)
	}
}

// TestTakeOfficeSettlesRows: taking an office writes stopped (pid 0) on
// the session rows a dead server left live, and leaves the rows of agents
// running here and of ended sessions alone.
func TestTakeOfficeSettlesRows(t *testing.T) {
	h := newHarness(t, nil, office.Agent{Name: "PO"}, office.Agent{Name: "DEV"}, office.Agent{Name: "QA"})
	ctx := context.Background()
	h.run("DEV")
	for name, st := range map[string]string{"PO": office.SessionBusy, "DEV": office.SessionReady, "QA": office.SessionCrashed} {
		if _, _, _, err := h.st.SetSessionStatus(ctx, office.SessionStatus{OfficeID: h.office.ID, AgentID: h.id(name), Status: st, Process: true, PID: 4242}); err != nil {
			t.Fatal(err)
		}
	}
	h.r.TakeOffice(ctx, h.office.ID, nil, false)
	want := map[string]string{"PO": office.SessionStopped, "DEV": office.SessionReady, "QA": office.SessionCrashed}
	for name, w := range want {
		rec, err := h.st.GetSessionByAgent(ctx, h.id(name))
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != w || (w == office.SessionStopped && rec.PID != 0) {
			t.Errorf("%s's row after the take: %s pid %d; want %s", name, rec.Status, rec.PID, w)
		}
	}
}

// TestNoticeTypedAgainSince: a notice is a row like the others: its first
// typing, never acknowledged, leaves it pending with its typing marker;
// the next typing is handed to the session with the time of the first
// (the agent's record is checked first), and the notice is marked
// delivered once.
func TestNoticeTypedAgainSince(t *testing.T) {
	var ss *sinceSessions
	h := newHarness(t, func(c *Config) {
		ss = &sinceSessions{fakeSessions: c.Sessions.(*fakeSessions), failed: map[string]bool{}}
		c.Sessions = ss
	})
	first := h.clk.Now()
	dev := h.agents["DEV"]
	h.r.notify(dev, "Your request to use Bash was not approved.")
	ctx := context.Background()
	w, err := h.st.ListDue(ctx, h.office.ID, dev.ID)
	if err != nil || len(w.Notices) != 1 {
		t.Fatalf("stored notices %+v, %v; want the one", w.Notices, err)
	}
	id := w.Notices[0].ID
	h.run("DEV")
	h.r.notify(dev, "wake") // a second notice wakes the delivery
	h.typed("DEV", "was not approved")
	eventually(t, "the notices delivered", func() bool {
		w, _ := h.st.ListDue(ctx, h.office.ID, dev.ID)
		return len(w.Notices) == 0
	})
	ss.mu.Lock()
	since := append([]time.Time(nil), ss.since...)
	ss.mu.Unlock()
	if len(since) != 2 || !since[0].Equal(first) {
		t.Errorf("SendSince times %v; want two (one per notice), the first at %v", since, first)
	}
	kinds := map[string]int{}
	for _, e := range allEvents(t, h.st, dev.ID) {
		var p typingMark
		if json.Unmarshal(e.Payload, &p) == nil && p.Row == rowKey("notice", id) {
			kinds[e.Kind]++
		}
	}
	if kinds[EventTyping] != 1 || kinds[EventTypingAgain] != 1 {
		t.Errorf("events for the notice: %v; want one each of %s, %s", kinds, EventTyping, EventTypingAgain)
	}
	ss.fakeSessions.mu.Lock()
	typed := strings.Join(ss.typed[dev.ID], "\n")
	ss.fakeSessions.mu.Unlock()
	if n := strings.Count(typed, "was not approved"); n != 1 {
		t.Errorf("the notice was typed %d times into the agent; want 1", n)
	}
}

// refusingNotices is a store that refuses to store notices (a database
// outage for that write).
type refusingNotices struct {
	office.Store
	refused atomic.Int64
}

func (s *refusingNotices) AddNotices(context.Context, string, string, []string, int) (int, error) {
	s.refused.Add(1)
	return 0, office.Errorf(office.EUNAVAILABLE, "database down")
}

// TestNoticeKeptWhenStoreRefuses: a notice the store refuses waits in
// memory, in order with those after it, and is typed; the refusal is
// logged.
func TestNoticeKeptWhenStoreRefuses(t *testing.T) {
	var st *refusingNotices
	h := newHarness(t, func(c *Config) {
		st = &refusingNotices{Store: c.Store}
		c.Store = st
	})
	dev := h.agents["DEV"]
	h.r.notify(dev, "first")
	h.r.notify(dev, "second")
	h.r.notify(dev, "third")
	h.run("DEV") // the delivery's retry types them
	for _, want := range []string{"first", "second", "third"} {
		h.typed("DEV", want)
	}
	if n := st.refused.Load(); n != 1 {
		t.Errorf("AddNotices called %d times; want 1 (the notices after a refused one wait in memory behind it)", n)
	}
	h.logMu.Lock()
	logs := h.logs.String()
	h.logMu.Unlock()
	if !strings.Contains(logs, "store a notice; it waits in memory") {
		t.Errorf("the refusal was not logged:\n%s", logs)
	}
}

// TestDrainActsOnLastWords: a graceful stop calls Drain after the sessions
// stopped, before Run's context ends; when it returns, every block the
// agents wrote has been acted on (here 40 questions, one store write
// each), so nothing a command agent printed just before the stop is lost
// with its process.
func TestDrainActsOnLastWords(t *testing.T) {
	h := newHarness(t, nil)
	eventually(t, "Run", func() bool { return h.r.running() != nil })
	const n = 40
	for i := range n {
		h.say("DEV", fmt.Sprintf("[ASK_USER]\nquestion: Q%d?\n[/ASK_USER]", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(h.questions()); got != n {
		t.Errorf("%d questions recorded when Drain returned, want %d", got, n)
	}
}
