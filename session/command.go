package session

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/office-server/office-server/office"
)

// KindCommand runs any CLI agent and reads its words off its terminal
// screen (screenlines.go): lines that scroll off are final at once, the
// visible rows are read at turn end. A turn ends when the screen has been
// still for Spec.Quiescence (and, with Spec.PromptPattern, shows the
// prompt), or, with the prompt shown, as soon as the program is seen
// asleep reading its terminal (readingTerminal, Linux). Typed text is
// acknowledged by any output after it.
const KindCommand = "command"

// silentAck: where the terminal's input queue cannot be read (not Linux),
// a CLI that prints nothing after a line was typed (no echo, no reaction)
// but keeps running is taken to have read it after this.
const silentAck = 3 * time.Second

// queuedAck: a typed text still in the terminal's input queue this long
// (the program does not read its terminal) counts as delivered, with a
// warning: it waits there for the program's next read, and typing it again
// would give it twice. Only a program that died before reading gets it
// again (after its restart, on a new terminal).
const queuedAck = 30 * time.Second

func checkCommand(spec *Spec) error {
	if spec.Command == "" {
		return errors.New("kind command needs a command")
	}
	if spec.Quiescence <= 0 {
		spec.Quiescence = 500 * time.Millisecond
	}
	if spec.PromptPattern != "" {
		if _, err := regexp.Compile(spec.PromptPattern); err != nil {
			return fmt.Errorf("prompt pattern: %w", err)
		}
	}
	return nil
}

// commandDriver reads a CLI agent's screen.
type commandDriver struct {
	s         *Session
	lines     *screenLines   // the process's screen and the lines read off it (locked)
	prompt    *regexp.Regexp // Spec.PromptPattern (locked)
	typing    keyLine        // a person's keystrokes (locked)
	turnEndAt time.Time      // the live area was last read (locked)
	attn      bool           // needs_attention for an approval dialog (locked)
	dialogAt  time.Time      // an approval dialog has been on screen since (locked)
	probeOut  time.Time      // the output after which readingTerminal was asked (locked)
	probes    int            // how many times (of probeAfter), after probeOut (locked)
	textSeq   int            // worker-owned
}

// probeAfter: readingTerminal is asked at most at these times after the
// last output (time for the program to get from writing its prompt to
// reading; a program seen busy at the first look, by its own threads or
// a descheduled read, gets two more), then not until the next output.
var probeAfter = [...]time.Duration{5 * time.Millisecond, 25 * time.Millisecond, 60 * time.Millisecond}

// probesDone is how many of probeAfter were asked for the last output.
// Locked.
func (d *commandDriver) probesDone() int {
	if d.s.lastOutput.Equal(d.probeOut) {
		return d.probes
	}
	return 0
}

func newCommandDriver(s *Session) driver { return &commandDriver{s: s} }

func (d *commandDriver) launch(spec Spec) ([]string, []string, error) {
	env := buildEnv(spec, false)
	if err := teachCommand(spec, env); err != nil {
		return nil, nil, err
	}
	return spec.Args, env, nil
}

// instructionFiles are the global instruction files, under the agent's
// HOME, of the CLIs a command agent may run (by the executable's name):
// each reads its file into the model's system prompt at start
// (docs/notes/clis.md).
var instructionFiles = map[string]string{
	"qwen":   filepath.Join(".qwen", "QWEN.md"),
	"gemini": filepath.Join(".gemini", "GEMINI.md"),
}

// teachCommand puts the office's instructions (Spec.AppendSystemPrompt)
// in the instruction file of a CLI that has one, as a section of its own
// (what a person wrote there is kept). Other programs are not taught: they
// are told nothing the office does not type to them.
func teachCommand(spec Spec, env []string) error {
	f, ok := instructionFiles[filepath.Base(spec.Command)]
	if !ok || spec.AppendSystemPrompt == "" {
		return nil
	}
	home, _ := lookup(env, "HOME")
	if home == "" {
		return errors.New("teach the agent: no HOME for its instruction file")
	}
	path := filepath.Join(home, f)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("teach the agent: %w", err)
	}
	if err := writeInstructions(path, spec.AppendSystemPrompt); err != nil {
		return fmt.Errorf("teach the agent: %w", err)
	}
	return nil
}

func (d *commandDriver) started(spec Spec, _ *Info) {
	d.lines = &screenLines{scr: newScreen(spec.Cols, spec.Rows), cols: spec.Cols, rows: spec.Rows}
	d.prompt = nil
	if spec.PromptPattern != "" {
		d.prompt = regexp.MustCompile(spec.PromptPattern) // checked by checkCommand
	}
	d.typing = keyLine{}
}

func (d *commandDriver) output(p []byte) { d.lines.write(p) }

