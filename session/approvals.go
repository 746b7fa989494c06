package session

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// chatHook routes a chat CLI's tool approvals (Gemini CLI, Qwen Code) to
// the office through this server's hook command (Options.Hook), as Claude
// Code's and Codex's are (docs/notes/permissions.md), in settings the
// office owns: never the person's own files. Where it cannot, the CLI's
// dialog is answered from the office through the screen (dialogAsk).
type chatHook struct {
	// mode is the hook command's mode (RunPermissionHook): "permission"
	// (a PermissionRequest hook) or "before-tool" (Gemini CLI's).
	mode string
	// apply gives the CLI the hook command (a shell command line) with its
	// timeout, returning the environment to start it with; dir is the
	// session's state directory. ok false: no hook for this spec.
	apply func(spec Spec, env []string, command string, timeout time.Duration, dir string) (out []string, ok bool, err error)
}

// chatApprovals is what a chat driver keeps for its hook.
type chatApprovals struct {
	perm   permHook
	active bool // the CLI was given the hook at its last launch
}

// prepare gives the CLI its hook, or leaves env as it is when the CLI has
// no hook, the server no hook command, or the spec no place for it.
func (c *chatApprovals) prepare(s *Session, h *chatHook, spec Spec, env []string) ([]string, error) {
	c.active = false
	if h == nil || len(s.m.opts.Hook) == 0 {
		return env, nil
	}
	if err := c.perm.open(s); err != nil {
		return nil, err
	}
	timeout := spec.PermissionHookTimeout
	if timeout <= 0 {
		timeout = DefaultPermissionHookTimeout
	}
	out, ok, err := h.apply(spec, env, c.perm.command(s.m.opts.Hook, h.mode), timeout, c.perm.dir)
	if err != nil || !ok {
		return env, err
	}
	c.active = true
	return out, nil
}

func (c *chatApprovals) close() { c.perm.close() }

// officeHome reports whether the agent's HOME is the one the office made
// for it (Spec.Home), not one its launch environment gives (a person's).
func officeHome(spec Spec) bool {
	_, given := lookup(spec.Env, "HOME")
	return !given && spec.Home != ""
}

