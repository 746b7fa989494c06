package session

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
)

// The chat driver follows a CLI agent of the Gemini CLI family (Gemini
// CLI, Qwen Code): a TUI on the main screen that records its chat as JSONL
// (one record a line, each with an id), takes the office's conversation
// id as its session id (--session-id) and resumes it (--resume <id>),
// reads its standing instructions from a file in its home, and tells its
// state in its terminal title (idle, working, waiting for a tool
// approval). A chatCLI holds what differs between them.

// chatCLI describes one CLI the chat driver runs.
type chatCLI struct {
	kind string // its launch kind
	name string // for logs
	// instructions is its global instructions file for spec.
	instructions func(spec Spec) string
	// root is where its recordings are found for spec.
	root func(spec Spec) string
	// find returns the recording of session id under root, or "".
	find func(root, id string) string
	// resumable reports whether a recording holds a conversation that
	// --resume loads.
	resumable func(path string) bool
	// decode returns the records of one line of a recording.
	decode func(line []byte) []chatRecord
	// state reads its terminal title.
	state func(title string) chatState
	// dialog returns the text of the tool-approval dialog on screen.
	dialog func(rows []string) string
	// watchDir is the directory to watch while the recording is not found
	// yet: where it will be made, or where what names it is written.
	watchDir func(root, dir string) string
	// reEnters is how many times Enter is pressed again, chatAckTimeout
	// apart, for typed text the CLI has not recorded (0: once).
	reEnters int
	// pasteGuard is how long after a paste the CLI takes an Enter for a
	// line break rather than a submit (0: never).
	pasteGuard time.Duration
	// prepare, if set, adds to the environment what keeps a start-up
	// dialog away (folder trust), leaving the person's files alone.
	prepare func(spec Spec, env []string) []string
	// hook, if set, routes its tool approvals to the office.
	hook *chatHook
}

// chatRecord is one record of a chat recording, as the driver needs it.
type chatRecord struct {
	id    string
	kind  chatKind
	text  string
	calls bool      // a reply that calls a tool: the model has more to say after its result
	at    time.Time // its time stamp (the record check before typing again: record.go)
}

// chatKind is what a record is to the office.
type chatKind int

const (
	chatOther  chatKind = iota
	chatPrompt          // a prompt the CLI got (the acknowledgement of typed text)
	chatReply           // the model's words (text may be empty: a tool call)
	chatResult          // a tool's result, sent back to the model
)

// chatState is what a CLI's terminal title says.
type chatState int

const (
	chatUnknown chatState = iota // no title yet
	chatIdle
	chatWorking
	chatAction // a tool-approval dialog waits for a person
)

// chatAckTimeout: a prompt typed into the CLI shows up as a prompt record
// within this, or its Enter was lost (pressed again: chatCLI.reEnters).
const chatAckTimeout = 3 * time.Second

// chatReplyWait bounds how long the end of a turn (the title idle again,
// the screen still) waits for the model's last words in the recording. A
// CLI may draw a reply and say it is idle before it has recorded it: Qwen
// Code's recorder queues its appends, each one checked, written and synced
// under its session writer lease (docs/notes/clis.md), and with the machine
// busy (3 runs of its tests at once on 2 cores) a reply record reached the
// file 1.5 to 3.2 s after it was made, later than the 1.5 s of still
// screen that ends a turn.
const chatReplyWait = 20 * time.Second

// checkChat fills in the defaults of a chat kind's spec: its command, and
// how long its screen must be still before it counts as ready.
func checkChat(spec *Spec, command string, quiet time.Duration) error {
	if spec.Command == "" {
		spec.Command = command
	}
	if spec.Quiescence <= 0 {
		spec.Quiescence = quiet
	}
	if spec.ConversationID != "" {
		if _, err := uuid.Parse(spec.ConversationID); err != nil {
			return fmt.Errorf("conversation id %q: not a UUID", spec.ConversationID)
		}
	}
	return nil
}

