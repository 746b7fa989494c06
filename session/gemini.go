package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
)

// KindGemini runs Google's Gemini CLI and reads its words from the chat
// it records, JSONL under $HOME/.gemini/tmp/<project>/chats/
// session-<time>-<first 8 of the id>.jsonl (docs/notes/clis.md): one line
// per message record ({id, type: user|gemini|info…, content}), a record
// written again when it changes (same id), "$set" lines for metadata.
// The session's id is the office's (--session-id), so the file is found
// by it and a restart resumes it (--resume <id>). Identities are the
// message ids, stable across restarts. Its state comes from the terminal
// title it keeps (◇ Ready, ✦ Working…, ✋ Action Required): a turn ends
// when it is ready again; "Action Required" is a tool-approval dialog,
// which puts the agent in needs_attention with the dialog's text (the
// console answers it with keys). The office's instructions reach it as
// its global instructions file, $HOME/.gemini/GEMINI.md, in a section of
// their own.
const KindGemini = "gemini"

// geminiAckTimeout: a prompt typed into the Gemini CLI shows up as a user
// record within this, or its Enter was lost (pressed once more).
const geminiAckTimeout = 3 * time.Second

func checkGemini(spec *Spec) error {
	if spec.Command == "" {
		spec.Command = "gemini"
	}
	if spec.Quiescence <= 0 {
		spec.Quiescence = 500 * time.Millisecond
	}
	if spec.ConversationID != "" {
		if _, err := uuid.Parse(spec.ConversationID); err != nil {
			return fmt.Errorf("conversation id %q: not a UUID", spec.ConversationID)
		}
	}
	return nil
}

// geminiDriver follows a Gemini CLI session.
type geminiDriver struct {
	s *Session

	home     string // the agent's HOME
	dir      string // the agent's working directory
	id       string // the session id (--session-id)
	file     string // the chat recording, once found
	off      int64
	partial  []byte
	after    string          // resume cursor (a turn end's ID)
	skipping bool            // records up to the cursor were acted on
	seen     map[string]bool // message ids read (a record written again is not new)
	lastRec  string          // the id of the last message record read
	resumed  bool

	termView            // the screen, for readiness and dialogs (locked)
	title     string    // the terminal title it set last (locked)
	oscTail   []byte    // locked
	prompts   []string  // user records read since the last step
	replied   bool      // a model record was read since the prompt was typed (locked)
	gotReply  bool      // a model record was read by the last poll (worker-owned)
	working   bool      // the title said it worked since the prompt was typed (locked)
	typedAt   time.Time // locked
	awaiting  bool      // typed text not yet seen as a user record (locked)
	reEntered bool      // locked
	attnFrom  Status    // the status to return to when the dialog is gone (locked)
	watch     dirWatch  // the recording's directory (worker-owned)
}

func newGeminiDriver(s *Session) driver { return &geminiDriver{s: s} }

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

func (d *geminiDriver) launch(spec Spec) ([]string, []string, error) {
	home := agentHome(spec)
	dir := filepath.Join(home, ".gemini")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("gemini home: %w", err)
	}
	if err := writeInstructions(filepath.Join(dir, "GEMINI.md"), spec.AppendSystemPrompt); err != nil {
		return nil, nil, fmt.Errorf("gemini instructions: %w", err)
	}
	id := spec.ConversationID
	if id == "" {
		id = d.id
	}
	if id == "" {
		id = uuid.NewString()
	}
	if d.home != home || d.id != id {
		d.home, d.id, d.file, d.off, d.partial = home, id, "", 0, nil
		d.seen, d.lastRec = map[string]bool{}, ""
		d.after = spec.TranscriptAfter
		d.skipping = strings.HasPrefix(d.after, id+"/")
	}
	d.dir = spec.Dir
	d.resumed = false
	var args []string
	if f := d.findByID(); f != "" && geminiHasTurn(f) {
		args = []string{"--resume", id}
		d.resumed = true
	} else {
		args = []string{"--session-id", id}
	}
	args = append(args, spec.Args...)
	env := setEnv(buildEnv(spec, false), "HOME", home)
	return args, env, nil
}

