package session

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/office-server/office-server/office"
)

// proc is one run of the agent's process.
type proc struct {
	cmd        *exec.Cmd
	pty        *os.File
	tty        int           // the terminal's slave side, for its input queue (openTTY; -1: none); worker-owned
	exited     chan struct{} // closed after Wait
	readerDone chan struct{}
	waitErr    error
	started    time.Time
}

type ctrlOp int

const (
	opStop ctrlOp = iota
	opRestart
)

type ctrlReq struct {
	op   ctrlOp
	spec *Spec
	done chan error
}

// launch starts the agent's process in a new PTY, as its driver says.
func (s *Session) launch() error {
	s.mu.Lock()
	spec := s.spec
	s.mu.Unlock()
	if spec.Dir != "" {
		if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
			return fmt.Errorf("create working directory: %w", err)
		}
	}
	drv := s.driverFor(spec.Kind)
	args, env, err := drv.launch(spec)
	if err != nil {
		return err
	}
	cmd := exec.Command(spec.Command, args...)
	cmd.Env = env
	cmd.Dir = spec.Dir
	cred, err := runAs(cmd, spec)
	if err == nil {
		err = keep(cmd, s.m.opts.Keeper, cred, s.m.opts.Logger)
	}
	if err != nil {
		return s.launchFailed(spec, err)
	}
	var ptmx *os.File
	err = reaper.start(func() (int, *os.File, error) {
		var err error
		ptmx, err = s.m.startPTY(cmd, &pty.Winsize{Cols: uint16(spec.Cols), Rows: uint16(spec.Rows)})
		if err != nil {
			return 0, nil, err
		}
		ptmx = pollablePTY(ptmx)
		return cmd.Process.Pid, ptmx, nil
	})
	if err != nil {
		return s.launchFailed(spec, ptyError(err))
	}
	p := &proc{cmd: cmd, pty: ptmx, tty: openTTY(ptmx), exited: make(chan struct{}), readerDone: make(chan struct{}), started: time.Now()}
	s.mu.Lock()
	s.p = p
	s.modes = modeTracker{}
	s.inputAt = time.Time{}
	s.lastOutput = time.Time{}
	s.info.PID = cmd.Process.Pid
	s.info.StartedAt = p.started
	s.info.ExitCode = 0
	s.info.Err = ""
	s.info.Detail, s.info.LastLines = "", nil
	s.info.Cols, s.info.Rows = spec.Cols, spec.Rows
	s.resizeView(spec.Cols, spec.Rows)
	s.info.Kind = spec.Kind
	s.info.Resumes, s.info.Resumed = false, false
	drv.started(spec, &s.info)
	report, _ := s.setStatusLocked(office.SessionStarting)
	s.mu.Unlock()
	report()
	go s.read(p)
	go func() {
		pid := cmd.Process.Pid
		_ = awaitExit(pid) // parked on the poller; else Wait blocks
		p.waitErr = cmd.Wait()
		// What the agent left is this process's child by now: end it
		// before the agent is forgotten (then the sweep would no longer
		// know it for an agent's, and the watchdog never did).
		reaper.sweep()
		reaper.ended(pid)
		close(p.exited)
		s.poke()
	}()
	return nil
}

// launchFailed records why the process could not start (Info.Err and
// Detail, which its next status report carries) and returns err.
func (s *Session) launchFailed(spec Spec, err error) error {
	s.mu.Lock()
	s.info.Err = err.Error()
	s.info.Detail = cutText(err.Error(), maxDialogText)
	s.mu.Unlock()
	return fmt.Errorf("launch %s: %w", spec.Command, err)
}

// read copies the PTY's output to the scrollback, the viewers and the
// screen. It never waits for a consumer.
func (s *Session) read(p *proc) {
	defer close(p.readerDone)
	buf := make([]byte, 16<<10)
	for {
		n, err := p.pty.Read(buf)
		if n > 0 {
			s.outputs.Add(1)
			chunk := make([]byte, n)
			copy(chunk, buf[:n])
			s.broadcast(chunk)
			s.mu.Lock()
			if s.p == p {
				s.lastOutput = time.Now()
				s.modes.write(chunk)
				s.drv.output(chunk)
			}
			s.mu.Unlock()
			s.poke()
		}
		if err != nil {
			return
		}
	}
}

// terminate ends p: SIGHUP and SIGTERM to its process group, SIGKILL after
// the grace period; then it closes the PTY and waits for the reader.
func (s *Session) terminate(p *proc) {
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGHUP)
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(s.m.opts.StopGrace):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.exited
	}
	s.reap(p)
}

