package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/office-server/office-server/office"
)

// Tile previews: GET /ws/offices/{office}/previews.
//
// One WebSocket per console page carries small, read-only renderings of
// the screens of the agents whose tiles are in view: each screen's rows as
// text, from the server's screen model (the one a late viewer's snapshot
// is drawn from), at most previewRate times a second and only when the
// screen changed, and after the first time only the rows that changed. It
// costs the page no terminal emulator per tile, and the server nothing for
// a tile out of view: the page says which agents it shows, and only their
// screens are looked at.
//
// Messages are JSON text frames:
//
//	c→s  {"watch":["<agent id>",...]}  the agents whose tiles are in view now (the whole set; at most maxPreviewWatch)
//	s→c  {"screens":[{"agent":"<id>","live":true,"cols":200,"rows":50,"full":true,"at":[0,1,…],"lines":["…","…"]}]}
//
// A screen is sent whole ("full", every row; "at" left out) the first time
// after its agent is watched, after its terminal changed (a restart) or
// its size; otherwise "at" gives the indexes of the rows that changed and
// "lines" their text. "live":false says the agent has no running terminal
// (stopped, hibernated, crashed): no rows. A preview never wakes a
// hibernated agent and never sends input: watch is the only message the
// server takes, anything else closes the connection (1003).
const (
	previewRate     = 4   // screens sent per second at most, each
	maxPreviewWatch = 512 // agents one page may watch
)

// previewInterval is the time between two looks at the watched screens.
const previewInterval = time.Second / previewRate

// previewScreen is one watched agent's screen as last sent to the page.
// It is owned by the connection's writer.
type previewScreen struct {
	term    Terminal // the terminal the rows came from; nil when none ran
	version uint64   // its screen's version (Terminal.ScreenLines)
	lines   []string
	cols    int
	sent    bool // the page has this screen (or knows it has none)
}

// previewUpdate is one screen in a server message.
type previewUpdate struct {
	Agent string   `json:"agent"`
	Live  bool     `json:"live"`
	Cols  int      `json:"cols,omitempty"`
	Rows  int      `json:"rows,omitempty"`
	Full  bool     `json:"full,omitempty"`
	At    []int    `json:"at,omitempty"`
	Lines []string `json:"lines,omitempty"`
}

// previewConn is one page's preview WebSocket. The handler goroutine
// reads; one writer goroutine (writeLoop) does every write.
type previewConn struct {
	s        *Server
	officeID string
	ws       *websocket.Conn

	watchc chan []string // the latest watch set, for the writer (capacity 1: a newer set replaces an unread one)
	pongs  chan string
	quit   chan struct{} // closed by shutdown
	done   chan struct{} // closed when writeLoop returned
	once   sync.Once
	mu     sync.Mutex
	code   int
	reason string
}

// previews upgrades to the preview WebSocket of an office. The checks are
// the console's (wsAllowed), then the office (404).
func (s *Server) previews(w http.ResponseWriter, r *http.Request) {
	if !s.wsAllowed(w, r) {
		return
	}
	o, err := s.office(r.Context(), r.PathValue("office"))
	if err != nil {
		writeError(w, err)
		return
	}
	if s.forward(w, r, o.ID) {
		return // another node runs the office
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader wrote the error response
	}
	c := &previewConn{
		s: s, officeID: o.ID, ws: ws,
		watchc: make(chan []string, 1), pongs: make(chan string, 4),
		quit: make(chan struct{}), done: make(chan struct{}),
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ws.Close()
		return
	}
	s.previewConns[c] = struct{}{}
	s.mu.Unlock()
	go c.writeLoop()
	c.readLoop()
	c.shutdown(websocket.CloseNormalClosure, "")
	<-c.done
	ws.Close()
	s.mu.Lock()
	delete(s.previewConns, c)
	s.mu.Unlock()
}

// shutdown ends the connection; the writer sends a close frame with code
// and reason.
func (c *previewConn) shutdown(code int, reason string) {
	c.once.Do(func() {
		c.mu.Lock()
		c.code, c.reason = code, reason
		c.mu.Unlock()
		close(c.quit)
	})
}

// readLoop reads watch messages until the connection fails or closes.
func (c *previewConn) readLoop() {
	ws, s := c.ws, c.s
	deadline := s.keepReading(ws, c.pongs)
	for {
		mt, p, err := ws.ReadMessage()
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				s.log.Warn("previews: frame over limit, closing", "office", c.officeID, "limit", s.cfg.MaxFrame)
			}
			return
		}
		deadline()
		ids, why := parseWatch(mt, p)
		if why != "" {
			c.shutdown(websocket.CloseUnsupportedData, why)
			return
		}
		select {
		case <-c.watchc: // a set the writer has not taken yet: replaced
		default:
		}
		c.watchc <- ids
	}
}

