package session

import (
	"sync"

	"github.com/office-server/office-server/session/screen"
)

// The viewers' screen: every byte the agent writes goes through a screen
// model (session/screen) before it is offered to the viewers, under the
// same lock. A viewer attaching at any time gets the model's Snapshot (the
// screen's cells with their colours and attributes, the cursor, the modes,
// the title, the history that scrolled off as lines) and then exactly the
// output that follows it: no gap, no overlap. The model is the viewers'
// own, apart from the driver's, so its state is that of every viewer's
// terminal, whatever the driver reads or resets.

// maxSnapshotHistory bounds the bytes of history rows in one snapshot, so
// a snapshot stays within what a viewer is sent at once (server/console.go
// allows bursts of 1 MiB): the screens of 200x50 take at most about 340 KB
// each even when every cell has a colour of its own.
const maxSnapshotHistory = 256 << 10

// newView returns the viewers' screen of a session of cols x rows that
// keeps history rows of scrolled-off history.
func newView(cols, rows, history int) *screen.Screen {
	v := screen.New(cols, rows)
	v.SetScrolledLimit(history)
	return v
}

// resizeView follows a resize of the agent's terminal.
func (s *Session) resizeView(cols, rows int) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	s.view.Resize(cols, rows)
	s.viewVersion++
}

// ScreenLines returns the rows of the viewers' screen as a person sees
// them (screen.Screen.Lines: one string a row, trailing blanks trimmed)
// and the screen's version, which changes with every output and resize.
// When the version is still since, rows is nil and nothing is rendered:
// a reader that polls many screens (the console's tile previews) pays
// only for those that changed. Versions start at 1.
func (s *Session) ScreenLines(since uint64) (rows []string, version uint64) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if s.viewVersion == since {
		return nil, since
	}
	return s.view.Lines(), s.viewVersion
}

// Viewer receives a session's output: first the snapshot of its screen,
// then live output, through a bounded queue. A viewer that lets its queue fill up is
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

// Attach returns a new viewer that first receives, as one chunk, the bytes
// that draw the agent's screen as it is now (screen.Snapshot: the history
// rows that fit in maxSnapshotHistory bytes, the screen, cursor, modes and
// title), and then live output from the byte after it on. queue bounds the number of
// chunks waiting for the viewer (minimum 1; default 256 when <= 0).
func (s *Session) Attach(queue int) *Viewer {
	if queue <= 0 {
		queue = 256
	}
	v := &Viewer{s: s, c: make(chan []byte, queue+1)}
	s.outMu.Lock()
	defer s.outMu.Unlock()
	v.c <- s.view.Snapshot(nil, maxSnapshotHistory)
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

// broadcast writes p to the viewers' screen and offers it to every viewer.
// It never blocks on a viewer. p must not be modified afterwards.
func (s *Session) broadcast(p []byte) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	_, _ = s.view.Write(p)
	s.viewVersion++
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