// watchLanding and landedOff: see landWatcher. Locked.
func (d *commandDriver) watchLanding(tail string) {
	if d.lines != nil {
		d.lines.watchLanding(tail)
	}
}

func (d *commandDriver) landedOff() (int, string) {
	if d.lines == nil {
		return 0, ""
	}
	return d.lines.landedOff()
}

func (d *commandDriver) screen() []string {
	if d.lines == nil {
		return nil
	}
	return d.lines.scr.Lines()
}

func (d *commandDriver) resize(cols, rows int) {
	if d.lines != nil {
		d.lines.resized(cols, rows)
	}
}

func (d *commandDriver) typed(text string) {
	if d.lines != nil {
		d.lines.typed(text)
	}
}

// keys follows a person's keystrokes into a line (printable characters,
// backspace; escape sequences ignored) that the echo filter drops when it
// shows up on screen: the echo of what a person types is not the agent's
// words either.
func (d *commandDriver) keys(p []byte) bool {
	return d.lines != nil && d.typing.feed(p, d.lines)
}

// received: the program has read the typed text through its Enter (the
// terminal's input queue is empty: inputQueue). Where the queue cannot be
// read, any output after the typing began is taken for the CLI's reaction
// (its echo at least), and silence for silentAck as reading. The
// terminal's own echo (canonical mode) is written when the text arrives,
// before the program reads it: it is no sign where the queue says more,
// nor once the process has ended.
func (d *commandDriver) received(now time.Time, a *pendingAck) (bool, error) {
	if q, _, ok := inputQueue(a.p.tty); ok {
		if q > 0 && now.Sub(a.enteredAt) > queuedAck {
			d.s.log.Warn("typed text still unread in the terminal; counted as delivered", "bytes", q)
			d.s.boundAcks.Add(1)
			return true, nil
		}
		return q == 0, nil
	}
	select {
	case <-a.p.exited:
		// Ended with the text unread, or its terminal is closed (reap
		// read the queue last): its output then, such as the terminal's
		// echo, is no sign it read the text.
		return false, nil
	default:
	}
	d.s.mu.Lock()
	lastOut := d.s.lastOutput
	d.s.mu.Unlock()
	if lastOut.After(a.typedAt) {
		return true, nil
	}
	if now.Sub(a.typedAt) > silentAck {
		d.s.boundAcks.Add(1)
		return true, nil
	}
	return false, nil
}

// ackWake is when the worker must look at the input queue again for the
// pending acknowledgement (0: none pending, or no queue to read): a
// program that reads and prints nothing wakes nobody, so the worker looks
// on queueLook's backoff from the Enter, then every pollBusy. Worker-owned.
func (d *commandDriver) ackWake(now time.Time) time.Duration {
	a := d.s.ack
	if a == nil || a.p.tty < 0 {
		return 0
	}
	for n, at := 0, a.enteredAt; n < 8; n++ {
		at = at.Add(queueLook(n))
		if at.After(now) {
			return at.Sub(now)
		}
	}
	return 0
}

// probeWake is when the worker must look again while busy: at the input
// queue for a pending acknowledgement (ackWake), or to ask readingTerminal
// about the last output (turnProbeWake); 0: neither. Locked.
func (d *commandDriver) probeWake(now time.Time) time.Duration {
	if w := d.ackWake(now); w > 0 {
		if p := d.turnProbeWake(now); p > 0 {
			return min(w, p)
		}
		return w
	}
	return d.turnProbeWake(now)
}

// turnProbeWake is when the worker must look to ask readingTerminal about
// the last output (0: asked already, or no prompt pattern). Locked.
func (d *commandDriver) turnProbeWake(now time.Time) time.Duration {
	s := d.s
	n := d.probesDone()
	if d.prompt == nil || d.lines == nil || s.p == nil || s.lastOutput.IsZero() || n >= len(probeAfter) {
		return 0
	}
	return untilDue(now, s.lastOutput.Add(probeAfter[n]))
}

// idleWake: a ready CLI is only read again when it writes (the reader
// wakes the worker), except output nobody asked for behind a prompt
// pattern, read once it has been still for the quiescence period: a timer
// for then, none after (a screen that did not end with the prompt then
// waits for more output), and one for the readingTerminal look shortly
// after the output. Locked.
func (d *commandDriver) idleWake() time.Duration {
	s := d.s
	if d.prompt == nil || !s.lastOutput.After(d.turnEndAt) || s.p == nil {
		return 0
	}
	now, q := time.Now(), s.spec.Quiescence
	due := s.lastOutput.Add(q)
	if at := s.p.started.Add(q); at.After(due) {
		due = at
	}
	if !s.inputAt.IsZero() && !s.lastOutput.After(s.inputAt) && s.inputAt.Add(10*q).After(due) {
		due = s.inputAt.Add(10 * q) // keys typed and not echoed yet (texts)
	}
	if now.After(due) {
		return d.turnProbeWake(now)
	}
	if p := d.turnProbeWake(now); p > 0 && p < untilDue(now, due) {
		return p
	}
	return untilDue(now, due)
}

