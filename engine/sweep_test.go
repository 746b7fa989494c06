package engine_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/store/postgres"
	"github.com/office-server/office-server/store/sqlite"
)

// countingStore counts the store calls the engine's timers make (the
// queries an idle office would cost on a hosted database).
type countingStore struct {
	office.Store
	mu sync.Mutex
	n  map[string]int
}

func (c *countingStore) count(what string) {
	c.mu.Lock()
	c.n[what]++
	c.mu.Unlock()
}

func (c *countingStore) total() (n int, by map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	by = map[string]int{}
	for k, v := range c.n {
		n += v
		by[k] = v
	}
	return n, by
}

func (c *countingStore) ListOffices(ctx context.Context) ([]office.Office, error) {
	c.count("ListOffices")
	return c.Store.ListOffices(ctx)
}
func (c *countingStore) ListQuestions(ctx context.Context, f office.QuestionFilter) ([]office.Question, error) {
	c.count("ListQuestions")
	return c.Store.ListQuestions(ctx, f)
}
func (c *countingStore) ExpireQuestions(ctx context.Context, now time.Time, officeIDs []string) ([]office.Question, error) {
	c.count("ExpireQuestions")
	return c.Store.ExpireQuestions(ctx, now, officeIDs)
}
func (c *countingStore) ListDependencies(ctx context.Context, f office.DependencyFilter) ([]office.DependencyRequest, error) {
	c.count("ListDependencies")
	return c.Store.ListDependencies(ctx, f)
}
func (c *countingStore) ExpireDependencies(ctx context.Context, now time.Time) ([]office.DependencyRequest, error) {
	c.count("ExpireDependencies")
	return c.Store.ExpireDependencies(ctx, now)
}
func (c *countingStore) ListInvocations(ctx context.Context, f office.InvocationFilter) ([]office.Invocation, error) {
	c.count("ListInvocations")
	return c.Store.ListInvocations(ctx, f)
}
func (c *countingStore) ListProxyRequests(ctx context.Context, f office.ProxyRequestFilter) ([]office.ProxyRequest, error) {
	c.count("ListProxyRequests")
	return c.Store.ListProxyRequests(ctx, f)
}

