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
//	0x01  s→c   OUTPUT   terminal bytes (the screen's snapshot first, then live), ≤ 64 KiB per frame
//	0x02  c→s   INPUT    keystrokes; only the controlling viewer's reach the PTY
//	0x03  c→s   RESIZE   JSON {"cols":N,"rows":N}; controller only
//	0x04  c→s   PAUSE    stop sending OUTPUT (flow control: the client's terminal is behind)
//	0x05  c→s   RESUME   send OUTPUT again
//	0x06  c→s   TAKE     ask for control (granted when nobody else holds it)
//	0x07  c→s   RELEASE  give control back
//	0x08  s→c   STATUS   JSON {"control":"none|you|other","viewers":N,"session":"ready","detail":"...","cols":N,"rows":N,"note":"..."}
//	0x09  s→c   RESET    the viewer skipped ahead: a fresh snapshot follows
//
// The first frame is a STATUS, before any output: it carries the session's
// size, at which every viewer renders (the controller's RESIZE is the only
// one that reaches the PTY, and every viewer gets a STATUS with the new
// size when it changes). The snapshot (session.Session.Attach) draws the
// agent's screen from the server's screen model, so a viewer joining late,
// reconnecting or skipping ahead shows exactly what the others show.
//
// A viewer never slows the agent down and is never sent more than its
// rate (Config.ViewerRate, bytes/s, bursts up to 1 MiB): a viewer that
// falls behind — over its rate, paused past 1 MiB, or dropped by the
// session because its queue filled — skips ahead: its output is discarded
// until it is within its rate again, then it gets RESET and a fresh
// snapshot of the screen, on the same connection. Only a viewer that falls
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
	Detail  string `json:"detail,omitempty"` // why the session is in its status (Terminal.Detail)
	Cols    int    `json:"cols"`
	Rows    int    `json:"rows"`
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
// browsers always send one: wsAllowed), the agent and its running terminal
// (404).
func (s *Server) console(w http.ResponseWriter, r *http.Request) {
	if !s.wsAllowed(w, r) {
		return
	}
	o, a, err := s.agent(r.Context(), r.PathValue("office"), r.PathValue("agent"))
	if err != nil {
		writeError(w, err)
		return
	}
	if s.forward(w, r, o.ID) {
		return // another node runs the office
	}
	term, ok := s.cfg.Terminals.Terminal(o.ID, a.ID)
	if !ok && s.hibernated(r.Context(), o.ID, a.ID) {
		// Opening a hibernated agent's terminal wakes it, its
		// conversation resumed (docs/notes/hibernate.md).
		if err := s.cfg.Office.StartAgent(r.Context(), o.ID, a.ID); err != nil {
			writeError(w, err)
			return
		}
		term, ok = s.cfg.Terminals.Terminal(o.ID, a.ID)
	}
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
	st := ConsoleStatus{Control: "none", Session: c.term.Status(), Detail: c.term.Detail()}
	st.Cols, st.Rows = c.term.Size()
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

// keepReading bounds ws's frames (MaxFrame: the library closes with 1009
// over it) and its silence (two pings and a write), renewed by every pong,
// ping and frame (the returned func, for the frames); a ping's data goes to
// pongs, for the writer goroutine to answer (never answered here).
func (s *Server) keepReading(ws *websocket.Conn, pongs chan<- string) (deadline func()) {
	ws.SetReadLimit(s.cfg.MaxFrame)
	deadline = func() { _ = ws.SetReadDeadline(time.Now().Add(2*s.cfg.PingInterval + s.cfg.WriteTimeout)) }
	deadline()
	ws.SetPongHandler(func(string) error { deadline(); return nil })
	ws.SetPingHandler(func(data string) error {
		deadline()
		select {
		case pongs <- data:
		default:
		}
		return nil
	})
	return deadline
}

// readLoop reads client frames until the connection fails or closes. Frames
// over MaxFrame make the library close the connection (1009).
func (c *consoleConn) readLoop() {
	ws, s := c.ws, c.s
	deadline := s.keepReading(ws, c.pongs)
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
			if err := c.term.Resize(sz.Cols, sz.Rows); err != nil {
				c.tell("resize failed: " + err.Error())
			}
			s.notifySession(c.key) // every viewer follows the new size
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
// (up to maxHeld, then the viewer skips ahead). The state is a
// consoleWriter's; each event is one of its methods.
func (c *consoleConn) writeLoop() {
	defer close(c.done)
	w := newConsoleWriter(c)
	defer w.stop()
	// The session's size before its output, so the viewer renders the
	// snapshot at the session's size.
	if err := w.sendStatus(); err != nil {
		w.fail()
		return
	}
	for {
		// While skipping ahead the queue is not read at all: the session
		// drops it when full, which costs nothing; the resync re-attaches.
		var in <-chan []byte
		if !w.behind && !w.armed {
			in = w.out
		}
		var err error
		select {
		case <-c.quit:
			w.close()
			return
		case p := <-c.flow:
			err = w.setPaused(p)
		case <-c.notify:
			err = w.sendStatus()
		case data := <-c.pongs:
			err = w.ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(w.s.cfg.WriteTimeout))
		case <-w.ping.C:
			err = w.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(w.s.cfg.WriteTimeout))
		case <-w.poll.C:
			w.pollStatus()
		case <-w.timer.C:
			err = w.coalesced()
		case <-w.resync.C:
			err = w.tryResync()
		case chunk, ok := <-in:
			err = w.received(chunk, ok)
		}
		if err != nil {
			w.fail()
			return
		}
	}
}

