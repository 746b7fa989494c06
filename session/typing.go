package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/office-server/office-server/office"
)

type sendReq struct {
	text  string
	taken bool
	tries int // times typed
	// since: when the text was first typed (in this server's life or,
	// given to SendSince, an earlier one); zero until then. A text typed
	// before is typed again only when the driver's record (promptRecord) has
	// no prompt with it since then.
	since time.Time
	done  chan error
}

// pendingAck is text typed into the agent that it has not acknowledged yet
// (worker-owned). Send returns only once the agent has it: Claude Code
// writes the prompt into its transcript as a user entry, Codex, Gemini CLI
// and Qwen Code record it; a command agent has read it from its terminal
// through the Enter (commandDriver.received).
type pendingAck struct {
	r         *sendReq
	p         *proc
	typedAt   time.Time // typing began
	enteredAt time.Time // its Enter was written
}

// Send types text into the agent when it is ready for input: FIFO, one turn
// at a time. The text is untrusted and is sanitised first (see Sanitize).
// Multi-line text (or text with a tab) goes as a bracketed paste when the
// program enabled mode 2004; Enter follows as a separate write. Send
// returns once the text was typed, or with ctx's error (the text is then
// not typed), ErrEmpty (nothing left after sanitising), ErrStopped,
// ErrFailed or ErrExited. Text queued while the agent restarts after a
// crash waits for it.
func (s *Session) Send(ctx context.Context, text string) error {
	return s.SendSince(ctx, text, time.Time{})
}

// SendSince is Send for a text that may have been typed before, at since
// (zero: never), by an earlier server whose acknowledgement was not
// recorded. When the agent's CLI records the prompts it got (Claude Code's
// transcript), the record is read first and a prompt with this text at or
// after since counts as received: SendSince returns nil without typing.
// A CLI without a record gets the text again.
func (s *Session) SendSince(ctx context.Context, text string, since time.Time) error {
	text = trimNewlines(Sanitize(text))
	if text == "" {
		return ErrEmpty
	}
	r := &sendReq{text: text, since: since, done: make(chan error, 1)}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return ErrStopped
	}
	switch s.info.Status {
	case office.SessionFailed:
		s.mu.Unlock()
		return ErrFailed
	case office.SessionExited:
		s.mu.Unlock()
		return ErrExited
	}
	s.sendQ = append(s.sendQ, r)
	s.mu.Unlock()
	s.poke()
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
	}
	s.mu.Lock()
	if !r.taken {
		for i, q := range s.sendQ {
			if q == r {
				s.sendQ = append(s.sendQ[:i], s.sendQ[i+1:]...)
				break
			}
		}
		s.mu.Unlock()
		return ctx.Err()
	}
	s.mu.Unlock()
	return <-r.done
}

// typeNext types the head of the send queue if the agent is ready and the
// text typed before was acknowledged.
func (s *Session) typeNext() {
	s.mu.Lock()
	if s.ack != nil || len(s.sendQ) == 0 || s.info.Status != office.SessionReady || s.p == nil || isClosed(s.p.exited) {
		s.mu.Unlock()
		return
	}
	r := s.sendQ[0]
	s.sendQ = s.sendQ[1:]
	r.taken = true
	if s.alreadyRecordedLocked(r) {
		s.mu.Unlock()
		r.done <- nil
		s.poke()
		return
	}
	r.tries++
	if r.tries > 1 {
		s.typedAgain.Add(1)
		inputCounts.again.Add(1)
	}
	p := s.p
	paste := s.modes.paste
	s.drv.typed(r.text)
	s.inputAt = time.Now()
	report, _ := s.setStatusLocked(office.SessionBusy)
	s.mu.Unlock()
	report()
	typedAt := time.Now()
	if r.since.IsZero() {
		r.since = typedAt
	}
	if err := s.typeText(p, r.text, paste); err != nil {
		if isClosed(p.exited) {
			s.unacked(r, ErrExited) // typed into a process that died: again after the restart
			return
		}
		r.done <- err
		return
	}
	s.ack = &pendingAck{r: r, p: p, typedAt: typedAt, enteredAt: time.Now()}
	s.poke()
}

// alreadyRecordedLocked reports whether r, typed before, is in the
// driver's record of prompts since then (then it is not typed again). A
// record that cannot be read says nothing: the text is typed. Locked.
func (s *Session) alreadyRecordedLocked(r *sendReq) bool {
	rec, ok := s.drv.(promptRecord)
	if r.since.IsZero() || !ok {
		return false
	}
	got, err := rec.recorded(r.text, r.since)
	if err != nil {
		s.log.Warn("read the record of prompts before typing again", "err", err)
		return false
	}
	if got {
		s.log.Info("not typed again: the agent's record has it", "typed", r.since.Format(time.RFC3339Nano))
	}
	return got
}

