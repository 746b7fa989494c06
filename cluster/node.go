// Package cluster runs offices on several servers (nodes) that share one
// PostgreSQL database: each office is run by one node at a time, by a
// lease in the database; nodes announce their address and capacity, take
// offices up to it, give some up when a new node comes, and hand theirs
// over when they stop. It also keeps Claude Code agents' transcripts in the
// database so that the next owner resumes their conversations. The design
// and its costs are in docs/notes/cluster.md.
//
// The office router only learns "this office is mine now" (Runner.Take)
// and "it is not any more" (Runner.Drop), and asks Node.Owns before it
// acts.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults: an owner that stops renewing loses its offices within
// DefaultLease plus one DefaultRenew (the taker's poll), 13 s.
const (
	DefaultLease = 10 * time.Second
	DefaultRenew = 3 * time.Second
)

// QuietLimit bounds how long a hand-over waits for the office's agents to
// end their turns before it stops them.
const QuietLimit = 2 * time.Minute

// Config configures a node.
type Config struct {
	// NodeID names the node in the database; default: random. A node
	// starts by taking back the leases its name holds (a restart after a
	// crash resumes at once), so one name must never be used by two live
	// processes: the serve command keeps it in its data directory, locked.
	NodeID string
	// Addr is where other nodes reach this node's HTTP server (for the
	// console's terminal proxy).
	Addr string
	// Capacity is how many agents this node may run; 0: no limit. An
	// office weighs its agents that are neither disabled nor hibernated
	// (at least 1): a hibernated agent has no process, so a node holds
	// more offices of sleeping agents (their wake-ups are capped per node
	// by --max-live, docs/notes/hibernate.md).
	Capacity int
	// Lease is how long a lease lasts unrenewed (default DefaultLease);
	// Renew how often the node renews, takes and balances (default
	// DefaultRenew). Renew must be well under Lease.
	Lease, Renew time.Duration
	Logger       *slog.Logger
}

// Runner starts and stops running an office on this node. Take is called
// once Owns reports the office; Drop after Owns stopped reporting it: it
// must stop the office's agents before it returns, for the lease is given
// up after it (on a hand-over) and the next owner starts them.
type Runner interface {
	Take(ctx context.Context, officeID string)
	Drop(ctx context.Context, officeID string)
}

// Quieter is a Runner that can wait for an office's agents to end their
// turns before a hand-over drops them (no turn is cut short). The node
// keeps the lease meanwhile; nothing new is delivered (Owns is false).
type Quieter interface {
	Quiet(ctx context.Context, officeID string)
}

// lease is an office this node holds.
type lease struct {
	token   int64
	weight  int
	lost    chan struct{} // closed when the node stops holding it
	leaving bool          // being handed over: renewed, but not acted for
}

// hold records a lease; n.mu must be held.
func (n *Node) hold(id string, token int64, weight int) {
	if old, ok := n.owned[id]; ok && old.lost != nil {
		close(old.lost)
	}
	n.owned[id] = lease{token: token, weight: weight, lost: make(chan struct{})}
}

// unhold forgets a lease and signals its loss; n.mu must be held.
func (n *Node) unhold(id string) {
	if l, ok := n.owned[id]; ok {
		if l.lost != nil {
			close(l.lost)
		}
		delete(n.owned, id)
	}
}

// unholdAll forgets every lease; n.mu must be held.
func (n *Node) unholdAll() {
	for id := range n.owned {
		n.unhold(id)
	}
}

// Lost returns a channel closed once this node no longer holds officeID
// (closed already if it does not hold it now): what acts for the office,
// such as typing into an agent, stops there.
func (n *Node) Lost(officeID string) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if l, ok := n.owned[officeID]; ok && !l.leaving && time.Now().Before(n.validUntil) {
		return l.lost
	}
	c := make(chan struct{})
	close(c)
	return c
}

// Node holds this server's leases. Run renews them; Owns says, from the
// node's own monotonic clock, whether it may act for an office now.
type Node struct {
	cfg  Config
	pool *pgxpool.Pool
	log  *slog.Logger

	mu         sync.Mutex
	owned      map[string]lease
	validUntil time.Time        // monotonic: no act for any office after this
	released   map[string]given // offices given away, not taken back while nobody took them
	draining   bool

	jobs chan job      // to the runner, in order
	wake chan struct{} // a step now (Drain)

	stats Stats
}

