package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Permission requests (docs/notes/permissions.md). Claude Code runs its
// PermissionRequest hook when it would show a tool-permission dialog; the
// hook is this server's own executable (RunPermissionHook, `office-server
// hook permission SOCKET`), which hands the request to the session over a
// unix socket in the session's state directory (0700, the server's user)
// and blocks until the decision comes back on the same connection. So a
// decision can only come from the server: an agent that connects to the
// socket itself only makes another request.

// PermissionRequest is one tool-permission request of an agent.
type PermissionRequest struct {
	Key            Key
	ID             string          // a UUID, unique; Manager.DecidePermission answers it
	ConversationID string          // Claude Code's session_id
	Tool           string          // tool_name: "Bash", "Edit", "Write", …
	Input          json.RawMessage // tool_input (for Bash: command, description)
	Suggestions    json.RawMessage // permission_suggestions, as Claude Code gave them
	Mode           string          // permission_mode
	// Via is how it came and is decided: ViaHook (the CLI's hook waits)
	// or ViaScreen (its dialog, answered with keys).
	Via string
	// Kind is the session's launch kind (KindClaude…).
	Kind string
}

// RulesApplied reports whether the CLI applied the office's permission
// rules itself before asking: Claude Code, whose settings hold them
// (claudeconfig.go). For any other kind the office applies them.
func (r PermissionRequest) RulesApplied() bool { return r.Kind == KindClaude }

// PermissionDecision is the answer to a PermissionRequest.
type PermissionDecision struct {
	Allow bool
	// Message is what the model gets with a deny (Claude Code makes it the
	// content of an is_error tool_result, and the turn goes on).
	Message string
}

// hookInput is what Claude Code 2.1.330 writes to the PermissionRequest
// hook's stdin (the fields the office uses).
type hookInput struct {
	SessionID   string          `json:"session_id"`
	Event       string          `json:"hook_event_name"`
	Mode        string          `json:"permission_mode"`
	Tool        string          `json:"tool_name"`
	Input       json.RawMessage `json:"tool_input"`
	Suggestions json.RawMessage `json:"permission_suggestions"`
}

// hookDecision is the decision object of the hook's output
// (hookSpecificOutput.decision): behavior allow, or deny with a message.
// interrupt is never set: it stops the turn and loses the message.
type hookDecision struct {
	Behavior string `json:"behavior"`
	Message  string `json:"message,omitempty"`
}

// maxHookInput bounds a request (a Write's content is in its input).
const maxHookInput = 4 << 20

// permSocket is the socket's name in the state directory.
const permSocket = "permission.sock"

// permWait is a request waiting for its decision: the hook's connection.
type permWait struct {
	key   Key
	tool  string
	input string // tool_input, compacted
	sigAt int64  // the size of the session's signals file when it came
	conn  net.Conn
	ended bool // end closed it: answered in the terminal (locked)
	// answer, for a request read from a dialog on screen (ViaScreen),
	// types the decision; conn is nil.
	answer func(PermissionDecision) error
}

// permRegistry is the manager's set of waiting requests, by ID.
type permRegistry struct {
	mu      sync.Mutex
	waiting map[string]*permWait
}

func (r *permRegistry) add(id string, w *permWait) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waiting == nil {
		r.waiting = map[string]*permWait{}
	}
	r.waiting[id] = w
}

// take removes and returns the request id of key; nil when none waits.
func (r *permRegistry) take(key Key, id string) *permWait {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.waiting[id]
	if w == nil || w.key != key {
		return nil
	}
	delete(r.waiting, id)
	return w
}

// end ends the waiting requests of key that match (a tool call that
// ran or failed, a turn that ended: the dialog was answered in the
// terminal, and Claude Code leaves the hook running until its timeout).
// Their connections are closed, so the hook exits and the goroutine
// serving it reports the end (Options.OnPermissionEnd). Never blocks.
func (r *permRegistry) end(key Key, match func(w *permWait) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.waiting {
		if w.key == key && w.conn != nil && match(w) {
			w.ended = true
			w.conn.Close()
		}
	}
}