// consoleWriter is writeLoop's state: the pending OUTPUT frame, output held
// while the client paused, the viewer's rate bucket and its skip-ahead.
// It is owned by the writer goroutine.
type consoleWriter struct {
	c  *consoleConn
	s  *Server
	ws *websocket.Conn

	out        <-chan []byte // the viewer's queue; nil once closed
	lastStatus string        // the session status last seen (polled)
	lastSize   [2]int        // the terminal size last seen (polled)
	ping, poll *time.Ticker

	paused    bool
	pend      []byte // the OUTPUT frame being gathered; pend[0] is the frame type
	held      []byte // output kept while paused
	lastWrite time.Time
	timer     *time.Timer // coalescing: fires coalesceDelay after the first gathered chunk
	armed     bool        // timer is running

	// Rate and skip-ahead.
	rate, burst, tokens float64
	refilled            time.Time
	behind              bool // discarding output until a resync
	lastSkip            time.Time
	resync              *time.Timer
}

func newConsoleWriter(c *consoleConn) *consoleWriter {
	s := c.s
	w := &consoleWriter{
		c: c, s: s, ws: c.ws,
		out:        c.viewer.C(),
		lastStatus: c.term.Status(),
		lastSize:   termSize(c.term),
		ping:       time.NewTicker(s.cfg.PingInterval),
		// The session's status is polled: a change sends a STATUS frame.
		poll:     time.NewTicker(250 * time.Millisecond),
		pend:     make([]byte, 1, maxOutputFrame),
		timer:    time.NewTimer(time.Hour),
		rate:     float64(s.cfg.ViewerRate),
		burst:    float64(maxHeld + maxOutputFrame),
		refilled: time.Now(),
		resync:   time.NewTimer(time.Hour),
	}
	w.timer.Stop()
	w.resync.Stop()
	w.tokens = w.burst
	w.pend[0] = FrameOutput
	return w
}

// stop releases the timers.
func (w *consoleWriter) stop() {
	w.ping.Stop()
	w.poll.Stop()
	w.timer.Stop()
	w.resync.Stop()
}

func (w *consoleWriter) write(p []byte) error {
	_ = w.ws.SetWriteDeadline(time.Now().Add(w.s.cfg.WriteTimeout))
	return w.ws.WriteMessage(websocket.BinaryMessage, p)
}

// fail ends a connection whose client is gone or stuck past the write
// deadline: the reader stops too.
func (w *consoleWriter) fail() {
	_ = w.ws.SetReadDeadline(time.Now())
	w.c.closeWith(websocket.CloseGoingAway, "")
}

// close writes what is pending and the close frame with the reason
// shutdown gave.
func (w *consoleWriter) close() {
	_ = w.flush()
	w.c.mu.Lock()
	code, reason := w.c.code, w.c.reason
	w.c.mu.Unlock()
	_ = w.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
	_ = w.ws.SetReadDeadline(time.Now())
}

// add appends output to the pending frame, writing every full frame.
func (w *consoleWriter) add(p []byte) error {
	for len(p) > 0 {
		n := min(len(p), maxOutputFrame-len(w.pend))
		w.pend = append(w.pend, p[:n]...)
		p = p[n:]
		if len(w.pend) == maxOutputFrame {
			if err := w.write(w.pend); err != nil {
				return err
			}
			w.pend, w.lastWrite = w.pend[:1], time.Now()
		}
	}
	return nil
}

// flush writes the pending frame, if any, and disarms the coalescing timer.
func (w *consoleWriter) flush() error {
	if w.armed {
		w.timer.Stop()
		w.armed = false
	}
	if len(w.pend) == 1 {
		return nil
	}
	if err := w.write(w.pend); err != nil {
		return err
	}
	w.pend, w.lastWrite = w.pend[:1], time.Now()
	return nil
}

// refill adds the tokens earned since the last refill.
func (w *consoleWriter) refill() {
	now := time.Now()
	if w.rate > 0 {
		w.tokens = min(w.burst, w.tokens+w.rate*now.Sub(w.refilled).Seconds())
	}
	w.refilled = now
}

// skip starts discarding output; false when the viewer fell behind again
// right after a skip and is to be disconnected.
func (w *consoleWriter) skip() bool {
	if w.behind {
		return true
	}
	if !w.lastSkip.IsZero() && time.Since(w.lastSkip) < time.Second && time.Since(w.lastWrite) > time.Second {
		return false // not even the snapshot got through: the client is stuck
	}
	w.behind, w.lastSkip, w.held = true, time.Now(), nil
	w.s.metrics.viewerSkips.Inc()
	wait := time.Duration(0)
	if w.rate > 0 && w.tokens < w.burst {
		wait = time.Duration((w.burst - w.tokens) / w.rate * float64(time.Second))
	}
	w.resync.Reset(max(wait, 50*time.Millisecond))
	return true
}