// Stats counts the statements a node sent, by purpose, and the leases it
// gained (an office it now runs) and lost (another node holds it now).
type Stats struct {
	Renewals, Takes, Releases, Views atomic.Int64
	Gained, Lost                     atomic.Int64
}

type job struct {
	take     bool
	officeID string
	release  int64 // token to release after the drop; 0: none (lost, not handed over)
}

// NewNodeID returns a fresh random node name.
func NewNodeID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// New returns a node on pool. Nothing happens before Run.
func New(pool *pgxpool.Pool, cfg Config) *Node {
	if cfg.NodeID == "" {
		cfg.NodeID = NewNodeID()
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Renew <= 0 {
		cfg.Renew = DefaultRenew
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Node{
		cfg: cfg, pool: pool, log: cfg.Logger.With("node", cfg.NodeID),
		owned: map[string]lease{}, released: map[string]given{},
		jobs: make(chan job, 1<<16), wake: make(chan struct{}, 1),
	}
}

// SetAddr sets the address announced to other nodes; call it before Run.
func (n *Node) SetAddr(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cfg.Addr = addr
}

// ID returns the node's name in the database.
func (n *Node) ID() string { return n.cfg.NodeID }

// Stats returns the node's statement counters.
func (n *Node) Stats() *Stats { return &n.stats }

// margin is how much earlier than the database the node considers its
// leases gone: renewal is measured from before the statement was sent, so
// this only covers clock rate differences and scheduling.
func (n *Node) margin() time.Duration { return n.cfg.Lease / 10 }

// Owns reports whether this node holds officeID's lease now, by its own
// monotonic clock: false as soon as the last successful renewal is older
// than the lease (minus a margin), even before the node learns that
// another took the office. A paused node that wakes up sees false first.
func (n *Node) Owns(officeID string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	l, ok := n.owned[officeID]
	return ok && !l.leaving && time.Now().Before(n.validUntil)
}

// Owned returns the offices this node holds, sorted.
func (n *Node) Owned() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Sorted(maps.Keys(n.owned))
}

// Run announces the node, then renews its leases, takes and balances
// offices every Renew until ctx ends; r starts and stops the offices (in a
// goroutine of Run's, in order). When ctx ends the node's offices are
// dropped (r.Drop) and their leases released, so that other nodes take
// them at once; the node's row is removed. Cancel ctx only after this
// server's agents and their final rows are written, or drop them in r.
func (n *Node) Run(ctx context.Context, r Runner) error {
	if err := n.announce(ctx); err != nil {
		return err
	}
	n.log.Info("cluster node up", "addr", n.cfg.Addr, "capacity", n.cfg.Capacity, "lease", n.cfg.Lease, "renew", n.cfg.Renew)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); n.work(ctx, r) }()
	if err := n.reclaim(ctx); err != nil && ctx.Err() == nil {
		n.log.Warn("take back this node's leases", "err", err)
	}
	// A node alone places offices at once; one that has company waits a
	// period first, to see the nodes that start with it.
	alone := n.alone(ctx)
	n.step(ctx, alone)
	t := time.NewTicker(n.cfg.Renew)
	watch := time.NewTicker(n.cfg.Lease / 20)
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-watch.C:
			n.expireLocally()
		case <-t.C:
			n.step(ctx, true)
		case <-n.wake:
			n.step(ctx, true)
		}
	}
	t.Stop()
	watch.Stop()
	close(n.jobs)
	wg.Wait()
	n.leave(context.WithoutCancel(ctx), r)
	return nil
}

// Drain stops taking offices and hands over every office this node holds:
// each is dropped, then its lease released. Run goes on renewing what is
// left until the hand-over is done.
func (n *Node) Drain(ctx context.Context) error {
	n.mu.Lock()
	n.draining = true
	n.mu.Unlock()
	if _, err := n.pool.Exec(ctx, `update office_cluster.nodes set draining = true where node_id = $1`, n.cfg.NodeID); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	select {
	case n.wake <- struct{}{}: // hand over now, not at the next period
	default:
	}
	return nil
}