// maxTries bounds how often one text is typed when it was not acknowledged
// (the agent crashed first, or its prompt lost it).
const maxTries = 3

// checkAck resolves the pending acknowledgement, as the driver sees it.
func (s *Session) checkAck(now time.Time) {
	a := s.ack
	if a == nil {
		return
	}
	done, err := s.drv.received(now, a)
	switch {
	case !done:
	case err != nil:
		s.unacked(a.r, err)
	default:
		s.acked()
	}
}

func (s *Session) acked() {
	r := s.ack.r
	s.ack = nil
	r.done <- nil
}

// unacked takes r back: it is typed again when the agent is ready (first in
// line), up to maxTries; then Send fails with err.
func (s *Session) unacked(r *sendReq, err error) {
	if s.ack != nil && s.ack.r == r {
		s.ack = nil
	}
	s.mu.Lock()
	if r.tries < maxTries && !s.ended {
		r.taken = false // a Send given up meanwhile may take it out again
		s.sendQ = append([]*sendReq{r}, s.sendQ...)
		s.mu.Unlock()
		s.poke()
		return
	}
	s.mu.Unlock()
	r.done <- fmt.Errorf("%w (typed %d times): %w", ErrNotReceived, r.tries, err)
}

func (s *Session) typeText(p *proc, text string, paste bool) error {
	write := func(b string) error {
		_ = p.pty.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, err := p.pty.Write([]byte(b))
		if err != nil {
			return fmt.Errorf("type into session %s: %w", s.key, err)
		}
		return nil
	}
	var body string
	switch {
	case paste && (containsNewline(text) || strings.IndexByte(text, '\t') >= 0):
		// A tab typed as a key may complete or switch modes; pasted, it is
		// text.
		body = "\x1b[200~" + text + "\x1b[201~"
	case !containsNewline(text):
		body = text
	case paste:
		body = "\x1b[200~" + text + "\x1b[201~"
	default:
		body = replaceNewlines(text, "\r")
	}
	tail := landTail(text)
	s.mu.Lock()
	if w, ok := s.drv.(landWatcher); ok {
		w.watchLanding(tail)
	}
	base := s.landMarksLocked(tail)
	s.mu.Unlock()
	wrote := time.Now()
	if err := write(body); err != nil {
		return err
	}
	if err := s.awaitLanded(p, tail, base, wrote); err != nil {
		return err
	}
	if g, ok := s.drv.(pasteGuarder); ok && strings.HasPrefix(body, "\x1b[200~") && g.afterPaste() > 0 {
		time.Sleep(g.afterPaste())
	}
	return write("\r")
}

// pasteGuarder is a driver whose program takes an Enter that comes soon
// after a paste for a line break: afterPaste is how long to wait.
type pasteGuarder interface{ afterPaste() time.Duration }

// awaitLanded waits until the program has taken the text typed at wrote,
// so that the Enter that follows submits it rather than joining it (a TUI
// that reads a burst of keys as a paste takes an Enter in the same burst
// for a line break). Each of these signals is exact:
//
//   - canonical: the terminal is in canonical mode, so its line discipline
//     holds the line until the Enter and the program reads both at once.
//   - read: the terminal's input queue is empty (the program read every
//     byte typed) and a thread of the program is asleep in a read of its
//     terminal again (inTerminalRead): it came back for more, so the Enter
//     comes in a read of its own. A program that waits in poll or epoll
//     (Node.js and Rust TUIs, which also time pastes) does not count: for
//     it, the next signal.
//   - echo: the program's own redraw, output after the write that shows
//     the text's tail (or Claude Code's "[Pasted text" placeholder for a
//     long paste) once more than the base count from before the write, in
//     the input box where the driver knows it. The text is often on screen
//     already (an earlier prompt ending the same way, as the office's do,
//     in the history above the box): seeing it there is no sign, and an
//     Enter sent on it under load came too early.
//
// Options.EnterDelay bounds the wait where none comes (no input queue to
// read: not Linux; a program that waits in epoll and draws nothing; one
// that does not read its terminal now).
//
// The reader goroutine keeps the screen current while the worker waits
// here and pokes the worker's wake channel on every chunk; the input queue,
// which nothing announces, is looked at on a short backoff (queueLook).
func (s *Session) awaitLanded(p *proc, tail string, base int, wrote time.Time) error {
	bound := time.NewTimer(s.m.opts.EnterDelay)
	defer bound.Stop()
	look := time.NewTimer(time.Hour)
	defer look.Stop()
	looks := 0
	for {
		s.mu.Lock()
		landed := s.p == p && s.lastOutput.After(wrote) && s.landMarksLocked(tail) > base
		s.mu.Unlock()
		sig := enterNone
		if q, canonical, ok := inputQueue(p.tty); ok {
			switch {
			case canonical:
				sig = enterCanonical
			case landed:
				sig = enterEcho
			case q == 0 && inTerminalRead(p.pty):
				sig = enterRead
			default:
				look.Reset(queueLook(looks))
				looks++
			}
		} else if landed {
			sig = enterEcho
		}
		if sig != enterNone {
			s.entered(sig, time.Since(wrote))
			return nil
		}
		select {
		case <-s.wake:
		case <-look.C:
		case <-bound.C:
			s.entered(enterBound, time.Since(wrote))
			return nil
		case <-p.exited:
			return fmt.Errorf("type into session %s: %w", s.key, errors.New("agent exited"))
		}
	}
}