// chatDriver follows a session of a chatCLI.
type chatDriver struct {
	s   *Session
	cli *chatCLI

	root     string          // where its recordings are
	dir      string          // the agent's working directory
	id       string          // the session id (--session-id)
	tail     jsonlTail       // the chat recording (its path once found)
	after    string          // resume cursor (a turn end's ID)
	skipping bool            // records up to the cursor were acted on
	seen     map[string]bool // record ids read (a record written again is not new)
	lastRec  string          // the id of the last record read
	resumed  bool

	termView            // the screen, for readiness and dialogs (locked)
	title    string     // the terminal title it set last (locked)
	oscTail  []byte     // locked
	prompts  []string   // prompt records read since the last step
	replied  bool       // a reply record was read since the prompt was typed (locked)
	gotReply bool       // a reply record was read by the last poll (worker-owned)
	owes     bool       // the last prompt, tool call or tool result read has no reply after it (worker-owned)
	owedAt   time.Time  // the turn looked over (idle title, still screen) while owes (worker-owned)
	late     bool       // a turn ended without the model's last words recorded (worker-owned)
	working  bool       // the title said it worked since the prompt was typed (locked)
	enter    enterAgain // the typed text until it is recorded (locked)
	attnFrom Status     // the status to return to when the dialog is gone (locked)
	actionAt time.Time  // the title has said an approval waits since (locked)
	start    startDialog
	watch    dirWatch      // the recording's directory (worker-owned)
	approve  chatApprovals // the approval hook's socket (Options.Hook)
	ask      dialogAsk     // the dialog on screen the office was asked about (locked)
}

// agentHome is the agent's HOME: from its environment, the spec, or the
// server's.
func agentHome(spec Spec) string {
	if h, ok := lookup(spec.Env, "HOME"); ok && h != "" {
		return h
	}
	if spec.Home != "" {
		return spec.Home
	}
	return os.Getenv("HOME")
}

func (d *chatDriver) launch(spec Spec) ([]string, []string, error) {
	d.s.mu.Lock()
	ask := d.ask
	d.ask = dialogAsk{}
	d.s.mu.Unlock()
	d.endAsk(ask)
	home := agentHome(spec)
	md := d.cli.instructions(spec)
	if err := os.MkdirAll(filepath.Dir(md), 0o700); err != nil {
		return nil, nil, fmt.Errorf("%s home: %w", d.cli.name, err)
	}
	if err := writeInstructions(md, spec.AppendSystemPrompt); err != nil {
		return nil, nil, fmt.Errorf("%s instructions: %w", d.cli.name, err)
	}
	id := spec.ConversationID
	if id == "" {
		id = d.id
	}
	if id == "" {
		id = uuid.NewString()
	}
	if root := d.cli.root(spec); d.root != root || d.id != id {
		d.root, d.id, d.tail = root, id, jsonlTail{}
		d.seen, d.lastRec = map[string]bool{}, ""
		d.after = spec.TranscriptAfter
		d.skipping = strings.HasPrefix(d.after, id+"/")
	}
	d.dir = spec.Dir
	d.resumed = false
	var args []string
	if f := d.cli.find(d.root, d.id); f != "" && d.cli.resumable(f) {
		args = []string{"--resume", id}
		d.resumed = true
	} else {
		args = []string{"--session-id", id}
	}
	args = append(args, spec.Args...)
	env := setEnv(buildEnv(spec, false), "HOME", home)
	if d.cli.prepare != nil {
		env = d.cli.prepare(spec, env)
	}
	env, err := d.approve.prepare(d.s, d.cli.hook, spec, env)
	if err != nil {
		return nil, nil, fmt.Errorf("%s approvals: %w", d.cli.name, err)
	}
	return args, env, nil
}

func (d *chatDriver) started(spec Spec, info *Info) {
	d.term = newScreen(spec.Cols, spec.Rows)
	d.title, d.oscTail = "", nil
	d.enter, d.working, d.replied = enterAgain{}, false, false
	d.owes, d.owedAt, d.late = false, time.Time{}, false
	d.start = startDialog{}
	info.Resumes = true
	info.ConversationID = d.id
	info.Transcript = d.tail.path
	info.Resumed = d.resumed
}

func (d *chatDriver) output(p []byte) {
	if d.term != nil {
		_, _ = d.term.Write(p)
		_ = d.term.TakeScrolledRows()
	}
	d.title, d.oscTail = oscTitle(d.title, d.oscTail, p)
	if d.enter.awaiting || d.s.info.Status == office.SessionBusy {
		if st := d.cli.state(d.title); st == chatWorking || st == chatAction {
			d.working = true
		}
	}
}

// oscTitleStart starts a terminal title: ESC ] 0 ; title BEL (or ST).
var oscTitleStart = []byte("\x1b]0;")

// oscTitle returns the last title set in p (or cur), and the tail of p to
// prepend to the next output.
func oscTitle(cur string, tail, p []byte) (string, []byte) {
	return lastOSC(oscTitleStart, "\x07\x1b", 512, cur, tail, p)
}

// flush: the recording holds every word.
func (d *chatDriver) flush() []Text { return nil }

func (d *chatDriver) typed(text string) {
	d.enter.typed(time.Now(), text)
	d.working, d.replied = false, false
}

func (d *chatDriver) keys([]byte) bool { return false }

