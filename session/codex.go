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

	"github.com/office-server/office-server/office"
)

// KindCodex runs OpenAI's Codex CLI and reads its words from the session
// ("rollout") file it keeps, JSONL under $CODEX_HOME/sessions
// (docs/notes/clis.md): each assistant message is a response_item line,
// each turn ends with an event_msg task_complete line. Identities are the
// rollout file's name and the line's byte offset, stable across restarts
// (the file only grows). The office's instructions reach it as its
// developer_instructions, a config override on its command line (nothing
// written to $CODEX_HOME); a restart resumes the conversation (`codex
// resume <id>`).
const KindCodex = "codex"

// codexAckTimeout: a prompt typed into Codex shows up as a user message in
// the rollout within this, or its Enter was lost (pressed once more).
const codexAckTimeout = 3 * time.Second

func checkCodex(spec *Spec) error {
	if spec.Command == "" {
		spec.Command = "codex"
	}
	if spec.Quiescence <= 0 {
		spec.Quiescence = 500 * time.Millisecond
	}
	return nil
}

// codexDriver follows a Codex session.
type codexDriver struct {
	s *Session

	home     string // CODEX_HOME
	dir      string // working directory, as Codex records it
	id       string // the conversation (session) id, once known
	file     string // the rollout file, once found
	off      int64
	partial  []byte
	after    string // resume cursor: skip entries up to this ID
	skipping bool
	launched time.Time
	resumed  bool

	termView             // the screen, for readiness and dialogs (locked)
	state     string     // Codex's last OSC 7501 state: idle, working, done (locked)
	oscTail   []byte     // the end of the last output, for a sequence split across writes (locked)
	prompts   []string   // user messages read since the last step
	turnEnded bool       // locked
	enter     enterAgain // the typed text until it is a user message (locked)
	warned    bool       // the missing rollout was logged
	start     startDialog

	perm  permHook // the PermissionRequest hook's socket (Options.Hook)
	watch dirWatch // the rollout's directory (worker-owned)
}

func newCodexDriver(s *Session) driver { return &codexDriver{s: s} }

// codexHome is the agent's CODEX_HOME: from its environment, else
// $HOME/.codex.
func codexHome(spec Spec) string {
	if h, ok := lookup(spec.Env, "CODEX_HOME"); ok && h != "" {
		return h
	}
	home := spec.Home
	if h, ok := lookup(spec.Env, "HOME"); ok && h != "" {
		home = h
	}
	if home == "" {
		home = os.Getenv("HOME")
	}
	return filepath.Join(home, ".codex")
}

func (d *codexDriver) launch(spec Spec) ([]string, []string, error) {
	home := codexHome(spec)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, nil, fmt.Errorf("codex home: %w", err)
	}
	// The instructions go as a config override (below); a section an
	// earlier version of the office wrote into AGENTS.md is removed.
	if err := writeInstructions(filepath.Join(home, "AGENTS.md"), ""); err != nil {
		return nil, nil, fmt.Errorf("codex instructions: %w", err)
	}
	if d.home != home || d.dir != spec.Dir {
		d.home, d.dir, d.file, d.off, d.partial = home, spec.Dir, "", 0, nil
		d.id = spec.ConversationID
		d.after, d.skipping = spec.TranscriptAfter, spec.TranscriptAfter != ""
	}
	// --no-daemon, and its feature daemon_auto_start (stable, on by
	// default: `codex features list`) off: Codex otherwise starts a shared
	// app server that detaches from it and outlives the agent (measured:
	// two processes per CODEX_HOME left running under init after the
	// session ended); without it the server runs inside the agent's own
	// process tree.
	flags := []string{"--no-daemon", "--disable", "daemon_auto_start"}
	flags = append(flags, codexPrepare(spec.Dir)...)
	if spec.AppendSystemPrompt != "" {
		flags = append(flags, "-c", "developer_instructions="+tomlString(spec.AppendSystemPrompt))
	}
	hook, err := d.permissionHook(spec)
	if err != nil {
		return nil, nil, err
	}
	flags = append(flags, hook...)
	args := append(flags, spec.Args...)
	d.resumed = false
	if d.id != "" && (spec.Resume || d.file != "") && d.findByID() != "" {
		args = append(append(flags, "resume", d.id), spec.Args...)
		d.resumed = true
	}
	env := buildEnv(spec, false)
	if _, ok := lookup(env, "CODEX_HOME"); !ok {
		env = setEnv(env, "CODEX_HOME", home)
	}
	d.launched = time.Now()
	return args, env, nil
}

