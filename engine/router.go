// Package engine is the office's routing core: it parses what each agent
// prints, acts on every message exactly once (rows and events in the
// office.Store), and types answers, results, tasks and notices back into
// the agents' terminals, one desk per agent. Only the wiring uses it
// (package agents, cmd/office-server). The path of a message through it is
// in docs/notes/engine.md.
package engine

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/office-server/office-server/office"

	"github.com/google/uuid"

	"github.com/office-server/office-server/proxy"
	"github.com/office-server/office-server/session"
)

// Defaults of Config.
const (
	DefaultQuestionTTL       = 5 * time.Minute
	DefaultInvocationTimeout = 30 * time.Minute
	DefaultDepthLimit        = 5
	DefaultDependencyTTL     = time.Hour
	DefaultRetryBackoff      = 30 * time.Second
	DefaultTick              = time.Second
	// DefaultSweep is how often the engine checks whether something
	// expired (questions, dependencies, tasks past their timeout, parked
	// proxy requests); a deadline is met within this much. It asks the
	// store only when a known deadline has come (sweep.go).
	DefaultSweep = 15 * time.Second
	// DefaultSafetySweep is how often the store is asked about every kind
	// of deadline anyway: three list queries, so an idle office costs
	// about 0.6 requests a minute.
	DefaultSafetySweep = 5 * time.Minute
	DefaultInboxBytes  = 1 << 20
	DefaultProxyWait   = 30 * time.Minute
)

// SessionSpec is what the office asks the session layer to run for an
// agent. It is the office's own type so the routing core does not depend on
// the session package; the agents package maps it onto session.Spec.
type SessionSpec struct {
	OfficeID, AgentID string
	// OfficeName and AgentName are for the logs, beside the ids.
	OfficeName, AgentName string
	Launch                office.LaunchSpec
	Dir                   string   // the agent's workspace
	Env                   []string // KEY=VALUE on top of Launch.Env (provided dependencies)
	SystemPrompt          string   // Instructions(...)
	ConversationID        string   // Claude Code --session-id / --resume
	Resume                bool
	// TranscriptAfter is the resume cursor of a Claude Code transcript
	// (session.Spec.TranscriptAfter): the last entry whose turn the office
	// fully acted on, so a restarted server does not read the conversation
	// again from its start. Empty: read from the start (dedupe keeps it
	// exactly once).
	TranscriptAfter string
	// PermissionTimeout is how long the agent's permission requests wait
	// for a person (its policy's, else Config.PermissionTimeout): the
	// session layer sets the hook's own timeout above it.
	PermissionTimeout time.Duration
}

// Sessions is what the office needs from the session layer (implemented by
// agents.Sessions; tests of the routing alone use fakes).
//
// Send types untrusted text into the agent's terminal (the layer sanitises
// it too) and blocks until the agent has received it, which happens once it
// is ready for input; it fails when the agent has no running session, or
// when the agent never acknowledged the text (it is then not delivered and
// is sent again later).
type Sessions interface {
	Start(ctx context.Context, spec SessionSpec) error
	Restart(ctx context.Context, spec SessionSpec) error
	Stop(ctx context.Context, officeID, agentID string) error
	Send(ctx context.Context, officeID, agentID, text string) error
	Running(officeID, agentID string) bool
}