// resume: a CLI restarts blank; nothing to carry over.
func (d *commandDriver) resume(*Spec, *Spec) {}

func (d *commandDriver) close() {}

// step dispatches scrolled-off lines and detects the turn's end on the
// screen.
func (d *commandDriver) step(now time.Time, st Status) ([]Text, func()) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	texts := d.texts(now, st)
	if len(texts) > 0 && texts[len(texts)-1].TurnEnd {
		if d.attn {
			d.attn, s.info.Detail = false, ""
		}
		report, _ := s.setStatusLocked(office.SessionReady)
		return texts, report
	}
	if next := d.approval(now, st); next != st {
		report, _ := s.setStatusLocked(next)
		return texts, report
	}
	return texts, func() {}
}

// approvalOption is the first choice of a CLI's tool-approval dialog as
// Gemini CLI and Qwen Code draw it ("● 1. Allow once", "1. Yes, allow
// once"); approvalQuestion the question above it.
var (
	approvalOption   = regexp.MustCompile(`^[\s│]*[●❯›>]?\s*1\.\s+(Allow once|Yes, allow once|Yes)\b`)
	approvalQuestion = regexp.MustCompile(`\?\s*[│]?\s*$`)
)

// approvalDialog returns the text of a tool-approval dialog on screen (a
// question, then a numbered first choice that allows: the rows around
// them, box edges trimmed), or "". A dialog with the prompt (prompt, when
// not nil) below it was answered: its rows are history.
func approvalDialog(rows []string, prompt *regexp.Regexp) string {
	for i := len(rows) - 1; i >= 0; i-- {
		r := rows[i]
		if prompt != nil && strings.TrimSpace(r) != "" && prompt.MatchString(trimRight(r)) {
			return ""
		}
		if !approvalOption.MatchString(r) {
			continue
		}
		for j := i - 1; j >= 0 && j >= i-8; j-- {
			if !approvalQuestion.MatchString(strings.TrimRight(rows[j], " ")) {
				continue
			}
			var lines []string
			for _, x := range rows[max(0, j-3):min(len(rows), i+4)] {
				x = strings.TrimSpace(strings.Trim(strings.TrimSpace(x), "│"))
				if x != "" && !strings.HasPrefix(x, "╭") && !strings.HasPrefix(x, "╰") {
					lines = append(lines, x)
				}
			}
			return strings.Join(lines, "\n")
		}
		return ""
	}
	return ""
}

// approval puts a busy agent whose screen has shown a tool-approval
// dialog for the quiescence period in needs_attention, with the dialog's text (a person answers it
// in the console's terminal), and back to busy once it is gone. Locked.
func (d *commandDriver) approval(now time.Time, st Status) Status {
	s := d.s
	if d.attn && st != office.SessionNeedsAttention {
		// Answered by keys (a line entered makes it busy) or gone.
		d.attn = false
		s.info.Detail = ""
	}
	if d.lines == nil || s.p == nil || (st != office.SessionBusy && st != office.SessionNeedsAttention) {
		return st
	}
	// A spinner may go on drawing under the dialog (Qwen Code's "Waiting
	// for user confirmation"): the dialog, not the screen, has to stay
	// for the quiescence period.
	text := approvalDialog(d.lines.scr.Lines(), d.prompt)
	if text == "" {
		d.dialogAt = time.Time{}
	} else if d.dialogAt.IsZero() {
		d.dialogAt = now
	}
	switch {
	case text != "" && st == office.SessionBusy && now.Sub(d.dialogAt) >= s.spec.Quiescence:
		d.attn = true
		s.info.Detail = text
		s.log.Warn("agent needs attention", "dialog", text)
		return office.SessionNeedsAttention
	case text == "" && st == office.SessionNeedsAttention:
		d.attn = false
		s.info.Detail = ""
		return office.SessionBusy
	}
	return st
}

