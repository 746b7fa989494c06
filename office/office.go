package office

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/office-server/office-server/protocol"
)

// Defaults of Config.
const (
	DefaultQuestionTTL       = 5 * time.Minute
	DefaultInvocationTimeout = 30 * time.Minute
	DefaultDepthLimit        = 5
	DefaultDependencyTTL     = time.Hour
	DefaultRetryBackoff      = 30 * time.Second
	DefaultTick              = time.Second
)

// SessionSpec is what the office asks the session layer to run for an
// agent. It is the office's own type so the routing core does not depend on
// the session package; the adapter (ManagerSessions) maps it onto
// session.Spec.
type SessionSpec struct {
	OfficeID, AgentID string
	Launch            LaunchSpec
	Dir               string   // the agent's workspace
	Home              string   // HOME for the agent ("" = the layer's default)
	Env               []string // KEY=VALUE on top of Launch.Env (provided dependencies)
	SystemPrompt      string   // Instructions(...)
	ConversationID    string   // Claude Code --session-id / --resume
	Resume            bool
}

// Sessions is what the office needs from the session layer. The
// session.Manager satisfies it through ManagerSessions; tests use fakes.
//
// Send types untrusted text into the agent's terminal (the layer sanitises
// it too) and blocks until it is typed, which happens when the agent is ready
// for input; it fails when the agent has no running session.
type Sessions interface {
	Start(ctx context.Context, spec SessionSpec) error
	Restart(ctx context.Context, spec SessionSpec) error
	Stop(ctx context.Context, officeID, agentID string) error
	Send(ctx context.Context, officeID, agentID, text string) error
	Running(officeID, agentID string) bool
}

// Text is a chunk of an agent's words, as the session layer reports it
// (session.Text): lines in order, an identity stable across re-renders and
// restarts, and whether the agent's turn ended after them.
type Text struct {
	OfficeID, AgentID string
	ID                string
	Lines             []string
	TurnEnd           bool
}

// Config configures an Office. Store and Sessions are required.
type Config struct {
	Store    Store
	Feed     ChangeFeed // nil: only in-process changes (AnswerQuestion…) are seen
	Sessions Sessions
	Logger   *slog.Logger
	Now      func() time.Time

	// OfficeIDs limits the offices served; empty: all.
	OfficeIDs []string

	QuestionTTL       time.Duration // default 5 min; an office's own QuestionTTL wins
	InvocationTimeout time.Duration // default 30 min
	DepthLimit        int           // default 5
	DependencyTTL     time.Duration // default 1 h
	RetryBackoff      time.Duration // ERROR pause_and_retry; default 30 s
	Tick              time.Duration // expiry and retry scan; default 1 s
	MaxContent        int           // forwarded content limit; default proxy.MaxContent

	// SecretsKey is the 32-byte AES-256-GCM key for dependency values. Empty:
	// api_key values are refused.
	SecretsKey []byte

	// DataDir holds each agent's workspace, DataDir/<office>/<agent>, unless
	// its launch spec names a Dir.
	DataDir string
	// Home, when set, gives each agent's HOME (for Claude Code's state).
	Home func(Agent) string
}