// compactJSON returns raw compacted, or as it is when it is not JSON.
func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// ErrNoRequest: no permission request with that ID waits (decided
// already, or its hook is gone).
var ErrNoRequest = errors.New("no such permission request waiting")

// DecidePermission sends the decision to the hook that waits for request
// id of key, exactly once: a second call, or one for a request whose hook
// is gone, fails with ErrNoRequest.
func (m *Manager) DecidePermission(key Key, id string, d PermissionDecision) error {
	w := m.perms.take(key, id)
	if w == nil {
		return fmt.Errorf("permission request %s: %w", id, ErrNoRequest)
	}
	if w.answer != nil {
		return w.answer(d)
	}
	defer w.conn.Close()
	out := hookDecision{Behavior: "deny", Message: d.Message}
	if d.Allow {
		out = hookDecision{Behavior: "allow"}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_ = w.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := w.conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("permission request %s: send the decision: %w", id, err)
	}
	return nil
}

// permListener accepts the hook's connections for one claude session. Its
// goroutines (the accept loop, one per connection) end with close.
type permListener struct {
	s       *Session
	ln      net.Listener
	path    string
	signals string // the session's hook signals file

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

// listenPermissions listens on dir/permission.sock for session s.
func listenPermissions(s *Session, dir, signals string) (*permListener, error) {
	path := dir + "/" + permSocket
	if len(path) >= 108 { // sun_path
		return nil, fmt.Errorf("permission socket %s: path too long for a unix socket (set TMPDIR to a shorter directory)", path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("permission socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("permission socket: %w", err)
	}
	p := &permListener{s: s, ln: ln, path: path, signals: signals, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *permListener) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.conns[c] = true
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(c)
	}
}

// serve reads one request from a hook, hands it to Options.OnPermission
// and waits for the connection to end: the decision was sent
// (DecidePermission closes it), or the hook went away first (Claude Code
// killed it: the dialog was answered in the terminal, the process ended),
// which Options.OnPermissionEnd hears.
func (p *permListener) serve(c net.Conn) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.Close()
	}()
	s := p.s
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReaderSize(io.LimitReader(c, maxHookInput+1), 64<<10).ReadBytes('\n')
	if err != nil {
		s.log.Warn("permission hook: no request", "err", err)
		return
	}
	var in hookInput
	if err := json.Unmarshal(line, &in); err != nil || in.Tool == "" {
		s.log.Warn("permission hook: not a PermissionRequest", "err", err)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	req := PermissionRequest{
		Key: s.key, ID: uuid.NewString(), ConversationID: in.SessionID, Tool: in.Tool,
		Input: in.Input, Suggestions: in.Suggestions, Mode: in.Mode, Via: ViaHook, Kind: s.Info().Kind,
	}
	m := s.m
	var sigAt int64
	if st, err := os.Stat(p.signals); err == nil {
		sigAt = st.Size()
	}
	m.perms.add(req.ID, &permWait{key: s.key, tool: in.Tool, input: compactJSON(in.Input), sigAt: sigAt, conn: c})
	if m.opts.OnPermission != nil {
		m.opts.OnPermission(req)
	}
	// The hook writes nothing more; a read ends when the connection does.
	_, _ = io.Copy(io.Discard, c)
	if w := m.perms.take(s.key, req.ID); w != nil && m.opts.OnPermissionEnd != nil {
		m.perms.mu.Lock()
		answered := w.ended
		m.perms.mu.Unlock()
		m.opts.OnPermissionEnd(s.key, req.ID, answered)
	}
}

// close stops accepting, ends every waiting hook's connection (the hook
// then exits without a decision) and waits for the goroutines.
func (p *permListener) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
	_ = os.Remove(p.path)
}

// permHook is the hook socket of a session whose CLI runs this server's
// executable as its permission hook (Codex, Gemini CLI, Qwen Code): a state
// directory of its own (0700, the server's user) holding the socket and
// the hook signals file. It is made at the first launch and kept across
// restarts of the agent; close removes it.
type permHook struct {
	dir string
	ln  *permListener
}

