package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/cluster"
	"github.com/office-server/office-server/internal/anthropictest"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/server"
)

// clusterKills is how many owners TestClusterFailover kills. CI kills two
// (the Claude office's owner, then a command office's); the figures in
// docs/notes/cluster.md come from -cluster.kills=20.
var clusterKills = flag.Int("cluster.kills", 2, "owners TestClusterFailover kills (SIGKILL), one after the other")

// failover is how long after its owner's SIGKILL an office was leased by
// another node, and how long until its agents ran there.
type failover struct{ taken, running time.Duration }

// failoverBound is the stated bound: a node that stops renewing loses its
// offices within lease + renew; the taker's agents start right after.
const failoverBound = cluster.DefaultLease + cluster.DefaultRenew + 2*time.Second

// commandAgent asks a question at start, then appends every line typed
// into it to the file named by its second argument.
const commandAgent = `printf '[ASK_USER]\nquestion: Which colour for %s?\n[/ASK_USER]\n' "$0"; echo 'c>'; while IFS= read -r l; do printf '%s\n' "$l" >> "$1"; echo 'c>'; done`

const clusterToken = "cluster-token-0123456789abcdef"

// clusterRun is three `office-server serve` processes on one PostgreSQL,
// with the offices of TestClusterFailover.
type clusterRun struct {
	t         *testing.T
	bin       string
	env       []string
	db        *pgx.Conn
	nodes     []*serverProc
	model     *anthropictest.Server
	logs      string            // command agents' input logs
	cmdIDs    []string          // command offices
	claude    string            // the Claude office
	claudeCmd string            // the Claude Code executable
	agent     map[string]string // office → its command agent's id
}

// TestClusterFailover runs three built servers on one PostgreSQL with
// three offices of a `kind: command` agent and one of two real Claude Code
// agents (scripted model). The console on one node controls an agent run
// by another. Owners are killed (SIGKILL) one after the other: their
// offices run again on another node within lease + renew; answers given
// during the failover are delivered once; the Claude agent's next request
// carries its earlier conversation (resumed on the new node from the
// transcript kept in the database). Last, an owner is paused (SIGSTOP) past
// its lease and woken (SIGCONT): its offices moved, and it neither types
// into its agents nor writes their rows; it stops them.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	c := newClusterRun(t)
	c.createOffices()
	c.consoleOnAnotherNode()

	var took []failover
	for i := range *clusterKills {
		c.settle()
		took = append(took, c.killOwner(i == 0)...)
		c.launchNode() // back to three
	}
	var taken, running []time.Duration
	for _, f := range took {
		taken, running = append(taken, f.taken), append(running, f.running)
	}
	t.Logf("failover over %d offices in %d kills: leased by another node in %s (bound %v); agents running in %s",
		len(took), *clusterKills, spread(taken), failoverBound, spread(running))
	c.settle()
	c.pausedOwner()
	c.drain()
	for _, n := range c.nodes {
		if n.cmd.ProcessState == nil {
			n.stop(t)
		}
	}
}

func newClusterRun(t *testing.T) *clusterRun {
	url := testenv.NewDatabase(t)
	claude := testenv.ClaudeBin(t)
	model := anthropictest.New(t)
	model.Reply(officeModel)
	ctx := context.Background()
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	c := &clusterRun{
		t: t, bin: buildServer(t), db: db, model: model, logs: t.TempDir(), agent: map[string]string{},
		env: []string{"DATABASE_URL=" + url, "OFFICE_ADMIN_TOKEN=" + clusterToken, "LANG=C.UTF-8",
			"ANTHROPIC_BASE_URL=" + model.URL, "ANTHROPIC_API_KEY=" + model.Key, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1"},
	}
	c.claudeCmd = claude
	for range 3 {
		c.launchNode()
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, n := range c.nodes {
				t.Logf("node %d (%s) log:\n%s", i, n.base, n.stderr.String())
			}
		}
	})
	return c
}