// queueLook is how long to wait before the n-th look (from 0) at a
// terminal's input queue while a typed text is not taken: 1 ms doubling to
// 16 ms. A program that reads at once is seen within a millisecond or two;
// one that takes longer costs a look every 16 ms (a poll, two ioctls and
// its /proc files), no more.
func queueLook(n int) time.Duration {
	return time.Millisecond << min(n, 4)
}

// enterSignal is what told the session that a typed text was taken, so
// its Enter was pressed (awaitLanded).
type enterSignal int

const (
	enterNone enterSignal = iota
	enterCanonical
	enterRead
	enterEcho
	enterBound // no signal came: the Options.EnterDelay bound
	enterSignals
)

var enterSignalNames = [enterSignals]string{"", "canonical", "read", "echo", "bound"}

// entered counts an Enter pressed on sig, after waiting for it.
func (s *Session) entered(sig enterSignal, after time.Duration) {
	s.enters[sig].Add(1)
	inputCounts.enters[sig].Add(1)
	s.log.Debug("enter", "after", after, "signal", enterSignalNames[sig])
}

// inputCounts are the process's counts of Enters by signal and of texts
// typed again (InputCounters).
var inputCounts struct {
	enters [enterSignals]atomic.Int64
	again  atomic.Int64
}

// InputCounts counts, for every session of the process since it started,
// what made it press Enter after a typed text, and how many texts it typed
// again because the agent had not received them (it restarted first, or its
// prompt lost the text).
type InputCounts struct {
	EnterCanonical int64 // the terminal in canonical mode: at once
	EnterOnRead    int64 // the input queue read and the program back in its terminal read
	EnterOnEcho    int64 // the program showed the text
	EnterOnBound   int64 // nothing said so: Options.EnterDelay
	TypedAgain     int64
}

// InputCounters returns the process's InputCounts.
func InputCounters() InputCounts {
	e := &inputCounts.enters
	return InputCounts{
		EnterCanonical: e[enterCanonical].Load(), EnterOnRead: e[enterRead].Load(),
		EnterOnEcho: e[enterEcho].Load(), EnterOnBound: e[enterBound].Load(),
		TypedAgain: inputCounts.again.Load(),
	}
}

// inputBox is a driver that knows which rows of its screen are its input
// box (Claude Code's prompt box). Locked.
type inputBox interface {
	inputRows(rows []string) []string
}

// landWatcher is a driver that also counts a typed text's tail in the
// lines that scroll off its screen (a command agent's full screen pushes
// the previous prompt, ending alike, off the top as the echo comes).
// landedOff returns that count and the end of what scrolled off (spaces
// removed, shorter than the tail): a tail half scrolled off is whole
// again when the carry is put before the screen.
type landWatcher interface {
	watchLanding(tail string)
	landedOff() (n int, carry string)
}

// landMarksLocked counts the signs on screen that a text with this tail
// was taken: in the driver's input box when it has one, else on the whole
// screen and in what scrolled off it since the count began. Each sign
// counts once wherever it is: whole on screen, whole above it, or across
// the top row. Locked.
func (s *Session) landMarksLocked(tail string) int {
	if s.drv == nil {
		return 0
	}
	rows := s.drv.screen()
	if b, ok := s.drv.(inputBox); ok {
		return landMarks(b.inputRows(rows), tail)
	}
	if w, ok := s.drv.(landWatcher); ok {
		off, carry := w.landedOff()
		return off + landMarks(append([]string{carry}, rows...), tail)
	}
	return landMarks(rows, tail)
}