// open makes the directory and listens on its socket, once.
func (h *permHook) open(s *Session) error {
	if h.ln != nil {
		return nil
	}
	dir, err := newStateDir()
	if err != nil {
		return err
	}
	signals := filepath.Join(dir, "signals")
	if err := os.WriteFile(signals, nil, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("state directory: %w", err)
	}
	ln, err := listenPermissions(s, dir, signals)
	if err != nil {
		_ = os.RemoveAll(dir)
		return err
	}
	h.dir, h.ln = dir, ln
	return nil
}

// command is the hook's shell command line: the server's hook command
// (Options.Hook), the mode ("permission" or "before-tool") and the socket.
func (h *permHook) command(hook []string, mode string) string {
	argv := append(append([]string{}, hook...), mode, h.ln.path)
	for i, a := range argv {
		argv[i] = shellQuote(a)
	}
	return strings.Join(argv, " ")
}

// close stops listening and removes the directory.
func (h *permHook) close() {
	if h.ln != nil {
		h.ln.close()
		h.ln = nil
	}
	if h.dir != "" {
		_ = os.RemoveAll(h.dir)
		h.dir = ""
	}
}

// RunPermissionHook is the permission hook's main, in one of two modes:
//
//   - `hook permission SOCKET`: a PermissionRequest hook (Claude Code,
//     Codex, Qwen Code: the same input and decision format). It runs when
//     the CLI would show its approval dialog. Exit 0 with a decision; 1
//     without one (no server, the connection ended), which the CLI takes as
//     a failed hook and shows its own dialog.
//   - `hook before-tool SOCKET`: Gemini CLI's BeforeTool hook, for the
//     tools the office routes (their dialog is turned off by the office's
//     policy, so the hook is the only gate). It fails closed: without a
//     decision it denies, with the reason, since a failed BeforeTool hook
//     lets the tool run.
//
// Either passes the request on stdin to the session listening on SOCKET,
// waits for the decision and prints it as the CLI reads it. 2 for a bad
// command line.
func RunPermissionHook(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 2 || (args[0] != "permission" && args[0] != "before-tool") {
		fmt.Fprintln(stderr, "usage: hook permission|before-tool SOCKET")
		return 2
	}
	beforeTool := args[0] == "before-tool"
	d, err := askServer(args[1], stdin)
	if err != nil {
		fmt.Fprintf(stderr, "hook: %v\n", err)
		if !beforeTool {
			return 1
		}
		d = hookDecision{Behavior: "deny", Message: "The office could not ask anyone about this tool call (" + err.Error() + "), so it was not approved. Try again later."}
	}
	var out any = map[string]any{"hookSpecificOutput": map[string]any{
		"hookEventName": "PermissionRequest",
		"decision":      d,
	}}
	if beforeTool {
		// Gemini CLI 0.61 (hook-utils.ts evaluateBeforeToolHook): "deny"
		// blocks the call and gives the model "Tool execution blocked:
		// <reason>"; "allow" goes on to the policy, which allows it.
		out = map[string]string{"decision": d.Behavior, "reason": d.Message}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return 0
}

// askServer hands the hook's request (JSON on stdin) to the session
// listening on socket and returns its decision.
func askServer(socket string, stdin io.Reader) (hookDecision, error) {
	var d hookDecision
	in, err := io.ReadAll(io.LimitReader(stdin, maxHookInput+1))
	if err != nil || len(in) > maxHookInput {
		return d, errors.New("request unreadable or too large")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, in); err != nil {
		return d, fmt.Errorf("request is not JSON: %w", err)
	}
	c, err := net.Dial("unix", socket)
	if err != nil {
		return d, fmt.Errorf("office server: %w", err)
	}
	defer c.Close()
	compact.WriteByte('\n')
	if _, err := c.Write(compact.Bytes()); err != nil {
		return d, fmt.Errorf("office server: %w", err)
	}
	reply, err := bufio.NewReader(io.LimitReader(c, 1<<20)).ReadBytes('\n')
	if err != nil {
		return d, errors.New("the office server ended the request without a decision")
	}
	if err := json.Unmarshal(reply, &d); err != nil || (d.Behavior != "allow" && d.Behavior != "deny") {
		return hookDecision{}, fmt.Errorf("bad decision %q", strings.TrimSpace(string(reply)))
	}
	return d, nil
}