// launchNode starts one more node, with a HOME and data directory of its
// own (another machine, as far as it knows).
func (c *clusterRun) launchNode() *serverProc {
	t := c.t
	env := append(slices.Clone(c.env), "HOME="+t.TempDir())
	args := []string{"--data-dir", t.TempDir()}
	if *clusterKills > 2 {
		args = append(args, "--log-level", "debug") // the placement decisions, for a long run's outliers
	}
	n := launchServer(t, c.bin, env, args...)
	n.waitHealthy(t)
	waitUntil(t, 10*time.Second, "the node up", func() bool { return strings.Contains(n.stderr.String(), "cluster node up") })
	c.nodes = append(c.nodes, n)
	return n
}

// live returns the nodes still running, not paused.
func (c *clusterRun) live() []*serverProc {
	var out []*serverProc
	for _, n := range c.nodes {
		select {
		case <-n.exited:
		default:
			out = append(out, n)
		}
	}
	return out
}

func (c *clusterRun) api(n *serverProc, method, path string, body, v any) int {
	c.t.Helper()
	res, b, err := apiClient{t: c.t, base: n.base, token: clusterToken}.send(method, path, body, v)
	if err != nil {
		c.t.Fatalf("%s %s%s: %v", method, n.base, path, err)
	}
	if res.StatusCode >= 300 {
		c.t.Logf("%s %s%s = %d: %s", method, n.base, path, res.StatusCode, b)
	}
	return res.StatusCode
}

// settle waits until every live node runs an office and the placement
// stayed the same for two renewal periods (a new node takes its share
// from the others first).
func (c *clusterRun) settle() {
	all := append(slices.Clone(c.cmdIDs), c.claude)
	placement := func() string {
		var b strings.Builder
		seen := map[*serverProc]bool{}
		for _, id := range all {
			o := c.owner(id)
			if o == nil {
				return ""
			}
			seen[o] = true
			b.WriteString(o.base + " ")
		}
		if len(seen) < len(c.live()) {
			return ""
		}
		return b.String()
	}
	last, since := "", time.Now()
	waitUntil(c.t, 60*time.Second, "a settled placement", func() bool {
		p := placement()
		if p == "" || p != last {
			last, since = p, time.Now()
			return false
		}
		return time.Since(since) > 2*cluster.DefaultRenew
	})
}

// owner returns the node holding officeID's lease now, nil if none.
func (c *clusterRun) owner(officeID string) *serverProc {
	var addr string
	err := c.db.QueryRow(context.Background(), `
		select n.addr from office_cluster.leases l join office_cluster.nodes n on n.node_id = l.node_id
		where l.office_id = $1 and l.expires_at > now()`, officeID).Scan(&addr)
	if err != nil {
		return nil
	}
	for _, n := range c.nodes {
		if n.base == "http://"+addr {
			return n
		}
	}
	return nil
}