// Config configures a Router. Store and Sessions are required.
type Config struct {
	Store    office.Store
	Feed     office.ChangeFeed // nil: only in-process changes (AnswerQuestion…) are seen
	Sessions Sessions
	Logger   *slog.Logger
	Now      func() time.Time

	// OfficeIDs limits the offices served; empty: all.
	OfficeIDs []string
	// Owns, when set, says whether this server runs an office now (one
	// owner per office: cmd/office-server/owner.go). It is asked at every
	// decision, so ownership may change while Run runs: the office neither
	// starts agents, delivers, expires nor records sessions for an office it
	// does not own. Call CatchUp when an office is taken. Nil: every office
	// (within OfficeIDs).
	Owns func(officeID string) bool
	// LookupEnv gives the values of the ${NAME} references in the agents'
	// launch env and args when they start; default os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Node names the server running the agents: it is recorded in every
	// session row it writes (agent_sessions.node), so a member sees which
	// node runs an agent. Empty: a single server without a node name.
	Node string

	QuestionTTL       time.Duration // default 5 min; an office's own QuestionTTL wins
	InvocationTimeout time.Duration // default 30 min
	DepthLimit        int           // default 5
	DependencyTTL     time.Duration // default 1 h
	RetryBackoff      time.Duration // ERROR pause_and_retry; default 30 s
	Tick              time.Duration // ERROR retries (in memory); default 1 s
	// Sweep is how often the engine checks for expiries; default
	// DefaultSweep, or Tick when only Tick is set (tests that shorten it).
	// A deadline is met within this much. The store is asked only about
	// the kinds whose earliest known deadline has come (sweep.go).
	Sweep time.Duration
	// SafetySweep is how often the store is asked about every kind of
	// deadline even when none is known to have come: the safety net for a
	// row whose insertion the change feed did not report; default
	// DefaultSafetySweep.
	SafetySweep time.Duration
	MaxContent  int // forwarded content limit; default proxy.MaxContent
	// ProxyWait is how long a parked PROXY_REQUEST waits for a proxy before
	// it times out (backed up to a file, a person asked, the requester
	// told); default 30 min.
	ProxyWait time.Duration
	// ContentRules screen what a PROXY_REQUEST asks a proxy to record
	// (proxy.ActionRequest.Screen); nil: proxy.DefaultRules().
	ContentRules []proxy.Rule
	// InboxBytes bounds each session's text waiting to be parsed and acted
	// on (a slow or hung store holds the reader up). Beyond it, screen
	// text is dropped and recorded as lost (an "output.lost" event, a
	// notice to the agent), and Backlogged reports true so that the
	// session layer stops reading a Claude Code transcript until the
	// inbox drains (session.Options.Paused). Default 1 MiB.
	InboxBytes int

	// SecretsKey is the 32-byte AES-256-GCM key for dependency values. Empty:
	// api_key values are refused.
	SecretsKey []byte

	// DataDir holds each agent's workspace, DataDir/<office>/<agent>, unless
	// its launch spec names a Dir.
	DataDir string

	// Decider sends permission decisions to the agents' hooks
	// (permission.go); nil: requests are not taken.
	Decider Decider
	// PermissionTimeout is how long a permission request waits for a
	// person before it is denied, unless the agent's policy says; default
	// DefaultPermissionTimeout.
	PermissionTimeout time.Duration

	// MaxLive caps the live agents of this server: a wake-up (or an
	// autostart) beyond it waits while the least recently used idle agents
	// hibernate (hibernate.go). 0: no cap.
	MaxLive int
}

// statusChange is what the status writer records: a session's new status
// as the session layer reported it (HandleStatus), or one the office
// makes itself (hibernation: hibernated), with what explains it.
type statusChange struct {
	OfficeID, AgentID string
	Status            string // Session* statuses
	PID               int
	ExitCode          *int     // exited, crashed, failed, stopped
	Detail            string   // the dialog's text, or how the process ended
	LastLines         []string // the screen's last lines when the process ended
	// Resumes: the agent keeps its conversation across restarts of its
	// process (session.Info.Resumes: Claude Code resumes it); others start
	// blank, so their tasks in progress are typed again.
	Resumes bool
	// Resumed: this process did resume the conversation (there was one to
	// resume), so after a crash the agent is reminded of its tasks; a
	// fresh one gets what it had not acknowledged typed again by the
	// session.
	Resumed bool
	// ConversationID is the conversation the process holds
	// (session.Info.ConversationID): Codex names its own, which the
	// office keeps in the session row so that the next process, after a
	// hibernation or a server restart, resumes it (hibernate.go).
	ConversationID string
}

// Router is the routing core: it acts on every message the agents print and
// feeds answers, results and tasks back into their terminals. It owns the
// desks (one per agent, desk.go) and every goroutine, and wires the parts
// that do the work (parts.go); its exported methods are the engine's API.
type Router struct {
	*base
	sess Sessions

	mu     sync.Mutex
	runCtx context.Context // set by Run
	desks  map[agentKey]*desk
	wg     sync.WaitGroup

	intake   *dispatcher
	delivery *deliverer
	status   *statusWriter
	perms    *permissions
	proxies  *proxyWork
	sweep    *sweeper
	hib      *hibernation
}

type agentKey struct{ officeID, agentID string }

// Progress is an agent's last reported phase and step.
type Progress struct {
	Phase     int    `json:"phase,omitempty"`
	PhaseName string `json:"phase_name,omitempty"`
	Step      int    `json:"step,omitempty"`
	Steps     int    `json:"steps,omitempty"`
	StepName  string `json:"step_name,omitempty"`
}

