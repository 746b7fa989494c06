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
}

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
		if w.key == key && match(w) {
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
		Input: in.Input, Suggestions: in.Suggestions, Mode: in.Mode,
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

// RunPermissionHook is the PermissionRequest hook's main: `hook permission
// SOCKET`, Claude Code's request on stdin. It passes the request to the
// session listening on SOCKET, waits for the decision and prints it as the
// hook's output. It returns the exit code: 0 with a decision; 1 without
// one (no server, the connection ended), which Claude Code takes as a
// failed hook and shows its own dialog; 2 for a bad command line.
func RunPermissionHook(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 2 || args[0] != "permission" {
		fmt.Fprintln(stderr, "usage: hook permission SOCKET")
		return 2
	}
	in, err := io.ReadAll(io.LimitReader(stdin, maxHookInput+1))
	if err != nil || len(in) > maxHookInput {
		fmt.Fprintln(stderr, "hook: request unreadable or too large")
		return 1
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, in); err != nil {
		fmt.Fprintf(stderr, "hook: request is not JSON: %v\n", err)
		return 1
	}
	c, err := net.Dial("unix", args[1])
	if err != nil {
		fmt.Fprintf(stderr, "hook: office server: %v\n", err)
		return 1
	}
	defer c.Close()
	compact.WriteByte('\n')
	if _, err := c.Write(compact.Bytes()); err != nil {
		fmt.Fprintf(stderr, "hook: office server: %v\n", err)
		return 1
	}
	reply, err := bufio.NewReader(io.LimitReader(c, 1<<20)).ReadBytes('\n')
	if err != nil {
		fmt.Fprintln(stderr, "hook: the office server ended the request without a decision")
		return 1
	}
	var d hookDecision
	if err := json.Unmarshal(reply, &d); err != nil || (d.Behavior != "allow" && d.Behavior != "deny") {
		fmt.Fprintf(stderr, "hook: bad decision %q\n", strings.TrimSpace(string(reply)))
		return 1
	}
	out, err := json.Marshal(map[string]any{"hookSpecificOutput": map[string]any{
		"hookEventName": "PermissionRequest",
		"decision":      d,
	}})
	if err != nil {
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", out)
	return 0
}