func (d *geminiDriver) started(spec Spec, info *Info) {
	d.term = newScreen(spec.Cols, spec.Rows)
	d.title, d.oscTail = "", nil
	d.awaiting, d.reEntered, d.working, d.replied = false, false, false, false
	info.Resumes = true
	info.ConversationID = d.id
	info.Transcript = d.file
	info.Resumed = d.resumed
}

func (d *geminiDriver) output(p []byte) {
	if d.term != nil {
		_, _ = d.term.Write(p)
		_ = d.term.TakeScrolledRows()
	}
	d.title, d.oscTail = oscTitle(d.title, d.oscTail, p)
	if d.awaiting || d.s.info.Status == StatusBusy {
		if t := strings.TrimSpace(d.title); t != "" && !strings.HasPrefix(t, "◇") {
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
func (d *geminiDriver) flush() []Text { return nil }

func (d *geminiDriver) typed(string) {
	d.awaiting, d.reEntered, d.working, d.replied = true, false, false, false
	d.typedAt = time.Now()
}

func (d *geminiDriver) keys([]byte) bool { return false }

// received: the Gemini CLI records the prompt it got as a user record.
func (d *geminiDriver) received(now time.Time, a *pendingAck) (bool, error) {
	for _, p := range d.prompts {
		if samePrompt(p, a.r.text) {
			return true, nil
		}
	}
	if now.Sub(a.typedAt) <= 10*geminiAckTimeout {
		return false, nil
	}
	return true, ErrNotReceived
}

// resume continues the conversation, unless the restart asked for another.
func (d *geminiDriver) resume(spec *Spec, asked *Spec) {
	if d.id != "" && spec.Kind == KindGemini && (asked == nil || asked.ConversationID == "" || asked.ConversationID == d.id) {
		spec.ConversationID = d.id
		spec.Resume = true
	}
}

func (d *geminiDriver) close() { d.watch.stop() }

// follow finds the chat recording and has its directory watched. The CLI
// makes it at start, in tmp/<project>/chats, the project's short name
// being in ~/.gemini/projects.json; until that names the agent's folder,
// ~/.gemini is watched (where projects.json is written). Worker-owned.
func (d *geminiDriver) follow() {
	if d.file == "" {
		d.file = d.findByID()
	}
	if d.file != "" {
		d.watch.follow(d.s, filepath.Dir(d.file))
		return
	}
	dir := filepath.Join(d.home, ".gemini")
	if short := geminiProject(dir, d.dir); short != "" {
		dir = filepath.Join(dir, "tmp", short, "chats")
	}
	d.watch.follow(d.s, dir)
}

// geminiProject returns the short name projects.json in gemini gives the
// folder dir, or "".
func geminiProject(gemini, dir string) string {
	b, err := os.ReadFile(filepath.Join(gemini, "projects.json"))
	if err != nil {
		return ""
	}
	var p struct {
		Projects map[string]string `json:"projects"`
	}
	if json.Unmarshal(b, &p) != nil {
		return ""
	}
	if short, ok := p.Projects[dir]; ok {
		return short
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		return p.Projects[real]
	}
	return ""
}

// idleWake: a ready Gemini CLI is looked at when its recording's directory
// (or where it is to be made) changes or it writes to its terminal (its
// title says its state); typed
// text not yet recorded is given its Enter again once geminiAckTimeout is
// over. Without a watch, every pollIdle. Locked.
func (d *geminiDriver) idleWake() time.Duration {
	if d.awaiting && !d.reEntered && d.s.p != nil {
		return untilDue(time.Now(), d.typedAt.Add(geminiAckTimeout+time.Millisecond))
	}
	if d.watch.ok {
		return 0
	}
	return pollIdle
}

// Gemini CLI's title marks (its dynamic window title).
const (
	geminiReady  = "◇"
	geminiAction = "✋"
)

// step reads the recording and decides the status from the title: ready
// at start once it says Ready and the screen is still; busy once typed;
// ready at a turn's end (Ready again after it worked, the prompt
// recorded); needs_attention while it shows Action Required.
func (d *geminiDriver) step(now time.Time, st Status) ([]Text, func()) {
	s := d.s
	var texts []Text
	d.prompts = d.prompts[:0]
	d.follow()
	if s.m.opts.Paused == nil || !s.m.opts.Paused(s.key) {
		var err error
		if texts, err = d.poll(); err != nil {
			s.log.Warn("gemini chat recording", "err", err)
		}
	}
	s.mu.Lock()
	next := st
	if len(d.prompts) > 0 {
		d.awaiting = false
	}
	if d.gotReply {
		d.replied, d.gotReply = true, false
	}
	s.info.ConversationID, s.info.Transcript = d.id, d.file
	quiet := !s.lastOutput.IsZero() && now.Sub(s.lastOutput) >= s.spec.Quiescence
	title := strings.TrimSpace(d.title)
	switch {
	case strings.HasPrefix(title, geminiAction):
		next = d.attention(next)
	case next == StatusNeedsAttention:
		next = d.attnFrom
		s.info.Detail = ""
	}
	ready := strings.HasPrefix(title, geminiReady) && quiet && d.term != nil
	switch {
	case next == StatusStarting && ready && geminiComposer(d.term.Lines()):
		// The title says Ready before the composer takes input (text
		// typed then is lost, or its paste never ends and the Enter
		// becomes a line break): its placeholder is drawn once it does.
		next = StatusReady
	case next == StatusBusy && ready && !d.awaiting && (d.working || d.replied):
		next = StatusReady
		texts = append(texts, Text{Key: s.key, ID: d.id + "/" + d.lastRec, Source: FromTranscript, TurnEnd: true})
		d.working, d.replied = false, false
	}
	var reEnter *proc
	if d.awaiting && !d.reEntered && s.p != nil && now.Sub(d.typedAt) > geminiAckTimeout {
		d.reEntered, reEnter = true, s.p
	}
	report := func() {}
	if next != st {
		report, _ = s.setStatusLocked(next)
	}
	s.mu.Unlock()
	if reEnter != nil {
		s.log.Warn("prompt not submitted; pressing Enter again")
		_ = reEnter.pty.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := reEnter.pty.Write([]byte("\r")); err != nil {
			s.log.Warn("press Enter again", "err", err)
		}
	}
	return texts, report
}

// geminiComposer reports whether the Gemini CLI's empty composer (its
// placeholder) is on screen.
func geminiComposer(rows []string) bool {
	for _, r := range rows {
		if strings.Contains(r, "Type your message") {
			return true
		}
	}
	return false
}

// attention moves the session to needs_attention with the approval
// dialog's text. Locked.
func (d *geminiDriver) attention(cur Status) Status {
	s := d.s
	if cur != StatusNeedsAttention {
		d.attnFrom = cur
		if cur == StatusReady || cur == StatusStarting {
			d.attnFrom = StatusBusy
		}
	}
	if d.term != nil {
		if text := dialogText(d.term.Lines()); text != "" && text != s.info.Detail {
			s.info.Detail = text
			s.log.Warn("agent needs attention", "dialog", text)
		}
	}
	return StatusNeedsAttention
}

// dialogText returns the text of the last box drawn on screen (╭ … ╰)
// that offers a choice: an approval dialog's question and options, box
// edges trimmed.
func dialogText(rows []string) string {
	end := -1
	for i := len(rows) - 1; i >= 0; i-- {
		if strings.HasPrefix(strings.TrimSpace(rows[i]), "╰") {
			end = i
			break
		}
	}
	if end < 0 {
		return ""
	}
	var lines []string
	for i := end - 1; i >= 0; i-- {
		r := strings.TrimSpace(rows[i])
		if strings.HasPrefix(r, "╭") {
			break
		}
		r = strings.TrimSpace(strings.Trim(r, "│"))
		if r != "" {
			lines = append([]string{r}, lines...)
		}
	}
	return strings.Join(lines, "\n")
}

// findByID returns the chat recording of session d.id.
func (d *geminiDriver) findByID() string {
	if len(d.id) < 8 {
		return ""
	}
	m, _ := filepath.Glob(filepath.Join(d.home, ".gemini", "tmp", "*", "chats", "session-*-"+d.id[:8]+".jsonl"))
	for _, f := range m {
		if geminiSessionID(f) == d.id {
			return f
		}
	}
	return ""
}

// geminiSessionID reads a recording's first line, its metadata.
func geminiSessionID(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 64<<10).ReadSlice('\n')
	if err != nil {
		return ""
	}
	var meta struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(line, &meta)
	return meta.SessionID
}

// geminiHasTurn reports whether a recording holds a user message record
// of its own (not only the session context it starts with): something
// --resume loads.
func geminiHasTurn(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		var r geminiRecord
		if json.Unmarshal(line, &r) == nil && r.ID != "" && r.Type == "user" {
			return true
		}
	}
	return false
}

// geminiRecord is one line of a chat recording (the fields read).
type geminiRecord struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Content json.RawMessage `json:"content"`
	Set     *struct {
		Messages []geminiRecord `json:"messages"`
	} `json:"$set"`
}