// writeSettings merges ours into the JSON settings file at path (made if
// missing) and writes it back (0600).
func writeSettings(path string, ours map[string]any) error {
	merged, err := mergeSettings(path, ours)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(merged, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// mergeSettings returns the settings in file (none when it does not exist)
// with ours over them: ours win for every key but "hooks", whose event
// lists keep their entries of other names and get ours (by name, so a
// file written again holds each once), and objects, merged key by key.
func mergeSettings(file string, ours map[string]any) (map[string]any, error) {
	out := map[string]any{}
	b, err := os.ReadFile(file)
	switch {
	case os.IsNotExist(err):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	return mergeInto(out, ours, ""), nil
}

func mergeInto(out, ours map[string]any, parent string) map[string]any {
	for k, v := range ours {
		prev, isMap := out[k].(map[string]any)
		mine, mineMap := v.(map[string]any)
		switch {
		case parent == "hooks":
			var kept []any
			prevDefs, _ := out[k].([]any)
			for _, d := range prevDefs {
				if !officeDefinition(d) {
					kept = append(kept, d)
				}
			}
			out[k] = append(kept, v.([]any)...)
		case isMap && mineMap:
			out[k] = mergeInto(prev, mine, k)
		case mineMap:
			out[k] = mergeInto(map[string]any{}, mine, k)
		default:
			out[k] = v
		}
	}
	return out
}

// officeDefinition reports whether a hook definition is the office's.
func officeDefinition(d any) bool {
	m, _ := d.(map[string]any)
	hooks, _ := m["hooks"].([]any)
	for _, h := range hooks {
		if hm, _ := h.(map[string]any); hm["name"] == officeHookName {
			return true
		}
	}
	return false
}

// officeHookName names the office's hook in a CLI's settings.
const officeHookName = "office-permission"

// qwenSettingsEnv names Qwen Code's system settings file (its
// settings.ts getSystemSettingsPath), read with the highest precedence;
// qwenSystemSettings is where it is otherwise.
const (
	qwenSettingsEnv    = "QWEN_CODE_SYSTEM_SETTINGS_PATH"
	qwenSystemSettings = "/etc/qwen-code/settings.json"
)

// geminiRouted are the tools Gemini CLI 0.61 asks a person about in its
// default approval mode (bundle/policies/write.toml: decision "ask_user",
// interactive): the tools its hook routes. Any other tool it asks about
// (an MCP server's) shows its dialog, answered through the screen.
var geminiRouted = []string{"run_shell_command", "write_file", "replace", "web_fetch", "activate_skill"}

// geminiHook: Gemini CLI has no hook that answers its dialog, but its
// BeforeTool hook runs before its policy is asked (scheduler.ts
// _processToolCall: evaluateBeforeToolHook, then checkPolicy) and can deny
// a call with a reason the model gets. So the office's hook gates the
// routed tools, and a policy file allows them, so that no dialog follows
// an allowed call. Gemini CLI reads hooks only from its settings, and a
// system settings file only when root owns it and every folder above it
// (settings.ts loadSystemFile), so the hook goes where only the office
// writes: the user settings of the HOME the office made for the agent
// ($HOME/.gemini/settings.json and policies/), with the auth type its
// GEMINI_API_KEY needs, which it would otherwise ask for. An agent started
// with a HOME of a person's keeps its dialogs (answered through the
// screen), as does one whose folder is not trusted (Gemini CLI runs no
// hooks there: hookRegistry.ts processHooksFromConfig), since the policy
// without the hook would let every routed tool run unasked.
func geminiHook(spec Spec, env []string, command string, timeout time.Duration, _ string) ([]string, bool, error) {
	if !officeHome(spec) {
		return env, false, nil
	}
	if v, ok := lookup(env, "GEMINI_CLI_TRUST_WORKSPACE"); !ok || v != "true" {
		return env, false, nil
	}
	gemini := filepath.Join(spec.Home, ".gemini")
	quoted := make([]string, len(geminiRouted))
	for i, t := range geminiRouted {
		quoted[i] = fmt.Sprintf("%q", t)
	}
	policy := "# Written by the office server: these tools are asked through its\n" +
		"# BeforeTool hook (settings.json, " + officeHookName + "), so Gemini CLI\n# does not ask again.\n" +
		"[[rule]]\ntoolName = [" + strings.Join(quoted, ", ") + "]\ndecision = \"allow\"\npriority = 100\n"
	if err := os.MkdirAll(filepath.Join(gemini, "policies"), 0o700); err != nil {
		return nil, false, fmt.Errorf("hook policy: %w", err)
	}
	if err := os.WriteFile(filepath.Join(gemini, "policies", "office.toml"), []byte(policy), 0o600); err != nil {
		return nil, false, fmt.Errorf("hook policy: %w", err)
	}
	settings := map[string]any{
		"hooksConfig": map[string]any{"enabled": true},
		"hooks": map[string]any{"BeforeTool": []any{map[string]any{
			"matcher": "^(" + strings.Join(geminiRouted, "|") + ")$",
			"hooks": []any{map[string]any{
				"name": officeHookName, "type": "command", "command": command,
				"timeout": timeout.Milliseconds(),
			}},
		}}},
	}
	if _, ok := lookup(env, "GEMINI_API_KEY"); ok {
		settings["security"] = map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}}
	}
	if err := writeSettings(filepath.Join(gemini, "settings.json"), settings); err != nil {
		return nil, false, fmt.Errorf("gemini settings: %w", err)
	}
	return env, true, nil
}

// qwenHook: Qwen Code 0.24 runs a PermissionRequest hook, with Claude
// Code's input and decision format, when it would show its approval
// dialog (coreToolScheduler firePermissionRequestHook); without a decision
// it shows the dialog. The hook is given in a system settings file of the
// session's own, named by qwenSettingsEnv (Qwen Code does not check who
// owns it): the person's settings are never written, and a system
// settings file the machine has is kept, merged under the office's keys.
// Its command hooks' timeout is in seconds (readCommandHookTimeout).
func qwenHook(_ Spec, env []string, command string, timeout time.Duration, dir string) ([]string, bool, error) {
	base := qwenSystemSettings
	if p, ok := lookup(env, qwenSettingsEnv); ok && p != "" {
		base = p
	}
	path := filepath.Join(dir, "qwen-system-settings.json")
	if b, err := os.ReadFile(base); err == nil {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return nil, false, fmt.Errorf("qwen settings: %w", err)
		}
	}
	err := writeSettings(path, map[string]any{
		"hooks": map[string]any{"PermissionRequest": []any{map[string]any{
			"hooks": []any{map[string]any{
				"name": officeHookName, "type": "command", "command": command,
				"timeout": int(timeout.Seconds()),
			}},
		}}},
	})
	if err != nil {
		return nil, false, fmt.Errorf("qwen settings: %w", err)
	}
	return setEnv(env, qwenSettingsEnv, path), true, nil
}