// texts reads the lines that scrolled off, and the live area when the turn
// is over. Locked.
func (d *commandDriver) texts(now time.Time, st Status) []Text {
	s := d.s
	var texts []Text
	if d.lines == nil || s.p == nil {
		return nil
	}
	if l, lost := d.lines.take(); len(l) > 0 || lost > 0 {
		texts = append(texts, d.newText(l, lost, false))
	}
	// At most a few times after each output, shortly after it: may the
	// prompt on screen be taken at once (the program waits for a line)?
	probe := false
	if n := d.probesDone(); d.prompt != nil && !s.lastOutput.IsZero() && n < len(probeAfter) && now.Sub(s.lastOutput) >= probeAfter[n] {
		for n < len(probeAfter) && now.Sub(s.lastOutput) >= probeAfter[n] {
			n++
		}
		d.probeOut, d.probes, probe = s.lastOutput, n, true
	}
	switch st {
	case office.SessionStarting, office.SessionBusy:
	case office.SessionReady:
		// Output nobody asked for (a background job finishing): read it
		// once it settles behind a prompt. Only with a prompt pattern: the
		// prompt row, which may hold what a person is typing, is skipped.
		if d.prompt == nil || !s.lastOutput.After(d.turnEndAt) {
			return texts
		}
	default:
		return texts
	}
	q := s.spec.Quiescence
	settled := now.Sub(s.lastOutput) >= q && now.Sub(s.p.started) >= q
	if !settled && !probe {
		return texts
	}
	// After typing, wait for the program to react (its echo at least),
	// unless it stays silent much longer than the quiescence period.
	if !s.inputAt.IsZero() && !s.lastOutput.After(s.inputAt) && now.Sub(s.inputAt) < 10*q {
		return texts
	}
	var skip func(string) bool
	lastRow := -1
	if d.prompt != nil {
		last := ""
		rows := d.lines.scr.Lines()
		for i := len(rows) - 1; i >= 0; i-- {
			if r := trimRight(rows[i]); r != "" {
				last, lastRow = r, i
				break
			}
		}
		if !d.prompt.MatchString(last) {
			return texts
		}
		skip = d.prompt.MatchString
	}
	// Not while a person has a line half typed at the prompt (the
	// console): the program reads it then too, and the turn goes on.
	if !settled && (len(d.typing.line) > 0 || !lineInput(d.lines.scr, lastRow) || !readingTerminal(s.p.pty)) {
		return texts
	}
	d.lines.turnEnd(skip)
	d.turnEndAt = now
	if l, lost := d.lines.take(); len(l) > 0 || lost > 0 || st != office.SessionReady {
		texts = append(texts, d.newText(l, lost, true))
	}
	return texts
}

// flush reads the live area of an agent that exited: its last words.
func (d *commandDriver) flush() []Text {
	if d.lines == nil {
		return nil
	}
	d.lines.turnEnd(nil)
	l, lost := d.lines.take()
	if len(l) == 0 && lost == 0 {
		return nil
	}
	return []Text{d.newText(l, lost, true)}
}

func (d *commandDriver) newText(lines []string, lost int, turnEnd bool) Text {
	d.textSeq++
	if lost > 0 {
		d.s.log.Warn("agent output lost: the session's consumer did not keep up", "lines", lost)
	}
	return Text{Key: d.s.key, Lines: lines, ID: fmt.Sprintf("screen:%d", d.textSeq), Source: FromScreen, TurnEnd: turnEnd, Lost: lost}
}

// keyLine follows a person's keystrokes into the line being typed.
type keyLine struct {
	line []rune
	esc  int // 0 none, 1 after ESC, 2 in CSI/SS3
	utf  []byte
}

// feed takes keystrokes; each completed line (Enter) is registered as
// typed text with x. It reports whether a line was completed.
func (k *keyLine) feed(p []byte, x *screenLines) bool {
	entered := false
	for _, c := range p {
		switch k.esc {
		case 1:
			if c == '[' || c == 'O' {
				k.esc = 2
			} else {
				k.esc = 0
			}
			continue
		case 2:
			if c >= 0x40 && c <= 0x7e {
				k.esc = 0
			}
			continue
		}
		if len(k.utf) > 0 || c >= 0x80 {
			k.utf = append(k.utf, c)
			if utf8.FullRune(k.utf) {
				r, _ := utf8.DecodeRune(k.utf)
				k.utf = k.utf[:0]
				k.line = append(k.line, r)
			}
			continue
		}
		switch c {
		case 0x1b:
			k.esc = 1
		case '\r', '\n':
			x.typed(string(k.line))
			k.line = k.line[:0]
			entered = true
		case 0x7f, 0x08:
			if len(k.line) > 0 {
				k.line = k.line[:len(k.line)-1]
			}
		case 0x15: // Ctrl-U
			k.line = k.line[:0]
		default:
			if c >= 0x20 {
				k.line = append(k.line, rune(c))
			}
		}
	}
	return entered
}

// lineInput reports whether the screen looks like a program waiting for a
// line at its prompt: the main screen (a full-screen program on the
// alternate screen, such as a Go TUI, keeps a thread reading its terminal
// while it streams), the cursor shown and on the prompt's row. Only then is
// readingTerminal's answer taken as the turn's end before the quiescence
// period.
func lineInput(scr screenModel, promptRow int) bool {
	v, ok := scr.(interface {
		AltScreen() bool
		CursorVisible() bool
		Cursor() (x, y int)
	})
	if !ok || promptRow < 0 || v.AltScreen() || !v.CursorVisible() {
		return false
	}
	_, y := v.Cursor()
	return y == promptRow
}
