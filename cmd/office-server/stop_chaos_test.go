package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/anthropictest"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/store/sqlite"
)

// TestStopChaos stops the built server at random instants while a real
// Claude Code agent ("lead", against the scripted Messages API) and two
// command agents ("worker" and "clerk", shell loops that log every line
// they read) pass every kind of text the office types through chains: a
// person's message, the answer to the question it raises, a task, its
// result, the value of a dependency the result asks for; and notices: the
// worker's proxy request told to lead (its proxy), lead's update told to
// the worker, the [PROXY_RESPONSE] each gets, and the notice that a
// permission request of lead's was interrupted by a stop (a person denies
// lead's Bash call after 6 s; with OFFICE_CHAOS_PERMISSIONS=1). In odd
// chains the worker gives lead a task, in even ones lead gives the clerk
// one: lead giving the worker one would often be refused as a cycle (the
// worker waiting on lead's result), and a command agent would seldom get
// a task. Each run starts the server (the same data directory and HOME),
// starts a chain for lead and for the worker, waits a random time and
// then sends SIGTERM or SIGKILL to the server, or first kills one agent's
// own process. After the last stop a final run lets everything settle.
// Then every row the office created to type (messages, answered
// questions, tasks, results, provided dependencies) is matched with what
// arrived, and so is every stored notice carrying a chain's token
// (office_notices, read from the server's SQLite file): the scripted
// model's requests for lead (its conversation's user messages) and the
// command agents' logs. Each text must have arrived exactly once for lead;
// for a command agent (a program with no record of what it read) at least
// once, and once more only for each time the office says it typed the row
// again after an unconfirmed typing (delivery.typing_again): a task whose
// agent is stopped twice before it delivers is typed to three processes.
//
// OFFICE_CHAOS_STOPS sets the number of stops (default 4: the CI run);
// docs/guarantees.md gives the long run's command.
func TestStopChaos(t *testing.T) {
	stops := 4
	if s := os.Getenv("OFFICE_CHAOS_STOPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("OFFICE_CHAOS_STOPS=%q: want a positive number", s)
		}
		stops = n
	}
	stopChaos(t, stops, os.Getenv("OFFICE_CHAOS_PERMISSIONS") != "")
}

// TestStopChaosPermissions is TestStopChaos's short run with lead's
// permission requests (OFFICE_CHAOS_PERMISSIONS=1): 3 stops, for CI; the
// long run is TestStopChaos with that variable.
func TestStopChaosPermissions(t *testing.T) { stopChaos(t, 3, true) }

