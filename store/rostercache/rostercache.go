// Package rostercache keeps each office's roster (its agents) in memory in
// front of a store, so that what reads the roster on every step — a
// delivery's selector snapshot, every agent start's system prompt, the
// API's agent list — costs a copy, not a query: start-up and delivery stay
// linear in the number of agents instead of quadratic.
//
// Writes through the cache keep it exact: a status change is applied in
// place, an agent saved or deleted drops its office's entry (read again on
// the next use, in the store's order). Writes that bypass this process (SQL
// by hand, another server) are seen once an entry is older than the TTL.
package rostercache

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/office-server/office-server/office"
)

// DefaultTTL bounds how stale a roster written by someone else can be.
const DefaultTTL = 2 * time.Second

// Store is an office.Store whose roster reads are served from memory.
type Store struct {
	office.Store
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	offices map[string]*entry // by office ID
	owner   map[string]string // agent ID → office ID, for the cached offices
	// gen is bumped by every write of an agent other than its status (and
	// by a failed status write): a read that began before one is not
	// cached. Status writes, one per agent's turn, race reads all the
	// time; they are kept in statuses while reads are under way and put
	// over what such a read returns, so the read is cached all the same.
	gen      uint64
	reading  int                    // roster reads under way
	statuses map[string]statusWrite // agent ID → its last status written while reading > 0
	seq      uint64                 // orders statusWrites
	filling  map[string]bool        // offices whose roster a stale GetAgent is reading
}

// statusWrite is a status written while a roster read was under way.
type statusWrite struct {
	seq    uint64
	status string
}

type entry struct {
	agents   []office.Agent
	at       map[string]int // agent ID → index in agents
	loadedAt time.Time
	derived  map[string]any // Derived's values, dropped with any change
}

func newEntry(as []office.Agent, now time.Time) *entry {
	e := &entry{agents: as, at: make(map[string]int, len(as)), loadedAt: now}
	for i, a := range as {
		e.at[a.ID] = i
	}
	return e
}

// New returns st with its roster cached for at most ttl (DefaultTTL when
// ttl is 0).
func New(st office.Store, ttl time.Duration) *Store {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Store{Store: st, ttl: ttl, now: time.Now, offices: map[string]*entry{}, owner: map[string]string{},
		statuses: map[string]statusWrite{}, filling: map[string]bool{}}
}

// ListAgents returns the office's agents, from memory when the entry is
// fresh. The slice is the caller's.
func (c *Store) ListAgents(ctx context.Context, officeID string) ([]office.Agent, error) {
	c.mu.Lock()
	if e, ok := c.offices[officeID]; ok && c.now().Sub(e.loadedAt) < c.ttl {
		out := slices.Clone(e.agents)
		c.mu.Unlock()
		return out, nil
	}
	c.mu.Unlock()
	return c.fill(ctx, officeID)
}

// fill reads the office's roster from the store and caches it, with the
// statuses written meanwhile put over it; not cached when another write
// raced the read.
func (c *Store) fill(ctx context.Context, officeID string) ([]office.Agent, error) {
	c.mu.Lock()
	gen, seq := c.gen, c.seq
	c.reading++
	c.mu.Unlock()
	as, err := c.Store.ListAgents(ctx, officeID)
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() {
		if c.reading--; c.reading == 0 {
			clear(c.statuses)
		}
	}()
	if err != nil {
		return nil, err
	}
	for i, a := range as {
		if w, ok := c.statuses[a.ID]; ok && w.seq > seq {
			as[i].Status = w.status
		}
	}
	if gen != c.gen {
		return as, nil // an agent was saved or deleted meanwhile: not cached
	}
	c.drop(officeID)
	c.offices[officeID] = newEntry(slices.Clone(as), c.now())
	for _, a := range as {
		c.owner[a.ID] = officeID
	}
	return as, nil
}