// afterPaste: the Enter of a paste waits out the CLI's paste guard, from
// when the paste was seen taken.
func (d *chatDriver) afterPaste() time.Duration { return d.cli.pasteGuard }

// received: the CLI records the prompt it got.
func (d *chatDriver) received(now time.Time, a *pendingAck) (bool, error) {
	return promptRecorded(d.prompts, a, now, 10*chatAckTimeout)
}

// resume continues the conversation, unless the restart asked for another.
func (d *chatDriver) resume(spec *Spec, asked *Spec) {
	resumeConversation(d.id, d.cli.kind, spec, asked)
}

func (d *chatDriver) close() {
	d.watch.stop()
	d.approve.close()
	d.endAsk(d.ask) // the process is gone, and its dialog with it
	d.ask = dialogAsk{}
}

// follow finds the chat recording and has its directory watched; until
// it is found, the directory the CLI says (watchDir). Worker-owned.
func (d *chatDriver) follow() {
	if d.tail.path == "" {
		d.tail.path = d.cli.find(d.root, d.id)
	}
	if d.tail.path != "" {
		d.watch.follow(d.s, filepath.Dir(d.tail.path))
		return
	}
	d.watch.follow(d.s, d.cli.watchDir(d.root, d.dir))
}

// idleWake: a ready CLI is looked at when its recording's directory (or
// where it is to be made) changes or it writes to its terminal (its title
// says its state); typed text not yet recorded is given its Enter again
// once chatAckTimeout is over. Without a watch, every pollIdle. Locked.
func (d *chatDriver) idleWake() time.Duration {
	if at, ok := d.enter.next(max(d.cli.reEnters, 1), chatAckTimeout); ok && d.s.p != nil {
		return untilDue(time.Now(), at.Add(time.Millisecond))
	}
	if d.watch.ok {
		return 0
	}
	return pollIdle
}

// step reads the recording and decides the status from the title: ready
// at start once the title is idle, the screen still and the composer
// drawn; busy once typed; ready at a turn's end (idle again after it
// worked, the prompt recorded); needs_attention while a tool approval
// waits.
func (d *chatDriver) step(now time.Time, st Status) ([]Text, func()) {
	s := d.s
	var texts []Text
	d.prompts = d.prompts[:0]
	d.follow()
	if s.m.opts.Paused == nil || !s.m.opts.Paused(s.key) {
		var err error
		if texts, err = d.poll(); err != nil {
			s.log.Warn(d.cli.name+" chat recording", "err", err)
		}
	}
	s.mu.Lock()
	next := st
	d.enter.recorded(d.prompts)
	if d.gotReply {
		d.replied, d.gotReply = true, false
	}
	s.info.ConversationID, s.info.Transcript = d.id, d.tail.path
	quiet := !s.lastOutput.IsZero() && now.Sub(s.lastOutput) >= s.spec.Quiescence
	title := d.cli.state(d.title)
	switch {
	case title == chatAction:
		next = d.attention(now, next)
	case next == office.SessionNeedsAttention && !d.start.up:
		next = d.attnFrom
		s.info.Detail = ""
	}
	if title != chatAction {
		d.actionAt = time.Time{}
	}
	asked := d.askDialog(title == chatAction)
	ready := title == chatIdle && quiet && d.term != nil
	switch {
	case next == office.SessionStarting && ready && chatComposer(d.term.Lines()):
		// The title says idle before the composer takes input (text
		// typed then is lost, or its paste never ends and the Enter
		// becomes a line break): its placeholder is drawn once it does.
		next = office.SessionReady
	case next == office.SessionBusy && ready && !d.enter.awaiting && (d.working || d.replied) && d.replyRecorded(now):
		next = office.SessionReady
		texts = append(texts, d.endTurn())
	}
	if title != chatIdle {
		d.owedAt = time.Time{}
	}
	if d.term != nil && s.p != nil && (next == office.SessionStarting || d.start.up) {
		// An auth choice, a folder-trust question, a key to enter or
		// any other choice before the composer is drawn.
		var text string
		if rows := d.term.Lines(); !chatComposer(rows) {
			text = choiceText(rows)
			if box := dialogText(rows); text == "" && strings.Contains(box, "Enter") {
				text = box // an input box: "(Press Enter to submit, Esc to cancel…)"
			}
		}
		next = d.start.step(s, now, next, text)
	}
	var reEnter *proc
	if s.p != nil && d.enter.due(now, max(d.cli.reEnters, 1), chatAckTimeout) {
		reEnter = s.p
	}
	report := func() {}
	if next != st {
		report, _ = s.setStatusLocked(next)
	}
	s.mu.Unlock()
	s.pressEnterAgain(reEnter)
	if asked != nil {
		status := report
		report = func() {
			status()
			asked()
		}
	}
	return texts, report
}