// parseWatch reads a watch message; why says what is wrong with any other.
func parseWatch(mt int, p []byte) (ids []string, why string) {
	const only = `previews are read-only: the only message is {"watch":["<agent id>",...]}`
	if mt != websocket.TextMessage {
		return nil, only
	}
	var m struct {
		Watch []string `json:"watch"`
	}
	if err := json.Unmarshal(p, &m); err != nil || m.Watch == nil {
		return nil, only
	}
	if len(m.Watch) > maxPreviewWatch {
		return nil, "at most 512 previews at once"
	}
	slices.Sort(m.Watch)
	return slices.Compact(m.Watch), ""
}

// writeLoop is the connection's only writer: on a new watch set it sends
// the newly watched screens at once, and every previewInterval the
// watched screens that changed.
func (c *previewConn) writeLoop() {
	defer close(c.done)
	s := c.s
	tick := time.NewTicker(previewInterval)
	defer tick.Stop()
	ping := time.NewTicker(s.cfg.PingInterval)
	defer ping.Stop()
	screens := map[string]*previewScreen{}
	var order []string // the watched agents, sorted
	defer func() { s.metrics.previewScreens.Sub(float64(len(order))) }()
	for {
		var err error
		select {
		case <-c.quit:
			c.mu.Lock()
			code, reason := c.code, c.reason
			c.mu.Unlock()
			_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
			_ = c.ws.SetReadDeadline(time.Now())
			return
		case ids := <-c.watchc:
			s.metrics.previewScreens.Add(float64(len(ids) - len(order)))
			order = ids
			for id := range screens {
				if _, ok := slices.BinarySearch(order, id); !ok {
					delete(screens, id)
				}
			}
			for _, id := range order {
				if screens[id] == nil {
					screens[id] = &previewScreen{}
				}
			}
			err = c.send(order, screens)
		case <-tick.C:
			err = c.send(order, screens)
		case data := <-c.pongs:
			err = c.ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(s.cfg.WriteTimeout))
		case <-ping.C:
			err = c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(s.cfg.WriteTimeout))
		}
		if err != nil {
			_ = c.ws.SetReadDeadline(time.Now()) // the reader stops too
			c.shutdown(websocket.CloseGoingAway, "")
			return
		}
	}
}

// send writes one message with every watched screen that changed since it
// was last sent (nothing when none did).
func (c *previewConn) send(order []string, screens map[string]*previewScreen) error {
	var ups []previewUpdate
	for _, id := range order {
		if u, ok := c.look(id, screens[id]); ok {
			ups = append(ups, u)
		}
	}
	if len(ups) == 0 {
		return nil
	}
	b, err := json.Marshal(map[string]any{"screens": ups})
	if err != nil {
		return err
	}
	c.s.metrics.previewBytes.Add(float64(len(b)))
	_ = c.ws.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

// look compares an agent's screen with what the page has of it and
// returns the update to send, if any.
func (c *previewConn) look(id string, ps *previewScreen) (previewUpdate, bool) {
	term, ok := c.s.cfg.Terminals.Terminal(c.officeID, id)
	if !ok {
		if ps.sent && ps.term == nil {
			return previewUpdate{}, false
		}
		*ps = previewScreen{sent: true}
		return previewUpdate{Agent: id}, true
	}
	if ps.term != term {
		*ps = previewScreen{term: term}
	}
	lines, v := term.ScreenLines(ps.version)
	if lines == nil {
		return previewUpdate{}, false
	}
	ps.version = v
	cols, _ := term.Size()
	u := previewUpdate{Agent: id, Live: true}
	if !ps.sent || cols != ps.cols || len(lines) != len(ps.lines) {
		u.Full, u.Cols, u.Rows, u.Lines = true, cols, len(lines), lines
	} else {
		for i, l := range lines {
			if l != ps.lines[i] {
				u.At = append(u.At, i)
				u.Lines = append(u.Lines, l)
			}
		}
		if len(u.At) == 0 {
			return previewUpdate{}, false // a change no row shows (colours, the cursor)
		}
	}
	ps.lines, ps.cols, ps.sent = lines, cols, true
	return u, true
}

// wsAllowed checks a WebSocket request as the console does: the token
// (401), the Origin against the allow-list (403; a request without Origin
// is only accepted with a Bearer header, as browsers always send one). It
// writes the refusal and reports whether the request may go on.
func (s *Server) wsAllowed(w http.ResponseWriter, r *http.Request) bool {
	ok, viaCookie := s.authorized(r)
	if !ok {
		refuseUnread(w, r, office.Errorf(office.EUNAUTHORIZED, "missing or wrong admin token"))
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" && viaCookie || origin != "" && !s.originAllowed(origin) {
		s.log.Warn("websocket: origin refused", "origin", origin, "path", r.URL.Path)
		writeError(w, office.Errorf(office.EFORBIDDEN, "origin %q is not allowed", origin))
		return false
	}
	return true
}