// fellBehind skips ahead, or disconnects a viewer that cannot keep up even
// after a skip.
func (w *consoleWriter) fellBehind() {
	if !w.skip() {
		w.c.closeWith(websocket.CloseNormalClosure, "viewer fell behind; reconnect for a fresh snapshot")
		w.out = nil
	}
}

// catchUp re-attaches: RESET, then a fresh snapshot through a new queue.
func (w *consoleWriter) catchUp() error {
	if err := w.flush(); err != nil {
		return err
	}
	w.c.viewer.Close()
	w.c.viewer = w.c.term.Attach(w.s.cfg.ViewerQueue)
	w.out = w.c.viewer.C()
	w.behind, w.lastWrite = false, time.Now()
	return w.write([]byte{FrameReset})
}

// onChunk takes one chunk of output (ok=false: the queue closed).
func (w *consoleWriter) onChunk(chunk []byte, ok bool) error {
	if !ok {
		w.out = nil
		if !w.c.viewer.Dropped() {
			w.c.closeWith(websocket.CloseNormalClosure, "session ended")
			return nil
		}
		// The session dropped this viewer: its queue filled.
		w.s.metrics.viewersDropped.Inc()
		w.fellBehind()
		return nil
	}
	if w.paused {
		// Keep reading so the session never sees this viewer as slow;
		// past the allowance, skip ahead on resume.
		if len(w.held)+len(chunk) > maxHeld {
			w.fellBehind()
			return nil
		}
		w.held = append(w.held, chunk...)
		return nil
	}
	if w.rate > 0 {
		w.refill()
		if w.tokens < float64(len(chunk)) {
			w.fellBehind()
			return nil
		}
		w.tokens -= float64(len(chunk))
	}
	return w.add(chunk)
}

// received takes a chunk from the queue and writes it at once after a
// quiet spell, or arms the coalescing timer while the agent streams.
func (w *consoleWriter) received(chunk []byte, ok bool) error {
	if err := w.onChunk(chunk, ok); err != nil {
		return err
	}
	if w.out == nil || w.behind || w.paused {
		return nil
	}
	if time.Since(w.lastWrite) > busyGap {
		return w.flush()
	}
	if !w.armed && len(w.pend) > 1 {
		// Streaming: stop reading until the timer, then take everything
		// queued at once (one wake-up per batch).
		w.timer.Reset(coalesceDelay)
		w.armed = true
	}
	return nil
}

// coalesced takes, when the coalescing timer fires, what queued up
// meanwhile, without waiting, and writes it.
func (w *consoleWriter) coalesced() error {
	w.armed = false
	for w.out != nil && !w.behind {
		select {
		case chunk, ok := <-w.out:
			if err := w.onChunk(chunk, ok); err != nil {
				return err
			}
		default:
			return w.flush()
		}
	}
	return w.flush()
}

// setPaused follows the client's PAUSE and RESUME: on resume the held
// output is written, or a viewer that skipped ahead meanwhile resyncs.
func (w *consoleWriter) setPaused(p bool) error {
	w.paused = p
	if p {
		return nil
	}
	if w.behind {
		w.resync.Reset(0)
		return nil
	}
	if len(w.held) == 0 {
		return nil
	}
	err := w.add(w.held)
	w.held = nil
	if err != nil {
		return err
	}
	return w.flush()
}

// tryResync re-attaches a viewer that skipped ahead, once its bucket is
// full again (a snapshot is up to about 1 MiB).
func (w *consoleWriter) tryResync() error {
	if !w.behind || w.paused {
		return nil
	}
	w.refill()
	if w.rate > 0 && w.tokens < w.burst*0.99 {
		w.resync.Reset(time.Duration((w.burst - w.tokens) / w.rate * float64(time.Second)))
		return nil
	}
	return w.catchUp()
}

// sendStatus writes what is pending, then a STATUS frame.
func (w *consoleWriter) sendStatus() error {
	b, _ := json.Marshal(w.c.status())
	if err := w.flush(); err != nil {
		return err
	}
	return w.write(append([]byte{FrameStatus}, b...))
}

// pollStatus asks for a STATUS frame when the session's status or size
// changed.
func (w *consoleWriter) pollStatus() {
	st, size := w.c.term.Status(), termSize(w.c.term)
	if st != w.lastStatus || size != w.lastSize {
		w.lastStatus, w.lastSize = st, size
		w.c.poke()
	}
}

func termSize(t Terminal) [2]int {
	c, r := t.Size()
	return [2]int{c, r}
}

// Output coalescing (see writeLoop).
const (
	busyGap       = 10 * time.Millisecond
	coalesceDelay = 4 * time.Millisecond
)

// maxHeld bounds the output kept for a paused viewer.
const maxHeld = 1 << 20
