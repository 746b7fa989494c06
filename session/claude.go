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
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
)

// KindClaude runs Claude Code (the default kind). Its words come from its
// JSONL transcript (transcript.go): exact, with a stable identity per
// entry. Hooks it runs (--settings) signal turn ends and submitted prompts
// exactly; its screen tells whether its input prompt or a dialog is up
// (claudescreen.go). Typed text is acknowledged by a user entry in the
// transcript. A restart resumes the conversation (--resume).
const KindClaude = "claude"

// Acknowledgement and submission bounds.
const (
	// claudeAckTimeout: a prompt typed into Claude Code that has no user
	// entry in the transcript this long after its Enter was not received.
	claudeAckTimeout = 30 * time.Second
	// submitTimeout is how long after typing a prompt the UserPromptSubmit
	// hook may take before Enter is pressed again.
	submitTimeout = 5 * time.Second
)

func checkClaude(spec *Spec) error {
	if spec.Command == "" {
		spec.Command = "claude"
	}
	if spec.Quiescence <= 0 {
		spec.Quiescence = 300 * time.Millisecond
	}
	return nil
}

// claudeDriver runs Claude Code in a session.
type claudeDriver struct {
	s *Session
	c *claudeState // worker-owned

	// locked
	termView              // the screen, for readiness and dialogs (locked)
	attnFrom    Status    // the status a dialog interrupted (needs_attention)
	turnEnded   bool      // the transcript said end_turn since the last input
	awaitSubmit bool      // typed; UserPromptSubmit not seen yet
	reEntered   bool      // Enter was repeated for this input
	screenSeen  time.Time // lastOutput when the screen was last read still

	prompts []string // worker-owned: user entries the last step read
}

func newClaudeDriver(s *Session) driver { return &claudeDriver{s: s} }

// launch keeps the conversation's state across restarts, or makes a new one
// for another (or no) conversation id, and prepares the start.
func (d *claudeDriver) launch(spec Spec) ([]string, []string, error) {
	if d.c == nil || d.c.id != spec.ConversationID || spec.ConversationID == "" {
		old := d.c
		c, err := newClaudeState(spec, old)
		if err != nil {
			return nil, nil, err
		}
		if old != nil {
			old.cleanup()
		}
		if len(d.s.m.opts.Hook) > 0 {
			// Without the socket the agent still runs: its permission
			// dialogs are answered in the terminal, as without a hook.
			if c.perm, err = listenPermissions(d.s, c.stateDir, c.signals); err != nil {
				d.s.log.Warn("permission requests stay in the terminal", "err", err)
			}
		}
		d.c = c
		d.s.mu.Lock()
		d.s.spec.ConversationID = c.id // a generated id is kept for restarts
		d.s.mu.Unlock()
	}
	return d.c.prepare(spec, d.s.m.opts.Hook)
}

func (d *claudeDriver) started(spec Spec, info *Info) {
	d.term = newScreen(spec.Cols, spec.Rows)
	d.turnEnded = false
	d.awaitSubmit, d.reEntered = false, false
	info.Resumes = true
	if d.c != nil {
		info.ConversationID = d.c.id
		info.Transcript = d.c.tr.path
		info.Resumed = d.c.resumed
	}
}

func (d *claudeDriver) output(p []byte) {
	if d.term != nil {
		_, _ = d.term.Write(p)
		_ = d.term.TakeScrolledRows() // only the visible rows matter
	}
}

// flush: the transcript holds every word; nothing is left on screen.
func (d *claudeDriver) flush() []Text { return nil }

func (d *claudeDriver) typed(string) {
	d.turnEnded = false
	d.awaitSubmit, d.reEntered = true, false
}

// keys: a person's prompt shows up in the transcript as a user entry and
// through the UserPromptSubmit hook; the keystrokes themselves say nothing.
func (d *claudeDriver) keys([]byte) bool { return false }