// codexPrepare returns the config overrides (-c, held in memory for this
// run; Codex writes none of them to its config.toml) that keep Codex's
// start-up dialogs away from an agent (docs/notes/clis.md): the agent's
// own folder trusted, under each name Codex may look it up by (the
// folder, its resolved path, its git checkout's root; Codex 0.169 asks
// "Trust this folder?" in a git checkout with no trust_level), and no
// update check (a newer version found by one start's check is offered in
// a modal prompt at the next). Everything else in the person's
// config.toml stays in force; a sign-in screen (no provider and no login)
// is left to a person (needs_attention).
func codexPrepare(dir string) []string {
	if dir == "" {
		return []string{"-c", "check_for_update_on_startup=false"}
	}
	var b strings.Builder
	b.WriteString("projects={")
	for i, d := range trustDirs(dir) {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(tomlString(d) + `={trust_level="trusted"}`)
	}
	b.WriteString("}")
	return []string{"-c", b.String(), "-c", "check_for_update_on_startup=false"}
}

// Instruction sections in a file shared with a person: ours is between
// these lines and is replaced in place; the rest of the file is kept.
const (
	instrBegin = "<!-- office-server: instructions (kept up to date by the office; edit outside this section) -->"
	instrEnd   = "<!-- /office-server -->"
)