// New returns a Router for cfg, or EINVALID when cfg lacks Store or
// Sessions. It starts nothing: call Run.
func New(cfg Config) (*Router, error) {
	if cfg.Store == nil || cfg.Sessions == nil {
		return nil, office.Errorf(office.EINVALID, "office: Store and Sessions are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LookupEnv == nil {
		cfg.LookupEnv = os.LookupEnv
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.QuestionTTL, DefaultQuestionTTL)
	def(&cfg.InvocationTimeout, DefaultInvocationTimeout)
	def(&cfg.DependencyTTL, DefaultDependencyTTL)
	def(&cfg.RetryBackoff, DefaultRetryBackoff)
	if cfg.Sweep <= 0 && cfg.Tick > 0 {
		cfg.Sweep = cfg.Tick
	}
	def(&cfg.Sweep, DefaultSweep)
	def(&cfg.SafetySweep, DefaultSafetySweep)
	def(&cfg.Tick, DefaultTick)
	def(&cfg.PermissionTimeout, DefaultPermissionTimeout)
	def(&cfg.ProxyWait, DefaultProxyWait)
	if cfg.DepthLimit <= 0 {
		cfg.DepthLimit = DefaultDepthLimit
	}
	if cfg.InboxBytes <= 0 {
		cfg.InboxBytes = DefaultInboxBytes
	}
	sealer, err := office.NewSealer(cfg.SecretsKey)
	if err != nil {
		return nil, err
	}
	r := &Router{sess: cfg.Sessions, desks: map[agentKey]*desk{}}
	r.wire(cfg, sealer)
	return r, nil
}

// Run starts the router's goroutines — the change-feed watch, the expiry
// and retry ticker, the status recorder, and each agent's desk's intake
// and delivery loops — and blocks until ctx ends, then waits for all of
// them. Everything still to be delivered is in the store, so a later Run
// picks it up.
func (rt *Router) Run(ctx context.Context) error {
	rt.mu.Lock()
	if rt.runCtx != nil {
		rt.mu.Unlock()
		return office.Errorf(office.ECONFLICT, "office: Run called twice")
	}
	rt.runCtx = ctx
	for _, d := range rt.desks {
		if !d.intakeOn {
			d.intakeOn = rt.goLocked(d.intake)
		}
	}
	rt.mu.Unlock()

	if rt.cfg.Feed != nil {
		rt.wg.Add(1)
		go func() {
			defer rt.wg.Done()
			err := rt.cfg.Feed.Watch(ctx, rt.cfg.OfficeIDs, rt.onChange)
			if err != nil && ctx.Err() == nil {
				rt.log.Error("change feed stopped", "err", err)
			}
		}()
	}
	rt.wg.Add(4)
	go func() {
		defer rt.wg.Done()
		rt.sweep.run(ctx)
	}()
	go func() {
		defer rt.wg.Done()
		rt.hib.run(ctx)
	}()
	go func() {
		defer rt.wg.Done()
		rt.perms.run(ctx)
	}()
	go func() {
		defer rt.wg.Done()
		rt.status.run(ctx)
	}()
	// Catch up on everything waiting in the store (the feed does too; the
	// store's conditional transitions make doing it twice harmless).
	rt.kickAll(ctx)
	<-ctx.Done()
	rt.wg.Wait()
	return nil
}

// goLocked starts f as a goroutine owned by Run; false when Run is not
// running. The caller holds o.mu.
func (rt *Router) goLocked(f func(ctx context.Context)) bool {
	ctx := rt.runCtx
	if ctx == nil || ctx.Err() != nil {
		return false
	}
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		f(ctx)
	}()
	return true
}

func (rt *Router) onChange(c office.Change) {
	if rt.sweep.noteChange(c) {
		return // a pending row another process inserted: a deadline, nothing to deliver
	}
	rt.perms.wake() // an answer to a permission question?
	if c.AgentID != "" && c.OfficeID != "" {
		rt.kick(agentKey{c.OfficeID, c.AgentID})
		return
	}
	rt.mu.Lock()
	ctx := rt.runCtx
	rt.mu.Unlock()
	if ctx != nil {
		rt.kickAll(ctx)
	}
}

// kickAll wakes the delivery of every agent of the served offices.
func (rt *Router) kickAll(ctx context.Context) {
	offices, err := rt.roster.offices(ctx)
	if err != nil {
		rt.log.Warn("list offices", "err", err)
		return
	}
	for _, off := range offices {
		agents, err := rt.store.ListAgents(ctx, off.ID)
		if err != nil {
			rt.log.Warn("list agents", "office", off.ID, "err", err)
			continue
		}
		for _, a := range agents {
			rt.kick(agentKey{a.OfficeID, a.ID})
		}
	}
}