// Router is the routing core: it acts on every message the agents print and
// feeds answers, results and tasks back into their terminals.
type Router struct {
	cfg    Config
	store  Store
	sess   Sessions
	log    *slog.Logger
	now    func() time.Time
	sealer *Sealer

	mu         sync.Mutex
	runCtx     context.Context // set by Run
	inboxes    map[agentKey]*inbox
	pumps      map[agentKey]*pump
	progress   map[agentKey]Progress
	retries    []retry
	parked     []parkedProxy
	subs       map[*Subscription]struct{}
	epochs     map[agentKey]string // per process start; see HandleText
	statusQ    []statusUpdate
	statusWake chan struct{}
	wg         sync.WaitGroup
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

// New returns an Office. It starts nothing: call Run.
func New(cfg Config) (*Router, error) {
	if cfg.Store == nil || cfg.Sessions == nil {
		return nil, Errorf(EINVALID, "office: Store and Sessions are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
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
	def(&cfg.Tick, DefaultTick)
	if cfg.DepthLimit <= 0 {
		cfg.DepthLimit = DefaultDepthLimit
	}
	sealer, err := NewSealer(cfg.SecretsKey)
	if err != nil {
		return nil, err
	}
	return &Router{
		cfg: cfg, store: cfg.Store, sess: cfg.Sessions, log: cfg.Logger, now: cfg.Now, sealer: sealer,
		inboxes:    map[agentKey]*inbox{},
		pumps:      map[agentKey]*pump{},
		progress:   map[agentKey]Progress{},
		subs:       map[*Subscription]struct{}{},
		epochs:     map[agentKey]string{},
		statusWake: make(chan struct{}, 1),
	}, nil
}

// Run starts the office's goroutines — the change-feed watch, the expiry and
// retry ticker, one delivery pump per agent and one reader per session — and
// blocks until ctx ends, then waits for all of them. Everything still to be
// delivered is in the store, so a later Run picks it up.
func (o *Router) Run(ctx context.Context) error {
	o.mu.Lock()
	if o.runCtx != nil {
		o.mu.Unlock()
		return Errorf(ECONFLICT, "office: Run called twice")
	}
	o.runCtx = ctx
	for k, in := range o.inboxes {
		o.startInboxLocked(k, in)
	}
	o.mu.Unlock()

	if o.cfg.Feed != nil {
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			err := o.cfg.Feed.Watch(ctx, o.cfg.OfficeIDs, o.onChange)
			if err != nil && ctx.Err() == nil {
				o.log.Error("change feed stopped", "err", err)
			}
		}()
	}
	o.wg.Add(2)
	go func() {
		defer o.wg.Done()
		o.ticker(ctx)
	}()
	go func() {
		defer o.wg.Done()
		o.recordStatuses(ctx)
	}()
	// Catch up on everything waiting in the store (the feed does too; the
	// store's conditional transitions make doing it twice harmless).
	o.kickAll(ctx)
	<-ctx.Done()
	o.wg.Wait()
	return nil
}

// go starts f as a goroutine owned by Run; false when Run is not running.
func (o *Router) goOwned(f func(ctx context.Context)) bool {
	o.mu.Lock()
	ctx := o.runCtx
	o.mu.Unlock()
	if ctx == nil || ctx.Err() != nil {
		return false
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		f(ctx)
	}()
	return true
}

func (o *Router) onChange(c Change) {
	if c.AgentID != "" && c.OfficeID != "" {
		o.kick(agentKey{c.OfficeID, c.AgentID})
		return
	}
	if o.runCtx != nil {
		o.kickAll(o.runCtx)
	}
}

// kickAll wakes the pump of every agent of the served offices.
func (o *Router) kickAll(ctx context.Context) {
	offices, err := o.offices(ctx)
	if err != nil {
		o.log.Warn("list offices", "err", err)
		return
	}
	for _, off := range offices {
		agents, err := o.store.ListAgents(ctx, off.ID)
		if err != nil {
			o.log.Warn("list agents", "office", off.ID, "err", err)
			continue
		}
		for _, a := range agents {
			o.kick(agentKey{a.OfficeID, a.ID})
		}
	}
}

func (o *Router) offices(ctx context.Context) ([]Office, error) {
	all, err := o.store.ListOffices(ctx)
	if err != nil {
		return nil, err
	}
	if len(o.cfg.OfficeIDs) == 0 {
		return all, nil
	}
	return slices.DeleteFunc(all, func(of Office) bool { return !slices.Contains(o.cfg.OfficeIDs, of.ID) }), nil
}

func (o *Router) serves(officeID string) bool {
	return len(o.cfg.OfficeIDs) == 0 || slices.Contains(o.cfg.OfficeIDs, officeID)
}

// inbox holds one session's unread text, in order, and its parser.
type inbox struct {
	mu      sync.Mutex
	items   []Text
	wake    chan struct{}
	parser  *protocol.Parser
	started bool
}

// HandleText takes a chunk of an agent's words (session.Options.OnText). It
// never blocks for long: the chunk is queued and parsed by the session's
// own reader goroutine, in order.
//
// Screen-read chunk IDs ("screen:<n>") are unique only within one process's
// life; they are prefixed with an epoch renewed at every session start
// (HandleStatus "starting"), so a message read after a restart is never
// taken for one already acted on. Transcript IDs (Claude Code's entry
// uuids) are stable across restarts and used as they are.
func (o *Router) HandleText(t Text) {
	k := agentKey{t.OfficeID, t.AgentID}
	o.mu.Lock()
	if strings.HasPrefix(t.ID, "screen:") {
		ep := o.epochs[k]
		if ep == "" {
			ep = uuid.NewString()
			o.epochs[k] = ep
		}
		t.ID = ep + "/" + t.ID
	}
	in := o.inboxes[k]
	if in == nil {
		in = &inbox{wake: make(chan struct{}, 1), parser: protocol.NewParser(protocol.Options{})}
		o.inboxes[k] = in
	}
	if o.runCtx != nil && !in.started {
		o.startInboxLocked(k, in)
	}
	o.mu.Unlock()
	in.mu.Lock()
	in.items = append(in.items, t)
	in.mu.Unlock()
	select {
	case in.wake <- struct{}{}:
	default:
	}
}

func (o *Router) startInboxLocked(k agentKey, in *inbox) {
	if in.started || o.runCtx.Err() != nil {
		return
	}
	in.started = true
	ctx := o.runCtx
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		o.readInbox(ctx, k, in)
	}()
}

func (o *Router) readInbox(ctx context.Context, k agentKey, in *inbox) {
	for {
		in.mu.Lock()
		items := in.items
		in.items = nil
		in.mu.Unlock()
		for _, t := range items {
			o.parseText(ctx, k, in.parser, t)
		}
		select {
		case <-ctx.Done():
			return
		case <-in.wake:
		}
	}
}

// parseText feeds t to the parser and acts on the messages it completes,
// ordered by seed 001's priority (stable, so equal ranks keep their order).
// Each message is named by the chunk's ID and its index among the chunk's
// messages: that name is the event's dedupe key, so a re-rendered or
// re-read chunk is never acted on twice.
func (o *Router) parseText(ctx context.Context, k agentKey, p *protocol.Parser, t Text) {
	var msgs []protocol.Message
	for _, l := range t.Lines {
		msgs = append(msgs, p.Feed(l)...)
	}
	if t.TurnEnd {
		msgs = append(msgs, p.Flush()...)
	}
	if len(msgs) == 0 {
		return
	}
	idx := make([]int, len(msgs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return msgs[idx[a]].Priority() > msgs[idx[b]].Priority() })
	for _, i := range idx {
		src := source{officeID: k.officeID, agentID: k.agentID, key: fmt.Sprintf("%s#%d", t.ID, i)}
		if err := o.handle(ctx, src, msgs[i]); err != nil {
			o.log.Error("handle message", "office", k.officeID, "agent", k.agentID, "kind", msgs[i].Kind, "err", err)
		}
	}
}

// source names where a message came from.
type source struct {
	officeID, agentID string
	key               string // dedupe key: chunk ID # index
}

// event appends an event (deduplicated when key is set) and publishes it to
// subscribers when it was inserted.
func (o *Router) event(ctx context.Context, officeID, agentID, kind string, payload any, raw, key string) (bool, error) {
	var pj json.RawMessage
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			return false, fmt.Errorf("event %s: %w", kind, err)
		}
		pj = b
	}
	ev, inserted, err := o.store.AppendEvent(ctx, Event{OfficeID: officeID, AgentID: agentID, Kind: kind, Payload: pj, Raw: raw, DedupeKey: key})
	if err != nil {
		return false, fmt.Errorf("append event %s: %w", kind, err)
	}
	if inserted {
		o.publish(ev)
	}
	return inserted, nil
}

// workspace returns an agent's working directory.
func (o *Router) workspace(a Agent) string {
	if a.Launch.Dir != "" {
		return a.Launch.Dir
	}
	base := o.cfg.DataDir
	if base == "" {
		base = "office-data"
	}
	return filepath.Join(base, a.OfficeID, a.Name)
}