// runOn runs a router over st (fed by feed) until the test ends.
func runOn(t *testing.T, cfg engine.Config) (*engine.Router, office.Office, office.Agent) {
	t.Helper()
	cfg.Sessions, cfg.DataDir = nopSessions{}, t.TempDir()
	r, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	off, agents, err := r.SyncOffice(ctx, engine.OfficeConfig{Office: office.Office{Name: "idle"}, Agents: []office.Agent{{Name: "po"}}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = r.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r, off, agents[0]
}

// autoClock is a clock that runs step ahead every time it is read: the
// engine's sweeper reads it once or twice a tick, so simulated time runs at
// the pace of the sweeper's own loop, however the machine schedules it.
type autoClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *autoClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

func (c *autoClock) peek() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// TestIdleSweepCalls: an idle office on the embedded store, over a
// simulated hour, costs the store at most the safety net's three list
// queries every DefaultSafetySweep, plus what one question that expires on
// the way needs — where sweeping every Sweep cost four statements each time
// (960 an hour). The question, written by "someone else" through the store
// (the engine learns its deadline from the feed), expires within a sweep of
// its deadline.
func TestIdleSweepCalls(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "office.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	start := time.Now()
	clk := &autoClock{t: start}
	cs := &countingStore{Store: st, n: map[string]int{}}
	_, off, po := runOn(t, engine.Config{Store: cs, Feed: st, Now: clk.now, Tick: time.Millisecond, Sweep: engine.DefaultSweep})

	const ttl = 20 * time.Minute
	q, err := st.CreateQuestion(ctx, office.Question{OfficeID: off.ID, AgentID: po.ID, QuestionType: office.QuestionText,
		Question: "which database?", Options: []string{}, Required: true, ExpiresAt: start.Add(ttl)})
	if err != nil {
		t.Fatal(err)
	}
	clk.mu.Lock()
	clk.step = time.Second // from here on, a second a read
	clk.mu.Unlock()
	const period = time.Hour
	var expiredAt time.Time
	for clk.peek().Sub(start) < period {
		time.Sleep(time.Millisecond)
		if expiredAt.IsZero() {
			if got, _ := st.GetQuestion(ctx, q.ID); got.Status == office.QuestionExpired {
				expiredAt = clk.peek()
			}
		}
	}
	n, by := cs.total()
	t.Logf("idle for a simulated %v: %d timer store calls %v; the question's expiry seen %v after its deadline", period, n, by, expiredAt.Sub(start.Add(ttl)))
	safety := int(period / engine.DefaultSafetySweep)
	// The safety net's three lists at start and every 5 min, a list and
	// an expiry at the question's deadline, the proxy list once, and what
	// the start and the expiry notice's delivery rounds read (offices,
	// tasks: counted here too).
	if budget := 3*(safety+1) + 2 + 1 + 3; n > budget {
		t.Errorf("idle office made %d timer store calls in a simulated %v; want at most %d", n, period, budget)
	}
	switch late := expiredAt.Sub(start.Add(ttl)); {
	case expiredAt.IsZero():
		t.Errorf("the question never expired")
	case late < 0 || late > engine.DefaultSweep+time.Minute:
		t.Errorf("the question's expiry was seen %v after its deadline; want within a sweep (%v) and the test's polling", late, engine.DefaultSweep)
	}
}

// TestForeignQuestionExpiresPostgres: a question another process inserts
// into PostgreSQL with a short TTL expires on time — the engine learns its
// deadline from the change feed (LISTEN/NOTIFY) — though the safety net
// would not look for an hour.
func TestForeignQuestionExpiresPostgres(t *testing.T) {
	url := pgDB(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	other, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	const sweep = 200 * time.Millisecond
	cs := &countingStore{Store: st, n: map[string]int{}}
	_, off, po := runOn(t, engine.Config{Store: cs, Feed: st, Tick: 50 * time.Millisecond, Sweep: sweep, SafetySweep: time.Hour})
	waitFor(t, "the feed", 10*time.Second, st.Connected)
	time.Sleep(3 * sweep) // the first sweep learnt that nothing is due
	before, _ := cs.total()

	const ttl = 1500 * time.Millisecond
	deadline := time.Now().Add(ttl)
	q, err := other.CreateQuestion(ctx, office.Question{OfficeID: off.ID, AgentID: po.ID, QuestionType: office.QuestionText,
		Question: "which database?", Options: []string{}, Required: true, ExpiresAt: deadline})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the question expired", 10*time.Second, func() bool {
		got, _ := st.GetQuestion(ctx, q.ID)
		return got.Status == office.QuestionExpired
	})
	late := time.Since(deadline)
	after, by := cs.total()
	t.Logf("expired %v after its deadline; %d timer store calls meanwhile %v", late, after-before, by)
	if late > sweep+time.Second {
		t.Errorf("the question expired %v after its deadline; want within a sweep (%v) and some slack", late, sweep)
	}
	// Waiting for it cost no polling: one list and one expiry at its
	// deadline.
	if after-before > 3 {
		t.Errorf("%d timer store calls while one question waited %v; want at most 3", after-before, ttl)
	}
}

// TestExpiryLeavesOtherServersOffices: with several servers on one
// database (Config.Owns), a server expires the due questions of its own
// offices only. Another office's due question stays pending for the server
// that runs it, which alone can tell its asker (before, the first server
// to sweep expired it and nobody told the agent).
func TestExpiryLeavesOtherServersOffices(t *testing.T) {
	url := pgDB(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	foreign, err := st.UpsertOffice(ctx, office.Office{Name: "run by another server"})
	if err != nil {
		t.Fatal(err)
	}
	fa, err := st.UpsertAgent(ctx, office.Agent{OfficeID: foreign.ID, Name: "x", Role: "x"})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := st.CreateQuestion(ctx, office.Question{OfficeID: foreign.ID, AgentID: fa.ID, QuestionType: office.QuestionText,
		Question: "theirs", Options: []string{}, ExpiresAt: time.Now().Add(-time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	owns := func(id string) bool { return id != foreign.ID }
	_, off, po := runOn(t, engine.Config{Store: st, Feed: st, Owns: owns, Tick: 50 * time.Millisecond, Sweep: 100 * time.Millisecond, SafetySweep: time.Hour})
	mine, err := st.CreateQuestion(ctx, office.Question{OfficeID: off.ID, AgentID: po.ID, QuestionType: office.QuestionText,
		Question: "mine", Options: []string{}, ExpiresAt: time.Now().Add(300 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "this server's question expired", 10*time.Second, func() bool {
		got, _ := st.GetQuestion(ctx, mine.ID)
		return got.Status == office.QuestionExpired
	})
	if got, err := st.GetQuestion(ctx, theirs.ID); err != nil || got.Status != office.QuestionPending {
		t.Errorf("another server's due question: status %q, err %v; want pending (its own server expires it and tells its asker)", got.Status, err)
	}
}

// lateFeed is a change feed that reports nothing and is connected only
// once up is set: a feed that came up after rows were inserted.
type lateFeed struct{ up atomic.Bool }

func (f *lateFeed) Watch(ctx context.Context, _ []string, _ func(office.Change)) error {
	<-ctx.Done()
	return nil
}
func (f *lateFeed) Connected() bool { return f.up.Load() }

// A question inserted by another process before the change feed listened
// is reported by neither a notification nor the catch-up: its deadline is
// learned from the store when the feed comes up, not at the next
// safety-net sweep (an hour here).
func TestDeadlineLearnedWhenFeedComesUp(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "office.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	feed := &lateFeed{}
	_, off, po := runOn(t, engine.Config{Store: st, Feed: feed, Tick: 20 * time.Millisecond, Sweep: 50 * time.Millisecond, SafetySweep: time.Hour})
	time.Sleep(200 * time.Millisecond) // the safety sweep at start has run: nothing pending then
	q, err := st.CreateQuestion(ctx, office.Question{OfficeID: off.ID, AgentID: po.ID, QuestionType: office.QuestionText,
		Question: "asked while the feed was down", Options: []string{}, ExpiresAt: time.Now().Add(100 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if got, _ := st.GetQuestion(ctx, q.ID); got.Status != office.QuestionPending {
		t.Fatalf("status %q before the feed came up; want pending (no deadline known yet)", got.Status)
	}
	feed.up.Store(true)
	waitFor(t, "the question expired once the feed came up", 5*time.Second, func() bool {
		got, _ := st.GetQuestion(ctx, q.ID)
		return got.Status == office.QuestionExpired
	})
}
