package engine

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/office-server/office-server/office"
)

// The engine's parts. The Router owns the desks and the goroutines and
// wires these; each part holds what it needs and no more (docs/notes/engine.md
// lists their methods):
//
//   - eventLog: appends events, counts refused ones, fans them out to
//     subscribers; the transcript cursors.
//   - roster: reads of offices, agents and their sessions that the others
//     share (who is served here, the proxy registry, names, TTLs).
//   - dispatcher: acts on each parsed message once and sends it to its
//     handler (asks, work, proxyWork); invalid and excess blocks.
//   - asks: questions and dependency requests from agents.
//   - work: tasks (INVOKE), results, ERROR blocks.
//   - proxyWork: PROXY_REQUEST and the parked requests.
//   - deliverer: one deliverer per kind of work due to an agent, and
//     starting its session.
//   - statusWriter: the single writer of session statuses.
//   - permissions: permission requests waiting for a person.
//   - timers: what the parts tell the sweeper (deadlines, ERROR retries,
//     parked proxy requests, a wake-up); it points to no part.
//   - sweeper: ERROR retries and expiries (sweep.go).
//
// The parts call one way: no part holds one that holds it, directly or
// through others (TestPartsCallOneWay draws the graph from these structs).

// base is what every part shares: the configuration, the store, the clock,
// the log, the event log and the roster, and the two ways to reach an
// agent's desk (the Router's).
type base struct {
	cfg   Config
	store office.Store
	log   *slog.Logger
	now   func() time.Time
	// events and roster are named, not embedded: a part calls them
	// through these fields and gets none of their methods as its own.
	events *eventLog
	roster *roster

	notify  func(a office.Agent, text string) // queue a notice on a's desk
	kick    func(k agentKey)                  // wake k's delivery
	desk    func(k agentKey) *desk            // k's desk
	running func() context.Context            // Run's context; nil when not running
}

// eventLog appends the office's events and fans them out to subscribers.
type eventLog struct {
	store office.Events
	log   *slog.Logger

	mu            sync.Mutex
	subs          map[*Subscription]struct{}
	auditFailures atomic.Uint64 // events the store refused (AuditFailures)
}

// roster reads the offices, agents and sessions the other parts share.
type roster struct {
	cfg   Config
	store office.Store
	log   *slog.Logger
}

// asks turns agents' questions and dependency requests into rows.
type asks struct {
	*base
	timers *timers
}

// work handles tasks between agents, their results and ERROR blocks.
type work struct {
	*base
	sess   Sessions
	asks   *asks
	timers *timers
	status *statusWriter
}

// dispatcher acts on each parsed message exactly once, through the part
// that handles its kind.
type dispatcher struct {
	*base
	asks    *asks
	work    *work
	proxies *proxyWork
}

// deliverer types what is due to an agent, one kind of work at a time,
// and starts its session when work waits.
type deliverer struct {
	*base
	sess   Sessions
	sealer *office.Sealer
	asks   *asks
	work   *work
	perms  *permissions
	timers *timers
	quiet  quiesce // the graceful stop (once.go)
	hib    *hibernation
}

// statusWriter records session status changes in order, one at a time.
type statusWriter struct {
	*base
	sess   Sessions
	perms  *permissions
	timers *timers
	// failer fails the work of an agent whose session failed for good:
	// work, which writes its own statuses through the status writer, so
	// the status writer holds only this.
	failer workFailer
	hib    *hibernation

	mu   sync.Mutex
	q    []statusChange
	wake chan struct{}
	turn chan struct{} // a token: held while statuses are written
	last sync.Map      // agent ID → the last status recorded (lastStatus)
}

// proxyWork carries PROXY_REQUESTs along their fallback chain.
type proxyWork struct {
	*base
	asks     *asks
	delivery *deliverer
	timers   *timers
}

// workFailer fails every open task of an agent and tells its callers why
// (work.failWork).
type workFailer interface {
	failWork(ctx context.Context, a office.Agent, why string) error
}