// createOffices makes the offices through the first node's API and starts
// their agents (through whichever node the API call reaches: the owner
// runs them).
func (c *clusterRun) createOffices() {
	t, a := c.t, c.nodes[0]
	work := t.TempDir() // the agents' folders: one volume all nodes see
	mk := func(name string) string {
		var o struct{ ID string }
		if st := c.api(a, "POST", "/api/offices", map[string]any{"name": name}, &o); st >= 300 {
			t.Fatalf("create office %s: %d", name, st)
		}
		return o.ID
	}
	addAgent := func(officeID string, body map[string]any) string {
		var ag struct{ ID string }
		if st := c.api(a, "POST", "/api/offices/"+officeID+"/agents", body, &ag); st >= 300 {
			t.Fatalf("create agent: %d", st)
		}
		return ag.ID
	}
	for i := range 3 {
		id := mk(fmt.Sprintf("command office %d", i))
		c.cmdIDs = append(c.cmdIDs, id)
		c.agent[id] = addAgent(id, map[string]any{"name": "c", "role": "Command agent", "allowed_actions": []string{"ask_user"},
			"launch": map[string]any{"kind": "command", "command": "/bin/sh", "args": []string{"-c", commandAgent, id, filepath.Join(c.logs, id)}, "prompt_pattern": "^c>$"}})
	}
	c.claude = mk("claude office")
	claude := c.claudeCmd
	addAgent(c.claude, map[string]any{"name": "po", "role": "Product owner", "allowed_actions": []string{"ask_user", "invoke"},
		"launch": map[string]any{"kind": "claude", "command": claude, "dir": filepath.Join(work, "po")}})
	addAgent(c.claude, map[string]any{"name": "dev", "role": "Developer", "allowed_actions": []string{"deliver_result", "ask_user"},
		"launch": map[string]any{"kind": "claude", "command": claude, "dir": filepath.Join(work, "dev")}})
	all := append(slices.Clone(c.cmdIDs), c.claude)
	waitUntil(t, 3*cluster.DefaultRenew+5*time.Second, "every office placed", func() bool {
		for _, id := range all {
			if c.owner(id) == nil {
				return false
			}
		}
		return true
	})
	for _, id := range c.cmdIDs {
		c.api(a, "POST", "/api/offices/"+id+"/agents/c/start", nil, nil)
	}
	c.api(a, "POST", "/api/offices/"+c.claude+"/agents/po/start", nil, nil)
	c.api(a, "POST", "/api/offices/"+c.claude+"/agents/dev/start", nil, nil)
	for _, id := range c.cmdIDs {
		waitUntil(t, 30*time.Second, "the command agent's question", func() bool { return len(c.pending(id)) == 1 })
	}
	waitUntil(t, 90*time.Second, "both Claude agents ready", func() bool { return c.sessionsReady(c.claude) == 2 })
	placed := map[string]int{}
	for _, id := range all {
		placed[c.owner(id).base]++
	}
	t.Logf("offices per node: %v", placed)
	// po asks a person, on the node that runs it.
	var po struct{ ID string }
	c.api(a, "POST", "/api/offices/"+c.claude+"/messages", map[string]any{"agent": "po", "content": "We need a login page."}, &po)
	waitUntil(t, 60*time.Second, "po's question", func() bool { return len(c.pending(c.claude)) == 1 })
}

func (c *clusterRun) pending(officeID string) []string {
	rows, err := c.db.Query(context.Background(), `select id::text from user_questions where office_id = $1 and status = 'pending' order by created_at`, officeID)
	if err != nil {
		c.t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		c.t.Fatal(err)
	}
	return ids
}

func (c *clusterRun) sessionsReady(officeID string) int {
	var n int
	if err := c.db.QueryRow(context.Background(), `select count(*) from agent_sessions where office_id = $1 and status = 'ready'`, officeID).Scan(&n); err != nil {
		c.t.Fatal(err)
	}
	return n
}

// runningUnder reports whether every session of officeID is a process of
// node n.
func (c *clusterRun) runningUnder(officeID string, n *serverProc) bool {
	rows, err := c.db.Query(context.Background(), `select pid from agent_sessions where office_id = $1`, officeID)
	if err != nil {
		c.t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		c.t.Fatal(err)
	}
	for _, p := range pids {
		if p == 0 || parentPID(int(p)) != n.cmd.Process.Pid {
			return false
		}
	}
	return len(pids) > 0
}

// token returns the fencing token of officeID's lease.
func (c *clusterRun) token(officeID string) int64 {
	var tok int64
	if err := c.db.QueryRow(context.Background(), `select token from office_cluster.leases where office_id = $1`, officeID).Scan(&tok); err != nil {
		c.t.Fatal(err)
	}
	return tok
}

// typed counts the lines holding s that officeID's command agent got.
func (c *clusterRun) typed(officeID, s string) int {
	b, _ := os.ReadFile(filepath.Join(c.logs, officeID))
	return strings.Count(string(b), s)
}