// GetAgent returns the agent from its office's cached roster when that is
// fresh, else from the store. A roster that went stale is read again once
// (the lookups meanwhile go to the store): otherwise every lookup of a
// busy office would go to the store until something listed it.
func (c *Store) GetAgent(ctx context.Context, id string) (office.Agent, error) {
	c.mu.Lock()
	off, known := c.owner[id]
	if e := c.offices[off]; known && e != nil {
		if i, ok := e.at[id]; ok && c.now().Sub(e.loadedAt) < c.ttl {
			a := e.agents[i]
			c.mu.Unlock()
			return a, nil
		}
	}
	refill := known && !c.filling[off]
	if refill {
		c.filling[off] = true
	}
	c.mu.Unlock()
	if refill {
		as, err := c.fill(ctx, off)
		c.mu.Lock()
		delete(c.filling, off)
		c.mu.Unlock()
		if i := slices.IndexFunc(as, func(a office.Agent) bool { return a.ID == id }); err == nil && i >= 0 {
			return as[i], nil
		}
	}
	return c.Store.GetAgent(ctx, id)
}

// SetAgentStatus writes the status and applies it to the cached roster,
// and to what the roster reads under way will return.
func (c *Store) SetAgentStatus(ctx context.Context, id, status string) error {
	if err := c.Store.SetAgentStatus(ctx, id, status); err != nil {
		c.forget(id) // the status in the store is not known
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reading > 0 {
		c.seq++
		c.statuses[id] = statusWrite{seq: c.seq, status: status}
	}
	if e := c.offices[c.owner[id]]; e != nil {
		if i, ok := e.at[id]; ok {
			e.agents[i].Status = status // Derived's values stay: see there
		}
	}
	return nil
}

// Derived returns build's value for the office's roster, made once per
// cached roster and dropped when an agent is saved or deleted or the entry
// expires (what every agent's start would otherwise compute from the whole
// roster: its system prompt's list of agents). A status change keeps it:
// every start changes a status, and rebuilding then would make start-up
// quadratic again; so a value must not depend on agents' statuses. build
// must not keep or change the slice; it runs under the cache's lock.
func (c *Store) Derived(ctx context.Context, officeID, key string, build func([]office.Agent) any) (any, error) {
	if v, ok := c.derived(officeID, key, build); ok {
		return v, nil
	}
	as, err := c.ListAgents(ctx, officeID) // cached unless a write raced it
	if err != nil {
		return nil, err
	}
	if v, ok := c.derived(officeID, key, build); ok {
		return v, nil
	}
	return build(as), nil // one read per call at worst, as without the cache
}

// derived is Derived from a fresh entry; false when there is none.
func (c *Store) derived(officeID, key string, build func([]office.Agent) any) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.offices[officeID]
	if !ok || c.now().Sub(e.loadedAt) >= c.ttl {
		return nil, false
	}
	v, ok := e.derived[key]
	if !ok {
		v = build(e.agents)
		if e.derived == nil {
			e.derived = map[string]any{}
		}
		e.derived[key] = v
	}
	return v, true
}

// UpsertAgent saves the agent; its office's roster is read again next time
// (a new or renamed agent changes the store's order).
func (c *Store) UpsertAgent(ctx context.Context, a office.Agent) (office.Agent, error) {
	c.bump()
	saved, err := c.Store.UpsertAgent(ctx, a)
	c.mu.Lock()
	c.gen++
	c.drop(a.OfficeID)
	c.drop(saved.OfficeID)
	c.mu.Unlock()
	return saved, err
}

// DeleteAgent deletes the agent and drops its office's cached roster.
func (c *Store) DeleteAgent(ctx context.Context, id string) error {
	c.bump()
	c.forget(id)
	err := c.Store.DeleteAgent(ctx, id)
	c.forget(id)
	return err
}

// bump marks a roster write as begun: a read that began before it is not
// cached (it may hold what the write changes).
func (c *Store) bump() {
	c.mu.Lock()
	c.gen++
	c.mu.Unlock()
}

// Invalidate drops every cached roster: call it when the server takes an
// office over from another (what that server wrote is read afresh).
func (c *Store) Invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offices, c.owner = map[string]*entry{}, map[string]string{}
}

// forget drops the cached roster of agent id's office.
func (c *Store) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.drop(c.owner[id])
}

// drop removes officeID's entry; the caller holds mu.
func (c *Store) drop(officeID string) {
	e := c.offices[officeID]
	if e == nil {
		return
	}
	for _, a := range e.agents {
		delete(c.owner, a.ID)
	}
	delete(c.offices, officeID)
}