// A dialog the office answers through the screen (dialogAsk): when a chat
// CLI shows its tool-approval dialog (no hook decided: a HOME of a
// person's for Gemini CLI, a tool its hook does not route), the dialog
// becomes a PermissionRequest too, whose Via is ViaScreen: its tool and
// subject and its options read from the screen. The decision is typed as
// the number of the option that makes it (Ink's select takes a digit as a
// choice at once), only while that same dialog is still on screen and
// still this request's: never into another dialog, never twice. A dialog
// that goes away without a decision was answered in the terminal
// (Options.OnPermissionEnd, answered).

// Via says how a permission request reached the office and is decided.
const (
	ViaHook   = "hook"   // the CLI's hook waits for the decision
	ViaScreen = "screen" // the CLI's dialog, answered with keys
)

// dialogAsk is the screen request of a chat driver's dialog (locked).
type dialogAsk struct {
	id     string // the request's ID; "" when none
	dialog string // the dialog's text it was made from
	// answered is the text of the dialog the office just answered, kept
	// until it leaves the screen: the CLI redraws after the key, and until
	// then the dialog still shown is no new request (answered again, its
	// key would go to whatever follows it).
	answered string
}

var (
	dialogOptionLine = regexp.MustCompile(`^(?:[●›❯>]\s*)?(\d)\.\s+(.+)$`)
	dialogToolLine   = regexp.MustCompile(`^[?]\s+(\S+)\s+(.*)$`)
)

// dialogMarker is the highlight before a dialog's chosen option, which
// moves with the arrow keys and with the digit that answers it.
var dialogMarker = regexp.MustCompile(`(?m)^(\s*│?\s*)[●›❯>]\s*(\d\.)`)

// sameDialog reports whether two texts of a dialog are the same dialog:
// equal but for where the highlight is.
func sameDialog(a, b string) bool {
	return dialogMarker.ReplaceAllString(a, "$1$2") == dialogMarker.ReplaceAllString(b, "$1$2")
}

// dialogNow is the text of the dialog on screen ("" when none). Locked.
func (d *chatDriver) dialogNow() string {
	if d.term == nil {
		return ""
	}
	return d.cli.dialog(d.term.Lines())
}

// otherDialog reports whether dialog text now asks about another tool or
// subject than before; a text without its tool line says nothing.
func otherDialog(now, before string) bool {
	tool, subject := dialogHead(now)
	if tool == "" {
		return false
	}
	t, s := dialogHead(before)
	return tool != t || subject != s
}

// choiceBox reports whether a box's text is (part of) an approval dialog:
// its "? Tool" line or a numbered option.
func choiceBox(text string) bool {
	if tool, _ := dialogHead(text); tool != "" {
		return true
	}
	for _, l := range strings.Split(text, "\n") {
		if dialogOptionLine.MatchString(strings.TrimSpace(l)) {
			return true
		}
	}
	return false
}

// dialogHead returns the tool and subject of a dialog's first
// "? Tool  subject" line ("" when it has none).
func dialogHead(text string) (tool, subject string) {
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(strings.Trim(strings.TrimSpace(l), "│"))
		if m := dialogToolLine.FindStringSubmatch(l); m != nil {
			return m[1], strings.TrimSpace(m[2])
		}
	}
	return "", ""
}

// dialogRequest reads a tool-approval dialog's text: the tool and what it
// acts on (its first "? Tool  subject" line), and the options by number.
func dialogRequest(text string) (tool string, input json.RawMessage, options map[int]string) {
	options = map[int]string{}
	tool, subject := dialogHead(text)
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(strings.Trim(strings.TrimSpace(l), "│"))
		if m := dialogOptionLine.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			options[n] = strings.TrimSpace(m[2])
		}
	}
	if tool == "" {
		tool = "dialog"
	}
	field := "subject"
	switch strings.ToLower(tool) {
	case "shell":
		field = "command"
	case "writefile", "edit", "replace", "writetodos":
		field = "file_path"
	case "webfetch":
		field = "url"
	}
	input, _ = json.Marshal(map[string]string{field: subject, "dialog": text})
	return tool, input, options
}

