package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/office-server/office-server/office"
)

// Console frames. Every WebSocket message is binary; its first byte is the
// type, the rest the payload.
//
//	type  dir   payload
//	0x01  s→c   OUTPUT   terminal bytes (scrollback replay first, then live), ≤ 64 KiB per frame
//	0x02  c→s   INPUT    keystrokes; only the controlling viewer's reach the PTY
//	0x03  c→s   RESIZE   JSON {"cols":N,"rows":N}; controller only
//	0x04  c→s   PAUSE    stop sending OUTPUT (flow control: the client's terminal is behind)
//	0x05  c→s   RESUME   send OUTPUT again
//	0x06  c→s   TAKE     ask for control (granted when nobody else holds it)
//	0x07  c→s   RELEASE  give control back
//	0x08  s→c   STATUS   JSON {"control":"none|you|other","viewers":N,"session":"ready","note":"..."}
//	0x09  s→c   RESET    clear the terminal: a fresh replay follows (skip-ahead)
//
// A viewer never slows the agent down and is never sent more than its
// rate (Config.ViewerRate, bytes/s, bursts up to 1 MiB): a viewer that
// falls behind — over its rate, paused past 1 MiB, or dropped by the
// session because its queue filled — skips ahead: its output is discarded
// until it is within its rate again, then it gets RESET and a fresh replay
// of the scrollback, on the same connection. Only a viewer that falls
// behind again within a second of a skip is disconnected.
const (
	FrameOutput  byte = 0x01
	FrameInput   byte = 0x02
	FrameResize  byte = 0x03
	FramePause   byte = 0x04
	FrameResume  byte = 0x05
	FrameTake    byte = 0x06
	FrameRelease byte = 0x07
	FrameStatus  byte = 0x08
	FrameReset   byte = 0x09
)

// maxOutputFrame is the largest OUTPUT frame (type byte included).
const maxOutputFrame = 64 << 10

// ConsoleStatus is the payload of a STATUS frame.
type ConsoleStatus struct {
	Control string `json:"control"` // none, you, other
	Viewers int    `json:"viewers"`
	Session string `json:"session"`
	Note    string `json:"note,omitempty"`
}

// consoleConn is one viewer's WebSocket. The handler goroutine reads; one
// writer goroutine (writeLoop) does every write, each with a deadline.
type consoleConn struct {
	s      *Server
	key    string
	ws     *websocket.Conn
	term   Terminal
	viewer Viewer

	notify chan struct{} // a STATUS frame is due
	pongs  chan string   // pongs to send (ping payloads)
	flow   chan bool     // true: pause, false: resume
	quit   chan struct{} // closed by shutdown
	done   chan struct{} // closed when writeLoop returned
	once   sync.Once
	mu     sync.Mutex
	note   string // the next STATUS frame's note
	reason string // the close reason
	code   int
}

var upgrader = websocket.Upgrader{
	ReadBufferSize:  16 << 10,
	WriteBufferSize: maxOutputFrame + 16, // a whole OUTPUT frame and its header in one write
	// Origin is checked by the handler against the exact allow-list before
	// Upgrade is called; this hook only has to let the request through.
	CheckOrigin: func(*http.Request) bool { return true },
}