// stopChaos runs TestStopChaos: stops stops, lead asking for its Bash
// calls when perms.
func stopChaos(t *testing.T, stops int, perms bool) {
	claude := testenv.ClaudeBin(t)
	bin := buildServer(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("OFFICE_CHAOS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (OFFICE_CHAOS_SEED), %d stops", seed, stops)
	c := newChaos(t, bin, claude, rand.New(rand.NewPCG(seed, seed)), perms)
	kinds := map[string]int{}
	for i := 1; i <= stops; i++ {
		how := c.run(i)
		kinds[how]++
	}
	rows, again := c.settle()
	t.Logf("stops by kind: %v", kinds)
	c.mu.Lock()
	found := 0
	for _, l := range c.logs {
		found += strings.Count(l, "not typed again: the agent's record has it")
	}
	c.mu.Unlock()
	t.Logf("rows typed again after an unconfirmed typing: %d; of these, found in the agent's record and not typed: %d", len(again), found)
	c.check(rows, again)
}

type chaos struct {
	t                 *testing.T
	bin               string
	rnd               *rand.Rand
	model             *anthropictest.Server
	home, data        string
	workLog, clerkLog string // what each command agent read
	officeFile        string
	env               []string
	p                 *serverProc
	officeID          string
	chains            int
	mu                sync.Mutex
	logs              []string       // server logs of earlier runs, for a failure
	events            []string       // the office's events at the end, for a failure
	messages          []row          // the people's messages posted
	evAfter           int64          // the last event read
	again             map[string]int // row → its typings again (delivery.typing_again)
	delivered         map[string]bool
	typings           int               // delivery.typing events read
	reqChain          map[string]string // proxy request id → its chain (the n of its PRQ token)
	permTyped         map[string]bool   // permission questions whose answer was typed (no hook waited)
	settling          atomic.Bool       // the last run: permission requests denied at once
}

const chaosToken = "chaos-token-0123456789abcdef"

// chaosTok finds a chain's tokens: a dependency's value is in lower
// case (a package name), the rest in upper case.
//
// Notices: PRQ is the proxy request told to lead (the proxy of the
// worker's create_plan), UPD lead's update of that task told to the
// worker; RSP is a [PROXY_RESPONSE] (no token in its text: found by its
// request_id, chaos.reqChain), to the worker for its create_plan, to lead
// for its update.
//
// PRM is a permission request of lead's (a Bash call after its
// dependency's value) in the notice that tells lead the request was
// interrupted by a stop, or in the answer a person gave while no hook
// waited (typed, as a row of its own).
var chaosTok = regexp.MustCompile(`(MSG|ANS|TASK|RES|VAL|val|PRQ|UPD|RSP|PRM)-([LWClwc])-(\d+)`)

// token returns a match of chaosTok in upper case.
func token(m []string) (tok, kind, agent string) {
	return strings.ToUpper(m[0]), strings.ToUpper(m[1]), strings.ToUpper(m[2])
}

func newChaos(t *testing.T, bin, claude string, rnd *rand.Rand, perms bool) *chaos {
	c := &chaos{t: t, bin: bin, rnd: rnd, model: anthropictest.New(t), home: t.TempDir(), data: t.TempDir()}
	dir := t.TempDir()
	c.workLog, c.clerkLog = filepath.Join(dir, "worker.log"), filepath.Join(dir, "clerk.log")
	c.officeFile = filepath.Join(dir, "office.yaml")
	// perms: lead asks for its Bash calls (PRM).
	mode := ""
	if perms {
		mode = ", permission_mode: default"
	}
	yaml := fmt.Sprintf(`office:
  name: Chaos office
agents:
  - name: lead
    capabilities: [todowrite, todoread]
    max_load: 100
    launch: {kind: claude, command: %q, dir: %q%s}
  - name: worker
    launch: {kind: command, command: /bin/sh, args: [-c, %q], prompt_pattern: "^w>$"}
  - name: clerk
    launch: {kind: command, command: /bin/sh, args: [-c, %q], prompt_pattern: "^w>$"}
`, claude, filepath.Join(dir, "lead"), mode, chaosWorker(c.workLog, "W"), chaosWorker(c.clerkLog, "C"))
	if err := os.WriteFile(c.officeFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c.env = []string{"HOME=" + c.home, "LANG=C.UTF-8", "OFFICE_ADMIN_TOKEN=" + chaosToken,
		"ANTHROPIC_API_KEY=" + c.model.Key, "ANTHROPIC_BASE_URL=" + c.model.URL, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
	c.model.Reply(leadReply(perms))
	t.Cleanup(c.logOnFailure)
	return c
}

// chaosWorker is the command agent's shell script: it logs each line it
// reads first (to log), then answers by the token in it (the next step of
// its chain), then shows its prompt; shell builtins only, so that it is
// back in its read at once.
func chaosWorker(log, letter string) string {
	return `echo "w>"
while IFS= read -r l; do
  printf '%s\n' "$l" >> ` + log + `
  set --
  for k in MSG ANS TASK RES; do
    case "$l" in *"$k-` + letter + `-"[0-9]*) n=${l##*"$k-` + letter + `-"}; n=${n%%[!0-9]*}; set -- "$k" "$n"; break;; esac
  done
  case "$1" in
  MSG) printf '[ASK_USER]\nquestion: QW-%s which?\n[/ASK_USER]\n' "$2"
       printf '[PROXY_REQUEST]\n{"action": "create_plan", "requester": "worker", "tasks": [{"content": "PRQ-L-%s", "priority": "high"}], "preferences": {"preferred_proxy": "lead"}}\n[/PROXY_REQUEST]\n' "$2";;
  ANS) if [ $(($2 % 2)) = 1 ]; then printf '[INVOKE:lead]\nTASK-L-%s\n[/INVOKE:lead]\n' "$2"
       else printf '[DEPENDENCY_REQUEST]\ntype: package\nname: depw%s\ndescription: a package\nrequired: true\n[/DEPENDENCY_REQUEST]\n' "$2"; fi;;
  TASK) printf '[DELIVER_RESULT:lead]\ntype: message\ncontent: RES-L-%s\n[/DELIVER_RESULT:lead]\n' "$2";;
  RES) printf '[DEPENDENCY_REQUEST]\ntype: package\nname: depw%s\ndescription: a package\nrequired: true\n[/DEPENDENCY_REQUEST]\n' "$2";;
  esac
  echo "w>"
done`
}

// leadReply is lead's model: the next step of the chain for every token
// in the prompt (a prompt may carry two: Claude Code joins a prompt whose
// reply never came with the next). perms: lead also asks to run a Bash
// command (PRM).
func leadReply(perms bool) func(anthropictest.Request) anthropictest.Response {
	return func(r anthropictest.Request) anthropictest.Response {
		var out []string
		var tools []anthropictest.ToolUse
		if strings.Contains(r.LastUserText(), "ended unexpectedly") {
			// Reminded of a task whose reply was cut short: deliver the
			// results the conversation lacks.
			for _, n := range undelivered(r) {
				out = append(out, "[DELIVER_RESULT:worker]\ntype: message\ncontent: RES-W-"+n+"\n[/DELIVER_RESULT:worker]")
			}
		}
		for _, m := range chaosTok.FindAllStringSubmatch(r.LastUserText(), -1) {
			if strings.ToUpper(m[2]) != "L" {
				continue
			}
			n := m[3]
			switch strings.ToUpper(m[1]) {
			case "MSG":
				out = append(out, "[ASK_USER]\nquestion: QL-"+n+" which?\n[/ASK_USER]")
			case "ANS":
				// Odd chains: the worker gives lead a task; even chains:
				// lead gives the worker one (both at once would often be
				// a cycle, which the office refuses).
				if k, _ := strconv.Atoi(n); k%2 == 0 {
					out = append(out, "[INVOKE:clerk]\nTASK-C-"+n+"\n[/INVOKE:clerk]")
				} else {
					out = append(out, "[DEPENDENCY_REQUEST]\ntype: package\nname: depl"+n+"\ndescription: a package\nrequired: true\n[/DEPENDENCY_REQUEST]")
				}
			case "TASK":
				out = append(out, "[DELIVER_RESULT:worker]\ntype: message\ncontent: RES-W-"+n+"\n[/DELIVER_RESULT:worker]")
			case "RES":
				out = append(out, "[DEPENDENCY_REQUEST]\ntype: package\nname: depl"+n+"\ndescription: a package\nrequired: true\n[/DEPENDENCY_REQUEST]")
			case "VAL":
				// A Bash call the office asks a person about (PRM): denied
				// after a while, or interrupted by a stop. Only in a reply
				// with no block of the protocol in it.
				if !perms {
					continue
				}
				tools = append(tools, anthropictest.ToolUse{Name: "Bash", Input: map[string]string{"command": "mkdir -p PRM-L-" + n, "description": "Make a directory"}})
			case "PRQ":
				// The proxy closes the task it was given, noting the
				// chain: the worker is told (UPD), lead answered (RSP).
				for _, t := range chaosProxyTask.FindAllStringSubmatch(r.LastUserText(), -1) {
					if t[2] == n {
						out = append(out, `[PROXY_REQUEST]`+"\n"+`{"action": "update_status", "requester": "lead", "task_id": "`+t[1]+`", "status": "completed", "metadata": {"note": "UPD-W-`+n+`"}}`+"\n[/PROXY_REQUEST]")
					}
				}
			}
		}
		if len(out) > 0 {
			tools = nil // a tool call only in a reply with no block
		}
		if len(out) == 0 && len(tools) == 0 {
			return anthropictest.Response{Text: "OK"}
		}
		text := strings.Join(out, "\n")
		if text == "" {
			text = "Working."
		}
		return anthropictest.Response{Text: text, ToolUses: tools[:min(len(tools), 1)]}
	}
}

// undelivered returns the chains whose task lead was given in r's
// conversation without a result in its replies.
func undelivered(r anthropictest.Request) []string {
	tasks, done := map[string]bool{}, map[string]bool{}
	for _, m := range r.Messages {
		for _, t := range chaosTok.FindAllStringSubmatch(m.Text(), -1) {
			switch {
			case m.Role == "user" && t[1] == "TASK" && t[2] == "L":
				tasks[t[3]] = true
			case m.Role == "assistant" && t[1] == "RES" && t[2] == "W":
				done[t[3]] = true
			}
		}
	}
	var out []string
	for n := range tasks {
		if !done[n] {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// get calls the API; false when the server does not answer (it may be
// stopping).
func (c *chaos) call(method, path, body string, v any) bool {
	req, err := http.NewRequest(method, c.p.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+chaosToken)
	req.Header.Set("Content-Type", "application/json")
	cl := http.Client{Timeout: 5 * time.Second}
	res, err := cl.Do(req)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 {
		return false
	}
	return v == nil || json.NewDecoder(res.Body).Decode(v) == nil
}

// start runs the server and waits until it answers and knows the office.
func (c *chaos) start() {
	c.p = launchServer(c.t, c.bin, c.env, "--office", c.officeFile, "--data-dir", c.data)
	c.p.waitHealthy(c.t)
	deadline := time.Now().Add(30 * time.Second)
	for c.officeID == "" {
		var offs []struct{ ID string }
		if c.call("GET", "/api/offices", "", &offs) && len(offs) == 1 {
			c.officeID = offs[0].ID
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatal("the office never showed")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// person answers every pending question and provides every pending
// dependency, by the token of its chain, until stop is closed.
func (c *chaos) person(stop <-chan struct{}) {
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		c.personOnce()
	}
}

var (
	// chaosProxyTask is a task of a proxy request as lead is told it.
	chaosProxyTask = regexp.MustCompile(`- ([A-Za-z]+-[0-9a-f]{6}) \(priority \w+\): PRQ-L-(\d+)`)
	chaosQ         = regexp.MustCompile(`Q([LW])-(\d+)`)
	chaosDep       = regexp.MustCompile(`^dep([lw])(\d+)$`)
)

func (c *chaos) personOnce() {
	var qs []struct {
		ID, Question, Category string
		CreatedAt              time.Time `json:"created_at"`
	}
	if c.call("GET", "/api/offices/"+c.officeID+"/questions?status=pending&limit=500", "", &qs) {
		for _, q := range qs {
			if q.Category == "permission" {
				// Denied after 6 s: a SIGKILL may fall in the wait (the
				// next server tells lead the request was interrupted);
				// SIGTERM denies it through its hook. The settling run
				// denies at once: the requests piled up by the stops
				// come one after another.
				if c.settling.Load() || time.Since(q.CreatedAt) > 6*time.Second {
					c.call("POST", "/api/questions/"+q.ID+"/answer", `{"response":"deny"}`, nil)
				}
				continue
			}
			if m := chaosQ.FindStringSubmatch(q.Question); m != nil {
				c.call("POST", "/api/questions/"+q.ID+"/answer", fmt.Sprintf(`{"response":"ANS-%s-%s"}`, m[1], m[2]), nil)
			}
		}
	}
	var ds []struct{ ID, Name string }
	if c.call("GET", "/api/offices/"+c.officeID+"/dependencies?status=pending&limit=500", "", &ds) {
		for _, d := range ds {
			if m := chaosDep.FindStringSubmatch(d.Name); m != nil {
				if !c.call("POST", "/api/dependencies/"+d.ID+"/provide", fmt.Sprintf(`{"value":"val-%s-%s"}`, m[1], m[2]), nil) {
					c.t.Logf("provide %s: refused", d.Name)
				}
			}
		}
	}
}

// sessions returns the agents' session rows by name.
func (c *chaos) sessions() map[string]struct {
	Status string
	PID    int
} {
	var ss []struct {
		AgentName string `json:"agent_name"`
		Status    string `json:"status"`
		PID       int    `json:"pid"`
	}
	out := map[string]struct {
		Status string
		PID    int
	}{}
	if c.call("GET", "/api/offices/"+c.officeID+"/sessions", "", &ss) {
		for _, s := range ss {
			out[s.AgentName] = struct {
				Status string
				PID    int
			}{s.Status, s.PID}
		}
	}
	return out
}

// run is one server life: start, a new chain for each agent, a random
// wait, a stop of a random kind. It returns the kind.
func (c *chaos) run(i int) string {
	c.start()
	c.checkRowsSettled(i)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.person(stop) }()
	c.chains++
	n := c.chains
	for _, who := range []string{"lead", "worker"} {
		var m struct{ ID string }
		if !c.call("POST", "/api/offices/"+c.officeID+"/messages", fmt.Sprintf(`{"agent":%q,"content":"MSG-%s-%d please."}`, who, strings.ToUpper(who[:1]), n), &m) || m.ID == "" {
			c.t.Fatalf("run %d: post a message to %s", i, who)
		}
		c.messages = append(c.messages, row{"message:" + m.ID, fmt.Sprintf("MSG-%s-%d", strings.ToUpper(who[:1]), n), false})
	}
	// From the start, or from both agents ready (most texts are typed
	// then): a random instant in the next few seconds.
	if c.rnd.IntN(3) > 0 {
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			s := c.sessions()
			if live(s["lead"].Status) && live(s["worker"].Status) && live(s["clerk"].Status) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if c.rnd.IntN(2) == 0 {
		// Aim at the instants around a typing: the next row handed to an
		// agent, then up to 1.5 s (typed, acknowledged, marked).
		c.nextTyping(10 * time.Second)
		time.Sleep(time.Duration(c.rnd.IntN(1500)) * time.Millisecond)
	} else {
		time.Sleep(time.Duration(c.rnd.IntN(5000)) * time.Millisecond)
	}
	how := "sigterm"
	switch r := c.rnd.IntN(10); {
	case r < 4:
		how = "sigkill"
	case r < 6:
		who := "lead"
		if r == 5 {
			who = []string{"worker", "clerk"}[c.rnd.IntN(2)]
		}
		if pid := c.sessions()[who].PID; pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGKILL) // the agent's own process (its group)
			how = "kill " + who + ", then sigterm"
		}
		time.Sleep(time.Duration(c.rnd.IntN(4000)) * time.Millisecond)
	}
	if strings.HasPrefix(how, "sigkill") {
		_ = syscall.Kill(-c.p.cmd.Process.Pid, syscall.SIGKILL) // the server (its group: not the agents, in sessions of their own)
		<-c.p.exited
	} else {
		_ = c.p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.p.exited:
		case <-time.After(40 * time.Second):
			c.t.Fatalf("run %d: no exit within 40 s of SIGTERM", i)
		}
	}
	close(stop)
	wg.Wait()
	c.mu.Lock()
	c.logs = append(c.logs, c.p.stderr.String())
	c.mu.Unlock()
	// The agents end with the server (the keeper's watchdog); wait for
	// them so that the next run starts from no process.
	c.waitAgentsGone()
	c.t.Logf("run %d: chain %d, %s", i, n, how)
	return strings.SplitN(how, ",", 2)[0]
}

func live(status string) bool { return status == "ready" || status == "busy" || status == "waiting" }

// waitAgentsGone waits until no process of the worker's script or of
// Claude Code runs with this test's HOME.
func (c *chaos) waitAgentsGone() {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if !procWithEnv("HOME=" + c.home) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("agents still running 15 s after their server ended")
}

// procWithEnv reports whether a process of this user has kv in its
// environment.
func procWithEnv(kv string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, v := range strings.Split(string(b), "\x00") {
			if v == kv {
				if st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); strings.Contains(string(st), ") Z ") {
					break // a zombie: gone, only not yet reaped
				}
				return true
			}
		}
	}
	return false
}

// checkRowsSettled checks, right after a start, that no session row names
// a process that is not running (issue 32: rows true after any stop).
func (c *chaos) checkRowsSettled(i int) {
	for name, s := range c.sessions() {
		if s.PID > 0 && syscall.Kill(s.PID, 0) != nil {
			c.t.Errorf("run %d: %s's session row says %s with pid %d, which is not running", i, name, s.Status, s.PID)
		}
	}
}

// settle is the last run: the server runs until nothing waits to be
// typed and no chain moves any more, then stops with SIGTERM. It returns
// the rows to type and those the office typed again after an unconfirmed
// typing (delivery.typing_again), read before the stop.
func (c *chaos) settle() ([]row, map[string]int) {
	c.settling.Store(true)
	c.start()
	c.checkRowsSettled(0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.person(stop) }()
	quiet, last := time.Now(), ""
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		state := c.pendingState()
		if state != last {
			last, quiet = state, time.Now()
		}
		if strings.HasPrefix(state, "0 ") && time.Since(quiet) > 8*time.Second {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	rows := c.rows()
	c.p.stop(c.t)
	c.mu.Lock()
	c.logs = append(c.logs, c.p.stderr.String())
	c.mu.Unlock()
	if !strings.HasPrefix(last, "0 ") {
		c.t.Errorf("still waiting to be typed after 3 minutes: %s", last)
	}
	return rows, c.again
}

// pendingState is "<rows not yet typed> <rows in all>".
func (c *chaos) pendingState() string {
	r := c.rows()
	var waiting []string
	for _, x := range r {
		if !x.done {
			waiting = append(waiting, x.token+" ("+x.id+")")
		}
	}
	return fmt.Sprintf("%d %d %v", len(waiting), len(r), waiting)
}

// row is one text the office holds to type: its token and whether it is
// marked delivered.
type row struct {
	id, token string
	done      bool
}

func (c *chaos) rows() []row {
	var out []row
	id := "/api/offices/" + c.officeID
	var qs []struct{ ID, Status, Response, Category, Question string }
	c.call("GET", id+"/questions?limit=1000", "", &qs)
	c.readEvents()
	for _, q := range qs {
		if strings.HasPrefix(q.Response, "ANS-") {
			out = append(out, row{"question:" + q.ID, q.Response, q.Status == "delivered"})
		}
		// A permission answer is typed only when no hook waited for it:
		// answered, it waits to be typed or decided; delivered, it was
		// typed if the office says so.
		if tok := chaosTok.FindString(q.Question); q.Category == "permission" && tok != "" &&
			(q.Status == "answered" || q.Status == "delivered" && c.permTyped[q.ID]) {
			out = append(out, row{"question:" + q.ID, tok, q.Status == "delivered"})
		}
	}
	var invs []struct{ ID, Status, Reason string }
	c.call("GET", id+"/invocations?limit=1000", "", &invs)
	for _, v := range invs {
		// A task rejected (a cycle) or failed before it was typed is
		// never typed.
		if tok := chaosTok.FindString(v.Reason); tok != "" && (v.Status == "pending" || v.Status == "in_progress" || v.Status == "completed") {
			out = append(out, row{"task:" + v.ID, tok, v.Status != "pending"})
		}
	}
	var rs []struct{ ID, Status, Content string }
	c.call("GET", id+"/results?limit=1000", "", &rs)
	for _, r := range rs {
		if tok := chaosTok.FindString(r.Content); tok != "" {
			out = append(out, row{"result:" + r.ID, tok, r.Status != "pending"})
		}
	}
	var ds []struct {
		ID, Status, Name string
		DeliveredAt      *time.Time `json:"delivered_at"`
	}
	c.call("GET", id+"/dependencies?limit=1000", "", &ds)
	for _, d := range ds {
		if m := chaosDep.FindStringSubmatch(d.Name); m != nil && d.Status == "provided" {
			out = append(out, row{"dependency:" + d.ID, "VAL-" + strings.ToUpper(m[1]) + "-" + m[2], d.DeliveredAt != nil})
		}
	}
	out = append(out, c.noticeRows()...)
	c.readEvents()
	for _, m := range c.messages {
		m.done = c.delivered[m.id]
		out = append(out, m)
	}
	return out
}

// nextTyping waits, up to d, until the office records the typing of a
// row (delivery.typing) after the events read so far.
func (c *chaos) nextTyping(d time.Duration) {
	c.readEvents()
	n := c.typings
	for deadline := time.Now().Add(d); time.Now().Before(deadline) && c.typings == n; {
		time.Sleep(30 * time.Millisecond)
		c.readEvents()
	}
}

// readEvents reads the office's events since the last read: the rows
// the office typed again after a typing whose acknowledgement it never
// recorded (delivery.typing_again), and the people's messages delivered.
func (c *chaos) readEvents() {
	if c.again == nil {
		c.again, c.delivered, c.permTyped = map[string]int{}, map[string]bool{}, map[string]bool{}
	}
	for {
		var evs []struct {
			ID      int64           `json:"id"`
			Kind    string          `json:"kind"`
			Payload json.RawMessage `json:"payload"`
		}
		if !c.call("GET", fmt.Sprintf("/api/offices/%s/events?limit=500&after_id=%d", c.officeID, c.evAfter), "", &evs) || len(evs) == 0 {
			return
		}
		for _, e := range evs {
			c.evAfter = e.ID
			c.events = append(c.events, e.Kind+" "+string(e.Payload))
			var p struct {
				Row        string `json:"row"`
				MessageID  string `json:"message_id"`
				QuestionID string `json:"question_id"`
				Answer     string `json:"answer"`
			}
			_ = json.Unmarshal(e.Payload, &p)
			switch e.Kind {
			case "delivery.typing_again":
				c.again[p.Row]++
			case "delivery.typing":
				c.typings++
			case "message.delivered":
				c.delivered["message:"+p.MessageID] = true
			case "permission.interrupted":
				if p.Answer != "" { // typed (deliverInterruptedAnswer), not a cancel
					c.permTyped[p.QuestionID] = true
				}
			}
		}
	}
}

// check matches what the office typed with what arrived.
func (c *chaos) check(rows []row, again map[string]int) {
	want := map[string]int{}
	againTok := map[string]int{}
	for _, r := range rows {
		want[r.token]++
		againTok[r.token] += again[r.id]
	}
	got := c.arrived()
	byKind := map[string][3]int{} // texts, arrived once, arrived again after a typing again (command agents)
	var bad []string
	toks := make([]string, 0, len(want))
	for tok := range want {
		toks = append(toks, tok)
	}
	sort.Strings(toks)
	for _, tok := range toks {
		w, g := want[tok], got[tok]
		_, k0, agent := token(chaosTok.FindStringSubmatch(tok))
		kind := k0 + "-" + agent
		k := byKind[kind]
		k[0] += w
		switch {
		case g == w:
			k[1] += w
		case agent != "L" && g > w && g <= w+againTok[tok]:
			k[1] += w - (g - w)
			k[2] += g - w
		default:
			bad = append(bad, fmt.Sprintf("%s: arrived %d times, typed for %d rows (typed again %d times)", tok, g, w, againTok[tok]))
		}
		byKind[kind] = k
	}
	for tok, g := range got {
		if want[tok] == 0 && !strings.HasPrefix(tok, "MSG") {
			bad = append(bad, fmt.Sprintf("%s: arrived %d times, but no row holds it", tok, g))
		}
	}
	c.t.Logf("texts by kind (L: lead, Claude Code; W: worker, C: clerk, command agents) [rows, arrived once, arrived again after an unconfirmed typing]: %v", byKind)
	for _, b := range bad {
		c.t.Error(b)
	}
	if len(bad) > 0 || os.Getenv("OFFICE_CHAOS_EVENTS") != "" {
		c.t.Logf("events:\n%s", strings.Join(c.events, "\n"))
	}
}

// arrived counts, for each token, how many times it reached its agent:
// for lead, in its conversation's user messages (a conversation is
// followed by its first user message; each request carries the whole
// conversation, so its largest count is what the model got); for the
// worker, the lines of its log.
func (c *chaos) arrived() map[string]int {
	got := map[string]int{}
	convs := map[string]map[string]int{}
	for _, r := range c.model.MainRequests() {
		if len(r.Messages) == 0 {
			continue
		}
		// The first prompt without the reminders Claude Code adds to it
		// (they differ after a resume) names the conversation.
		key := anthropictest.Request{Messages: r.Messages[:1]}.LastUserText()
		n := map[string]int{}
		for _, m := range r.Messages {
			if m.Role != "user" {
				continue
			}
			for _, t := range chaosTok.FindAllStringSubmatch(m.Text(), -1) {
				if tok, _, agent := token(t); agent == "L" {
					n[tok]++
				}
			}
			for _, tok := range c.responses(m.Text(), "L") {
				n[tok]++
			}
		}
		if convs[key] == nil {
			convs[key] = map[string]int{}
		}
		for tok, k := range n {
			convs[key][tok] = max(convs[key][tok], k)
		}
	}
	c.t.Logf("lead's model: %d conversation(s)", len(convs))
	for _, conv := range convs {
		for tok, k := range conv {
			got[tok] += k
		}
	}
	for letter, log := range map[string]string{"W": c.workLog, "C": c.clerkLog} {
		b, _ := os.ReadFile(log)
		for _, line := range strings.Split(string(b), "\n") {
			for _, t := range chaosTok.FindAllStringSubmatch(line, -1) {
				if tok, _, agent := token(t); agent == letter {
					got[tok]++
				}
			}
			for _, tok := range c.responses(line, letter) {
				got[tok]++
			}
		}
	}
	return got
}

// chaosRequestID finds a [PROXY_RESPONSE]'s request.
var chaosRequestID = regexp.MustCompile(`"request_id":"([0-9a-f-]{36})"`)

// responses returns the RSP token of each [PROXY_RESPONSE] in text, for
// agent (L or W).
func (c *chaos) responses(text, agent string) []string {
	var out []string
	for _, m := range chaosRequestID.FindAllStringSubmatch(text, -1) {
		if n, ok := c.reqChain[m[1]]; ok {
			out = append(out, "RSP-"+agent+"-"+n)
		}
	}
	return out
}

// noticeRows returns the notices the office stored to type (office_notices,
// the server's own table: read from its SQLite file) that carry a chain's
// token or answer a chain's proxy request, and records the proxy
// requests' chains.
func (c *chaos) noticeRows() []row {
	db, err := sql.Open(sqlite.DriverName, "file:"+filepath.Join(c.data, "office.db")+"?_pragma=busy_timeout(5000)&_pragma=query_only(1)")
	if err != nil {
		c.t.Fatal(err)
	}
	defer db.Close()
	if c.reqChain == nil {
		c.reqChain = map[string]string{}
	}
	reqs, err := db.Query(`select id, payload from proxy_requests`)
	if err != nil {
		c.t.Fatalf("read proxy requests: %v", err)
	}
	for reqs.Next() {
		var id, payload string
		if err := reqs.Scan(&id, &payload); err != nil {
			c.t.Fatal(err)
		}
		if m := chaosTok.FindStringSubmatch(payload); m != nil && m[1] == "PRQ" {
			c.reqChain[id] = m[3]
		}
	}
	reqs.Close()
	rs, err := db.Query(`select n.id, n.text, n.status, a.name from office_notices n join office_agents a on a.id = n.agent_id order by n.rowid`)
	if err != nil {
		c.t.Fatalf("read notices: %v", err)
	}
	defer rs.Close()
	var out []row
	for rs.Next() {
		var id, text, status, name string
		if err := rs.Scan(&id, &text, &status, &name); err != nil {
			c.t.Fatal(err)
		}
		agent := strings.ToUpper(name[:1])
		toks := c.responses(text, agent)
		for _, m := range chaosTok.FindAllStringSubmatch(text, -1) {
			if tok, _, a := token(m); a == agent {
				toks = append(toks, tok)
			}
		}
		for _, tok := range toks {
			out = append(out, row{"notice:" + id, tok, status == "delivered"})
		}
	}
	return out
}

// logOnFailure logs the end of each run's server log (without the HTTP
// request lines) when the test failed.
func (c *chaos) logOnFailure() {
	if !c.t.Failed() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, l := range c.logs {
		var keep []string
		for _, line := range strings.Split(l, "\n") {
			if !strings.Contains(line, "msg=http ") {
				keep = append(keep, line)
			}
		}
		l = strings.Join(keep, "\n")
		if len(l) > 20000 {
			l = l[len(l)-20000:]
		}
		c.t.Logf("server log of run %d (end):\n%s", i+1, l)
	}
}