// consoleOnAnotherNode opens the terminal of a command agent through a
// node that does not run its office, takes control and types: the line
// reaches the agent on its owner.
func (c *clusterRun) consoleOnAnotherNode() {
	t := c.t
	var via *serverProc
	var officeID string
	for _, id := range c.cmdIDs {
		for _, n := range c.nodes {
			if n != c.owner(id) {
				via, officeID = n, id
			}
		}
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+clusterToken)
	h.Set("Origin", via.base)
	ws, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(via.base, "http")+"/ws/offices/"+officeID+"/agents/c", h)
	if err != nil {
		t.Fatalf("console on %s for an agent of %s: %v (%v)", via.base, c.owner(officeID).base, err, res)
	}
	defer ws.Close()
	out := make(chan string, 256)
	go func() {
		for {
			_, p, err := ws.ReadMessage()
			if err != nil {
				close(out)
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
		case s := <-out:
			screen.WriteString(s)
		case <-deadline:
			t.Fatalf("no terminal output through the other node; got %q", screen.String())
		}
	}
	line := "typed-on-another-node"
	for _, f := range [][]byte{{server.FrameTake}, append([]byte{server.FrameInput}, line+"\r"...)} {
		if err := ws.WriteMessage(websocket.BinaryMessage, f); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 10*time.Second, "the line typed through the other node", func() bool { return c.typed(officeID, line) == 1 })
	t.Logf("console on %s controls the agent of %s, run by %s", via.base, officeID, c.owner(officeID).base)
}

// killOwner kills (SIGKILL) the owner of the Claude office (withClaude)
// or of a random command office, answers the pending questions of its
// offices while they move, and checks they run again elsewhere in time,
// each answer typed once. It returns each office's failover times.
func (c *clusterRun) killOwner(withClaude bool) []failover {
	t := c.t
	target := c.cmdIDs[rand.N(len(c.cmdIDs))]
	if withClaude {
		target = c.claude
	}
	victim := c.owner(target)
	var moved []string
	for _, id := range append(slices.Clone(c.cmdIDs), c.claude) {
		if c.owner(id) == victim {
			moved = append(moved, id)
		}
	}
	if withClaude {
		time.Sleep(2 * cluster.TranscriptPoll) // po's last lines reach the database
	}
	before := len(c.model.MainRequests())
	time.Sleep(rand.N(cluster.DefaultRenew)) // a random point of the others' renewal cycle
	killed := time.Now()
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-victim.exited
	answers := c.answerWhileMoving(moved)
	var took []failover
	pendingIDs := slices.Clone(moved)
	taken := map[string]time.Duration{}
	waitUntil(t, 2*failoverBound, "the offices leased by another node", func() bool {
		for _, id := range pendingIDs {
			if _, ok := taken[id]; !ok {
				if o := c.owner(id); o != nil && o != victim {
					taken[id] = time.Since(killed)
				}
			}
		}
		return len(taken) == len(pendingIDs)
	})
	for _, id := range moved {
		var by *serverProc
		waitUntil(t, 2*failoverBound, "the office's agents on another node", func() bool {
			by = c.owner(id)
			return by != nil && by != victim && c.runningUnder(id, by)
		})
		f := failover{taken: taken[id], running: time.Since(killed)}
		took = append(took, f)
		t.Logf("office %s: leased by %s %v after its owner's SIGKILL, its agents running %v after", id, by.base, f.taken.Round(time.Millisecond), f.running.Round(time.Millisecond))
		if f.taken > failoverBound {
			t.Errorf("office %s was taken %v after the kill, want within %v", id, f.taken, failoverBound)
		}
	}
	for id, all := range answers {
		if id == c.claude {
			c.checkResumed(before)
			continue
		}
		for _, ans := range all {
			waitUntil(t, 20*time.Second, "the answer typed", func() bool { return c.typed(id, ans) >= 1 })
		}
	}
	time.Sleep(cluster.DefaultRenew)
	for id, all := range answers {
		if id == c.claude {
			c.checkAnsweredOnce()
			continue
		}
		for _, ans := range all {
			if n := c.typed(id, ans); n != 1 {
				t.Errorf("office %s: an answer given during the failover was typed %d times", id, n)
			}
		}
	}
	return took
}

