package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/office-server/office-server/office"
)

// testNotices: AddNotices stores notices in order under the bound of
// pending notices per agent; ListDue returns an agent's pending ones
// (and no one else's) oldest first; ListDueTyping marks the first notice
// before any other row; MarkDelivered marks a notice once, only the
// agent's own, with no event, and a marked notice frees its room.
func testNotices(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	add := func(a office.Agent, limit int, texts ...string) int {
		t.Helper()
		n, err := s.AddNotices(ctx, fx.office.ID, a.ID, texts, limit)
		if err != nil {
			t.Fatalf("AddNotices(%q): %v", texts, err)
		}
		return n
	}
	if n := add(fx.a, 5, "one", "two", "three"); n != 3 {
		t.Fatalf("AddNotices of 3 under 5 added %d", n)
	}
	if n := add(fx.a, 5, "four", "five", "six", "seven"); n != 2 {
		t.Fatalf("AddNotices of 4 with room for 2 added %d", n)
	}
	if n := add(fx.a, 5, "eight"); n != 0 {
		t.Fatalf("AddNotices over the bound added %d", n)
	}
	if n := add(fx.a, 0, "unbounded"); n != 1 {
		t.Fatalf("AddNotices without a bound added %d", n)
	}
	if n := add(fx.b, 5, "for b"); n != 1 {
		t.Fatalf("AddNotices for another agent added %d", n)
	}
	w := fx.notices(t, fx.a, "one", "two", "three", "four", "five", "unbounded")
	for _, n := range w.Notices {
		if n.ID == "" || n.OfficeID != fx.office.ID || n.AgentID != fx.a.ID || n.Status != office.NoticePending || n.DeliveredAt != nil {
			t.Errorf("ListDue notice = %+v; want a pending notice of %s", n, fx.a.ID)
		}
		fx.near(t, "notice created_at", n.CreatedAt, now())
	}
	noticesRefused(t, fx)
	noticesTyped(t, fx, w.Notices)
}

// notices checks that ListDue returns a's pending notices as want, in
// order.
func (fx *fixture) notices(t *testing.T, a office.Agent, want ...string) office.DueWork {
	t.Helper()
	w, err := fx.s.ListDue(fx.ctx, fx.office.ID, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range w.Notices {
		got = append(got, n.Text)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ListDue notices of %s = %q; want %q", a.Name, got, want)
	}
	return w
}

// noticesRefused: an agent not of the office, and an empty text, are
// refused; nothing is stored.
func noticesRefused(t *testing.T, fx *fixture) {
	s, ctx := fx.s, fx.ctx
	other := fx.mkOffice(t, "other notices")
	stranger := fx.mkAgent(t, other.ID, "Stranger")
	for what, agentID := range map[string]string{"an unknown agent": uuid.NewString(), "another office's agent": stranger.ID} {
		if _, err := s.AddNotices(ctx, fx.office.ID, agentID, []string{"x"}, 5); office.ErrorCode(err) != office.EINVALID {
			t.Errorf("AddNotices for %s: %v; want %s", what, err, office.EINVALID)
		}
	}
	if _, err := s.AddNotices(ctx, fx.office.ID, fx.b.ID, []string{"ok", ""}, 5); office.ErrorCode(err) != office.EINVALID {
		t.Errorf("AddNotices of an empty text: %v; want %s", err, office.EINVALID)
	}
	fx.notices(t, fx.b, "for b")
	if w, err := s.ListDue(ctx, other.ID, stranger.ID); err != nil || len(w.Notices) != 0 {
		t.Errorf("ListDue of the stranger = %d notices, %v; want none", len(w.Notices), err)
	}
}

// noticesTyped: the first notice is typed first (its marker before a
// dependency's round or an answer), and MarkDelivered marks each once.
func noticesTyped(t *testing.T, fx *fixture, ns []office.Notice) {
	s, ctx := fx.s, fx.ctx
	fx.answered(t)
	d := fx.dependency(t)
	if _, ok, err := s.RejectDependency(ctx, d.ID, "no"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	tr := &typingReads{t: t, fx: fx, at: now().Add(-time.Minute), firstAt: map[string]time.Time{}}
	tr.read("notices, a dependency and an answer", office.TypingRow("notice", ns[0].ID), true)
	var before int
	if evs, err := s.ListEvents(ctx, office.EventFilter{OfficeID: fx.office.ID, Limit: 1000}); err == nil {
		before = len(evs)
	}
	mark := func(agentID, id string) (time.Time, office.Event, bool) {
		t.Helper()
		at, ev, ok, err := s.MarkDelivered(ctx, office.Delivered{OfficeID: fx.office.ID, AgentID: agentID, Kind: office.DeliveredNotice, ID: id})
		if err != nil {
			t.Fatalf("MarkDelivered(notice %s): %v", id, err)
		}
		return at, ev, ok
	}
	if _, _, ok := mark(fx.b.ID, ns[0].ID); ok {
		t.Error("MarkDelivered of another agent's notice: ok")
	}
	at, ev, ok := mark(fx.a.ID, ns[0].ID)
	if !ok || ev.ID != 0 {
		t.Fatalf("MarkDelivered(notice) = ok %v, event %+v; want ok and no event", ok, ev)
	}
	fx.near(t, "notice delivered_at", at, now())
	if _, _, ok := mark(fx.a.ID, ns[0].ID); ok {
		t.Error("MarkDelivered of a delivered notice: ok again")
	}
	if evs, err := s.ListEvents(ctx, office.EventFilter{OfficeID: fx.office.ID, Limit: 1000}); err != nil || len(evs) != before {
		t.Errorf("MarkDelivered(notice) appended %d events (%v); want none", len(evs)-before, err)
	}
	fx.notices(t, fx.a, "two", "three", "four", "five", "unbounded")
	tr.read("the next notice", office.TypingRow("notice", ns[1].ID), true)
	// A delivered notice frees its room: 5 pending of 6 allowed.
	if n, err := s.AddNotices(ctx, fx.office.ID, fx.a.ID, []string{"six", "seven"}, 6); err != nil || n != 1 {
		t.Errorf("AddNotices after a delivery added %d (%v); want 1", n, err)
	}
}

// testRaceAddNotices: writers racing past the bound store exactly the
// bound, no more.
func testRaceAddNotices(t *testing.T, fx *fixture) {
	const writers, each, limit = 10, 3, 20
	var wg sync.WaitGroup
	added := make([]int, writers)
	errs := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			texts := []string{fmt.Sprintf("w%d-a", i), fmt.Sprintf("w%d-b", i), fmt.Sprintf("w%d-c", i)}
			added[i], errs[i] = fx.s.AddNotices(fx.ctx, fx.office.ID, fx.a.ID, texts[:each], limit)
		}()
	}
	wg.Wait()
	total := 0
	for i := range writers {
		if errs[i] != nil {
			t.Fatalf("AddNotices writer %d: %v", i, errs[i])
		}
		total += added[i]
	}
	w, err := fx.s.ListDue(fx.ctx, fx.office.ID, fx.a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if total != limit || len(w.Notices) != limit {
		t.Errorf("racing AddNotices added %d, %d pending; want %d", total, len(w.Notices), limit)
	}
}