// received: Claude Code writes the prompt it got into its transcript as a
// user entry.
func (d *claudeDriver) received(now time.Time, a *pendingAck) (bool, error) {
	for _, p := range d.prompts {
		if samePrompt(p, a.r.text) {
			return true, nil
		}
	}
	if now.Sub(a.typedAt) <= claudeAckTimeout {
		return false, nil
	}
	d.s.mu.Lock()
	st := d.s.info.Status
	d.s.mu.Unlock()
	if st == office.SessionReady || st == office.SessionBusy {
		d.s.log.Warn("typed text not received: no user entry in the transcript", "after", now.Sub(a.typedAt).Round(time.Millisecond))
	}
	return true, ErrNotReceived
}

// resume continues the conversation, unless the restart asked for another.
func (d *claudeDriver) resume(spec *Spec, asked *Spec) {
	if d.c != nil && spec.Kind == KindClaude && (asked == nil || asked.ConversationID == "" || asked.ConversationID == d.c.id) {
		spec.ConversationID = d.c.id
		spec.Resume = true
	}
}

func (d *claudeDriver) close() {
	if d.c != nil {
		d.c.cleanup()
	}
}

// samePrompt reports whether a user entry of Claude Code's transcript is
// the text typed: compared with whitespace runs folded (a paste may be
// re-indented), by its first 200 characters. A long text that reached
// Claude Code in two reads is recorded as a pasted piece in
// <pasted_content> markup, with line breaks around it, and the rest as
// typed, the cut anywhere (inside a word too): that entry is compared
// without the markup and without any whitespace.
func samePrompt(entry, typed string) bool {
	fold := foldSpace
	if pastedContent.MatchString(entry) {
		entry, fold = pastedContent.ReplaceAllString(entry, ""), dropSpace
	}
	e, t := fold(entry), fold(typed)
	if e == t {
		return true
	}
	if len(t) > 200 {
		t = cutText(t, 200)
	}
	return t != "" && strings.Contains(e, t)
}

// pastedContent is Claude Code's markup around a pasted piece of a
// prompt, as in <pasted_content id="187f"> and its closing tag, which
// repeats the id.
var pastedContent = regexp.MustCompile(`</?pasted_content id="[^"]*">`)

func foldSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

func dropSpace(s string) string { return strings.Join(strings.Fields(s), "") }

// claudeState is what a claude session keeps across restarts of its
// process: the conversation id, the transcript follower and the state
// directory where its hooks signal.
type claudeState struct {
	id        string
	home      string
	configDir string
	dir       string
	stateDir  string // settings.json and the signals file
	signals   string
	sigOff    int64
	sigPart   []byte
	tr        *transcript
	resolved  time.Time
	resumed   bool          // the last launch resumed the conversation (--resume)
	perm      *permListener // the PermissionRequest hook's socket (Options.Hook)
	watch     dirWatch      // the state and transcript directories (worker-owned)
}

// Hook signals written to the signals file, one per line.
const (
	sigStop   = "stop"   // Stop hook: the main agent finished its turn
	sigPrompt = "prompt" // UserPromptSubmit hook: a prompt was submitted (by us or a person)
	sigNotify = "notify" // Notification hook, followed by its JSON input
	sigTool   = "tool"   // PostToolUse(Failure) hook, followed by its JSON input
)

func newClaudeState(spec Spec, old *claudeState) (*claudeState, error) {
	c := &claudeState{id: spec.ConversationID}
	if c.id == "" {
		c.id = uuid.NewString()
	} else if _, err := uuid.Parse(c.id); err != nil {
		return nil, fmt.Errorf("conversation id %q: not a UUID", c.id)
	}
	c.home = spec.Home
	if c.home == "" {
		c.home = os.Getenv("HOME")
	}
	c.configDir = filepath.Join(c.home, ".claude")
	if v, ok := lookup(os.Environ(), "CLAUDE_CONFIG_DIR"); ok && v != "" && spec.Home == "" {
		c.configDir = v
	}
	for _, kv := range spec.Env {
		if v, ok := strings.CutPrefix(kv, "CLAUDE_CONFIG_DIR="); ok {
			c.configDir = v
		}
	}
	if spec.ConfigDir != "" {
		d, err := filepath.Abs(spec.ConfigDir)
		if err != nil {
			return nil, fmt.Errorf("config directory: %w", err)
		}
		c.configDir = d
	}
	c.dir = spec.Dir
	if c.dir == "" {
		d, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("working directory: %w", err)
		}
		c.dir = d
	}
	d, err := newStateDir()
	if err != nil {
		return nil, err
	}
	c.stateDir = d
	c.signals = filepath.Join(d, "signals")
	// A follower of this conversation in this process knows exactly what
	// it emitted: its position wins over the caller's cursor, which may be
	// older (a caller records it at turn ends).
	after := spec.TranscriptAfter
	if old != nil && old.tr != nil && old.id == c.id && old.tr.lastID != "" {
		after = old.tr.lastID
	}
	c.tr = newTranscript(TranscriptPath(c.configDir, c.dir, c.id), after)
	c.resolved = time.Now()
	return c, nil
}