// reap releases what is left of an exited process: any of its process
// group still holding the terminal is killed, the PTY closed and the
// reader awaited. First, while the terminal is open, the text typed last
// is looked at once more: its input queue says whether the process read
// it before it ended; once closed, nothing does.
func (s *Session) reap(p *proc) {
	s.checkAck(time.Now())
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	// The server's own descriptor of the terminal goes first: while it is
	// open the reader never sees the terminal hung up.
	closeTTY(p.tty)
	p.tty = -1
	// Let the reader drain what the process wrote last (its reason for
	// exiting, often): with every holder of the terminal gone it ends by
	// itself. Closing the PTY first would drop that output.
	select {
	case <-p.readerDone:
	case <-time.After(500 * time.Millisecond):
	}
	_ = p.pty.Close()
	<-p.readerDone
}

// run is the session's worker: it owns the process lifecycle, readiness,
// typing and text dispatch. It ends when the session is stopped.
func (s *Session) run() {
	defer close(s.done)
	tick := time.NewTimer(pollBusy)
	defer tick.Stop()
	paused := s.m.opts.Paused
	for {
		var exited chan struct{}
		s.mu.Lock()
		if s.p != nil {
			exited = s.p.exited
		}
		// Poll often while something is expected (start-up, a turn, queued
		// input, typed text not yet acknowledged); an idle session wakes
		// only when its driver asks (output, Send, exits and the files it
		// watches wake it at once). While the consumer is behind
		// (Options.Paused) the files are left unread: look again later,
		// nothing else says when it has caught up.
		d := pollIdle
		if st := s.info.Status; st == office.SessionStarting || st == office.SessionBusy || len(s.sendQ) > 0 || s.ack != nil {
			d = pollBusy
			if w, ok := s.drv.(probeWaker); ok {
				if p := w.probeWake(time.Now()); p > 0 {
					d = min(d, p)
				}
			}
		} else if w, ok := s.drv.(idleWaker); ok {
			d = w.idleWake()
		}
		s.mu.Unlock()
		if d == 0 && paused != nil && paused(s.key) {
			d = pollIdle
		}
		if d > 0 {
			tick.Reset(d)
		} else {
			tick.Stop() // nothing to look at until something happens
		}
		select {
		case <-exited:
			s.onExit()
		case <-s.restart:
			s.restart = nil
			s.relaunch()
		case r := <-s.ctrl:
			if s.handle(r) {
				return
			}
		case <-s.wake:
		case <-tick.C:
			s.timerWakes.Add(1)
		}
		s.step()
	}
}

// idleWaker is a driver that knows how soon an idle session (ready,
// nothing queued) must look again; 0: not until something happens (output,
// Send, an exit, a control request or a watched file wake the worker).
// Drivers without it look every pollIdle. Locked.
type idleWaker interface {
	idleWake() time.Duration // locked
}

// probeWaker is a driver that may need to look sooner than pollBusy while
// busy (0: no need).
type probeWaker interface {
	probeWake(now time.Time) time.Duration // locked
}

// Worker poll intervals: hooks and the transcript are files.
const (
	pollBusy = 100 * time.Millisecond
	pollIdle = 500 * time.Millisecond
)

// handle serves a control request; it reports whether the session ended.
func (s *Session) handle(r ctrlReq) bool {
	s.mu.Lock()
	p := s.p
	s.mu.Unlock()
	if p != nil {
		s.terminate(p)
		s.step() // dispatch what the agent wrote last
		s.mu.Lock()
		s.p = nil
		s.mu.Unlock()
		s.recordExit(p)
	}
	s.restart = nil
	if a := s.ack; a != nil {
		if r.op == opStop {
			s.ack = nil
			a.r.done <- ErrStopped
		} else {
			s.unacked(a.r, ErrExited)
		}
	}
	switch r.op {
	case opStop:
		s.setStatus(office.SessionStopped)
		s.finish(ErrStopped)
		r.done <- nil
		return true
	default:
		s.mu.Lock()
		if r.spec != nil {
			s.spec = *r.spec
		}
		s.drv.resume(&s.spec, r.spec)
		s.crashes = nil
		s.info.Restarts++
		s.mu.Unlock()
		err := s.launch()
		if err != nil {
			s.crashed(err)
		}
		r.done <- err
		return false
	}
}

// failSends fails every queued Send with err.
func (s *Session) failSends(err error) {
	s.mu.Lock()
	q := s.sendQ
	s.sendQ = nil
	s.mu.Unlock()
	for _, r := range q {
		r.done <- err
	}
}

// finish ends the session for good.
func (s *Session) finish(err error) {
	s.mu.Lock()
	s.ended = true
	q := s.sendQ
	s.sendQ = nil
	s.mu.Unlock()
	for _, r := range q {
		r.done <- err
	}
	s.closeViewers()
	s.cleanup()
	s.m.remove(s)
}

