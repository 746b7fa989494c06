package session

import "sync"

// ring is a bounded byte ring holding the most recent output of a session
// for replay to new viewers. It grows on demand up to its limit, so an idle
// session with little output costs little memory.
type ring struct {
	limit int
	buf   []byte // len(buf) <= limit
	start int    // index of the oldest byte once full
	full  bool
}

func (r *ring) write(p []byte) {
	if r.limit <= 0 {
		return
	}
	if len(p) >= r.limit {
		r.buf = append(r.buf[:0], p[len(p)-r.limit:]...)
		r.start, r.full = 0, true
		return
	}
	if !r.full {
		if len(r.buf)+len(p) <= r.limit {
			r.buf = append(r.buf, p...)
			return
		}
		// Fill up to the limit, then wrap.
		n := r.limit - len(r.buf)
		r.buf = append(r.buf, p[:n]...)
		p = p[n:]
		r.full, r.start = true, 0
	}
	for len(p) > 0 {
		n := copy(r.buf[r.start:], p)
		p = p[n:]
		r.start = (r.start + n) % r.limit
	}
}

// bytes returns a copy of the ring's content, oldest first.
func (r *ring) bytes() []byte {
	out := make([]byte, 0, len(r.buf))
	if !r.full {
		return append(out, r.buf...)
	}
	out = append(out, r.buf[r.start:]...)
	return append(out, r.buf[:r.start]...)
}

// Viewer receives a session's output: first the scrollback, then live
// output, through a bounded queue. A viewer that lets its queue fill up is
// dropped (its channel closed) rather than ever making the PTY reader wait.
type Viewer struct {
	s       *Session
	c       chan []byte
	mu      sync.Mutex
	closed  bool
	dropped bool
}

// C returns the channel of output chunks. It is closed when the viewer is
// dropped for being too slow, closed by Close, or the session is stopped.
// Chunks are shared: receivers must not modify them.
func (v *Viewer) C() <-chan []byte { return v.c }

// Dropped reports whether the viewer was dropped for falling behind.
func (v *Viewer) Dropped() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.dropped
}

// Close detaches the viewer and closes its channel. It is safe to call more
// than once.
func (v *Viewer) Close() {
	v.s.detach(v)
	v.close(false)
}

// offer queues p without waiting; it drops the viewer if its queue is full.
// It reports whether the viewer is still attached.
func (v *Viewer) offer(p []byte) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return false
	}
	select {
	case v.c <- p:
		return true
	default:
		v.dropped, v.closed = true, true
		close(v.c)
		return false
	}
}

func (v *Viewer) close(dropped bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return
	}
	v.closed = true
	v.dropped = dropped
	close(v.c)
}

// Attach returns a new viewer that first receives the scrollback (as one
// chunk, if there is any) and then live output. queue bounds the number of
// chunks waiting for the viewer (minimum 1; default 256 when <= 0).
func (s *Session) Attach(queue int) *Viewer {
	if queue <= 0 {
		queue = 256
	}
	v := &Viewer{s: s, c: make(chan []byte, queue+1)}
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if b := s.ring.bytes(); len(b) > 0 {
		v.c <- b
	}
	if s.ended {
		v.close(false)
		return v
	}
	if s.viewers == nil {
		s.viewers = make(map[*Viewer]struct{})
	}
	s.viewers[v] = struct{}{}
	return v
}

func (s *Session) detach(v *Viewer) {
	s.outMu.Lock()
	delete(s.viewers, v)
	s.outMu.Unlock()
}

// broadcast records p in the scrollback and offers it to every viewer.
// It never blocks on a viewer. p must not be modified afterwards.
func (s *Session) broadcast(p []byte) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	s.ring.write(p)
	for v := range s.viewers {
		if !v.offer(p) {
			delete(s.viewers, v)
		}
	}
}

// closeViewers closes every viewer when the session ends for good.
func (s *Session) closeViewers() {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	s.ended = true
	for v := range s.viewers {
		v.close(false)
		delete(s.viewers, v)
	}
}