// replyRecorded reports whether a turn that looks over may end: the recording
// holds the model's words after the last prompt, tool call or tool result
// read, or chatReplyWait has passed since the turn first looked over
// without them. Worker-owned.
func (d *chatDriver) replyRecorded(now time.Time) bool {
	if !d.owes {
		return true
	}
	if d.owedAt.IsZero() {
		d.owedAt = now
	}
	return now.Sub(d.owedAt) >= chatReplyWait
}

// endTurn returns the text that ends the turn, warning when the recording
// lacks the reply. Locked.
func (d *chatDriver) endTurn() Text {
	s := d.s
	switch {
	case !d.replied:
		s.log.Warn("turn ended with no reply recorded", "recording", d.tail.path)
	case d.owes:
		s.log.Warn("turn ended without the model's last words in the chat recording", "waited", chatReplyWait, "recording", d.tail.path)
		d.late = true
	}
	d.working, d.replied, d.owes, d.owedAt = false, false, false, time.Time{}
	return Text{Key: s.key, ID: d.id + "/" + d.lastRec, Source: FromTranscript, TurnEnd: true}
}

// chatComposer reports whether the empty composer of a Gemini CLI or Qwen
// Code (its placeholder, "Type your message or @path/to/file") is on
// screen.
func chatComposer(rows []string) bool {
	for _, r := range rows {
		if strings.Contains(r, "Type your message") {
			return true
		}
	}
	return false
}

// dialogWait bounds how long a title that says an approval waits may go
// without the dialog drawn before the agent needs attention anyway.
const dialogWait = 2 * time.Second

// attention moves the session to needs_attention with the approval
// dialog's text, once the dialog is drawn (the title may say so first).
// Locked.
func (d *chatDriver) attention(now time.Time, cur Status) Status {
	s := d.s
	if d.actionAt.IsZero() {
		d.actionAt = now
	}
	var text string
	if d.term != nil {
		text = d.cli.dialog(d.term.Lines())
	}
	if cur != office.SessionNeedsAttention {
		if text == "" && now.Sub(d.actionAt) < dialogWait {
			return cur
		}
		d.attnFrom = cur
		if cur == office.SessionReady || cur == office.SessionStarting {
			d.attnFrom = office.SessionBusy
		}
	}
	if text != "" && text != s.info.Detail {
		s.info.Detail = text
		s.log.Warn("agent needs attention", "dialog", text)
	}
	return office.SessionNeedsAttention
}

// poll reads the recording's new complete lines (jsonlTail: at most
// maxTranscriptRead a poll, a line longer than maxTranscriptLine skipped).
// A recording written anew from its start is read again: the ids already
// read are not new.
func (d *chatDriver) poll() ([]Text, error) {
	if d.tail.path == "" {
		if d.tail.path = d.cli.find(d.root, d.id); d.tail.path == "" {
			return nil, nil
		}
	}
	var texts []Text
	read, err := d.tail.read(func() {}, func(line []byte) { texts = append(texts, d.entry(line)...) })
	if err != nil {
		return nil, err
	}
	if d.tail.more {
		d.s.poke()
	} else if read && d.skipping {
		// The cursor is not in the file: everything in it counts as
		// acted on, later records are new (never act twice).
		d.skipping = false
	}
	return texts, nil
}

// entry takes the records of one line of the recording.
func (d *chatDriver) entry(line []byte) []Text {
	var out []Text
	for _, r := range d.cli.decode(line) {
		if t, ok := d.record(r); ok {
			out = append(out, t)
		}
	}
	return out
}

// record takes one record: a prompt the CLI got, the model's words, or
// something else (its id still moves the cursor); each id once.
func (d *chatDriver) record(r chatRecord) (Text, bool) {
	if r.id == "" {
		return Text{}, false
	}
	old := d.seen[r.id]
	d.seen[r.id] = true
	d.lastRec = r.id
	if d.skipping {
		if d.id+"/"+r.id == d.after {
			d.skipping = false
		}
		return Text{}, false
	}
	if old {
		return Text{}, false
	}
	switch r.kind {
	case chatPrompt:
		d.prompts = append(d.prompts, r.text)
		d.owes = true
	case chatResult:
		d.owes = true
	case chatReply:
		d.gotReply, d.owes = true, r.calls
		if d.late && r.text != "" {
			d.s.log.Warn("the model's words were recorded after their turn ended: they go with the next turn", "recording", d.tail.path)
		}
		d.late = false
		if r.text != "" {
			return Text{Key: d.s.key, Lines: strings.Split(r.text, "\n"), ID: r.id, Source: FromTranscript}, true
		}
	}
	return Text{}, false
}