func (c *claudeState) cleanup() {
	c.watch.stop()
	if c.perm != nil {
		c.perm.close()
		c.perm = nil
	}
	if c.stateDir != "" {
		_ = os.RemoveAll(c.stateDir)
	}
}

// prepare writes what a launch needs ($HOME/.claude.json, the hook
// settings, an empty signals file) and returns the arguments and the
// environment.
func (c *claudeState) prepare(spec Spec, hook []string) ([]string, []string, error) {
	if spec.ConfigDir != "" {
		if err := PrepareClaudeConfig(c.configDir, c.dir, apiKey(spec.Env), spec.PermissionMode == "bypassPermissions"); err != nil {
			return nil, nil, err
		}
	}
	settings, err := c.writeSettings(spec, hook)
	if err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(c.signals, nil, 0o600); err != nil {
		return nil, nil, fmt.Errorf("signals file: %w", err)
	}
	c.sigOff, c.sigPart = 0, nil

	// Resume only a conversation: --resume of an unknown id fails, and
	// --session-id of a used one is refused. Claude Code creates the file
	// with a few metadata lines at once but writes the first prompt only
	// later (measured, 2.1.330: a process killed while its first request
	// was in flight left a file without it, and --resume of that id exits
	// with "No conversation found"): such a file holds nothing to resume and
	// is removed, so the id starts afresh.
	c.tr.path = TranscriptPath(c.configDir, c.dir, c.id)
	var args []string
	switch has, err := hasConversation(c.tr.path); {
	case err != nil:
		return nil, nil, err
	case has:
		args = append(args, "--resume", c.id)
		c.resumed = true
	default:
		if err := os.Remove(c.tr.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("remove empty transcript: %w", err)
		}
		c.tr.off, c.tr.partial, c.tr.discarding = 0, nil, false
		args = append(args, "--session-id", c.id)
		c.resumed = false
	}
	args = append(args, "--settings", settings)
	if spec.AppendSystemPrompt != "" {
		// From a file, not on the command line, where every local user
		// reads it (ps, /proc/PID/cmdline). Claude Code 2.1.330 has
		// --append-system-prompt-file (its --help names it).
		p := filepath.Join(c.stateDir, "system-prompt.md")
		if err := os.WriteFile(p, []byte(spec.AppendSystemPrompt), 0o600); err != nil {
			return nil, nil, fmt.Errorf("system prompt file: %w", err)
		}
		args = append(args, "--append-system-prompt-file", p)
	}
	if spec.PermissionMode != "" {
		args = append(args, "--permission-mode", spec.PermissionMode)
	}
	if spec.Model != "" {
		args = append(args, "--model", spec.Model)
	}
	args = append(args, spec.Args...)
	env := buildEnv(spec, true)
	env = setEnv(env, "HOME", c.home)
	if spec.ConfigDir != "" {
		env = setEnv(env, "CLAUDE_CONFIG_DIR", c.configDir)
		if spec.CredentialsDir != "" {
			env = setEnv(env, "CLAUDE_SECURESTORAGE_CONFIG_DIR", spec.CredentialsDir)
		}
	}
	return args, env, nil
}