// CatchUp wakes the delivery of every agent of officeID, so that what waits in
// the store for them (answers, messages, tasks, results) is delivered: call
// it when this server takes the office over (Config.Owns).
func (rt *Router) CatchUp(ctx context.Context, officeID string) {
	agents, err := rt.store.ListAgents(ctx, officeID)
	if err != nil {
		rt.log.Warn("list agents", "office", officeID, "err", err)
		return
	}
	for _, a := range agents {
		rt.kick(agentKey{a.OfficeID, a.ID})
	}
	rt.sweep.timers.forget() // its deadlines and parked proxy requests are this server's now
}

// TakeOffice is what this server does when it becomes officeID's owner
// (Config.Owns): it catches up on what waits for the office's agents
// (CatchUp) and, with autostart, starts the agents that should run: the
// declared ones (an office file's) that are not disabled, and every other
// agent that was running when its last server stopped (status active).
// Failures to start are logged: the agent stays as it is. First of all,
// the session rows a server left live when it died are written stopped
// (statusWriter.settle).
func (rt *Router) TakeOffice(ctx context.Context, officeID string, declared []office.Agent, autostart bool) {
	rt.status.settle(ctx, officeID)
	rt.hib.forgetOffice(officeID)
	rt.perms.sweepPermissions(ctx, officeID, "")
	rt.CatchUp(ctx, officeID)
	if !autostart {
		return
	}
	var start []office.Agent
	seen := map[string]bool{}
	for _, a := range declared {
		if a.OfficeID == officeID && a.Status != office.AgentDisabled {
			start, seen[a.ID] = append(start, a), true
		}
	}
	agents, err := rt.store.ListAgents(ctx, officeID)
	if err != nil {
		rt.log.Warn("list agents", "office", officeID, "err", err)
	}
	for _, a := range agents {
		if a.Status == office.AgentActive && !seen[a.ID] {
			start = append(start, a)
		}
	}
	for _, a := range start {
		if rt.hib.skipStart(ctx, a) {
			continue // hibernated: the first work for it wakes it
		}
		if err := rt.StartAgent(ctx, a.ID); err != nil && ctx.Err() == nil {
			rt.log.Warn("start agent", "agent", a.Name, "err", err)
		}
	}
}

// source is the identity of the message being handled, passed to its
// handlers as a value: who printed it, its dedupe key (chunk ID # index)
// and whether it is a replay (seen before). A message's rows get IDs
// derived from its key, so a replay conflicts instead of duplicating, and
// nothing is typed for a replay. The zero source is no message (an API
// call, a timer): rows get IDs from the store, events no dedupe key.
type source struct {
	officeID, agentID string
	key               string
	replay            bool
	// msg is the message's own event while a transition may still carry
	// it (handle.go carried): nil for the other messages, whose event is
	// appended before they are handled.
	msg *pendingMessage
}

// pendingMessage is a message's event that the transition acting on the
// message appends first with its rows (office.Ask, office.Invoke,
// office.ResultDelivery Message), or recordMessage on any other path.
type pendingMessage struct {
	ev       office.Event
	done     bool // appended, or found stored before
	inserted bool // appended by this handling
}

// message returns the event a transition appends first with its rows:
// the message's, while it is not appended yet (zero otherwise).
func (s source) message() office.Event {
	if s.msg == nil || s.msg.done {
		return office.Event{}
	}
	return s.msg.ev
}

// carried records the write of a transition that was given message():
// the message's event is among events when that write appended it, and
// was stored before otherwise.
func (s source) carried(events []office.Event) {
	if s.msg == nil || s.msg.done {
		return
	}
	s.msg.done = true
	for _, ev := range events {
		if ev.Kind == s.msg.ev.Kind && ev.DedupeKey == s.msg.ev.DedupeKey {
			s.msg.inserted = true
		}
	}
}

// rowID returns the ID of the row the message creates as what, or "" for
// the zero source (the store picks one).
func (s source) rowID(what string) string {
	if s.key == "" {
		return ""
	}
	return uuid.NewSHA1(rowNamespace, []byte(s.officeID+"\x00"+s.key+"\x00"+what)).String()
}

// subKey returns the dedupe key of a secondary event of the message ("" for
// the zero source).
func (s source) subKey(what string) string {
	if s.key == "" {
		return ""
	}
	return s.key + "#" + what
}