// landTail is what of text a program shows once it took it: the last 16
// non-space characters (screens wrap and indent, so spaces are not
// compared).
func landTail(text string) string {
	r := []rune(strings.Join(strings.Fields(text), ""))
	if len(r) > 16 {
		r = r[len(r)-16:]
	}
	return string(r)
}

// landMarks counts, in rows joined without their spaces, the occurrences
// of tail and of Claude Code's placeholder for a pasted text.
func landMarks(rows []string, tail string) int {
	var b strings.Builder
	n := 0
	for _, r := range rows {
		n += strings.Count(r, "[Pasted text")
		for _, f := range strings.Fields(r) {
			b.WriteString(f)
		}
	}
	if tail != "" {
		n += strings.Count(b.String(), tail)
	}
	return n
}

// Input writes raw keystrokes from the console's controlling viewer. A line
// a person enters makes the agent busy when its driver says so (a screen
// read: the echo of the keystrokes is not the agent's words either, see
// keyLine).
func (s *Session) Input(p []byte) error {
	s.mu.Lock()
	pr := s.p
	if pr != nil && s.drv.keys(p) {
		s.inputAt = time.Now()
		report, _ := s.setStatusLocked(office.SessionBusy)
		defer report()
	}
	s.mu.Unlock()
	if pr == nil {
		return fmt.Errorf("input to session %s: %w", s.key, errors.New("no running agent"))
	}
	_ = pr.pty.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := pr.pty.Write(p); err != nil {
		return fmt.Errorf("input to session %s: %w", s.key, err)
	}
	return nil
}

// pressEnterAgain presses Enter once more in p, for a prompt the program
// has not taken as submitted within its time (p nil: nothing to do). Not
// locked: the write may wait on a program that reads slowly.
func (s *Session) pressEnterAgain(p *proc) {
	if p == nil {
		return
	}
	s.log.Warn("prompt not submitted; pressing Enter again")
	_ = p.pty.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := p.pty.Write([]byte("\r")); err != nil {
		s.log.Warn("press Enter again", "err", err)
	}
}

// enterAgain follows a typed text until its CLI records it as a prompt
// (Codex's rollout, Gemini CLI's and Qwen Code's chat recordings), and says
// when to press Enter again for it: after wait without the record, then
// after each further wait, at most times times (an Enter typed while the
// CLI loads is lost). Locked, as its driver's fields.
type enterAgain struct {
	typedAt  time.Time
	text     string
	awaiting bool // typed, not yet seen recorded
	pressed  int  // Enter pressed again since it was typed
}

func (e *enterAgain) typed(now time.Time, text string) {
	*e = enterAgain{typedAt: now, text: text, awaiting: true}
}

// recorded is told the prompts the CLI recorded since the last look:
// once the typed text is among them, nothing more is pressed. Another
// prompt (a CLI records the session's context as a user message of its
// own) is no sign that this one was submitted.
func (e *enterAgain) recorded(prompts []string) {
	for _, p := range prompts {
		if e.awaiting && samePrompt(p, e.text) {
			e.awaiting = false
		}
	}
}

// next is when the next Enter again falls due; false when none will.
func (e *enterAgain) next(times int, wait time.Duration) (time.Time, bool) {
	if !e.awaiting || e.pressed >= times {
		return time.Time{}, false
	}
	return e.typedAt.Add(time.Duration(e.pressed+1) * wait), true
}

// due reports whether Enter is to be pressed again at now, and counts it.
func (e *enterAgain) due(now time.Time, times int, wait time.Duration) bool {
	at, ok := e.next(times, wait)
	if !ok || !now.After(at) {
		return false
	}
	e.pressed++
	return true
}

// promptRecorded is received for a CLI that records the prompts it got:
// the text is among prompts (read since the last step), or it is given up
// after giveUp (ErrNotReceived: typed again).
func promptRecorded(prompts []string, a *pendingAck, now time.Time, giveUp time.Duration) (bool, error) {
	for _, p := range prompts {
		if samePrompt(p, a.r.text) {
			return true, nil
		}
	}
	if now.Sub(a.typedAt) <= giveUp {
		return false, nil
	}
	return true, ErrNotReceived
}

// resumeConversation continues the conversation id of a CLI of kind after
// a restart, unless the restart asked for another one.
func resumeConversation(id, kind string, spec, asked *Spec) {
	if id != "" && spec.Kind == kind && (asked == nil || asked.ConversationID == "" || asked.ConversationID == id) {
		spec.ConversationID = id
		spec.Resume = true
	}
}
