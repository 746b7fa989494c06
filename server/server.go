// Package server is the office's HTTP edge: the admin JSON API, the
// WebSocket console that attaches people to agents' terminals, the console
// web page, and /healthz, /readyz and /metrics.
//
// The server reads rows through Rows (the read-only queries it makes of the
// store, a subset of office.Store) and acts through two small interfaces
// declared here, Office (the routing core's actions) and Terminals (running
// agents' PTYs), so it can be tested with fakes and wired to the real office
// and session packages in cmd/office-server.
package server

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/office-server/office-server/office"
)

// Rows is what the server reads from the store: offices, agents and the
// rows the console shows. office.Store has all of it; the server never
// writes through it (every change goes through Office).
type Rows interface {
	RowsByID
	RowLists
}

// RowsByID reads one row by its id (and pings the store).
type RowsByID interface {
	Ping(ctx context.Context) error
	GetOffice(ctx context.Context, id string) (office.Office, error)
	GetQuestion(ctx context.Context, id string) (office.Question, error)
	GetInvocation(ctx context.Context, id string) (office.Invocation, error)
	GetResult(ctx context.Context, id string) (office.Result, error)
	GetDependency(ctx context.Context, id string) (office.DependencyRequest, error)
}

// RowLists reads lists of rows.
type RowLists interface {
	ListOffices(ctx context.Context) ([]office.Office, error)
	ListAgents(ctx context.Context, officeID string) ([]office.Agent, error)
	ListSessions(ctx context.Context, officeID string) ([]office.SessionRecord, error)
	ListQuestions(ctx context.Context, f office.QuestionFilter) ([]office.Question, error)
	ListInvocations(ctx context.Context, f office.InvocationFilter) ([]office.Invocation, error)
	ListResults(ctx context.Context, f office.ResultFilter) ([]office.Result, error)
	ListDependencies(ctx context.Context, f office.DependencyFilter) ([]office.DependencyRequest, error)
	ListEvents(ctx context.Context, f office.EventFilter) ([]office.Event, error)
}

// Office is what the server needs from the routing core. Every method
// returns an error carrying an office error code (office.ErrorCode), which
// the API maps onto an HTTP status.
type Office interface {
	// AnswerQuestion records a person's answer to a pending question; the
	// office delivers it to the agent's terminal.
	AnswerQuestion(ctx context.Context, questionID, response, answeredBy string) (office.Question, error)
	// SendUserMessage stores a message for an agent and delivers it.
	SendUserMessage(ctx context.Context, m office.UserMessage) (office.UserMessage, error)
	// ProvideDependency answers a pending dependency request with a value
	// (encrypted at rest by the office for secret types).
	ProvideDependency(ctx context.Context, id, value string) (office.DependencyRequest, error)
	// RejectDependency refuses a pending dependency request.
	RejectDependency(ctx context.Context, id, reason string) (office.DependencyRequest, error)
	StartAgent(ctx context.Context, officeID, agentID string) error
	StopAgent(ctx context.Context, officeID, agentID string) error
	RestartAgent(ctx context.Context, officeID, agentID string) error
	// SendInput types untrusted text (sanitised) into a running agent's
	// terminal, as a prompt.
	SendInput(ctx context.Context, officeID, agentID, text string) error
	// CallGraph returns the office's invocation graph, JSON-encodable.
	CallGraph(ctx context.Context, officeID string) (any, error)
	// SaveOffice creates or updates an office.
	SaveOffice(ctx context.Context, o office.Office) (office.Office, error)
	// SaveAgent creates or updates an agent (by office and name).
	SaveAgent(ctx context.Context, a office.Agent) (office.Agent, error)
	// DeleteAgent stops the agent's session and deletes it.
	DeleteAgent(ctx context.Context, officeID, agentID string) error
}

// Terminals finds the terminal of a running agent for the console.
type Terminals interface {
	// Terminal returns the agent's running terminal, or false when it has
	// no session.
	Terminal(officeID, agentID string) (Terminal, bool)
}

// Terminal is one agent's pseudo-terminal as the console sees it.
type Terminal interface {
	// Attach returns a viewer that receives the scrollback, then live
	// output, through a queue of the given number of chunks; the viewer is
	// dropped (its channel closed) when it falls behind.
	Attach(queue int) Viewer
	// Input writes raw keystrokes (from the controlling viewer only).
	Input(p []byte) error
	// Resize changes the terminal's size.
	Resize(cols, rows int) error
	// Size is the terminal's size in columns and rows: every viewer
	// renders at it (scaled to its pane), never re-wrapping the output.
	Size() (cols, rows int)
	// Status is the session's status (starting, ready, busy, ...).
	Status() string
	// Detail says why it is in that status: the dialog it shows
	// (needs_attention), or how its last process ended. Empty otherwise.
	Detail() string
	// ScreenLines returns the rows of the terminal's screen as text (what a
	// viewer's screen shows, trailing blanks trimmed) and the screen's
	// version, which changes with every output; rows is nil when the
	// version is still since. Versions start above 0.
	ScreenLines(since uint64) (rows []string, version uint64)
}

