package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

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
}

// Hook signals written to the signals file, one per line.
const (
	sigStop   = "stop"   // Stop hook: the main agent finished its turn
	sigPrompt = "prompt" // UserPromptSubmit hook: a prompt was submitted (by us or a person)
	sigNotify = "notify" // Notification hook, followed by its JSON input
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
	d, err := os.MkdirTemp("", "office-session-")
	if err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
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
	if c.stateDir != "" {
		_ = os.RemoveAll(c.stateDir)
	}
}

// prepare writes what a launch needs ($HOME/.claude.json, the hook
// settings, an empty signals file) and returns the arguments and the
// environment.
func (c *claudeState) prepare(spec Spec) ([]string, []string, error) {
	if spec.ConfigDir != "" {
		if err := PrepareClaudeConfig(c.configDir, c.dir, apiKey(spec.Env), spec.PermissionMode == "bypassPermissions"); err != nil {
			return nil, nil, err
		}
	}
	settings, err := c.writeSettings()
	if err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(c.signals, nil, 0o600); err != nil {
		return nil, nil, fmt.Errorf("signals file: %w", err)
	}
	c.sigOff, c.sigPart = 0, nil

	// Resume only what exists: --resume of an unknown id fails, and
	// --session-id of a used one is refused.
	c.tr.path = TranscriptPath(c.configDir, c.dir, c.id)
	var args []string
	if _, err := os.Stat(c.tr.path); err == nil {
		args = append(args, "--resume", c.id)
	} else {
		args = append(args, "--session-id", c.id)
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
// the signals file, so the session learns turn end and prompts exactly.
func (c *claudeState) writeSettings() (string, error) {
	q := shellQuote(c.signals)
	hook := func(cmd string) []any {
		return []any{map[string]any{"hooks": []any{map[string]any{"type": "command", "command": cmd}}}}
	}
	cfg := map[string]any{
		"hooks": map[string]any{
			"Stop":             hook("printf '" + sigStop + "\\n' >> " + q),
			"UserPromptSubmit": hook("printf '" + sigPrompt + "\\n' >> " + q),
			"Notification":     hook("{ printf '" + sigNotify + " '; tr -d '\\n\\r'; printf '\\n'; } >> " + q),
		},
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

// pollSignals returns the complete lines appended to the signals file.
func (c *claudeState) pollSignals() []string {
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
	c.sigOff += int64(len(data))
	data = append(c.sigPart, data...)
	c.sigPart = nil
	var out []string
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if len(data) > 0 {
				c.sigPart = append([]byte(nil), data...)
			}
			return out
		}
		out = append(out, string(data[:i]))
		data = data[i+1:]
	}
}

// claudeStep follows hooks and the transcript of a claude session.
func (s *Session) claudeStep(now time.Time, st Status) ([]Text, func()) {
	c := s.claude
	var sigs []string
	var texts []Text
	// While the consumer of OnText is behind (Options.Paused), the
	// transcript and the hook signals are left unread: both are files, so
	// nothing is lost, and the turn's end (hence "ready") waits for its
	// words. The PTY reader and the viewers are not concerned.
	paused := s.m.opts.Paused != nil && s.m.opts.Paused(s.key)
	if !paused {
		sigs = c.pollSignals()
		var err error
		texts, err = c.tr.poll(s.key)
		if err != nil {
			s.log.Warn("transcript", "err", err)
		}
		if c.tr.more {
			s.poke()
		}
	}
	if !paused && len(texts) == 0 && errors.Is(statErr(c.tr.path), os.ErrNotExist) && now.Sub(c.resolved) > 2*time.Second {
		// The file may live under another project name (a long or
		// symlinked working directory): search for it now and then.
		c.resolved = now
		c.tr.path = TranscriptPath(c.configDir, c.dir, c.id)
	}

	s.mu.Lock()
	next := st
	for _, t := range texts {
		if t.TurnEnd {
			s.turnEnded = true
		}
	}
	for _, sig := range sigs {
		name, arg, _ := strings.Cut(sig, " ")
		switch name {
		case sigStop:
			if next == StatusBusy || next == StatusStarting {
				next = StatusReady
			}
			s.turnEnded = true
			if t, ok := c.tr.stopped(s.key); ok {
				texts = append(texts, t)
			}
		case sigPrompt:
			next = StatusBusy
			s.turnEnded = false
			s.awaitSubmit = false
			s.info.Notice = ""
			s.inputAt = now
		case sigNotify:
			var n struct {
				Message string `json:"message"`
				Type    string `json:"notification_type"`
			}
			_ = json.Unmarshal([]byte(arg), &n)
			s.info.Notice = n.Message
			switch {
			case n.Type == "permission_prompt":
				// Exact: a permission dialog is up.
				next = s.attention(next, n.Message)
			case n.Type == "idle_prompt" || strings.Contains(n.Message, "waiting for your input"):
				if next != StatusNeedsAttention {
					next = StatusReady
				}
			}
		}
	}
	quiet := now.Sub(s.lastOutput) >= s.spec.Quiescence && !s.lastOutput.IsZero()
	if s.p != nil && quiet && s.term != nil {
		// Claude Code gives no signal that its input prompt is up, and
		// every dialog draws the prompt's "❯" too (text typed into the
		// folder-trust dialog is lost and its Enter chooses "No, exit").
		// So a still screen is read: the prompt box under a rule is
		// ready, anything else that offers a choice needs a person.
		view, text := readClaudeScreen(s.term.Lines())
		switch view {
		case viewDialog:
			next = s.attention(next, text)
		case viewPrompt:
			if next == StatusNeedsAttention {
				next = s.attnFrom
				s.info.Detail = ""
			}
			// Start-up: bracketed paste comes on first, the prompt box
			// a moment later; text typed before the box exists loses
			// its Enter. A turn whose end_turn is in the transcript but
			// whose Stop hook did not arrive ends here too.
			if (next == StatusStarting && s.modes.paste) || (next == StatusBusy && s.turnEnded) {
				next = StatusReady
			}
		}
	}
	var reEnter *proc
	if s.awaitSubmit && !s.reEntered && s.p != nil && now.Sub(s.inputAt) > submitTimeout {
		// The prompt was typed but never submitted (its Enter was lost):
		// press Enter once more. On an empty prompt box Enter does nothing.
		s.reEntered = true
		reEnter = s.p
	}
	report := func() {}
	if next != st {
		report, _ = s.setStatusLocked(next)
	}
	s.mu.Unlock()
	if reEnter != nil {
		s.log.Warn("prompt not submitted; pressing Enter again")
		_ = reEnter.pty.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, _ = reEnter.pty.Write([]byte("\r"))
	}
	return texts, report
}

// attention moves a session to needs_attention with the dialog's text,
// remembering the status to return to once the dialog is gone.
func (s *Session) attention(cur Status, text string) Status {
	if cur != StatusNeedsAttention {
		s.attnFrom = cur
		if cur == StatusReady {
			s.attnFrom = StatusBusy // a dialog means work is under way
		}
		if s.info.Status != StatusNeedsAttention {
			s.log.Warn("agent needs attention", "dialog", text)
		}
	}
	if text != "" {
		s.info.Detail = text
	}
	return StatusNeedsAttention
}

// submitTimeout is how long after typing a prompt the UserPromptSubmit hook
// may take before Enter is pressed again.
const submitTimeout = 5 * time.Second

func statErr(p string) error {
	_, err := os.Stat(p)
	return err
}

// PrepareClaudeConfig writes configDir/.claude.json, the file Claude Code
// reads when CLAUDE_CONFIG_DIR=configDir, so that it shows none of its
// first-run dialogs (docs/notes/screen.md): onboarding done, the API key
// approved by its last 20 characters (when key is not empty), the bypass
// confirmation accepted (bypassAccepted), and workdir trusted — under every
// name Claude Code may look it up by: the folder, its resolved path, and
// the root of the git checkout enclosing it (measured on 2.1.330: the trust
// dialog stores its answer for the git root). Settings already in the file
// (Claude Code's own bookkeeping) are kept.
func PrepareClaudeConfig(configDir, workdir, key string, bypassAccepted bool) error {
	if err := os.MkdirAll(configDir, 0o700); err != nil {
		return fmt.Errorf("prepare claude config: %w", err)
	}
	p := filepath.Join(configDir, ".claude.json")
	cfg := map[string]any{}
	if b, err := os.ReadFile(p); err == nil && len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &cfg); err != nil {
			return fmt.Errorf("prepare claude config: %s: %w", p, err)
		}
	}
	cfg["hasCompletedOnboarding"] = true
	if _, ok := cfg["numStartups"]; !ok {
		cfg["numStartups"] = 1
	}
	if bypassAccepted {
		cfg["bypassPermissionsModeAccepted"] = true
	}
	if key != "" {
		approveKey(cfg, key)
	}
	projects, _ := cfg["projects"].(map[string]any)
	if projects == nil {
		projects = map[string]any{}
	}
	for _, d := range trustDirs(workdir) {
		pr, _ := projects[d].(map[string]any)
		if pr == nil {
			pr = map[string]any{"allowedTools": []any{}}
		}
		pr["hasTrustDialogAccepted"] = true
		pr["hasCompletedProjectOnboarding"] = true
		projects[d] = pr
	}
	cfg["projects"] = projects
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("prepare claude config: %w", err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("prepare claude config: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("prepare claude config: %w", err)
	}
	return nil
}

// approveKey records key as approved in a .claude.json (by its last 20
// characters, as Claude Code does), so its "Detected a custom API key"
// dialog does not come up.
func approveKey(cfg map[string]any, key string) {
	tail := key
	if len(tail) > 20 {
		tail = tail[len(tail)-20:]
	}
	resp, _ := cfg["customApiKeyResponses"].(map[string]any)
	if resp == nil {
		resp = map[string]any{}
	}
	approved, _ := resp["approved"].([]any)
	if !slices.Contains(approved, any(tail)) {
		approved = append(approved, tail)
	}
	resp["approved"] = approved
	if rejected, _ := resp["rejected"].([]any); rejected != nil {
		resp["rejected"] = slices.DeleteFunc(rejected, func(v any) bool { return v == tail })
	} else {
		resp["rejected"] = []any{}
	}
	cfg["customApiKeyResponses"] = resp
}

// trustDirs returns the paths a folder's trust is looked up under: the
// folder, its resolved path, and the enclosing git checkout's root(s).
func trustDirs(workdir string) []string {
	var dirs []string
	add := func(d string) {
		if d != "" && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	add(workdir)
	if r, err := filepath.EvalSymlinks(workdir); err == nil {
		add(r)
	}
	for _, d := range slices.Clone(dirs) {
		add(gitRoot(d))
	}
	return dirs
}

// gitRoot returns the nearest directory at or above dir holding .git, or "".
func gitRoot(dir string) string {
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		up := filepath.Dir(d)
		if up == d {
			return ""
		}
		d = up
	}
}

func apiKey(env []string) string {
	key := os.Getenv("ANTHROPIC_API_KEY")
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "ANTHROPIC_API_KEY="); ok {
			key = v
		}
	}
	return key
}

