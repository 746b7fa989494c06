package rostercache_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/store/rostercache"
	"github.com/office-server/office-server/store/sqlite"
	"github.com/office-server/office-server/store/storetest"
)

func openSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "office.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestConformance: the cache in front of a store passes the stores' whole
// suite: it changes nothing a caller can see.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) (office.Store, office.ChangeFeed) {
			s := openSQLite(t)
			return rostercache.New(s, 0), s
		},
		// The feed is the store's own, tested with it (store/sqlite).
	})
}

// counting counts the roster reads that reach the store.
type counting struct {
	office.Store
	lists, gets atomic.Int64
}

func (c *counting) ListAgents(ctx context.Context, id string) ([]office.Agent, error) {
	c.lists.Add(1)
	return c.Store.ListAgents(ctx, id)
}

func (c *counting) GetAgent(ctx context.Context, id string) (office.Agent, error) {
	c.gets.Add(1)
	return c.Store.GetAgent(ctx, id)
}

// TestReadsServedFromMemory: with 200 agents, starting each (read the
// roster, mark it active) reads the store's roster once, not 200 times,
// and every read sees the statuses written through the cache.
func TestReadsServedFromMemory(t *testing.T) {
	ctx := context.Background()
	raw := &counting{Store: openSQLite(t)}
	c := rostercache.New(raw, time.Hour)
	off, err := c.UpsertOffice(ctx, office.Office{Name: "big"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		if _, err := c.UpsertAgent(ctx, office.Agent{OfficeID: off.ID, Name: "agent" + string(rune('A'+i/26)) + string(rune('a'+i%26)), Status: office.AgentIdle}); err != nil {
			t.Fatal(err)
		}
	}
	before := raw.lists.Load()
	as, err := c.ListAgents(ctx, off.ID)
	if err != nil || len(as) != n {
		t.Fatalf("ListAgents: %d agents, %v", len(as), err)
	}
	for _, a := range as {
		roster, err := c.ListAgents(ctx, off.ID) // as an agent start does
		if err != nil || len(roster) != n {
			t.Fatalf("ListAgents: %d, %v", len(roster), err)
		}
		if err := c.SetAgentStatus(ctx, a.ID, office.AgentActive); err != nil {
			t.Fatal(err)
		}
		got, err := c.GetAgent(ctx, a.ID)
		if err != nil || got.Status != office.AgentActive {
			t.Fatalf("GetAgent after SetAgentStatus: %q, %v", got.Status, err)
		}
	}
	if reads := raw.lists.Load() - before; reads != 1 {
		t.Errorf("%d roster reads reached the store for %d starts, want 1", reads, n)
	}
	if gets := raw.gets.Load(); gets != 0 {
		t.Errorf("%d GetAgent reached the store, want 0", gets)
	}
	// What the store holds is what the cache says.
	direct, _ := raw.Store.ListAgents(ctx, off.ID)
	for _, a := range direct {
		if a.Status != office.AgentActive {
			t.Fatalf("store has %s %s", a.Name, a.Status)
		}
	}
	// A write by someone else is seen once the entry is older than the TTL.
	short := rostercache.New(raw, 50*time.Millisecond)
	if _, err := short.ListAgents(ctx, off.ID); err != nil {
		t.Fatal(err)
	}
	if err := raw.Store.SetAgentStatus(ctx, as[0].ID, office.AgentDisabled); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	if got, _ := short.GetAgent(ctx, as[0].ID); got.Status != office.AgentDisabled {
		t.Errorf("after the TTL the cache still says %s", got.Status)
	}
}

// TestDerived: a value derived from the roster is built once for many
// reads and status changes (every agent's start makes one), and built
// again after an agent is saved and after the TTL.
func TestDerived(t *testing.T) {
	ctx := context.Background()
	raw := &counting{Store: openSQLite(t)}
	c := rostercache.New(raw, time.Hour)
	off, err := c.UpsertOffice(ctx, office.Office{Name: "derived"})
	if err != nil {
		t.Fatal(err)
	}
	add := func(name string) office.Agent {
		a, err := c.UpsertAgent(ctx, office.Agent{OfficeID: off.ID, Name: name, Status: office.AgentIdle})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := add("alpha")
	builds := 0
	names := func() string {
		v, err := c.Derived(ctx, off.ID, "names", func(as []office.Agent) any {
			builds++
			s := ""
			for _, a := range as {
				s += a.Name + " "
			}
			return s
		})
		if err != nil {
			t.Fatal(err)
		}
		return v.(string)
	}
	for range 100 {
		if got := names(); got != "alpha " {
			t.Fatalf("derived %q", got)
		}
	}
	if builds != 1 {
		t.Errorf("built %d times for 100 reads, want 1", builds)
	}
	if err := c.SetAgentStatus(ctx, a.ID, office.AgentActive); err != nil {
		t.Fatal(err)
	}
	if got := names(); got != "alpha " || builds != 1 {
		t.Errorf("after a status change: %q after %d builds, want the same value after 1", got, builds)
	}
	add("beta")
	if got := names(); got != "alpha beta " || builds != 2 {
		t.Errorf("after a new agent: %q after %d builds, want both after 2", got, builds)
	}
	short := rostercache.New(raw, 50*time.Millisecond)
	v1, _ := short.Derived(ctx, off.ID, "k", func([]office.Agent) any { return 1 })
	time.Sleep(60 * time.Millisecond)
	v2, _ := short.Derived(ctx, off.ID, "k", func([]office.Agent) any { return 2 })
	if v1 != 1 || v2 != 2 {
		t.Errorf("after the TTL: %v then %v, want 1 then 2", v1, v2)
	}
}

// held blocks the next ListAgents until release is closed, after it began.
type held struct {
	*counting
	began, release chan struct{}
}

func (h *held) ListAgents(ctx context.Context, id string) ([]office.Agent, error) {
	if h.began != nil {
		close(h.began)
		h.began = nil
		<-h.release
	}
	return h.counting.ListAgents(ctx, id)
}

// TestRefillRacedByStatus: a status written while the roster is read (each
// agent's turn writes one, so during a burst some always is) no longer
// keeps the read from being cached; the cached roster has the status; and
// a stale roster is read again once by a lookup, after which lookups are
// served from memory.
func TestRefillRacedByStatus(t *testing.T) {
	ctx := context.Background()
	raw := &counting{Store: openSQLite(t)}
	h := &held{counting: raw}
	c := rostercache.New(h, time.Hour)
	off, err := c.UpsertOffice(ctx, office.Office{Name: "busy"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, name := range []string{"po", "dev", "qa"} {
		a, err := c.UpsertAgent(ctx, office.Agent{OfficeID: off.ID, Name: name, Status: office.AgentIdle})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
	}
	h.began, h.release = make(chan struct{}), make(chan struct{})
	began := h.began
	done := make(chan []office.Agent)
	go func() {
		as, err := c.ListAgents(ctx, off.ID)
		if err != nil {
			t.Error(err)
		}
		done <- as
	}()
	<-began
	if err := c.SetAgentStatus(ctx, ids[1], office.AgentActive); err != nil {
		t.Fatal(err)
	}
	close(h.release)
	<-done
	lists := raw.lists.Load()
	for range 10 {
		as, err := c.ListAgents(ctx, off.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			if a.ID == ids[1] && a.Status != office.AgentActive {
				t.Fatalf("dev's status %q, want %q", a.Status, office.AgentActive)
			}
		}
		if a, err := c.GetAgent(ctx, ids[1]); err != nil || a.Status != office.AgentActive {
			t.Fatalf("GetAgent: %+v, %v", a, err)
		}
	}
	if n := raw.lists.Load() - lists; n != 0 {
		t.Errorf("%d roster reads reached the store after the raced read, want 0 (it was not cached)", n)
	}
	if n := raw.gets.Load(); n != 0 {
		t.Errorf("%d agent reads reached the store, want 0", n)
	}
}

// TestStaleLookupRefills: once the roster is older than the TTL, the next
// lookup reads the roster again and the ones after are served from memory.
func TestStaleLookupRefills(t *testing.T) {
	ctx := context.Background()
	raw := &counting{Store: openSQLite(t)}
	c := rostercache.New(raw, 50*time.Millisecond)
	off, err := c.UpsertOffice(ctx, office.Office{Name: "stale"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.UpsertAgent(ctx, office.Agent{OfficeID: off.ID, Name: "po", Status: office.AgentIdle})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListAgents(ctx, off.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	lists, gets := raw.lists.Load(), raw.gets.Load()
	for range 20 {
		if got, err := c.GetAgent(ctx, a.ID); err != nil || got.Name != "po" {
			t.Fatalf("GetAgent: %+v, %v", got, err)
		}
	}
	if l, g := raw.lists.Load()-lists, raw.gets.Load()-gets; l != 1 || g != 0 {
		t.Errorf("20 lookups of a stale roster: %d roster reads and %d agent reads reached the store, want 1 and 0", l, g)
	}
}