// Viewer receives a terminal's output.
type Viewer interface {
	C() <-chan []byte
	Dropped() bool
	Close()
}

// Feed is the part of the change feed /readyz looks at.
type Feed interface{ Connected() bool }

// Config configures a Server.
type Config struct {
	// Metrics are the server's metrics (nil: NewMetrics()); the serve
	// command makes them first, to measure the store and its feed.
	Metrics   *Metrics
	Store     Rows // rows are read from here
	Office    Office
	Terminals Terminals
	Feed      Feed // optional: nil means no external change feed (embedded store)

	// Members manages the offices' members for the admin API and the
	// member endpoints (members.go); nil when the store has none (SQLite).
	Members office.Members
	// MemberTokens verifies the Supabase access tokens of members calling
	// the member endpoints; nil when the project's JWT secret is not set.
	MemberTokens MemberTokens

	// Token is the admin token; every API and console request must carry it.
	Token string
	// Origins is the exact allow-list of Origin values for WebSocket
	// upgrades and cookie-authenticated writes, e.g. "http://127.0.0.1:8080".
	Origins []string

	Logger *slog.Logger
	// ViewerQueue is the per-viewer queue in chunks (default 256).
	ViewerQueue int
	// ViewerRate is the most output a console viewer is sent, in bytes per
	// second (bursts up to 1 MiB); a viewer over it skips ahead to a fresh
	// replay. Default 1 MiB/s (far more than a person reads, and a bound
	// on what 50 viewers cost); negative: unlimited.
	ViewerRate int
	// MaxFrame is the largest frame a console client may send (default 64 KiB).
	MaxFrame int64
	// WriteTimeout bounds every WebSocket write (default 10s).
	WriteTimeout time.Duration
	// PingInterval is how often the console pings (default 20s); a client
	// that does not answer within two intervals is disconnected.
	PingInterval time.Duration
	// EventPoll is how often the event tail polls the store (default 250ms).
	EventPoll time.Duration
	// Owners, if set (several servers on one database), says which node
	// runs an office: an agent's terminal and session actions are passed
	// to it (forward.go).
	Owners Owners
	// AuditFailures, if set, counts the events the office could not append
	// to the event log; /metrics exports it as office_audit_failures_total.
	AuditFailures func() uint64
}

// Server serves the API, the console and the operational endpoints. Build it
// with New, run its background work with Run, and end it with Close.
type Server struct {
	cfg     Config
	log     *slog.Logger
	mux     *http.ServeMux
	metrics *Metrics
	events  *eventHub

	mu      sync.Mutex
	origins map[string]bool
	hosts   map[string]bool // Host values of the origins (see hostAllowed)
	conns   map[*consoleConn]struct{}
	// previewConns are the pages' tile-preview sockets (preview.go).
	previewConns map[*previewConn]struct{}
	controls     map[string]*consoleConn // session key → controlling viewer
	since        map[string]statusSince  // session key → its status and since when
	closed       bool
}