// announce writes the node's row and forgets nodes gone for a day.
func (n *Node) announce(ctx context.Context) error {
	_, err := n.pool.Exec(ctx, `
		with gone as (delete from office_cluster.nodes where heartbeat < now() - interval '1 day')
		insert into office_cluster.nodes (node_id, addr, capacity) values ($1, $2, $3)
		on conflict (node_id) do update set addr = excluded.addr, capacity = excluded.capacity, heartbeat = now(), started_at = now(), draining = false`,
		n.cfg.NodeID, n.cfg.Addr, n.cfg.Capacity)
	if err != nil {
		return fmt.Errorf("announce node: %w", err)
	}
	return nil
}

// alone reports whether no other node has been seen within a lease.
func (n *Node) alone(ctx context.Context) bool {
	var others int
	err := n.pool.QueryRow(ctx, `select count(*) from office_cluster.nodes where node_id <> $1 and heartbeat > now() - make_interval(secs => $2)`,
		n.cfg.NodeID, n.cfg.Lease.Seconds()).Scan(&others)
	return err == nil && others == 0
}

// HasPeer reports whether another node, seen within a lease and not
// draining, could take this node's offices. A node alone has nobody to
// hand its offices to: on shutdown it stops its agents itself.
func (n *Node) HasPeer(ctx context.Context) bool {
	var others int
	err := n.pool.QueryRow(ctx, `select count(*) from office_cluster.nodes
		where node_id <> $1 and heartbeat > now() - make_interval(secs => $2) and not draining`,
		n.cfg.NodeID, n.cfg.Lease.Seconds()).Scan(&others)
	return err == nil && others > 0
}

// reclaim takes back the leases this node's name holds from its previous
// run, expired or not, with new tokens.
func (n *Node) reclaim(ctx context.Context) error {
	sent := time.Now()
	n.stats.Takes.Add(1)
	rows, err := n.pool.Query(ctx, `
		update office_cluster.leases set token = token + 1, expires_at = now() + make_interval(secs => $2), taken_at = now()
		where node_id = $1 returning office_id::text, token`, n.cfg.NodeID, n.cfg.Lease.Seconds())
	if err != nil {
		return err
	}
	got := map[string]int64{}
	var (
		id  string
		tok int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &tok}, func() error { got[id] = tok; return nil }); err != nil {
		return err
	}
	n.mu.Lock()
	n.validUntil = sent.Add(n.cfg.Lease - n.margin())
	for id, tok := range got {
		n.hold(id, tok, 1)
	}
	n.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(got)) {
		n.log.Info("took back office after a restart", "office", id, "token", got[id])
		n.stats.Gained.Add(1)
		n.jobs <- job{take: true, officeID: id}
	}
	return nil
}

// step renews, then (unless only renewing) takes and balances.
func (n *Node) step(ctx context.Context, place bool) {
	// A slow database (a loaded machine) may take longer than a period: a
	// renewal is still worth having until half the lease has gone by.
	qctx, cancel := context.WithTimeout(ctx, n.cfg.Lease/2)
	defer cancel()
	if err := n.renew(qctx); err != nil {
		if ctx.Err() == nil {
			n.log.Warn("renew leases", "err", err)
		}
		return
	}
	n.mu.Lock()
	draining := n.draining
	n.mu.Unlock()
	if draining {
		n.handOver(n.Owned()) // at its next step the next owner takes them
		return
	}
	if !place {
		return
	}
	v, err := n.view(qctx)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("read placement", "err", err)
		}
		return
	}
	n.reweigh(v)
	want := n.pick(v)
	n.log.Debug("placement", "fair_share", v.fair, "load", n.load(), "live_nodes", len(v.nodes), "taking", len(want))
	if err := n.take(qctx, want); err != nil && ctx.Err() == nil {
		n.log.Warn("take offices", "err", err)
	}
	if give := n.surplus(v); len(give) > 0 {
		n.log.Info("giving offices to less loaded nodes", "offices", len(give), "fair_share", v.fair)
		n.handOver(give)
	}
}

