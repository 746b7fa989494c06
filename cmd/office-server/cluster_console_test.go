package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/cluster"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/server"
)

// TestConsoleOnEveryNode runs two built servers on one PostgreSQL and an
// office of one `kind: command` agent. The node that does not run the
// office lists it and its agent (naming the owner), and passes the agent's
// terminal and session actions to the owner after the console's own
// checks: no token → 401, an Origin not allowed → 403 (the owner would
// not see that Origin: the hop replaces it); with both right, the terminal is the owner's agent and a
// restart asked on this node restarts it on the owner.
func TestConsoleOnEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	url := testenv.NewDatabase(t)
	bin := buildServer(t)
	const token = "console-token-0123456789abcdef"
	env := []string{"DATABASE_URL=" + url, "OFFICE_ADMIN_TOKEN=" + token}
	var nodes []*serverProc
	for range 2 {
		n := launchServer(t, bin, append(env, "HOME="+t.TempDir()), "--data-dir", t.TempDir())
		n.waitHealthy(t)
		waitUntil(t, 10*time.Second, "the node up", func() bool { return strings.Contains(n.stderr.String(), "cluster node up") })
		nodes = append(nodes, n)
	}
	defer func() {
		if t.Failed() {
			for i, n := range nodes {
				t.Logf("node %d log:\n%s", i, n.stderr.String())
			}
		}
	}()
	api := func(n *serverProc, method, path, tok string, body, v any) int {
		t.Helper()
		return nodeAPI(t, n, method, path, tok, body, v)
	}

	var o struct{ ID string }
	if st := api(nodes[0], "POST", "/api/offices", token, map[string]any{"name": "console office"}, &o); st >= 300 {
		t.Fatalf("create office: %d", st)
	}
	typed := filepath.Join(t.TempDir(), "typed")
	agent := `echo 'c>'; while IFS= read -r l; do printf '%s\n' "$l" >> "$0"; echo 'c>'; done`
	if st := api(nodes[0], "POST", "/api/offices/"+o.ID+"/agents", token, map[string]any{"name": "c", "role": "Command agent",
		"launch": map[string]any{"kind": "command", "command": "/bin/sh", "args": []string{"-c", agent, typed}, "prompt_pattern": "^c>$"}}, nil); st >= 300 {
		t.Fatalf("create agent: %d", st)
	}
	db, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	owner, other := leaseOwner(t, db, o.ID, nodes)
	if st := api(other, "POST", "/api/offices/"+o.ID+"/agents/c/start", token, nil, nil); st >= 300 {
		t.Fatalf("start through the other node: %d", st)
	}
	pid := func() int {
		var p int32
		_ = db.QueryRow(context.Background(), `select coalesce(pid, 0) from agent_sessions where office_id = $1 and status = 'ready'`, o.ID).Scan(&p)
		return int(p)
	}
	waitUntil(t, 20*time.Second, "the agent ready on the owner", func() bool { p := pid(); return p != 0 && parentPID(p) == owner.cmd.Process.Pid })

	otherLists(t, owner, other, o.ID, token)
	otherRefuses(t, other, o.ID, token)
	conn := typeThroughOther(t, other, o.ID, token, typed)
	defer conn.Close() // open while the agent restarts

	before := pid()
	if st := api(other, "POST", "/api/offices/"+o.ID+"/agents/c/restart", token, nil, nil); st >= 300 {
		t.Fatalf("restart through the other node: %d", st)
	}
	waitUntil(t, 20*time.Second, "the agent restarted on the owner", func() bool {
		p := pid()
		return p != 0 && p != before && parentPID(p) == owner.cmd.Process.Pid
	})
	for _, n := range nodes {
		n.stop(t)
	}
}

// nodeAPI calls n's API with tok (none when empty), body as JSON, and
// decodes a 2xx answer into v; it returns the status.
func nodeAPI(t *testing.T, n *serverProc, method, path, tok string, body, v any) int {
	t.Helper()
	return apiClient{t: t, base: n.base, token: tok}.do(method, path, body, v)
}

// leaseOwner waits until one of two nodes holds the office's lease and
// returns it and the other.
func leaseOwner(t *testing.T, db *pgx.Conn, officeID string, nodes []*serverProc) (owner, other *serverProc) {
	waitUntil(t, 3*cluster.DefaultRenew+5*time.Second, "the office leased", func() bool {
		var addr string
		if db.QueryRow(context.Background(), `select n.addr from office_cluster.leases l join office_cluster.nodes n using (node_id)
			where l.office_id = $1 and l.expires_at > now()`, officeID).Scan(&addr) != nil {
			return false
		}
		for i, n := range nodes {
			if n.base == "http://"+addr {
				owner, other = n, nodes[1-i]
			}
		}
		return owner != nil
	})
	return owner, other
}