// New returns a Server for cfg. It fails when the token is empty or the
// store is missing.
func New(cfg Config) (*Server, error) {
	if cfg.Token == "" {
		return nil, errors.New("server: empty admin token")
	}
	if cfg.Store == nil || cfg.Office == nil || cfg.Terminals == nil {
		return nil, errors.New("server: store, office and terminals are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ViewerQueue <= 0 {
		cfg.ViewerQueue = 256
	}
	if cfg.ViewerRate == 0 {
		cfg.ViewerRate = 1 << 20
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = 64 << 10
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 20 * time.Second
	}
	if cfg.EventPoll <= 0 {
		cfg.EventPoll = 250 * time.Millisecond
	}
	s := &Server{
		cfg:          cfg,
		log:          cfg.Logger,
		mux:          http.NewServeMux(),
		conns:        map[*consoleConn]struct{}{},
		previewConns: map[*previewConn]struct{}{},
		controls:     map[string]*consoleConn{},
		since:        map[string]statusSince{},
		origins:      map[string]bool{},
	}
	s.SetOrigins(cfg.Origins)
	s.metrics = cfg.Metrics
	if s.metrics == nil {
		s.metrics = NewMetrics()
	}
	s.metrics.register(s)
	s.events = newEventHub(cfg.Store, s.metrics, s.log, cfg.EventPoll)
	s.routes()
	return s, nil
}

// SetOrigins replaces the Origin allow-list, and with it the host names
// requests may carry in their Host header (see hostAllowed); cmd uses it
// once the listen address (and so the server's own origin) is known.
func (s *Server) SetOrigins(origins []string) {
	m, hosts := map[string]bool{}, map[string]bool{}
	for _, o := range origins {
		if o = strings.TrimRight(strings.TrimSpace(o), "/"); o != "" {
			o = strings.ToLower(o)
			m[o] = true
			if u, err := url.Parse(o); err == nil && u.Host != "" {
				hosts[u.Host] = true
				// A default port may be written or left out.
				if def := defaultPorts[u.Scheme]; def != "" && (u.Port() == "" || u.Port() == def) {
					hosts[u.Hostname()] = true
					hosts[net.JoinHostPort(u.Hostname(), def)] = true
				}
			}
		}
	}
	s.mu.Lock()
	s.origins, s.hosts = m, hosts
	s.mu.Unlock()
}

var defaultPorts = map[string]string{"http": "80", "https": "443"}

// hostAllowed reports whether a request's Host header names this server,
// against DNS rebinding: a page of another site whose name is made to
// resolve to this server sends that name as Host, and the server would
// otherwise answer it as its own. Allowed: an IP address (no name was
// resolved), localhost, and the hosts of the allowed origins (the server's
// own, and those given with --allowed-origins, e.g. the name a reverse
// proxy serves it under). An empty Host (HTTP/1.0) comes from no browser.
func (s *Server) hostAllowed(host string) bool {
	if host == "" {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	if net.ParseIP(name) != nil || strings.EqualFold(name, "localhost") {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hosts[strings.ToLower(host)]
}

// checkHost refuses requests whose Host is not the server's (hostAllowed),
// except /healthz, which says nothing.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && !s.hostAllowed(r.Host) {
			refuseUnread(w, r, office.Errorf(office.EFORBIDDEN, "host %q is not a name of this server (add its origin with --allowed-origins)", r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// OwnOrigins returns the origins a browser uses to reach a server listening
// on addr: http://host:port (and https), plus the localhost/127.0.0.1/[::1]
// aliases for a loopback address, or localhost and every interface's
// address for an unspecified one (0.0.0.0, [::]).
func OwnOrigins(addr net.Addr) []string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return nil
	}
	hosts := []string{host}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() || host == "localhost" {
		hosts = []string{"127.0.0.1", "localhost", "[::1]"}
	} else if ip != nil && ip.IsUnspecified() {
		// Every interface: a browser may use any of its addresses.
		hosts = append([]string{"localhost"}, InterfaceAddrs()...)
	}
	var out []string
	for _, h := range hosts {
		if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") {
			h = "[" + h + "]"
		}
		out = append(out, "http://"+h+":"+port, "https://"+h+":"+port)
	}
	return out
}

func (s *Server) originAllowed(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.origins[strings.ToLower(strings.TrimRight(origin, "/"))]
}

// Metrics returns the server's metrics, for the office's hooks.
func (s *Server) Metrics() *Metrics { return s.metrics }

// Handler returns the HTTP handler: every route, with access logging and
// the Host check (checkHost).
func (s *Server) Handler() http.Handler { return s.accessLog(s.checkHost(s.mux)) }

// InterfaceAddrs returns the IP addresses of the machine's interfaces
// (loopback first), as they appear in a URL's host.
func InterfaceAddrs() []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return []string{"127.0.0.1"}
	}
	var loop, other []string
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLinkLocalUnicast() {
			continue
		}
		h := n.IP.String()
		if n.IP.To4() == nil {
			h = "[" + h + "]"
		}
		if n.IP.IsLoopback() {
			loop = append(loop, h)
		} else {
			other = append(other, h)
		}
	}
	return append(loop, other...)
}

// Run tails the event log for the live stream and the metrics until ctx
// ends.
func (s *Server) Run(ctx context.Context) error {
	return s.events.run(ctx)
}

// OfferEvent hands the event tail an event the office appended; cmd calls
// it for each event the office publishes, so the live stream follows
// without the poll's delay and, when the event follows the last one the
// tail has, without reading it back from the store.
func (s *Server) OfferEvent(ctx context.Context, ev office.Event) { s.events.Offer(ctx, ev) }

// Close disconnects every console viewer (hijacked connections are not
// closed by http.Server.Shutdown) and refuses new ones.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	conns := make([]*consoleConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	previews := make([]*previewConn, 0, len(s.previewConns))
	for c := range s.previewConns {
		previews = append(previews, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.shutdown("server shutting down")
	}
	for _, c := range previews {
		c.shutdown(websocket.CloseGoingAway, "server shutting down")
	}
	for _, c := range conns {
		<-c.done
	}
	for _, c := range previews {
		<-c.done
	}
	s.events.closeSubscribers()
}

// statusRecorder remembers the status code for the access log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(p)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController and the WebSocket upgrader reach the
// connection (Hijack).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// accessLog counts each request by route and status (office_http_*) and
// logs it at debug level by path only: the query string may carry the
// token (?token= on the console page), so it is never logged.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		status := rec.status
		if status == 0 {
			status = http.StatusOK // nothing written: net/http answers 200
		}
		d := time.Since(start)
		s.metrics.observeHTTP(r.Pattern, status, d)
		// Requests and probes are many: debug.
		s.log.Debug("http", "method", r.Method, "path", r.URL.Path, "route", r.Pattern, "status", status,
			"dur_ms", d.Milliseconds(), "remote", r.RemoteAddr)
	})
}

// Hijack lets the WebSocket upgrader take the connection.
func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := r.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("hijack not supported")
	}
	if r.status == 0 {
		r.status = http.StatusSwitchingProtocols
	}
	return h.Hijack()
}