// reweigh updates the weights of the offices held (agents added or
// disabled since they were taken).
func (n *Node) reweigh(v view) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, o := range v.offices {
		if l, ok := n.owned[o.id]; ok {
			l.weight = o.weight
			n.owned[o.id] = l
		}
	}
}

// renew renews every lease this node holds, and its heartbeat, in one
// statement. A lease not renewed (another node took it, or it expired on
// the database's clock) is lost: its office is dropped.
func (n *Node) renew(ctx context.Context) error {
	n.mu.Lock()
	ids := make([]string, 0, len(n.owned))
	tokens := make([]int64, 0, len(n.owned))
	for id, l := range n.owned {
		ids, tokens = append(ids, id), append(tokens, l.token)
	}
	n.mu.Unlock()
	sent := time.Now()
	var kept []string
	n.stats.Renewals.Add(1)
	err := n.pool.QueryRow(ctx, `
		with hb as (
		  insert into office_cluster.nodes (node_id, addr, capacity) values ($1, $3, $4)
		  on conflict (node_id) do update set heartbeat = now()
		), r as (
		  update office_cluster.leases l set expires_at = now() + make_interval(secs => $2)
		  from unnest($5::uuid[], $6::bigint[]) as o(id, token)
		  where l.office_id = o.id and l.token = o.token and l.node_id = $1 and l.expires_at > now()
		  returning l.office_id::text as id
		)
		select coalesce(array_agg(id), '{}') from r`,
		n.cfg.NodeID, n.cfg.Lease.Seconds(), n.cfg.Addr, n.cfg.Capacity, ids, tokens).Scan(&kept)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.validUntil = sent.Add(n.cfg.Lease - n.margin())
	var lost []string
	for _, id := range ids {
		if !slices.Contains(kept, id) {
			if _, still := n.owned[id]; still {
				n.unhold(id)
				lost = append(lost, id)
			}
		}
	}
	n.mu.Unlock()
	for _, id := range lost {
		n.log.Error("office lost: another node holds its lease; stopping its agents", "office", id)
		n.stats.Lost.Add(1)
		n.jobs <- job{officeID: id}
	}
	return nil
}

// expireLocally drops every office once the node's leases ran out on its
// own clock (renewals failed, or the process was paused): from then on
// another node may run them.
func (n *Node) expireLocally() {
	n.mu.Lock()
	if len(n.owned) == 0 || time.Now().Before(n.validUntil) {
		n.mu.Unlock()
		return
	}
	ids := slices.Sorted(maps.Keys(n.owned))
	n.unholdAll()
	n.mu.Unlock()
	n.log.Error("leases ran out before they were renewed: stopping every office's agents", "offices", len(ids))
	for _, id := range ids {
		n.jobs <- job{officeID: id}
	}
}

// work runs the jobs in order until the channel closes.
func (n *Node) work(ctx context.Context, r Runner) {
	for j := range n.jobs {
		if j.take {
			if n.Owns(j.officeID) && ctx.Err() == nil {
				r.Take(ctx, j.officeID)
			}
			continue
		}
		if j.release == 0 { // lost: stop at once
			r.Drop(context.WithoutCancel(ctx), j.officeID)
			continue
		}
		n.handOff(ctx, r, j)
	}
}

// handOff ends a hand-over: the office's agents finish their turns (if r
// can tell, within QuietLimit), stop, and the lease is released, if it is
// still this node's.
func (n *Node) handOff(ctx context.Context, r Runner, j job) {
	if q, ok := r.(Quieter); ok && ctx.Err() == nil {
		qctx, cancel := context.WithTimeout(ctx, QuietLimit)
		q.Quiet(qctx, j.officeID)
		cancel()
	}
	r.Drop(context.WithoutCancel(ctx), j.officeID)
	n.mu.Lock()
	l, ok := n.owned[j.officeID]
	still := ok && l.token == j.release
	if still {
		n.unhold(j.officeID)
	}
	n.mu.Unlock()
	if still {
		n.release(context.WithoutCancel(ctx), []string{j.officeID}, []int64{j.release})
	}
}