// writeSettings writes the --settings file: hooks that append a line to
// the signals file, so the session learns turn end and prompts exactly;
// with a hook command, the PermissionRequest hook that hands tool
// permission requests to the server (permission.go), with its timeout set
// explicitly; and the spec's permission rules.
func (c *claudeState) writeSettings(spec Spec, hookCmd []string) (string, error) {
	q := shellQuote(c.signals)
	hook := func(cmd string) []any {
		return []any{map[string]any{"hooks": []any{map[string]any{"type": "command", "command": cmd}}}}
	}
	hooks := map[string]any{
		"Stop":             hook("printf '" + sigStop + "\\n' >> " + q),
		"UserPromptSubmit": hook("printf '" + sigPrompt + "\\n' >> " + q),
		"Notification":     hook("{ printf '" + sigNotify + " '; tr -d '\\n\\r'; printf '\\n'; } >> " + q),
	}
	if len(hookCmd) > 0 && c.perm != nil {
		// A tool call that ran or failed: a permission request for it
		// still waiting was answered in the terminal (permission.go).
		tool := hook("{ printf '" + sigTool + " '; tr -d '\\n\\r'; printf '\\n'; } >> " + q)
		hooks["PostToolUse"], hooks["PostToolUseFailure"] = tool, tool
	}
	if len(hookCmd) > 0 && c.perm != nil {
		argv := append(append([]string{}, hookCmd...), "permission", c.perm.path)
		for i, a := range argv {
			argv[i] = shellQuote(a)
		}
		timeout := spec.PermissionHookTimeout
		if timeout <= 0 {
			timeout = DefaultPermissionHookTimeout
		}
		hooks["PermissionRequest"] = []any{map[string]any{"hooks": []any{map[string]any{
			"type": "command", "command": strings.Join(argv, " "), "timeout": int(timeout.Seconds()),
		}}}}
	}
	cfg := map[string]any{"hooks": hooks}
	if r := spec.Permissions; len(r.Allow)+len(r.Deny)+len(r.Ask) > 0 {
		perms := map[string]any{}
		for name, list := range map[string][]string{"allow": r.Allow, "deny": r.Deny, "ask": r.Ask} {
			if len(list) > 0 {
				perms[name] = list
			}
		}
		cfg["permissions"] = perms
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return "", err
	}
	p := filepath.Join(c.stateDir, "settings.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		return "", fmt.Errorf("settings file: %w", err)
	}
	return p, nil
}

// DefaultPermissionHookTimeout is the PermissionRequest hook's timeout
// when the spec gives none: above the office's default (10 minutes).
const DefaultPermissionHookTimeout = 11 * time.Minute

// sigLine is one line of the signals file and its offset there.
type sigLine struct {
	text string
	at   int64
}

// pollSignals returns the complete lines appended to the signals file.
func (c *claudeState) pollSignals() []sigLine {
	if st, err := os.Stat(c.signals); err != nil || st.Size() == c.sigOff {
		return nil
	}
	f, err := os.Open(c.signals)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(c.sigOff, io.SeekStart); err != nil {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil || len(data) == 0 {
		return nil
	}
	at := c.sigOff - int64(len(c.sigPart))
	c.sigOff += int64(len(data))
	data = append(c.sigPart, data...)
	c.sigPart = nil
	var out []sigLine
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if len(data) > 0 {
				c.sigPart = append([]byte(nil), data...)
			}
			return out
		}
		out = append(out, sigLine{string(data[:i]), at})
		at += int64(i + 1)
		data = data[i+1:]
	}
}

// step follows the hooks and the transcript, and reads the screen once it
// is still.
func (d *claudeDriver) step(now time.Time, st Status) ([]Text, func()) {
	s, c := d.s, d.c
	if c == nil {
		return nil, func() {}
	}
	defer func() { d.prompts = c.tr.takePrompts() }()
	d.watch()
	texts, sigs := d.read(now)

	s.mu.Lock()
	for _, t := range texts {
		if t.TurnEnd {
			d.turnEnded = true
		}
	}
	next := st
	for _, sig := range sigs {
		var stop *Text
		next, stop = d.signal(now, next, sig)
		if stop != nil {
			texts = append(texts, *stop)
		}
	}
	next = d.readScreen(now, next)
	reEnter := d.reEnterDue(now)
	report := func() {}
	if next != st {
		report, _ = s.setStatusLocked(next)
	}
	s.mu.Unlock()
	s.pressEnterAgain(reEnter)
	return texts, report
}

