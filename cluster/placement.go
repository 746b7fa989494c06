package cluster

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// view is what a node reads to place offices: every office's weight and
// whether it is free (no lease, or an expired one), and the live nodes'
// loads.
type view struct {
	offices []officeLoad
	nodes   []nodeLoad
	total   int // weight of all offices
	fair    int // total over live nodes, rounded up
}

type officeLoad struct {
	id      string
	weight  int
	free    bool
	freeFor time.Duration // since its lease expired (or it was made)
	token   int64         // its lease's, 0 when it never had one
}

// given is an office this node handed over: it does not take it back
// while the nodes under their share may take it (leftFree), unless another
// node took it since (a new token) and then stopped renewing it. The
// entry is forgotten after three leases.
type given struct {
	token int64
	until time.Time
}

type nodeLoad struct {
	id       string
	capacity int
	load     int
	// since its last heartbeat, and since it started: surplus hands
	// offices only to a node seen renewing that has been up long enough to
	// take them.
	silent, up time.Duration
}

// view reads the placement in one round trip (two statements in a batch;
// reads, not writes).
func (n *Node) view(ctx context.Context) (view, error) {
	n.stats.Views.Add(1)
	b := &pgx.Batch{}
	b.Queue(`
		with w as (
		  select o.id, o.created_at, greatest(count(a.id) filter (where a.status <> 'disabled' and s.status is distinct from 'hibernated'), 1)::int as w
		  from public.offices o left join public.office_agents a on a.office_id = o.id
		  left join public.agent_sessions s on s.agent_id = a.id
		  group by o.id)
		select w.id::text, w.w, l.office_id is null or l.expires_at <= now(),
		       extract(epoch from now() - coalesce(l.expires_at, w.created_at))::float8, coalesce(l.token, 0)
		from w left join office_cluster.leases l on l.office_id = w.id`)
	b.Queue(`
		select n.node_id, n.capacity, coalesce(sum(w.w), 0)::int,
		       extract(epoch from now() - n.heartbeat)::float8, extract(epoch from now() - n.started_at)::float8
		from office_cluster.nodes n
		left join office_cluster.leases l on l.node_id = n.node_id and l.expires_at > now()
		left join lateral (select greatest(count(*) filter (where a.status <> 'disabled' and s.status is distinct from 'hibernated'), 1)::int as w
		                   from public.office_agents a left join public.agent_sessions s on s.agent_id = a.id
		                   where a.office_id = l.office_id) w on l.office_id is not null
		where n.heartbeat > now() - make_interval(secs => $1) and not n.draining
		group by n.node_id, n.capacity, n.heartbeat, n.started_at`, n.cfg.Lease.Seconds())
	br := n.pool.SendBatch(ctx, b)
	defer br.Close()
	var v view
	rows, _ := br.Query()
	var (
		o    officeLoad
		secs float64
	)
	if _, err := pgx.ForEachRow(rows, []any{&o.id, &o.weight, &o.free, &secs, &o.token}, func() error {
		o.freeFor = seconds(secs)
		v.offices = append(v.offices, o)
		v.total += o.weight
		return nil
	}); err != nil {
		return v, err
	}
	rows, _ = br.Query()
	var (
		nl         nodeLoad
		silent, up float64
	)
	if _, err := pgx.ForEachRow(rows, []any{&nl.id, &nl.capacity, &nl.load, &silent, &up}, func() error {
		nl.silent, nl.up = seconds(silent), seconds(up)
		v.nodes = append(v.nodes, nl)
		return nil
	}); err != nil {
		return v, err
	}
	v.fair = fairShare(v.total, v.nodes)
	return v, nil
}

// fairShare is what each node without a smaller capacity should run: the
// total shared over the live nodes, after the nodes whose capacity is under
// an even share took what they can (water-filling), rounded up.
func fairShare(total int, nodes []nodeLoad) int {
	caps := make([]int, 0, len(nodes))
	for _, nl := range nodes {
		if nl.capacity > 0 {
			caps = append(caps, nl.capacity)
		}
	}
	slices.Sort(caps)
	k := len(nodes)
	if k == 0 {
		return total
	}
	for _, c := range caps {
		if c*k >= total {
			break
		}
		total -= c
		k--
	}
	if k == 0 {
		return total
	}
	return (total + k - 1) / k
}

// load returns the weight of the offices this node holds.
func (n *Node) load() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	sum := 0
	for _, l := range n.owned {
		sum += l.weight
	}
	return sum
}

// pick chooses the free offices to take: longest free first, while the
// node is under its fair share; an office left free for two periods (the
// nodes under their share did not take it) is taken by any node with
// room, the node that handed it over too. Capacity bounds both.
func (n *Node) pick(v view) map[string]int {
	now := time.Now()
	n.mu.Lock()
	for id, g := range n.released {
		if now.After(g.until) {
			delete(n.released, id)
		}
	}
	released := maps.Clone(n.released)
	n.mu.Unlock()
	free := slices.DeleteFunc(slices.Clone(v.offices), func(o officeLoad) bool {
		g, gave := released[o.id]
		return !o.free || gave && g.token == o.token && o.freeFor <= n.leftFree()
	})
	slices.SortFunc(free, func(a, b officeLoad) int { return int(b.freeFor - a.freeFor) })
	load, want := n.load(), map[string]int{}
	for _, o := range free {
		room := n.cfg.Capacity == 0 || load+o.weight <= n.cfg.Capacity
		share := load+o.weight <= v.fair || load == 0 || o.freeFor > n.leftFree()
		if room && share {
			want[o.id] = o.weight
			load += o.weight
		}
	}
	return want
}

// leftFree is how long an office is left to the nodes under their share
// (two periods: each takes at its next), and how long a node may go
// without renewing, or must have been up, to be handed offices. A node
// that never took what it was handed (it died, or it was just starting
// and died) would otherwise take the office down until the hand-over was
// forgotten (three leases).
func (n *Node) leftFree() time.Duration { return 2 * n.cfg.Renew }

// seconds converts a database interval in seconds.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// surplus returns offices to give up: while this node is above its fair
// share by more than the office it would give, and another live node is
// under its share with room for it, renewing and up for leftFree.
func (n *Node) surplus(v view) []string {
	n.mu.Lock()
	type held struct {
		id     string
		weight int
	}
	var mine []held
	load := 0
	for id, l := range n.owned {
		if !l.leaving { // already on its way out
			mine = append(mine, held{id, l.weight})
			load += l.weight
		}
	}
	n.mu.Unlock()
	slices.SortFunc(mine, func(a, b held) int { return a.weight - b.weight })
	room := 0 // what the nodes under their share can take
	for _, o := range v.nodes {
		if o.id == n.cfg.NodeID || o.load >= v.fair || o.silent > n.leftFree() || o.up < n.leftFree() {
			continue
		}
		r := v.fair - o.load
		if o.capacity > 0 {
			r = min(r, o.capacity-o.load)
		}
		room += max(r, 0)
	}
	var give []string
	for _, h := range mine {
		if load-h.weight < v.fair || h.weight > room {
			break
		}
		give = append(give, h.id)
		load -= h.weight
		room -= h.weight
	}
	return give
}