// console upgrades to the console WebSocket of one agent's terminal.
// Checks, in order: the token (401), the Origin against the allow-list (403;
// a request without Origin is only accepted with a Bearer header, as
// browsers always send one), the agent and its running terminal (404).
func (s *Server) console(w http.ResponseWriter, r *http.Request) {
	ok, viaCookie := s.authorized(r)
	if !ok {
		refuseUnread(w, r, office.Errorf(office.EUNAUTHORIZED, "missing or wrong admin token"))
		return
	}
	origin := r.Header.Get("Origin")
	if origin == "" && viaCookie || origin != "" && !s.originAllowed(origin) {
		s.log.Warn("console: origin refused", "origin", origin, "path", r.URL.Path)
		writeError(w, office.Errorf(office.EFORBIDDEN, "origin %q is not allowed", origin))
		return
	}
	o, a, err := s.agent(r.Context(), r.PathValue("office"), r.PathValue("agent"))
	if err != nil {
		writeError(w, err)
		return
	}
	term, ok := s.cfg.Terminals.Terminal(o.ID, a.ID)
	if !ok {
		writeError(w, office.Errorf(office.ENOTFOUND, "agent %q has no running session", a.Name))
		return
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		writeError(w, office.Errorf(office.EUNAVAILABLE, "server shutting down"))
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader wrote the error response
	}
	c := &consoleConn{
		s: s, key: o.ID + "/" + a.ID, ws: ws, term: term,
		notify: make(chan struct{}, 1), pongs: make(chan string, 4), flow: make(chan bool, 8),
		quit: make(chan struct{}), done: make(chan struct{}),
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ws.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.metrics.viewers.Inc()
	c.viewer = term.Attach(s.cfg.ViewerQueue)
	s.notifySession(c.key)
	go c.writeLoop()
	c.readLoop()
	c.shutdown("")
	<-c.done
	c.viewer.Close()
	ws.Close()
	s.mu.Lock()
	delete(s.conns, c)
	released := s.controls[c.key] == c
	if released {
		delete(s.controls, c.key)
	}
	s.mu.Unlock()
	s.metrics.viewers.Dec()
	s.notifySession(c.key)
}

// shutdown ends the connection; the writer sends a close frame with reason.
func (c *consoleConn) shutdown(reason string) {
	c.closeWith(websocket.CloseNormalClosure, reason)
}

func (c *consoleConn) closeWith(code int, reason string) {
	c.once.Do(func() {
		c.mu.Lock()
		c.code, c.reason = code, reason
		c.mu.Unlock()
		close(c.quit)
	})
}

// status computes this viewer's STATUS payload.
func (c *consoleConn) status() ConsoleStatus {
	s := c.s
	s.mu.Lock()
	st := ConsoleStatus{Control: "none", Session: c.term.Status()}
	if holder, ok := s.controls[c.key]; ok {
		st.Control = "other"
		if holder == c {
			st.Control = "you"
		}
	}
	for o := range s.conns {
		if o.key == c.key {
			st.Viewers++
		}
	}
	s.mu.Unlock()
	c.mu.Lock()
	st.Note, c.note = c.note, ""
	c.mu.Unlock()
	return st
}

// notifySession asks every viewer of the session for a fresh STATUS frame.
func (s *Server) notifySession(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.key == key {
			c.poke()
		}
	}
}

func (c *consoleConn) poke() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func (c *consoleConn) tell(note string) {
	c.mu.Lock()
	c.note = note
	c.mu.Unlock()
	c.poke()
}

// readLoop reads client frames until the connection fails or closes. Frames
// over MaxFrame make the library close the connection (1009).
func (c *consoleConn) readLoop() {
	ws, s := c.ws, c.s
	ws.SetReadLimit(s.cfg.MaxFrame)
	deadline := func() { _ = ws.SetReadDeadline(time.Now().Add(2*s.cfg.PingInterval + s.cfg.WriteTimeout)) }
	deadline()
	ws.SetPongHandler(func(string) error { deadline(); return nil })
	// Pongs are written by the writer goroutine, not here.
	ws.SetPingHandler(func(data string) error {
		deadline()
		select {
		case c.pongs <- data:
		default:
		}
		return nil
	})
	for {
		mt, p, err := ws.ReadMessage()
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				s.log.Warn("console: frame over limit, closing", "session", c.key, "limit", s.cfg.MaxFrame)
			}
			return
		}
		deadline()
		select {
		case <-c.quit:
			return
		default:
		}
		if mt != websocket.BinaryMessage || len(p) == 0 {
			c.closeWith(websocket.CloseUnsupportedData, "binary frames with a type byte only")
			return
		}
		c.handle(p[0], p[1:])
	}
}

func (c *consoleConn) handle(typ byte, p []byte) {
	s := c.s
	switch typ {
	case FrameInput:
		if !c.controls() {
			c.tell("read-only: take control to type")
			return
		}
		if err := c.term.Input(p); err != nil {
			c.tell("input failed: " + err.Error())
		}
	case FrameResize:
		var sz struct{ Cols, Rows int }
		if err := json.Unmarshal(p, &sz); err != nil || sz.Cols < 2 || sz.Rows < 2 || sz.Cols > 1000 || sz.Rows > 1000 {
			c.tell("bad resize: want {\"cols\":N,\"rows\":N}, 2..1000")
			return
		}
		if c.controls() {
			_ = c.term.Resize(sz.Cols, sz.Rows)
		}
	case FramePause, FrameResume:
		select {
		case c.flow <- typ == FramePause:
		default: // eight flow changes pending: the client is misbehaving
			c.closeWith(websocket.ClosePolicyViolation, "flow control flood")
		}
	case FrameTake:
		s.mu.Lock()
		holder, held := s.controls[c.key]
		if !held || holder == c {
			s.controls[c.key] = c
		}
		s.mu.Unlock()
		if held && holder != c {
			c.tell("another viewer has control")
		}
		s.notifySession(c.key)
	case FrameRelease:
		s.mu.Lock()
		if s.controls[c.key] == c {
			delete(s.controls, c.key)
		}
		s.mu.Unlock()
		s.notifySession(c.key)
	default:
		c.tell("unknown frame type")
	}
}