// watch has the hooks' signals file and the transcript's directory
// watched (dirWatch), so that an idle session wakes when they change
// instead of polling them; the transcript's directory, or its nearest
// ancestor, before Claude Code makes it at the first prompt. Worker-owned.
func (d *claudeDriver) watch() {
	d.c.watch.follow(d.s, d.c.stateDir, filepath.Dir(d.c.tr.path))
}

// idleWake: a ready Claude Code whose files are watched is looked at when
// they change or it writes to its terminal. Time alone moves two things
// on, so they set a timer for when they are due: a screen that changed is
// read once it has been still for the quiescence period (a dialog drawn
// or gone: output wakes the worker, but before the screen has settled),
// and typed text not yet submitted is given its Enter again after
// submitTimeout. Locked.
func (d *claudeDriver) idleWake() time.Duration {
	s := d.s
	var due time.Time
	if s.p != nil && d.term != nil && s.lastOutput.After(d.screenSeen) {
		due = s.lastOutput.Add(s.spec.Quiescence)
	}
	if s.p != nil && d.awaitSubmit && !d.reEntered {
		if at := s.inputAt.Add(submitTimeout + time.Millisecond); due.IsZero() || at.Before(due) {
			due = at
		}
	}
	if !due.IsZero() {
		return untilDue(time.Now(), due)
	}
	if d.c != nil && d.c.watch.ok {
		return 0
	}
	return pollIdle
}

// read returns the new transcript entries and hook signals. While the
// consumer of OnText is behind (Options.Paused), both are left unread: they
// are files, so nothing is lost, and the turn's end (hence "ready") waits
// for its words. The PTY reader and the viewers are not concerned.
func (d *claudeDriver) read(now time.Time) ([]Text, []sigLine) {
	s, c := d.s, d.c
	if s.m.opts.Paused != nil && s.m.opts.Paused(s.key) {
		return nil, nil
	}
	sigs := c.pollSignals()
	texts, err := c.tr.poll(s.key)
	if err != nil {
		s.log.Warn("transcript", "err", err)
	}
	if c.tr.more {
		s.poke()
	}
	if len(texts) == 0 && errors.Is(statErr(c.tr.path), os.ErrNotExist) && now.Sub(c.resolved) > 2*time.Second {
		// The file may live under another project name (a long or
		// symlinked working directory): search for it now and then.
		c.resolved = now
		c.tr.path = TranscriptPath(c.configDir, c.dir, c.id)
	}
	return texts, sigs
}

// signal applies one hook signal to the status next; a Stop that ends a
// turn the transcript did not end returns the turn end to dispatch. Locked.
func (d *claudeDriver) signal(now time.Time, next Status, line sigLine) (Status, *Text) {
	s := d.s
	name, arg, _ := strings.Cut(line.text, " ")
	// A hook signal ends only permission requests made before it.
	before := func(w *permWait) bool { return w.sigAt <= line.at }
	switch name {
	case sigStop:
		s.m.perms.end(s.key, before) // the turn is over
		// Between a typing and its UserPromptSubmit no turn of that text
		// can end: a Stop read then is the previous turn's, late (that
		// turn was ended by its transcript entry and the screen first).
		if !d.awaitSubmit {
			d.turnEnded = true
			if next == office.SessionBusy {
				next = office.SessionReady
			}
		}
		if next == office.SessionStarting {
			next = office.SessionReady
		}
		if t, ok := d.c.tr.stopped(s.key); ok {
			return next, &t
		}
	case sigPrompt:
		s.m.perms.end(s.key, before) // a new turn
		next = office.SessionBusy
		d.turnEnded = false
		d.awaitSubmit = false
		s.info.Notice = ""
		s.inputAt = now
	case sigTool:
		var in hookInput
		if err := json.Unmarshal([]byte(arg), &in); err != nil {
			s.log.Warn("tool hook: not JSON", "err", err)
			break
		}
		input := compactJSON(in.Input)
		s.m.perms.end(s.key, func(w *permWait) bool { return before(w) && w.tool == in.Tool && w.input == input })
	case sigNotify:
		var n struct {
			Message string `json:"message"`
			Type    string `json:"notification_type"`
		}
		if err := json.Unmarshal([]byte(arg), &n); err != nil {
			s.log.Warn("notification hook: not JSON", "err", err)
		}
		s.info.Notice = n.Message
		switch {
		case n.Type == "permission_prompt":
			// Exact: a permission dialog is up.
			next = d.attention(next, n.Message)
		case n.Type == "idle_prompt" || strings.Contains(n.Message, "waiting for your input"):
			if next != office.SessionNeedsAttention {
				next = office.SessionReady
			}
		}
	}
	return next, nil
}