// answerWhileMoving answers the pending questions of the offices moved,
// on a live node, while nobody runs them; it returns the answers by
// office.
func (c *clusterRun) answerWhileMoving(moved []string) map[string][]string {
	t := c.t
	answers := map[string][]string{}
	survivor := c.live()[0]
	for _, id := range moved {
		for _, q := range c.pending(id) {
			ans := fmt.Sprintf("answer-%d", rand.Int64())
			if id == c.claude {
				ans = "SSO"
			}
			if st := c.api(survivor, "POST", "/api/questions/"+q+"/answer", map[string]any{"response": ans}, nil); st != 200 {
				t.Fatalf("answer during failover: %d", st)
			}
			answers[id] = append(answers[id], ans)
		}
	}
	return answers
}

// checkResumed waits for po's request with the answer and checks that it
// carries the conversation from before the kill.
func (c *clusterRun) checkResumed(before int) {
	t := c.t
	var req anthropictest.Request
	waitUntil(t, 90*time.Second, "po's request with the answer", func() bool {
		for _, r := range c.model.MainRequests()[before:] {
			if strings.Contains(r.System, "You are po") && strings.Contains(r.LastUserText(), "SSO") {
				req = r
				return true
			}
		}
		return false
	})
	var history strings.Builder
	for _, m := range req.Messages {
		history.WriteString(m.Text())
	}
	for _, want := range []string{"We need a login page.", "Which login method?"} {
		if !strings.Contains(history.String(), want) {
			t.Errorf("po's first request on the new node does not carry %q: the conversation was restarted, not resumed; messages: %d", want, len(req.Messages))
		}
	}
	t.Logf("po resumed on the new node: its request carries %d messages of the conversation", len(req.Messages))
}

// checkAnsweredOnce checks that po's conversation, as it last sent it to
// the model, holds the answer given during the failover once.
func (c *clusterRun) checkAnsweredOnce() {
	if n := strings.Count(c.poTold(), "[OFFICE] Answer to question"); n != 1 {
		c.t.Errorf("po's conversation holds the answer given during the failover %d times, want once", n)
	}
}

// poTold returns what po's conversation holds from the office (its user
// messages), as po last sent it to the model.
func (c *clusterRun) poTold() string {
	var last anthropictest.Request
	for _, r := range c.model.MainRequests() {
		if strings.Contains(r.System, "You are po") {
			last = r
		}
	}
	var said strings.Builder
	for _, m := range last.Messages {
		if m.Role == "user" {
			said.WriteString(m.Text())
		}
	}
	return said.String()
}