func (c *consoleConn) controls() bool {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.s.controls[c.key] == c
}

// writeLoop is the connection's only writer. It sends OUTPUT frames of up
// to 64 KiB, STATUS frames, pongs and pings, each write with a deadline.
//
// Output is coalesced adaptively: a chunk arriving after a quiet spell
// (a keystroke's echo) is written at once; while the agent streams (the
// last write was under busyGap ago) chunks are gathered for up to
// coalesceDelay, so a busy session costs few large frames per viewer
// instead of one per PTY read. While the client has paused, output is held
// (up to maxHeld, then the viewer is dropped).
func (c *consoleConn) writeLoop() {
	defer close(c.done)
	s, ws := c.s, c.ws
	ping := time.NewTicker(s.cfg.PingInterval)
	defer ping.Stop()
	// The session's status is polled: a change sends a STATUS frame.
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	lastStatus := c.term.Status()
	write := func(p []byte) error {
		_ = ws.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		return ws.WriteMessage(websocket.BinaryMessage, p)
	}
	fail := func() {
		// The client is gone or stuck past the deadline: stop reading too.
		_ = ws.SetReadDeadline(time.Now())
		c.closeWith(websocket.CloseGoingAway, "")
	}
	var (
		paused    bool
		pend      = make([]byte, 1, maxOutputFrame) // pend[0] is the frame type
		held      []byte                            // output kept while paused
		lastWrite time.Time
		timer     = time.NewTimer(time.Hour)
		armed     bool
		// Rate and skip-ahead.
		rate     = float64(s.cfg.ViewerRate)
		burst    = float64(maxHeld + maxOutputFrame)
		tokens   = burst
		refilled = time.Now()
		behind   bool // discarding output until a resync
		lastSkip time.Time
		resync   = time.NewTimer(time.Hour)
	)
	timer.Stop()
	resync.Stop()
	defer timer.Stop()
	defer resync.Stop()
	pend[0] = FrameOutput
	out := c.viewer.C()
	// add appends output to the pending frame, writing every full frame.
	add := func(p []byte) error {
		for len(p) > 0 {
			n := min(len(p), maxOutputFrame-len(pend))
			pend = append(pend, p[:n]...)
			p = p[n:]
			if len(pend) == maxOutputFrame {
				if err := write(pend); err != nil {
					return err
				}
				pend, lastWrite = pend[:1], time.Now()
			}
		}
		return nil
	}
	flush := func() error {
		if armed {
			timer.Stop()
			armed = false
		}
		if len(pend) == 1 {
			return nil
		}
		if err := write(pend); err != nil {
			return err
		}
		pend, lastWrite = pend[:1], time.Now()
		return nil
	}
	refill := func() {
		now := time.Now()
		if rate > 0 {
			tokens = min(burst, tokens+rate*now.Sub(refilled).Seconds())
		}
		refilled = now
	}
	// skip starts discarding output; false when the viewer fell behind
	// again right after a skip and is to be disconnected.
	skip := func() bool {
		if behind {
			return true
		}
		if !lastSkip.IsZero() && time.Since(lastSkip) < time.Second && time.Since(lastWrite) > time.Second {
			return false // not even the replay got through: the client is stuck
		}
		behind, lastSkip, held = true, time.Now(), nil
		s.metrics.viewerSkips.Inc()
		wait := time.Duration(0)
		if rate > 0 && tokens < burst {
			wait = time.Duration((burst - tokens) / rate * float64(time.Second))
		}
		resync.Reset(max(wait, 50*time.Millisecond))
		return true
	}
	// catchUp re-attaches: RESET, then a fresh replay through a new queue.
	catchUp := func() error {
		if err := flush(); err != nil {
			return err
		}
		c.viewer.Close()
		c.viewer = c.term.Attach(s.cfg.ViewerQueue)
		out = c.viewer.C()
		behind, lastWrite = false, time.Now()
		return write([]byte{FrameReset})
	}
	// onChunk takes one chunk of output (ok=false: the queue closed).
	onChunk := func(chunk []byte, ok bool) error {
		if !ok {
			out = nil
			if !c.viewer.Dropped() {
				c.closeWith(websocket.CloseNormalClosure, "session ended")
				return nil
			}
			// The session dropped this viewer: its queue filled.
			s.metrics.viewersDropped.Inc()
			if !skip() {
				c.closeWith(websocket.CloseNormalClosure, "viewer fell behind; reconnect for a fresh replay")
			}
			return nil
		}
		if paused {
			// Keep reading so the session never sees this viewer as
			// slow; past the allowance, skip ahead on resume.
			if len(held)+len(chunk) > maxHeld {
				if !skip() {
					c.closeWith(websocket.CloseNormalClosure, "viewer fell behind; reconnect for a fresh replay")
					out = nil
				}
				return nil
			}
			held = append(held, chunk...)
			return nil
		}
		if rate > 0 {
			refill()
			if tokens < float64(len(chunk)) {
				if !skip() {
					c.closeWith(websocket.CloseNormalClosure, "viewer fell behind; reconnect for a fresh replay")
					out = nil
				}
				return nil
			}
			tokens -= float64(len(chunk))
		}
		return add(chunk)
	}
	for {
		// While skipping ahead the queue is not read at all: the session
		// drops it when full, which costs nothing; the resync re-attaches.
		var in <-chan []byte
		if !behind && !armed {
			in = out
		}
		select {
		case <-c.quit:
			_ = flush()
			c.mu.Lock()
			code, reason := c.code, c.reason
			c.mu.Unlock()
			_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
			_ = ws.SetReadDeadline(time.Now())
			return
		case p := <-c.flow:
			paused = p
			if paused {
				continue
			}
			if behind {
				resync.Reset(0)
				continue
			}
			if len(held) > 0 {
				err := add(held)
				held = nil
				if err == nil {
					err = flush()
				}
				if err != nil {
					fail()
					return
				}
			}
		case <-c.notify:
			b, _ := json.Marshal(c.status())
			if flush() != nil || write(append([]byte{FrameStatus}, b...)) != nil {
				fail()
				return
			}
		case data := <-c.pongs:
			if err := ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(s.cfg.WriteTimeout)); err != nil {
				fail()
				return
			}
		case <-ping.C:
			if err := ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(s.cfg.WriteTimeout)); err != nil {
				fail()
				return
			}
		case <-poll.C:
			if st := c.term.Status(); st != lastStatus {
				lastStatus = st
				c.poke()
			}
		case <-timer.C:
			armed = false
			// Take what queued up meanwhile, without waiting.
			for more := true; more && out != nil && !behind; {
				select {
				case chunk, ok := <-out:
					if onChunk(chunk, ok) != nil {
						fail()
						return
					}
				default:
					more = false
				}
			}
			if flush() != nil {
				fail()
				return
			}
		case <-resync.C:
			if !behind || paused {
				continue
			}
			refill()
			if rate > 0 && tokens < burst*0.99 {
				// Wait for a full bucket: the replay is up to 1 MiB.
				resync.Reset(time.Duration((burst - tokens) / rate * float64(time.Second)))
				continue
			}
			if catchUp() != nil {
				fail()
				return
			}
		case chunk, ok := <-in:
			if onChunk(chunk, ok) != nil {
				fail()
				return
			}
			if out != nil && !behind && !paused {
				if time.Since(lastWrite) > busyGap {
					if flush() != nil {
						fail()
						return
					}
				} else if !armed && len(pend) > 1 {
					// Streaming: stop reading until the timer, then take
					// everything queued at once (one wake-up per batch).
					timer.Reset(coalesceDelay)
					armed = true
				}
			}
		}
	}
}

// Output coalescing (see writeLoop).
const (
	busyGap       = 10 * time.Millisecond
	coalesceDelay = 4 * time.Millisecond
)

// maxHeld bounds the output kept for a paused viewer.
const maxHeld = 1 << 20