// readScreen reads a still screen. Claude Code gives no signal that its
// input prompt is up, and every dialog draws the prompt's "❯" too (text
// typed into the folder-trust dialog is lost and its Enter chooses "No,
// exit"). So the prompt box under a rule is ready, anything else that
// offers a choice needs a person. Locked.
func (d *claudeDriver) readScreen(now time.Time, next Status) Status {
	s := d.s
	quiet := now.Sub(s.lastOutput) >= s.spec.Quiescence && !s.lastOutput.IsZero()
	if s.p == nil || !quiet || d.term == nil {
		return next
	}
	d.screenSeen = s.lastOutput
	view, text := readClaudeScreen(d.term.Lines())
	switch view {
	case viewDialog:
		next = d.attention(next, text)
	case viewPrompt:
		if next == office.SessionNeedsAttention {
			next = d.attnFrom
			s.info.Detail = ""
		}
		// Start-up: bracketed paste comes on first, the prompt box a
		// moment later; text typed before the box exists loses its
		// Enter. A turn whose end_turn is in the transcript but whose
		// Stop hook did not arrive ends here too.
		if (next == office.SessionStarting && s.modes.paste) || (next == office.SessionBusy && d.turnEnded) {
			next = office.SessionReady
		}
	}
	return next
}

// reEnterDue returns the process to press Enter in again when the prompt
// typed was never submitted (its Enter was lost); on an empty prompt box
// Enter does nothing. Once per input. Locked.
func (d *claudeDriver) reEnterDue(now time.Time) *proc {
	s := d.s
	if !d.awaitSubmit || d.reEntered || s.p == nil || now.Sub(s.inputAt) <= submitTimeout {
		return nil
	}
	d.reEntered = true
	return s.p
}

// attention moves a session to needs_attention with the dialog's text,
// remembering the status to return to once the dialog is gone.
func (d *claudeDriver) attention(cur Status, text string) Status {
	s := d.s
	if cur != office.SessionNeedsAttention {
		d.attnFrom = cur
		if cur == office.SessionReady {
			d.attnFrom = office.SessionBusy // a dialog means work is under way
		}
		if s.info.Status != office.SessionNeedsAttention {
			s.log.Warn("agent needs attention", "dialog", text)
		}
	}
	if text != "" {
		s.info.Detail = text
	}
	return office.SessionNeedsAttention
}

func statErr(p string) error {
	_, err := os.Stat(p)
	return err
}

// hasConversation reports whether the transcript at path holds a user or
// assistant entry: something --resume can load. A missing file holds none.
func hasConversation(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("open transcript: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long line (a big tool result) is an entry of a
			// conversation that has begun; its head tells which.
			for err == bufio.ErrBufferFull {
				_, err = r.ReadSlice('\n')
			}
			if err != nil && err != io.EOF {
				return false, fmt.Errorf("read transcript: %w", err)
			}
			return true, nil
		}
		var e struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(line, &e) == nil && (e.Type == "user" || e.Type == "assistant") {
			return true, nil
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read transcript: %w", err)
		}
	}
}