// handOver stops holding ids: each is dropped, then its lease released.
func (n *Node) handOver(ids []string) {
	n.mu.Lock()
	var give []job
	for _, id := range ids {
		if l, ok := n.owned[id]; ok && !l.leaving {
			l.leaving = true
			n.owned[id] = l
			close(l.lost) // what waits to act for it stops
			l.lost = nil
			n.owned[id] = l
			n.released[id] = given{token: l.token, until: time.Now().Add(3 * n.cfg.Lease)}
			give = append(give, job{officeID: id, release: l.token})
		}
	}
	n.mu.Unlock()
	for _, j := range give {
		n.jobs <- j
	}
}

// release ends the leases now (if still this node's, with these tokens),
// so that another node takes the offices at its next step.
func (n *Node) release(ctx context.Context, ids []string, tokens []int64) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n.stats.Releases.Add(1)
	_, err := n.pool.Exec(ctx, `
		update office_cluster.leases l set expires_at = now()
		from unnest($2::uuid[], $3::bigint[]) as o(id, token)
		where l.office_id = o.id and l.token = o.token and l.node_id = $1`, n.cfg.NodeID, ids, tokens)
	if err != nil {
		n.log.Warn("release leases: they expire by themselves", "offices", len(ids), "err", err)
	}
}

// leave drops every office still held, releases the leases and removes
// the node's row.
func (n *Node) leave(ctx context.Context, r Runner) {
	n.mu.Lock()
	ids := make([]string, 0, len(n.owned))
	tokens := make([]int64, 0, len(n.owned))
	for id, l := range n.owned {
		ids, tokens = append(ids, id), append(tokens, l.token)
	}
	n.unholdAll()
	n.mu.Unlock()
	for _, id := range ids {
		r.Drop(ctx, id)
	}
	if len(ids) > 0 {
		n.release(ctx, ids, tokens)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := n.pool.Exec(cctx, `delete from office_cluster.nodes where node_id = $1`, n.cfg.NodeID); err != nil {
		n.log.Warn("remove node row", "err", err)
	}
	n.log.Info("cluster node left", "released", len(ids))
}

// take leases ids (those still free when the statement runs) and starts
// running them.
func (n *Node) take(ctx context.Context, want map[string]int) error {
	if len(want) == 0 {
		return nil
	}
	ids := slices.Sorted(maps.Keys(want))
	n.stats.Takes.Add(1)
	rows, err := n.pool.Query(ctx, `
		insert into office_cluster.leases as l (office_id, node_id, expires_at)
		select t.id, $1, now() + make_interval(secs => $2)
		from unnest($3::uuid[]) as t(id) where exists (select 1 from public.offices o where o.id = t.id)
		on conflict (office_id) do update
		  set node_id = excluded.node_id, token = l.token + 1, expires_at = excluded.expires_at, taken_at = now()
		  where l.expires_at <= now()
		returning l.office_id::text, l.token`, n.cfg.NodeID, n.cfg.Lease.Seconds(), ids)
	if err != nil {
		return err
	}
	got := map[string]int64{}
	var (
		id  string
		tok int64
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &tok}, func() error { got[id] = tok; return nil })
	if err != nil {
		return err
	}
	n.mu.Lock()
	for id, tok := range got {
		n.hold(id, tok, want[id])
	}
	n.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(got)) {
		if got[id] > 1 {
			n.log.Info("took over office", "office", id, "token", got[id])
		} else {
			n.log.Info("running office", "office", id, "token", got[id])
		}
		n.stats.Gained.Add(1)
		n.jobs <- job{take: true, officeID: id}
	}
	return nil
}

// Owner returns the address of the node running officeID, or local when
// that is this node or no live node runs it (server.Owners).
func (n *Node) Owner(ctx context.Context, officeID string) (addr string, local bool) {
	if n.Owns(officeID) {
		return "", true
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := n.pool.QueryRow(ctx, `
		select n.addr from office_cluster.leases l join office_cluster.nodes n on n.node_id = l.node_id
		where l.office_id = $1 and l.expires_at > now() and l.node_id <> $2`, officeID, n.cfg.NodeID).Scan(&addr)
	if err != nil || addr == "" {
		return "", true
	}
	return addr, false
}
