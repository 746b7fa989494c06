package engine

import (
	"context"
	"github.com/office-server/office-server/session"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

// sleepySessions is fakeSessions that reports statuses as the session
// layer does (starting and ready on a start, stopped before Stop returns)
// and is an Idler: a running agent is idle from its last start or typing.
// Stop waits for gate when set.
type sleepySessions struct {
	*fakeSessions
	r        *Router
	officeID string

	mu       sync.Mutex
	since    map[string]time.Time
	fresh    map[string]int // starts that made a process
	live     int
	maxLive  int
	gate     chan struct{} // Stop waits for it when set
	stopping chan string   // told of each Stop, when set
}

func newSleepy() *sleepySessions {
	return &sleepySessions{fakeSessions: newFakeSessions(), since: map[string]time.Time{}, fresh: map[string]int{}}
}

func (s *sleepySessions) Start(ctx context.Context, spec SessionSpec) error {
	if s.fakeSessions.Running(spec.OfficeID, spec.AgentID) {
		return nil // a live session is left alone (agents.Sessions.Start)
	}
	if err := s.fakeSessions.Start(ctx, spec); err != nil {
		return err
	}
	s.mu.Lock()
	s.since[spec.AgentID] = time.Now()
	s.fresh[spec.AgentID]++
	s.live++
	s.maxLive = max(s.maxLive, s.live)
	s.mu.Unlock()
	s.r.HandleStatus(session.Key{OfficeID: spec.OfficeID, AgentID: spec.AgentID}, office.SessionStarting, session.Info{PID: 10, Resumes: true, Resumed: spec.Resume})
	s.r.HandleStatus(session.Key{OfficeID: spec.OfficeID, AgentID: spec.AgentID}, office.SessionReady, session.Info{PID: 10, Resumes: true, Resumed: spec.Resume})
	return nil
}

func (s *sleepySessions) Stop(ctx context.Context, officeID, agentID string) error {
	s.mu.Lock()
	gate, told := s.gate, s.stopping
	s.mu.Unlock()
	if told != nil {
		told <- agentID
	}
	if gate != nil {
		<-gate
	}
	if s.fakeSessions.Running(officeID, agentID) {
		s.mu.Lock()
		s.live--
		s.mu.Unlock()
	}
	s.r.HandleStatus(session.Key{OfficeID: officeID, AgentID: agentID}, office.SessionStopped, session.Info{})
	return s.fakeSessions.Stop(ctx, officeID, agentID)
}

func (s *sleepySessions) Send(ctx context.Context, officeID, agentID, text string) error {
	if err := s.fakeSessions.Send(ctx, officeID, agentID, text); err != nil {
		return err
	}
	s.mu.Lock()
	s.since[agentID] = time.Now()
	s.mu.Unlock()
	return nil
}

func (s *sleepySessions) IdleSince(officeID, agentID string) (time.Time, bool) {
	if !s.fakeSessions.Running(officeID, agentID) {
		return time.Time{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.since[agentID], true
}

func (s *sleepySessions) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live
}

func (s *sleepySessions) starts(agentID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fresh[agentID]
}

func (s *sleepySessions) typedTo(agentID, sub string) int {
	s.fakeSessions.mu.Lock()
	defer s.fakeSessions.mu.Unlock()
	n := 0
	for _, x := range s.fakeSessions.typed[agentID] {
		if strings.Contains(x, sub) {
			n++
		}
	}
	return n
}

// sleepyOffice runs a router over the embedded store and sleepySessions
// with the agents given, and returns them as stored.
func sleepyOffice(t *testing.T, maxLive int, agents ...office.Agent) (*Router, *sleepySessions, []office.Agent) {
	t.Helper()
	st, ss := newTestStore(t), newSleepy()
	r, err := New(Config{Store: st, Sessions: ss, DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), Tick: 20 * time.Millisecond, MaxLive: maxLive})
	if err != nil {
		t.Fatal(err)
	}
	ss.r = r
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	off, as, err := r.SyncOffice(context.Background(), OfficeConfig{Office: office.Office{Name: "sleepy"}, Agents: agents})
	if err != nil {
		t.Fatal(err)
	}
	ss.officeID = off.ID
	return r, ss, as
}

func sessionStatus(t *testing.T, r *Router, agentID string) office.SessionRecord {
	t.Helper()
	rec, _ := r.store.GetSessionByAgent(context.Background(), agentID)
	return rec
}

func sleeper(name string, after time.Duration) office.Agent {
	return office.Agent{Name: name, Launch: office.LaunchSpec{HibernateAfter: after}}
}

// Work that arrives while the agent is being put to sleep (after the
// last look at what is due, before its process is gone) wakes it again
// at once, and is typed once.
func TestHibernateWorkWhileGoingToSleep(t *testing.T) {
	r, ss, as := sleepyOffice(t, 0, sleeper("po", 100*time.Millisecond))
	po := as[0]
	ss.mu.Lock()
	ss.gate, ss.stopping = make(chan struct{}), make(chan string, 1)
	gate, stopping := ss.gate, ss.stopping
	ss.mu.Unlock()
	ctx := context.Background()
	if err := r.StartAgent(ctx, po.ID); err != nil {
		t.Fatal(err)
	}
	<-stopping // idle for 100ms: being put to sleep
	if _, err := r.SendUserMessage(ctx, ss.officeID, po.ID, "", "while it falls asleep"); err != nil {
		t.Fatal(err)
	}
	ss.mu.Lock()
	ss.gate, ss.stopping = nil, nil
	ss.mu.Unlock()
	close(gate)
	eventually(t, "the message typed after the wake", func() bool { return ss.typedTo(po.ID, "while it falls asleep") == 1 })
	if n := ss.starts(po.ID); n != 2 {
		t.Errorf("po started %d times, want 2 (the start, the wake)", n)
	}
	eventually(t, "asleep again", func() bool { return sessionStatus(t, r, po.ID).Status == office.SessionHibernated })
	if n := ss.typedTo(po.ID, "while it falls asleep"); n != 1 {
		t.Errorf("the message was typed %d times, want 1", n)
	}
}

// Two wake-ups at once (two messages, an operator's start) start the
// agent once; each message is typed once.
func TestHibernateTwoWakesAtOnce(t *testing.T) {
	r, ss, as := sleepyOffice(t, 0, sleeper("po", 50*time.Millisecond))
	po := as[0]
	ctx := context.Background()
	if err := r.StartAgent(ctx, po.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "hibernated", func() bool { return sessionStatus(t, r, po.ID).Status == office.SessionHibernated })
	// Keep it awake once woken, so that the counts are of one wake.
	r.hib.mu.Lock()
	r.hib.watch = map[agentKey]watched{}
	r.hib.mu.Unlock()
	ss.mu.Lock()
	ss.gate = make(chan struct{}) // no further sleep completes
	ss.mu.Unlock()
	var wg sync.WaitGroup
	for _, text := range []string{"first wake-up", "second wake-up"} {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := r.SendUserMessage(ctx, ss.officeID, po.ID, "", text); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := r.StartAgent(ctx, po.ID); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	eventually(t, "both messages typed", func() bool {
		return ss.typedTo(po.ID, "first wake-up") == 1 && ss.typedTo(po.ID, "second wake-up") == 1
	})
	if n := ss.starts(po.ID); n != 2 {
		t.Errorf("po started %d times, want 2 (the first start, one wake)", n)
	}
	close(ss.gate)
}

// A wake-up while the server stops (after Quiesce) starts nothing: the
// row stays hibernated and the message waits in the store for the next
// server.
func TestHibernateWakeWhileServerStops(t *testing.T) {
	r, ss, as := sleepyOffice(t, 0, sleeper("po", 50*time.Millisecond))
	po := as[0]
	ctx := context.Background()
	if err := r.StartAgent(ctx, po.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "hibernated", func() bool { return sessionStatus(t, r, po.ID).Status == office.SessionHibernated })
	if err := r.Quiesce(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := r.SendUserMessage(ctx, ss.officeID, po.ID, "", "during the stop")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := ss.starts(po.ID); n != 1 {
		t.Errorf("po started %d times during the stop, want 1 (before it)", n)
	}
	if rec := sessionStatus(t, r, po.ID); rec.Status != office.SessionHibernated {
		t.Errorf("row %s after a wake-up during the stop, want hibernated", rec.Status)
	}
	due, err := r.store.ListDue(ctx, ss.officeID, po.ID)
	if err != nil || len(due.Messages) != 1 || due.Messages[0].ID != m.ID {
		t.Errorf("the message is not waiting for the next server: %+v %v", due.Messages, err)
	}
}

// With MaxLive 1, a wake-up of a second agent waits in line (its row
// says why) while the live idle agent hibernates; never two live at once;
// the message is typed once. An agent beyond the cap at autostart is
// left hibernated.
func TestMaxLive(t *testing.T) {
	r, ss, as := sleepyOffice(t, 1, sleeper("po", 0), sleeper("dev", 0))
	po, dev := as[0], as[1]
	ctx := context.Background()
	r.TakeOffice(ctx, ss.officeID, as, true)
	eventually(t, "po live, dev hibernated", func() bool {
		return ss.Running(ss.officeID, po.ID) && sessionStatus(t, r, dev.ID).Status == office.SessionHibernated
	})
	if d := sessionStatus(t, r, dev.ID).Detail; !strings.Contains(d, "max_live 1") {
		t.Errorf("dev's row says %q, want why it was not started", d)
	}
	if _, err := r.SendUserMessage(ctx, ss.officeID, dev.ID, "", "for dev"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the message typed into dev", func() bool { return ss.typedTo(dev.ID, "for dev") == 1 })
	if rec := sessionStatus(t, r, po.ID); rec.Status != office.SessionHibernated || !strings.Contains(rec.Detail, "make room") {
		t.Errorf("po's row: %s %q, want hibernated to make room", rec.Status, rec.Detail)
	}
	waited := false
	for _, e := range allEvents(t, r.store.(office.Events), dev.ID) {
		if e.Kind == "session.hibernated" && strings.Contains(string(e.Payload), "waiting to wake") {
			waited = true
		}
	}
	if !waited {
		t.Error("no event says why dev's wake-up waited")
	}
	ss.mu.Lock()
	most := ss.maxLive
	ss.mu.Unlock()
	if most != 1 {
		t.Errorf("%d agents were live at once, want at most 1", most)
	}
}

// An operator's stop of a hibernated agent makes it stopped: work for it
// then waits for a start.
func TestHibernatedStoppedOnRequest(t *testing.T) {
	r, ss, as := sleepyOffice(t, 0, sleeper("po", 50*time.Millisecond))
	po := as[0]
	ctx := context.Background()
	if err := r.StartAgent(ctx, po.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "hibernated", func() bool { return sessionStatus(t, r, po.ID).Status == office.SessionHibernated })
	if err := r.StopAgent(ctx, po.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "stopped", func() bool { return sessionStatus(t, r, po.ID).Status == office.SessionStopped })
	if _, err := r.SendUserMessage(ctx, ss.officeID, po.ID, "", "after the stop"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := ss.starts(po.ID); n != 1 {
		t.Errorf("po started %d times, want 1: a stopped agent is not woken", n)
	}
}

// A task and a result wake their hibernated receivers, each typed once.
func TestHibernateWakesForTaskAndResult(t *testing.T) {
	r, ss, as := sleepyOffice(t, 0, sleeper("caller", 100*time.Millisecond), sleeper("po", 100*time.Millisecond))
	caller, po := as[0], as[1]
	ctx := context.Background()
	for _, a := range as {
		if err := r.StartAgent(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
	}
	asleep := func(a office.Agent) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for sessionStatus(t, r, a.ID).Status != office.SessionHibernated {
			if time.Now().After(deadline) {
				t.Fatalf("%s never hibernated: %+v", a.Name, sessionStatus(t, r, a.ID))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	asleep(caller)
	asleep(po)
	if _, err := r.SendUserMessage(ctx, ss.officeID, caller.ID, "", "give po a task"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the message typed into caller", func() bool { return ss.typedTo(caller.ID, "give po a task") == 1 })
	r.HandleText(session.Text{Key: session.Key{OfficeID: ss.officeID, AgentID: caller.ID}, ID: "c-1", TurnEnd: true,
		Lines: []string{"[INVOKE:po]", "Write the release notes.", "[/INVOKE:po]"}})
	eventually(t, "the task typed into po", func() bool { return ss.typedTo(po.ID, "Write the release notes.") == 1 })
	asleep(caller)
	r.HandleText(session.Text{Key: session.Key{OfficeID: ss.officeID, AgentID: po.ID}, ID: "p-1", TurnEnd: true,
		Lines: []string{"[DELIVER_RESULT:caller]", "type: markdown", "content: Release notes written.", "[/DELIVER_RESULT:caller]"}})
	eventually(t, "the result typed into caller", func() bool { return ss.typedTo(caller.ID, "Release notes written.") == 1 })
	asleep(po)
	asleep(caller)
	if n, m := ss.typedTo(po.ID, "Write the release notes."), ss.typedTo(caller.ID, "Release notes written."); n != 1 || m != 1 {
		t.Errorf("the task was typed %d times and the result %d times, want 1 and 1", n, m)
	}
	if n := ss.starts(caller.ID); n != 3 {
		t.Errorf("caller started %d times, want 3 (start, message, result)", n)
	}
}

// Under a cap of 3 the server keeps one slot free: an agent idle past
// minSpareIdle is put to sleep ahead of demand, so a wake-up starts at
// once instead of waiting in line for another agent's stop.
func TestMaxLiveKeepsASpareSlot(t *testing.T) {
	r, ss, as := sleepyOffice(t, 3, sleeper("a", 0), sleeper("b", 0), sleeper("c", 0), sleeper("d", 0))
	d := as[3]
	ctx := context.Background()
	r.TakeOffice(ctx, ss.officeID, as, true)
	deadline := time.Now().Add(minSpareIdle + 2*maxHibernateCheck + 5*time.Second)
	spared := ""
	for spared == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no agent was put to sleep to keep a slot free; live %d", ss.Live())
		}
		for _, a := range as[:3] {
			if rec := sessionStatus(t, r, a.ID); rec.Status == office.SessionHibernated && strings.Contains(rec.Detail, "keep a live slot free") {
				spared = a.Name
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := ss.Live(); n != 2 {
		t.Errorf("%d agents live after %s was put to sleep ahead of demand, want 2", n, spared)
	}
	if _, err := r.SendUserMessage(ctx, ss.officeID, d.ID, "", "for d"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the message typed into d", func() bool { return ss.typedTo(d.ID, "for d") == 1 })
	for _, e := range allEvents(t, r.store.(office.Events), d.ID) {
		if strings.Contains(string(e.Payload), "waiting to wake") {
			t.Errorf("d's wake-up waited in line with a spare slot kept: %s", e.Payload)
		}
	}
	ss.mu.Lock()
	most := ss.maxLive
	ss.mu.Unlock()
	if most > 3 {
		t.Errorf("%d agents were live at once, want at most 3", most)
	}
}

// An operator's start of a hibernated agent under a full cap makes room
// as a wake-up does: the least recently used idle agent sleeps first.
func TestStartAgentRespectsMaxLive(t *testing.T) {
	r, ss, as := sleepyOffice(t, 1, sleeper("po", 0), sleeper("dev", 0))
	po, dev := as[0], as[1]
	ctx := context.Background()
	r.TakeOffice(ctx, ss.officeID, as, true)
	eventually(t, "po live, dev hibernated", func() bool {
		return ss.Running(ss.officeID, po.ID) && sessionStatus(t, r, dev.ID).Status == office.SessionHibernated
	})
	if err := r.StartAgent(ctx, dev.ID); err != nil {
		t.Fatal(err)
	}
	if !ss.Running(ss.officeID, dev.ID) || ss.Running(ss.officeID, po.ID) {
		t.Errorf("after the start: dev running %v, po running %v; want dev only", ss.Running(ss.officeID, dev.ID), ss.Running(ss.officeID, po.ID))
	}
	if rec := sessionStatus(t, r, po.ID); rec.Status != office.SessionHibernated || !strings.Contains(rec.Detail, "make room") {
		t.Errorf("po's row: %s %q, want hibernated to make room", rec.Status, rec.Detail)
	}
	ss.mu.Lock()
	most := ss.maxLive
	ss.mu.Unlock()
	if most != 1 {
		t.Errorf("%d agents were live at once, want at most 1", most)
	}
}

// A stored notice wakes a hibernated agent (the wake-up reads what is
// due, notices included), is typed once and marked, and the agent goes
// back to sleep.
func TestHibernateWakesForNotice(t *testing.T) {
	r, ss, as := sleepyOffice(t, 0, sleeper("po", 100*time.Millisecond))
	po := as[0]
	if err := r.StartAgent(context.Background(), po.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "hibernated", func() bool { return sessionStatus(t, r, po.ID).Status == office.SessionHibernated })
	r.notify(po, "Task 1 that you gave dev failed.")
	eventually(t, "the notice typed after the wake", func() bool { return ss.typedTo(po.ID, "that you gave dev failed") == 1 })
	eventually(t, "asleep again", func() bool { return sessionStatus(t, r, po.ID).Status == office.SessionHibernated })
	if n, m := ss.typedTo(po.ID, "that you gave dev failed"), ss.starts(po.ID); n != 1 || m != 2 {
		t.Errorf("the notice was typed %d times and po started %d times; want 1 and 2 (the start, the wake)", n, m)
	}
	if w, err := r.store.ListDue(context.Background(), ss.officeID, po.ID); err != nil || len(w.Notices) != 0 {
		t.Errorf("notices still due: %+v, %v", w.Notices, err)
	}
}