// cleanup releases what the driver holds (it is worker-owned by now).
func (s *Session) cleanup() {
	if s.drv != nil {
		s.drv.close()
	}
}

// recordExit keeps how p ended and what its screen showed last: for an
// agent that fails at start (not logged in, refused flags), the reason is
// only on its screen.
func (s *Session) recordExit(p *proc) {
	code := p.cmd.ProcessState.ExitCode()
	s.mu.Lock()
	s.info.ExitCode = code
	s.info.PID = 0
	how := "exit status 0"
	if p.waitErr != nil {
		s.info.Err = p.waitErr.Error()
		how = s.info.Err
	}
	s.info.LastLines = lastLines(s.screenRowsLocked(), exitLines)
	s.info.Detail = cutText(strings.Join(append([]string{how}, s.info.LastLines...), "\n"), maxDialogText)
	s.mu.Unlock()
}

// exitLines is how many of the last screen lines an exit records.
const exitLines = 12

// onExit handles an exit nobody asked for.
func (s *Session) onExit() {
	s.mu.Lock()
	p := s.p
	s.mu.Unlock()
	if p == nil {
		return
	}
	s.reap(p)
	s.step()
	s.flushScreen() // the agent's last words
	s.mu.Lock()
	s.p = nil
	s.mu.Unlock()
	s.recordExit(p)
	if p.cmd.ProcessState.ExitCode() == 0 {
		if a := s.ack; a != nil {
			s.ack = nil
			a.r.done <- ErrExited
		}
		s.setStatus(office.SessionExited)
		s.failSends(ErrExited)
		return
	}
	if a := s.ack; a != nil {
		s.unacked(a.r, ErrExited) // typed again into the restarted agent
	}
	s.crashed(p.waitErr)
}

// crashed records a crash and schedules a restart, or fails the session.
func (s *Session) crashed(err error) {
	now := time.Now()
	o := s.m.opts
	s.mu.Lock()
	if err != nil {
		s.info.Err = err.Error()
	}
	keep := s.crashes[:0]
	for _, t := range s.crashes {
		if now.Sub(t) < o.RestartWindow {
			keep = append(keep, t)
		}
	}
	s.crashes = append(keep, now)
	n := len(s.crashes)
	s.mu.Unlock()
	if n > o.MaxRestarts {
		s.mu.Lock()
		s.info.Detail = cutText(fmt.Sprintf("crashed %d times in %s; not restarted until an operator restarts it. Last: %s", n, o.RestartWindow, s.info.Detail), maxDialogText)
		s.mu.Unlock()
		s.log.Error("agent failed: too many crashes", "crashes", n, "window", o.RestartWindow, "err", err)
		s.setStatus(office.SessionFailed)
		s.failSends(ErrFailed)
		return
	}
	s.setStatus(office.SessionCrashed)
	d := o.RestartBackoff << (n - 1)
	if d > o.RestartWindow || d <= 0 {
		d = o.RestartWindow
	}
	s.mu.Lock()
	screen := strings.Join(s.info.LastLines, " | ")
	s.mu.Unlock()
	s.log.Warn("agent crashed; restarting", "err", err, "in", d, "crashes", n, "screen", screen)
	s.restart = time.After(d)
}

func (s *Session) relaunch() {
	s.mu.Lock()
	s.drv.resume(&s.spec, nil)
	s.info.Restarts++
	s.mu.Unlock()
	if err := s.launch(); err != nil {
		s.crashed(err)
	}
}

// step does the worker's periodic work: let the driver read the agent's
// words and decide its status, dispatch the words, then report the status,
// resolve the acknowledgement of typed text and type queued input.
func (s *Session) step() {
	now := time.Now()
	s.mu.Lock()
	st := s.info.Status
	s.mu.Unlock()
	texts, report := s.drv.step(now, st)
	s.dispatch(texts)
	// Status after the texts: whoever reacts to "ready" has the turn's
	// words already.
	report()
	s.checkAck(now)
	s.typeNext()
}

// dispatch hands texts to Options.OnText, in order.
func (s *Session) dispatch(texts []Text) {
	if f := s.m.opts.OnText; f != nil {
		for _, t := range texts {
			f(t)
		}
	}
}

// flushScreen dispatches the words still on screen when the process ended.
func (s *Session) flushScreen() {
	s.mu.Lock()
	texts := s.drv.flush()
	s.mu.Unlock()
	s.dispatch(texts)
}

// driverFor returns the session's driver for kind, making a new one (and
// closing the old) when the kind changed.
func (s *Session) driverFor(kind string) driver {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drv != nil && s.drvKind == kind {
		return s.drv
	}
	if s.drv != nil {
		s.drv.close()
	}
	s.drv, s.drvKind = kinds[kind].driver(s), kind
	return s.drv
}