// wire makes the Router's parts and connects them.
func (rt *Router) wire(cfg Config, sealer *office.Sealer) {
	ev := &eventLog{store: cfg.Store, log: cfg.Logger, subs: map[*Subscription]struct{}{}}
	b := &base{cfg: cfg, store: cfg.Store, log: cfg.Logger, now: cfg.Now, events: ev,
		roster: &roster{cfg: cfg, store: cfg.Store, log: cfg.Logger},
		notify: rt.notify, kick: rt.kick, desk: rt.desk, running: rt.running}
	rt.base = b
	// Each part is made after the parts it holds (docs/notes/engine.md
	// draws the graph); the status writer's failer is the one set after.
	tm := &timers{wake: make(chan struct{}, 1)}
	rt.perms = &permissions{base: b, timers: tm}
	rt.perms.init()
	a := &asks{base: b, timers: tm}
	rt.status = &statusWriter{base: b, sess: cfg.Sessions, perms: rt.perms, timers: tm, wake: make(chan struct{}, 1), turn: make(chan struct{}, 1)}
	w := &work{base: b, sess: cfg.Sessions, asks: a, timers: tm, status: rt.status}
	rt.status.failer = w
	rt.delivery = &deliverer{base: b, sess: cfg.Sessions, sealer: sealer, asks: a, work: w, perms: rt.perms, timers: tm}
	rt.proxies = &proxyWork{base: b, asks: a, delivery: rt.delivery, timers: tm}
	rt.intake = &dispatcher{base: b, asks: a, work: w, proxies: rt.proxies}
	rt.sweep = &sweeper{base: b, timers: tm, perms: rt.perms, work: w, proxies: rt.proxies}
	rt.hib = &hibernation{base: b, sess: cfg.Sessions, perms: rt.perms, status: rt.status.queue, desks: rt.delivery}
	rt.hib.init()
	rt.status.hib, rt.delivery.hib = rt.hib, rt.hib
}

// HandleStatus takes a session's status change, the session layer's values
// as they are (session.Options.OnStatus), without blocking: the status
// writer records the session, wakes the agent's delivery when it is ready,
// and fails the agent's open tasks when its session failed for good. An
// ended status (exited, crashed, failed, stopped) carries the exit code and
// the screen's last lines.
func (rt *Router) HandleStatus(k session.Key, st session.Status, info session.Info) {
	c := statusChange{OfficeID: k.OfficeID, AgentID: k.AgentID, Status: string(st), PID: info.PID, Detail: info.Detail,
		Resumes: info.Resumes, Resumed: info.Resumed, ConversationID: info.ConversationID}
	switch st {
	case office.SessionExited, office.SessionCrashed, office.SessionFailed, office.SessionStopped:
		code := info.ExitCode
		c.ExitCode = &code
		c.LastLines = info.LastLines
	}
	rt.status.queue(c)
}

// FlushStatuses writes every session status change reported so far, after
// the one being written now, with ctx; it returns ctx's error if ctx ends
// first. The server calls it after stopping the sessions at shutdown and
// before it ends Run's context, so that the final rows (stopped, pid 0) are
// written with a context that is still alive, bounded by ctx (the shutdown
// timeout).
func (rt *Router) FlushStatuses(ctx context.Context) error { return rt.status.flush(ctx) }

// HandlePermission takes an agent's permission request
// (session.Options.OnPermission; it may block). A request an "allow for
// this session" answer covers is allowed at once; any other becomes a
// permission question, an office event, and waits for its answer. A
// request that cannot be asked (the store fails, the office is not served
// here) is denied with the reason, so the agent never waits in vain.
func (rt *Router) HandlePermission(req session.PermissionRequest) { rt.perms.request(req) }

// PermissionEnded is told that a request's hook went away before a
// decision (session.Options.OnPermissionEnd): answered in the agent's
// terminal, its question is cancelled; the agent ended, the question is
// left for the sweep of the agent's next start.
func (rt *Router) PermissionEnded(officeID, agentID, id string, answered bool) {
	rt.perms.ended(officeID, agentID, id, answered)
}

// Subscribe returns a subscription to the office's events with a queue of
// n events (64 when n <= 0).
func (rt *Router) Subscribe(n int) *Subscription { return rt.events.subscribe(n) }

// AuditFailures returns how many events could not be appended to the
// event log since New (the store refused them); cmd/office-server exports
// it in /metrics.
func (rt *Router) AuditFailures() uint64 { return rt.events.failures() }

// running returns Run's context, or nil when Run does not run.
func (rt *Router) running() context.Context {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.runCtx == nil || rt.runCtx.Err() != nil {
		return nil
	}
	return rt.runCtx
}