// pausedOwner stops (SIGSTOP) the owner of a command office past its
// lease, answers the office's question meanwhile, and wakes it (SIGCONT)
// once another node runs the office: the answer is typed once (by the new
// owner), and the woken node stops its agents without writing their rows.
func (c *clusterRun) pausedOwner() {
	t := c.t
	id := c.cmdIDs[0]
	victim := c.owner(id)
	if victim == nil {
		t.Fatal("no owner for the command office")
	}
	var oldPID int32
	if err := c.db.QueryRow(context.Background(), `select pid from agent_sessions where office_id = $1`, id).Scan(&oldPID); err != nil {
		t.Fatal(err)
	}
	// (A restarted agent asks again: there may be several; any will do.)
	waitUntil(t, 20*time.Second, "the office's question", func() bool { return len(c.pending(id)) >= 1 })
	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	ans := fmt.Sprintf("answer-while-paused-%d", rand.Int64())
	var other *serverProc
	for _, n := range c.live() {
		if n != victim {
			other = n
		}
	}
	if st := c.api(other, "POST", "/api/questions/"+c.pending(id)[0]+"/answer", map[string]any{"response": ans}, nil); st != http.StatusOK {
		t.Fatalf("answer: %d", st)
	}
	var by *serverProc
	waitUntil(t, 2*failoverBound, "the paused owner's office on another node", func() bool {
		by = c.owner(id)
		return by != nil && by != victim && c.runningUnder(id, by)
	})
	t.Logf("paused owner: office running on %s %v after SIGSTOP", by.base, time.Since(stopped).Round(time.Millisecond))
	waitUntil(t, 20*time.Second, "the answer typed by the new owner", func() bool { return c.typed(id, ans) == 1 })
	token := c.token(id)
	if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	woke := time.Now()
	waitUntil(t, 10*time.Second, "the woken node to stop its old agent", func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", oldPID))
		return err != nil || parentPID(int(oldPID)) != victim.cmd.Process.Pid
	})
	t.Logf("woken owner stopped its old agent %v after SIGCONT", time.Since(woke).Round(time.Millisecond))
	time.Sleep(2 * cluster.DefaultRenew)
	if n := c.typed(id, ans); n != 1 {
		t.Errorf("the answer was typed %d times, want once (by the new owner only)", n)
	}
	// The woken node is a healthy node again and may be given the office
	// back (a new lease, a new token); until then the row is the new
	// owner's.
	if c.token(id) == token && !c.runningUnder(id, by) {
		t.Errorf("the woken node wrote the office's session row")
	}
	logs := victim.stderr.String()
	if !strings.Contains(logs, "leases ran out") && !strings.Contains(logs, "office lost") {
		t.Errorf("the woken node did not say it lost its offices")
	}
}

// drain asks the owner of the Claude office, through the API, to hand its
// offices over: they run on the other nodes within a renewal period or
// two, not after a lease. A message sent to po just before is one turn,
// taken once, whichever node types it.
func (c *clusterRun) drain() {
	t := c.t
	c.settle()
	n := c.owner(c.claude)
	var mine []string
	for _, id := range append(slices.Clone(c.cmdIDs), c.claude) {
		if c.owner(id) == n {
			mine = append(mine, id)
		}
	}
	var other *serverProc
	for _, o := range c.live() {
		if o != n {
			other = o
		}
	}
	const msg = "Drain check: add a logout button."
	if st := c.api(other, "POST", "/api/offices/"+c.claude+"/messages", map[string]any{"agent": "po", "content": msg}, nil); st >= 300 {
		t.Fatalf("message before the drain: %d", st)
	}
	began := time.Now()
	if st := c.api(n, "POST", "/api/node/drain", nil, nil); st != http.StatusAccepted {
		t.Fatalf("drain = %d", st)
	}
	for _, id := range mine {
		waitUntil(t, 3*cluster.DefaultRenew+5*time.Second, "the drained node's office elsewhere", func() bool {
			o := c.owner(id)
			return o != nil && o != n && c.runningUnder(id, o)
		})
	}
	t.Logf("drain: %d offices running on other nodes %v after the call", len(mine), time.Since(began).Round(time.Millisecond))
	// po's turn on the message: its question, asked once.
	waitUntil(t, 90*time.Second, "po's question on the message sent before the drain", func() bool { return len(c.pending(c.claude)) >= 1 })
	time.Sleep(cluster.DefaultRenew)
	if q := c.pending(c.claude); len(q) != 1 {
		t.Errorf("po asked %d questions on one message sent before the drain, want 1", len(q))
	}
	if k := strings.Count(c.poTold(), msg); k != 1 {
		t.Errorf("po's conversation holds the message sent before the drain %d times, want once", k)
	}
}

// spread describes durations: min, median, 90th percentile, max.
func spread(ds []time.Duration) string {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
	// Nearest rank: the smallest sample with at least p of them at or below it.
	rank := func(p float64) time.Duration { return r(ds[int(math.Ceil(p*float64(len(ds))))-1]) }
	return fmt.Sprintf("min %v, median %v, p90 %v, max %v", r(ds[0]), rank(0.5), rank(0.9), r(ds[len(ds)-1]))
}
