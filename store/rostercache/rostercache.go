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
	gen     uint64            // bumped by every roster write: a read that began before one is not cached
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
	return &Store{Store: st, ttl: ttl, now: time.Now, offices: map[string]*entry{}, owner: map[string]string{}}
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
	gen := c.gen
	c.mu.Unlock()
	as, err := c.Store.ListAgents(ctx, officeID)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return as, nil // a write raced the read: not cached
	}
	c.drop(officeID)
	c.offices[officeID] = newEntry(slices.Clone(as), c.now())
	for _, a := range as {
		c.owner[a.ID] = officeID
	}
	return as, nil
}

// GetAgent returns the agent from its office's cached roster when that is
// fresh, else from the store.
func (c *Store) GetAgent(ctx context.Context, id string) (office.Agent, error) {
	c.mu.Lock()
	if off, ok := c.owner[id]; ok {
		if e := c.offices[off]; e != nil && c.now().Sub(e.loadedAt) < c.ttl {
			if i, ok := e.at[id]; ok {
				a := e.agents[i]
				c.mu.Unlock()
				return a, nil
			}
		}
	}
	c.mu.Unlock()
	return c.Store.GetAgent(ctx, id)
}

// SetAgentStatus writes the status and applies it to the cached roster.
func (c *Store) SetAgentStatus(ctx context.Context, id, status string) error {
	c.bump()
	if err := c.Store.SetAgentStatus(ctx, id, status); err != nil {
		c.forget(id)
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++ // a read begun before the write finished is not cached
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