// Environment variables passed through from the server's environment to
// every agent, and to claude agents only (by prefix).
var (
	passEnv       = []string{"PATH", "LANG", "LC_ALL", "LC_CTYPE", "USER", "LOGNAME", "SHELL", "TZ", "TMPDIR", "HOME"}
	passEnvClaude = []string{"ANTHROPIC_", "CLAUDE_", "DISABLE_", "HTTP_PROXY=", "HTTPS_PROXY=", "NO_PROXY=", "http_proxy=", "https_proxy=", "no_proxy=", "NODE_EXTRA_CA_CERTS=", "SSL_CERT_FILE="}
)

// buildEnv returns a minimal environment for an agent: a few variables of
// the server's own, TERM, for claude the variables it needs, then spec.Env
// (which wins).
func buildEnv(spec Spec, claude bool) []string {
	var env []string
	for _, k := range passEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if claude {
		for _, kv := range os.Environ() {
			for _, p := range passEnvClaude {
				if strings.HasPrefix(kv, p) {
					env = append(env, kv)
					break
				}
			}
		}
		if _, ok := lookup(env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"); !ok {
			env = append(env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
		}
		if _, ok := lookup(env, "DISABLE_AUTOUPDATER"); !ok {
			env = append(env, "DISABLE_AUTOUPDATER=1")
		}
	}
	if _, ok := lookup(env, "LANG"); !ok {
		env = append(env, "LANG=C.UTF-8")
	}
	env = setEnv(env, "TERM", "xterm-256color")
	if spec.Home != "" {
		env = setEnv(env, "HOME", spec.Home)
	}
	for _, kv := range spec.Env {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			env = setEnv(env, k, v)
		}
	}
	return env
}

func lookup(env []string, k string) (string, bool) {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v, true
		}
	}
	return "", false
}

func setEnv(env []string, k, v string) []string {
	out := env[:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, k+"=") {
			out = append(out, kv)
		}
	}
	return append(out, k+"="+v)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