// dialogChoice returns the digit that makes decision allow (allow once)
// or deny (the "No" option) among options, or 0 when none does.
func dialogChoice(options map[int]string, allow bool) byte {
	for n := 1; n <= 9; n++ {
		o := strings.ToLower(options[n])
		if o == "" {
			continue
		}
		switch {
		case allow && (strings.HasPrefix(o, "allow once") || strings.HasPrefix(o, "yes, allow once")):
			return byte('0' + n)
		case !allow && strings.HasPrefix(o, "no"):
			return byte('0' + n)
		}
	}
	return 0
}

// askDialog makes the dialog on screen a screen request, once per
// dialog, when the office routes permission requests; it returns what to
// call after the session's lock is released (the request handed on, or
// the end of one whose dialog went away unanswered by the office). Locked.
func (d *chatDriver) askDialog(action bool) func() {
	m := d.s.m
	if m.opts.OnPermission == nil || len(m.opts.Hook) == 0 {
		return nil
	}
	var text string
	if action && d.term != nil {
		text = d.cli.dialog(d.term.Lines())
	}
	key := d.s.key
	if d.ask.id != "" && (!action || !sameDialog(text, d.ask.dialog)) {
		id := d.ask.id
		d.ask = dialogAsk{}
		if m.perms.take(key, id) == nil || m.opts.OnPermissionEnd == nil {
			return nil // decided by the office
		}
		return func() { m.opts.OnPermissionEnd(key, id, true) }
	}
	if d.ask.answered != "" {
		// Until it leaves the screen (the last box is none, or another
		// kind of box: the tool's own, once it ran) with the title no
		// longer saying a choice waits: the CLI redraws it in between; a
		// frame drawn in part is no other dialog.
		if now := d.dialogNow(); (action || choiceBox(now)) && !otherDialog(now, d.ask.answered) {
			return nil
		}
		d.ask.answered = ""
	}
	if !action || text == "" || d.ask.id != "" {
		return nil
	}
	tool, input, options := dialogRequest(text)
	if len(options) == 0 {
		return nil // not the dialog yet (or the call running after it)
	}
	req := PermissionRequest{Key: key, ID: uuid.NewString(), ConversationID: d.id, Tool: tool, Input: input, Via: ViaScreen, Kind: d.cli.kind}
	d.ask = dialogAsk{id: req.ID, dialog: text}
	m.perms.add(req.ID, &permWait{key: key, tool: tool, input: compactJSON(input),
		answer: func(dec PermissionDecision) error { return d.answerDialog(req.ID, options, dec) }})
	return func() { m.opts.OnPermission(req) }
}

// endAsk ends the screen request of a dialog that went with its process
// (a restart, a stop): unanswered (Options.OnPermissionEnd), as a hook's
// connection that ends with its process.
func (d *chatDriver) endAsk(ask dialogAsk) {
	m := d.s.m
	if ask.id == "" || m.perms.take(d.s.key, ask.id) == nil || m.opts.OnPermissionEnd == nil {
		return
	}
	m.opts.OnPermissionEnd(d.s.key, ask.id, false)
}

// answerDialog types the choice for decision dec into the dialog of
// request id, if that dialog is still the one on screen.
func (d *chatDriver) answerDialog(id string, options map[int]string, dec PermissionDecision) error {
	s := d.s
	s.mu.Lock()
	text := ""
	if d.term != nil {
		text = d.cli.dialog(d.term.Lines())
	}
	same := d.ask.id == id && sameDialog(text, d.ask.dialog) && d.cli.state(d.title) == chatAction
	if same {
		// Decided: its going away is no answer in the terminal, and it is
		// not asked again while it is still drawn.
		d.ask = dialogAsk{answered: text}
	}
	pr := s.p
	s.mu.Unlock()
	if !same || pr == nil {
		return fmt.Errorf("permission request %s: its dialog is no longer on screen: %w", id, ErrNoRequest)
	}
	key := dialogChoice(options, dec.Allow)
	if key == 0 {
		if dec.Allow {
			return fmt.Errorf("permission request %s: the dialog offers no \"allow once\" (%v)", id, options)
		}
		key = 0x1b // Esc: every dialog of theirs takes it as no
	}
	_ = pr.pty.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := pr.pty.Write([]byte{key}); err != nil {
		return fmt.Errorf("permission request %s: %w", id, err)
	}
	s.log.Info("permission dialog answered", "request", id, "allow", dec.Allow, "key", string(rune(key)))
	return nil
}