// otherLists: the other node lists the office and its agent, naming the
// owner.
func otherLists(t *testing.T, owner, other *serverProc, officeID, token string) {
	var offices []struct{ ID string }
	nodeAPI(t, other, "GET", "/api/offices", token, nil, &offices)
	if len(offices) != 1 || offices[0].ID != officeID {
		t.Errorf("offices listed by the node that does not run them: %+v", offices)
	}
	var agents []struct {
		Name    string `json:"name"`
		Session string `json:"session_status"`
		Node    string `json:"node"`
	}
	nodeAPI(t, other, "GET", "/api/offices/"+officeID+"/agents", token, nil, &agents)
	if len(agents) != 1 || agents[0].Session != "ready" || "http://"+agents[0].Node != owner.base {
		t.Errorf("agents listed by the other node: %+v, want c ready on %s", agents, owner.base)
	}
}

// dialTerminal opens agent c's terminal on n with tok and origin (each
// left out when empty): the connection, or nil and the refusal's status.
func dialTerminal(t *testing.T, n *serverProc, officeID, tok, origin string) (*websocket.Conn, int) {
	ws := "ws" + strings.TrimPrefix(n.base, "http") + "/ws/offices/" + officeID + "/agents/c"
	h := http.Header{}
	if tok != "" {
		h.Set("Authorization", "Bearer "+tok)
	}
	if origin != "" {
		h.Set("Origin", origin)
	}
	c, res, err := websocket.DefaultDialer.Dial(ws, h)
	if err != nil {
		if res == nil {
			t.Fatalf("dial %s: %v", ws, err)
		}
		return nil, res.StatusCode
	}
	return c, http.StatusSwitchingProtocols
}

// otherRefuses: the other node makes the console's own checks before the
// hop: no token → 401, an Origin not allowed → 403.
func otherRefuses(t *testing.T, other *serverProc, officeID, token string) {
	for _, c := range []struct {
		name, tok, origin string
		want              int
	}{
		{"no token", "", other.base, http.StatusUnauthorized},
		{"a wrong token", "not-the-token-0123456789abcdef", other.base, http.StatusUnauthorized},
		{"another site's Origin", token, "https://evil.example", http.StatusForbidden},
	} {
		if conn, st := dialTerminal(t, other, officeID, c.tok, c.origin); st != c.want {
			if conn != nil {
				conn.Close()
			}
			t.Errorf("terminal through the other node with %s: %d, want %d", c.name, st, c.want)
		}
	}
	if st := nodeAPI(t, other, "POST", "/api/offices/"+officeID+"/agents/c/restart", "", nil, nil); st != http.StatusUnauthorized {
		t.Errorf("restart through the other node without a token: %d, want 401", st)
	}
}

// typeThroughOther: the terminal through the other node is the owner's
// agent: its prompt shows, and a line typed there reaches it. It returns
// the open terminal.
func typeThroughOther(t *testing.T, other *serverProc, officeID, token, typed string) *websocket.Conn {
	conn, st := dialTerminal(t, other, officeID, token, other.base)
	if conn == nil {
		t.Fatalf("terminal through the other node: %d", st)
	}
	out := make(chan string, 256)
	go func() {
		defer close(out)
		for {
			_, p, err := conn.ReadMessage()
			if err != nil {
				return
			}
			if len(p) > 0 && p[0] == server.FrameOutput {
				out <- string(p[1:])
			}
		}
	}()
	var screen strings.Builder
	for deadline := time.After(10 * time.Second); !strings.Contains(screen.String(), "c>"); {
		select {
		case s, ok := <-out:
			if !ok {
				t.Fatalf("terminal closed; got %q", screen.String())
			}
			screen.WriteString(s)
		case <-deadline:
			t.Fatalf("no terminal output through the other node; got %q", screen.String())
		}
	}
	for _, f := range [][]byte{{server.FrameTake}, append([]byte{server.FrameInput}, "through-the-other-node\r"...)} {
		if err := conn.WriteMessage(websocket.BinaryMessage, f); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 10*time.Second, "the line typed into the owner's agent", func() bool {
		b, _ := os.ReadFile(typed)
		return strings.Contains(string(b), "through-the-other-node")
	})
	return conn
}