// text returns a record's content as text: a string, or its text parts.
func (r geminiRecord) text() string {
	var str string
	if json.Unmarshal(r.Content, &str) == nil {
		return str
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(r.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// maxGeminiRead bounds one poll's read of the recording.
const maxGeminiRead = 4 << 20

// poll reads the recording's new complete lines.
func (d *geminiDriver) poll() ([]Text, error) {
	if d.file == "" {
		if d.file = d.findByID(); d.file == "" {
			return nil, nil
		}
	}
	f, err := os.Open(d.file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() < d.off {
		d.off, d.partial = 0, nil // rewritten: read again (ids already read are skipped)
	}
	if fi.Size() == d.off {
		return nil, nil
	}
	buf := make([]byte, min(fi.Size()-d.off, maxGeminiRead))
	n, err := f.ReadAt(buf, d.off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	data := append(d.partial, buf[:n]...)
	d.off += int64(n)
	d.partial = nil
	var texts []Text
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			d.partial = append([]byte(nil), data...)
			break
		}
		texts = append(texts, d.entry(data[:i])...)
		data = data[i+1:]
	}
	if int64(n) == maxGeminiRead {
		d.s.poke()
	} else if d.skipping {
		// The cursor is not in the file: everything in it counts as
		// acted on, later records are new (never act twice).
		d.skipping = false
	}
	return texts, nil
}

// entry decodes one line of the recording: a message record, or a "$set"
// of the whole history (written at the start, and after a turn when the
// CLI manages its context), whose messages not read before are new.
func (d *geminiDriver) entry(line []byte) []Text {
	var r geminiRecord
	if json.Unmarshal(line, &r) != nil {
		return nil
	}
	if r.Set != nil {
		var out []Text
		for _, m := range r.Set.Messages {
			if t, ok := d.message(m); ok {
				out = append(out, t)
			}
		}
		return out
	}
	if t, ok := d.message(r); ok {
		return []Text{t}
	}
	return nil
}

// message takes one message record: a user record is a prompt the CLI
// got, a gemini record the model's words; each id once.
func (d *geminiDriver) message(r geminiRecord) (Text, bool) {
	if r.ID == "" || r.Type == "" {
		return Text{}, false
	}
	old := d.seen[r.ID]
	d.seen[r.ID] = true
	d.lastRec = r.ID
	if d.skipping {
		if d.id+"/"+r.ID == d.after {
			d.skipping = false
		}
		return Text{}, false
	}
	if old {
		return Text{}, false
	}
	switch r.Type {
	case "user":
		d.prompts = append(d.prompts, r.text())
	case "gemini":
		d.gotReply = true
		if t := r.text(); t != "" {
			return Text{Key: d.s.key, Lines: strings.Split(t, "\n"), ID: r.ID, Source: FromTranscript}, true
		}
	}
	return Text{}, false
}