// writeInstructions puts text in path as the office's section, keeping
// whatever else the file holds; empty text removes the section.
func writeInstructions(path, text string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	rest := string(old)
	if i := strings.Index(rest, instrBegin); i >= 0 {
		if j := strings.Index(rest[i:], instrEnd); j >= 0 {
			rest = rest[:i] + strings.TrimLeft(rest[i+j+len(instrEnd):], "\n")
		}
	}
	var b strings.Builder
	if text != "" {
		b.WriteString(instrBegin + "\n" + strings.TrimRight(text, "\n") + "\n" + instrEnd + "\n")
		if rest != "" {
			b.WriteString("\n")
		}
	}
	b.WriteString(rest)
	if b.String() == string(old) {
		return nil
	}
	if b.Len() == 0 {
		return os.Remove(path)
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

func (d *codexDriver) started(spec Spec, info *Info) {
	d.term = newScreen(spec.Cols, spec.Rows)
	d.state, d.oscTail = "", nil
	d.turnEnded, d.enter = false, enterAgain{}
	d.start = startDialog{}
	info.Resumes = true
	info.ConversationID = d.id
	info.Transcript = d.file
	info.Resumed = d.resumed
}

func (d *codexDriver) output(p []byte) {
	if d.term != nil {
		_, _ = d.term.Write(p)
		_ = d.term.TakeScrolledRows()
	}
	d.state, d.oscTail = codexState(d.state, d.oscTail, p)
}

// codexOSC is how Codex tells the terminal its state: ESC ] 7501 ;
// state=idle|working|done : app=codex, then BEL or ST. It says "idle" once
// its composer takes input (it draws the composer earlier, while still
// loading: an Enter typed then is lost), "working" during a turn and
// "done" at its end (docs/notes/clis.md).
var codexOSC = []byte("\x1b]7501;state=")

// codexState returns the last state Codex announced in p (or cur), and
// the tail of p to prepend to the next output.
func codexState(cur string, tail, p []byte) (string, []byte) {
	return lastOSC(codexOSC, ":\x07\x1b", 64, cur, tail, p)
}

// flush: the rollout holds every word.
func (d *codexDriver) flush() []Text { return nil }

func (d *codexDriver) typed(text string) {
	d.turnEnded = false
	d.enter.typed(time.Now(), text)
}

func (d *codexDriver) keys([]byte) bool { return false }

// received: Codex records the prompt it got as a user message.
func (d *codexDriver) received(now time.Time, a *pendingAck) (bool, error) {
	return promptRecorded(d.prompts, a, now, 10*codexAckTimeout)
}

// resume continues the conversation, unless the restart asked for another.
func (d *codexDriver) resume(spec *Spec, asked *Spec) {
	resumeConversation(d.id, KindCodex, spec, asked)
}

// follow has the rollout's directory watched: the file's once found;
// before, today's (Codex makes sessions/YYYY/MM/DD and the file in it at
// the first prompt) and its month's, which sees a day made in another
// time zone. A directory not made yet is stood in for by its nearest
// ancestor (dirWatch). Worker-owned.
func (d *codexDriver) follow() {
	if d.file != "" {
		d.watch.follow(d.s, filepath.Dir(d.file))
		return
	}
	day := filepath.Join(d.home, "sessions", time.Now().Format("2006/01/02"))
	d.watch.follow(d.s, day, filepath.Dir(day))
}

// idleWake: a ready Codex is looked at when its rollout's directory
// changes or it writes to its terminal; typed text not yet seen in the
// rollout is given its Enter again once codexAckTimeout is over. Without a
// file watcher, every pollIdle. Locked.
func (d *codexDriver) idleWake() time.Duration {
	if at, ok := d.enter.next(1, codexAckTimeout); ok && d.s.p != nil {
		return untilDue(time.Now(), at.Add(time.Millisecond))
	}
	if d.watch.ok {
		return 0
	}
	return pollIdle
}

func (d *codexDriver) close() {
	d.watch.stop()
	d.perm.close()
}

// permissionHook returns the flags that give Codex its PermissionRequest
// hook (Codex 0.169 runs it before it would show an approval dialog, with
// Claude Code's input and decision format: docs/notes/clis.md): this
// server's executable (Options.Hook) handing the request to the session's
// socket, as for Claude Code (permission.go). The hook is a config
// override (-c), so the agent's own hooks.json and config.toml are left as
// they are; --dangerously-bypass-hook-trust runs it without the trust
// review Codex asks for hooks it has not seen (the office wrote it). None
// without a hook command.
func (d *codexDriver) permissionHook(spec Spec) ([]string, error) {
	hook := d.s.m.opts.Hook
	if len(hook) == 0 {
		return nil, nil
	}
	if err := d.perm.open(d.s); err != nil {
		return nil, err
	}
	command := d.perm.command(hook, "permission")
	timeout := spec.PermissionHookTimeout
	if timeout <= 0 {
		timeout = DefaultPermissionHookTimeout
	}
	entry := fmt.Sprintf(`hooks.PermissionRequest=[{hooks=[{type="command",command=%s,timeout=%d}]}]`,
		tomlString(command), int(timeout.Seconds()))
	return []string{"-c", entry, "--dangerously-bypass-hook-trust"}, nil
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// step reads the rollout and decides the status: ready at start once Codex
// said it is idle, its composer (›) is drawn and the screen is still; busy
// once typed; ready at a turn's end (task_complete).
func (d *codexDriver) step(now time.Time, st Status) ([]Text, func()) {
	s := d.s
	var texts []Text
	d.prompts = d.prompts[:0]
	d.follow()
	if s.m.opts.Paused == nil || !s.m.opts.Paused(s.key) {
		var err error
		if texts, err = d.poll(); err != nil {
			s.log.Warn("codex rollout", "err", err)
		}
	}
	s.mu.Lock()
	next := st
	for _, t := range texts {
		if t.TurnEnd {
			d.turnEnded = true
		}
	}
	d.enter.recorded(d.prompts)
	if d.id != "" {
		s.info.ConversationID, s.info.Transcript = d.id, d.file
	}
	quiet := !s.lastOutput.IsZero() && now.Sub(s.lastOutput) >= s.spec.Quiescence
	switch {
	case next == office.SessionStarting && quiet && d.state != "" && d.state != "working" && d.term != nil && codexPrompt(d.term.Lines()):
		next = office.SessionReady
	case next == office.SessionBusy && d.turnEnded:
		next = office.SessionReady
	}
	if d.term != nil && s.p != nil && (next == office.SessionStarting || d.start.up) {
		// A sign-in screen, or any other choice before the composer.
		next = d.start.step(s, now, next, choiceText(d.term.Lines()))
	}
	var reEnter *proc
	if s.p != nil && d.enter.due(now, 1, codexAckTimeout) {
		reEnter = s.p
	}
	report := func() {}
	if next != st {
		report, _ = s.setStatusLocked(next)
	}
	s.mu.Unlock()
	s.pressEnterAgain(reEnter)
	return texts, report
}

// codexPrompt reports whether Codex's composer (a row starting with ›) is
// on screen; its dialogs mark their current choice with › too ("› 1.
// Trust and continue").
func codexPrompt(rows []string) bool {
	for _, r := range rows {
		if (strings.HasPrefix(r, "› ") && !numbered(r[len("› "):])) || r == "›" {
			return true
		}
	}
	return false
}

// findByID returns the rollout file of conversation d.id, the newest if
// several.
func (d *codexDriver) findByID() string {
	m, _ := filepath.Glob(filepath.Join(d.home, "sessions", "*", "*", "*", "rollout-*-"+d.id+".jsonl"))
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1]
}

// find looks for the rollout file: by id when it names one, else the
// newest one started since the launch in the agent's working directory
// (an id the office made up for a conversation Codex has not had is
// replaced by Codex's own).
func (d *codexDriver) find() {
	if d.id != "" {
		if f := d.findByID(); f != "" {
			d.file = f
			return
		}
	}
	m, _ := filepath.Glob(filepath.Join(d.home, "sessions", "*", "*", "*", "rollout-*.jsonl"))
	var best, bestID string
	var bestT time.Time
	for _, f := range m {
		fi, err := os.Stat(f)
		if err != nil || fi.ModTime().Before(d.launched.Add(-2*time.Second)) {
			continue
		}
		id, cwd, ok := rolloutMeta(f)
		if !ok || !sameDir(cwd, d.dir) {
			continue
		}
		if best == "" || fi.ModTime().After(bestT) {
			best, bestT, bestID = f, fi.ModTime(), id
		}
	}
	if best != "" {
		d.file, d.id = best, bestID
	}
}

// sameDir reports whether Codex's recorded cwd is dir (or its real path).
func sameDir(cwd, dir string) bool {
	if dir == "" || cwd == dir {
		return true
	}
	r, err := filepath.EvalSymlinks(dir)
	return err == nil && r == cwd
}

// rolloutMeta reads a rollout's first line, its session_meta.
func rolloutMeta(path string) (id, cwd string, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", false
	}
	defer f.Close()
	// The line carries Codex's base instructions: tens of KB.
	line, err := bufio.NewReaderSize(io.LimitReader(f, maxRolloutRead), 256<<10).ReadSlice('\n')
	if err != nil {
		return "", "", false
	}
	var e struct {
		Type    string `json:"type"`
		Payload struct {
			ID  string `json:"id"`
			Cwd string `json:"cwd"`
		} `json:"payload"`
	}
	if json.Unmarshal(line, &e) != nil || e.Type != "session_meta" || e.Payload.ID == "" {
		return "", "", false
	}
	return e.Payload.ID, e.Payload.Cwd, true
}

// maxRolloutRead bounds one poll's read of the rollout.
const maxRolloutRead = 4 << 20

// poll reads the rollout's new complete lines.
func (d *codexDriver) poll() ([]Text, error) {
	if d.file == "" {
		d.find()
		if d.file == "" {
			if d.enter.awaiting && !d.warned && time.Since(d.enter.typedAt) > 2*codexAckTimeout {
				d.warned = true
				m, _ := filepath.Glob(filepath.Join(d.home, "sessions", "*", "*", "*", "rollout-*.jsonl"))
				var cwds []string
				for _, f := range m {
					_, cwd, _ := rolloutMeta(f)
					cwds = append(cwds, cwd)
				}
				d.s.log.Warn("codex: no rollout file of this agent yet", "codex_home", d.home, "dir", d.dir, "rollouts", len(m), "their_dirs", cwds)
			}
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
		d.off, d.partial = 0, nil // rewritten: start over (IDs already acted on are skipped by the cursor)
	}
	if fi.Size() == d.off {
		return nil, nil
	}
	buf := make([]byte, min(fi.Size()-d.off, maxRolloutRead))
	n, err := f.ReadAt(buf, d.off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	buf = buf[:n]
	start := d.off - int64(len(d.partial))
	data := append(d.partial, buf...)
	d.off += int64(n)
	d.partial = nil
	var texts []Text
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			d.partial = append([]byte(nil), data...)
			break
		}
		if t, ok := d.entry(data[:i], start); ok {
			texts = append(texts, t)
		}
		start += int64(i + 1)
		data = data[i+1:]
	}
	if int64(n) == maxRolloutRead {
		d.s.poke()
	} else if d.skipping {
		// The cursor is not in the file: everything in it counts as
		// acted on, later entries are new (never act twice).
		d.skipping = false
	}
	return texts, nil
}

// entry decodes one rollout line at offset off.
func (d *codexDriver) entry(line []byte, off int64) (Text, bool) {
	var e struct {
		Type    string `json:"type"`
		Payload struct {
			Type    string `json:"type"`
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"payload"`
	}
	if json.Unmarshal(line, &e) != nil {
		return Text{}, false
	}
	base := strings.TrimSuffix(filepath.Base(d.file), ".jsonl")
	id := fmt.Sprintf("%s:%d", base, off)
	if d.skipping && !strings.HasPrefix(d.after, base+":") {
		// The cursor names another rollout (a conversation that could
		// not be resumed): nothing in this one was acted on.
		d.skipping = false
	}
	if d.skipping {
		if id == d.after {
			d.skipping = false
		}
		return Text{}, false
	}
	p := e.Payload
	switch {
	case e.Type == "response_item" && p.Type == "message" && p.Role == "user":
		var b strings.Builder
		for _, c := range p.Content {
			if c.Type == "input_text" {
				b.WriteString(c.Text)
			}
		}
		d.prompts = append(d.prompts, b.String())
	case e.Type == "response_item" && p.Type == "message" && p.Role == "assistant":
		var b strings.Builder
		for _, c := range p.Content {
			if c.Type == "output_text" {
				b.WriteString(c.Text)
			}
		}
		if b.Len() == 0 {
			return Text{}, false
		}
		return Text{Key: d.s.key, Lines: strings.Split(b.String(), "\n"), ID: id, Source: FromTranscript}, true
	case e.Type == "event_msg" && (p.Type == "task_complete" || p.Type == "turn_aborted"):
		return Text{Key: d.s.key, ID: id, Source: FromTranscript, TurnEnd: true}, true
	}
	return Text{}, false
}
