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
	DefaultInboxBytes        = 1 << 20
)

// SessionSpec is what the office asks the session layer to run for an
// agent. It is the office's own type so the routing core does not depend on
// the session package; the agents package maps it onto session.Spec.
type SessionSpec struct {
	OfficeID, AgentID string
	Launch            LaunchSpec
	Dir               string   // the agent's workspace
	Env               []string // KEY=VALUE on top of Launch.Env (provided dependencies)
	SystemPrompt      string   // Instructions(...)
	ConversationID    string   // Claude Code --session-id / --resume
	Resume            bool
	// TranscriptAfter is the resume cursor of a Claude Code transcript
	// (session.Spec.TranscriptAfter): the last entry whose turn the office
	// fully acted on, so a restarted server does not read the conversation
	// again from its start. Empty: read from the start (dedupe keeps it
	// exactly once).
	TranscriptAfter string
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

// Text is a chunk of an agent's words, as the session layer reports it
// (session.Text): lines in order, an identity stable across re-renders and
// restarts, and whether the agent's turn ended after them.
type Text struct {
	OfficeID, AgentID string
	ID                string
	Lines             []string
	TurnEnd           bool
	// Lost counts screen lines the session layer dropped before Lines
	// (session.Text.Lost): the office records it as lost output.
	Lost int
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
	// Owns, when set, says whether this server runs an office now (one
	// owner per office: cmd/office-server/owner.go). It is asked at every
	// decision, so ownership may change while Run runs: the office neither
	// starts agents, delivers, expires nor records sessions for an office it
	// does not own. Call CatchUp when an office is taken. Nil: every office
	// (within OfficeIDs).
	Owns func(officeID string) bool

	QuestionTTL       time.Duration // default 5 min; an office's own QuestionTTL wins
	InvocationTimeout time.Duration // default 30 min
	DepthLimit        int           // default 5
	DependencyTTL     time.Duration // default 1 h
	RetryBackoff      time.Duration // ERROR pause_and_retry; default 30 s
	Tick              time.Duration // expiry and retry scan; default 1 s
	MaxContent        int           // forwarded content limit; default proxy.MaxContent
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
}

// StatusChange is a session's new status (session.Options.OnStatus), with
// what explains it.
type StatusChange struct {
	OfficeID, AgentID string
	Status            string // Session* statuses
	PID               int
	ExitCode          *int     // exited, crashed, failed, stopped
	Detail            string   // the dialog's text, or how the process ended
	LastLines         []string // the screen's last lines when the process ended
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
	statusQ    []StatusChange
	crashed    map[agentKey]bool // crashed since its last ready (see remind)
	statusWake chan struct{}
	statusTurn chan struct{}       // a token: held while statuses are written
	cursors    map[agentKey]cursor // newest transcript cursor known per agent
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
	if cfg.InboxBytes <= 0 {
		cfg.InboxBytes = DefaultInboxBytes
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
		cursors:    map[agentKey]cursor{},
		crashed:    map[agentKey]bool{},
		statusWake: make(chan struct{}, 1),
		statusTurn: make(chan struct{}, 1),
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

// CatchUp wakes the pump of every agent of officeID, so that what waits in
// the store for them (answers, messages, tasks, results) is delivered: call
// it when this server takes the office over (Config.Owns).
func (o *Router) CatchUp(ctx context.Context, officeID string) {
	agents, err := o.store.ListAgents(ctx, officeID)
	if err != nil {
		o.log.Warn("list agents", "office", officeID, "err", err)
		return
	}
	for _, a := range agents {
		o.kick(agentKey{a.OfficeID, a.ID})
	}
}

func (o *Router) offices(ctx context.Context) ([]Office, error) {
	all, err := o.store.ListOffices(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(of Office) bool { return !o.serves(of.ID) }), nil
}

func (o *Router) serves(officeID string) bool {
	if o.cfg.Owns != nil && !o.cfg.Owns(officeID) {
		return false
	}
	return len(o.cfg.OfficeIDs) == 0 || slices.Contains(o.cfg.OfficeIDs, officeID)
}

// inbox holds one session's unread text, in order, and its parser. Its
// size is bounded (Config.InboxBytes): see HandleText.
type inbox struct {
	mu      sync.Mutex
	items   []inboxItem
	bytes   int // size of items, and of the one being handled
	wake    chan struct{}
	parser  *protocol.Parser
	started bool
	dropped bool // dropping screen text: logged once per overflow
	peak    int  // the most bytes ever held (tests, diagnostics)
	// cursorHeld: a message failed; no transcript cursor is recorded
	// after it (reader-owned).
	cursorHeld bool
	// blocks counts the current window's valid blocks (reader-owned).
	blocks blockTally
	// invalid counts the current window's invalid blocks (reader-owned).
	invalid invalidTally
}

// inboxItem is a chunk of text, or (lost > 0) a record of text dropped at
// that point of the stream.
type inboxItem struct {
	t    Text
	size int
	lost int
}

// textSize is what a chunk holds in memory, roughly.
func textSize(t Text) int {
	n := 64 + len(t.ID)
	for _, l := range t.Lines {
		n += 16 + len(l)
	}
	return n
}

// HandleText takes a chunk of an agent's words (session.Options.OnText). It
// never blocks: the chunk is queued and parsed by the session's own reader
// goroutine, in order.
//
// The queue is bounded (Config.InboxBytes) so that a hung store cannot make
// memory grow for ever. Transcript text (Claude Code) is always queued: the
// session layer stops reading the transcript while Backlogged reports true
// (backpressure; the file is durable), so at most one poll's worth goes past
// the bound. Screen text (other CLIs) cannot wait: beyond the bound it is
// dropped, logged, and recorded in order as lost output (see readInbox).
//
// Screen-read chunk IDs ("screen:<n>") are unique only within one process's
// life; they are prefixed with an epoch renewed at every session start
// (HandleStatus "starting"), so a message read after a restart is never
// taken for one already acted on. Transcript IDs (Claude Code's entry
// uuids) are stable across restarts and used as they are.
func (o *Router) HandleText(t Text) {
	k := agentKey{t.OfficeID, t.AgentID}
	screen := strings.HasPrefix(t.ID, "screen:")
	o.mu.Lock()
	if screen {
		ep := o.epochs[k]
		if ep == "" {
			ep = uuid.NewString()
			o.epochs[k] = ep
		}
		t.ID = ep + "/" + t.ID
	}
	in := o.inboxLocked(k)
	if o.runCtx != nil && !in.started {
		o.startInboxLocked(k, in)
	}
	o.mu.Unlock()
	size := textSize(t)
	in.mu.Lock()
	if t.Lost > 0 {
		in.addLost(t.Lost)
	}
	var lost int
	if screen && in.bytes+size > o.cfg.InboxBytes {
		// Keep what fits, in order; the rest is lost.
		keep, room := 0, o.cfg.InboxBytes-in.bytes-textSize(Text{ID: t.ID})-lostItemSize
		for keep < len(t.Lines) && room >= 16+len(t.Lines[keep]) {
			room -= 16 + len(t.Lines[keep])
			keep++
		}
		lost = len(t.Lines) - keep
		t.Lines = t.Lines[:keep]
		size = textSize(t)
		if !in.dropped {
			in.dropped = true
			o.log.Warn("agent output dropped: the office is not keeping up (store slow or down)", "office", k.officeID, "agent", k.agentID, "queued_bytes", in.bytes)
		}
	}
	if len(t.Lines) > 0 || (t.TurnEnd && lost == 0) {
		in.items = append(in.items, inboxItem{t: t, size: size})
		in.bytes += size
	}
	if lost > 0 {
		in.addLost(lost)
	}
	in.peak = max(in.peak, in.bytes)
	in.mu.Unlock()
	select {
	case in.wake <- struct{}{}:
	default:
	}
}

// addLost records n lost lines at the end of the queue.
func (in *inbox) addLost(n int) {
	if l := len(in.items); l > 0 && in.items[l-1].lost > 0 {
		in.items[l-1].lost += n
		return
	}
	in.items = append(in.items, inboxItem{lost: n, size: lostItemSize})
	in.bytes += lostItemSize
}

// lostItemSize is what a record of lost lines counts for.
const lostItemSize = 64

func (o *Router) inboxLocked(k agentKey) *inbox {
	in := o.inboxes[k]
	if in == nil {
		in = &inbox{wake: make(chan struct{}, 1), parser: protocol.NewParser(protocol.Options{})}
		o.inboxes[k] = in
	}
	return in
}

// Backlogged reports whether the agent's text waiting to be acted on has
// reached Config.InboxBytes (wire it to session.Options.Paused).
func (o *Router) Backlogged(officeID, agentID string) bool {
	o.mu.Lock()
	in := o.inboxes[agentKey{officeID, agentID}]
	o.mu.Unlock()
	if in == nil {
		return false
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.bytes >= o.cfg.InboxBytes
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

// readInbox acts on a session's text in order, one chunk at a time; a
// chunk's bytes count against the bound until it has been handled.
func (o *Router) readInbox(ctx context.Context, k agentKey, in *inbox) {
	for {
		in.mu.Lock()
		if len(in.items) == 0 {
			in.dropped = false
			in.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-in.wake:
			}
			continue
		}
		it := in.items[0]
		in.items[0] = inboxItem{}
		in.items = in.items[1:]
		if len(in.items) == 0 {
			in.items = nil // let the backing array go
		}
		in.mu.Unlock()
		if it.lost > 0 {
			o.outputLost(ctx, k, in, it.lost)
		} else {
			if !o.parseText(ctx, k, in, it.t) {
				// A message failed (the store refused it): the cursor
				// stays where it is for this server life, so a restart
				// reads that message again and retries it.
				in.cursorHeld = true
			}
			if it.t.TurnEnd && !in.cursorHeld && !strings.Contains(it.t.ID, "/screen:") && ctx.Err() == nil {
				o.recordCursor(ctx, k, it.t.ID)
			}
		}
		in.mu.Lock()
		in.bytes -= it.size
		in.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
	}
}

// outputLost records that n lines of an agent's screen output were dropped
// and tells the agent, so it can print again what mattered. The parser
// starts afresh: a block cut in the middle must not swallow what follows.
func (o *Router) outputLost(ctx context.Context, k agentKey, in *inbox, n int) {
	in.parser = protocol.NewParser(protocol.Options{})
	o.log.Warn("agent output lost", "office", k.officeID, "agent", k.agentID, "lines", n)
	if _, err := o.event(ctx, k.officeID, k.agentID, "output.lost", map[string]int{"lines": n}, "", ""); err != nil {
		o.log.Error("record lost output", "office", k.officeID, "agent", k.agentID, "err", err)
	}
	o.notify(Agent{OfficeID: k.officeID, ID: k.agentID}, fmt.Sprintf("%d lines of your output were lost (the office could not keep up). If they held protocol blocks, print those blocks again.", n))
}

// parseText feeds t to the parser and acts on the messages it completes,
// ordered by seed 001's priority (stable, so equal ranks keep their order).
// Each message is named by the chunk's ID and its index among the chunk's
// messages: that name is the event's dedupe key, so a re-rendered or
// re-read chunk is never acted on twice.
// Invalid blocks are recorded and told within bounds (see onInvalid).
// It reports false when a message could not be handled.
func (o *Router) parseText(ctx context.Context, k agentKey, in *inbox, t Text) bool {
	var msgs []protocol.Message
	for _, l := range t.Lines {
		msgs = append(msgs, in.parser.Feed(l)...)
	}
	if t.TurnEnd {
		msgs = append(msgs, in.parser.Flush()...)
	}
	idx := make([]int, len(msgs))
	for i := range idx {
		idx[i] = i
	}
	ok := true
	sort.SliceStable(idx, func(a, b int) bool { return msgs[idx[a]].Priority() > msgs[idx[b]].Priority() })
	for _, i := range idx {
		src := source{officeID: k.officeID, agentID: k.agentID, key: fmt.Sprintf("%s#%d", t.ID, i)}
		var err error
		if msgs[i].Kind == protocol.KindInvalid {
			err = o.onInvalid(ctx, src, &in.invalid, msgs[i])
		} else if o.admit(&in.blocks, msgs[i]) {
			err = o.handle(ctx, src, msgs[i])
		}
		if err != nil {
			o.log.Error("handle message", "office", k.officeID, "agent", k.agentID, "kind", msgs[i].Kind, "err", err)
			ok = false
		}
	}
	if err := o.flushInvalid(ctx, k, &in.invalid, t.TurnEnd, t.ID); err != nil {
		o.log.Error("record invalid blocks", "office", k.officeID, "agent", k.agentID, "err", err)
		ok = false
	}
	if err := o.flushRefused(ctx, k, &in.blocks, t.TurnEnd, t.ID); err != nil {
		o.log.Error("record refused blocks", "office", k.officeID, "agent", k.agentID, "err", err)
		ok = false
	}
	return ok
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

// workspace returns an agent's working directory: its launch spec's Dir
// (the admin's choice), else DataDir/<office>/<name>, which always stays
// inside DataDir. An agent whose stored name or office ID would not (a row
// written before names were checked, or by another program) gets a
// directory named by a hash of its IDs instead.
func (o *Router) workspace(a Agent) string {
	if a.Launch.Dir != "" {
		return a.Launch.Dir
	}
	base := o.cfg.DataDir
	if base == "" {
		base = "office-data"
	}
	if ValidateAgentName(a.Name) == nil {
		if dir, err := within(base, a.OfficeID, a.Name); err == nil && filepath.Dir(dir) != filepath.Clean(base) {
			return dir
		}
	}
	return filepath.Join(filepath.Clean(base), "unnamed", uuid.NewSHA1(rowNamespace, []byte(a.OfficeID+"\x00"+a.ID)).String())
}
