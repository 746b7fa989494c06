package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
	"github.com/office-server/office-server/store/postgres"
	"github.com/office-server/office-server/store/sqlite"
)

// The proxy protocol on the real stores (docs/notes/office.md, "The proxy
// protocol"): every test runs on SQLite and on PostgreSQL, with the
// office of docs/protocol.md's capability matrix.

// typedSessions records what the router types into each agent; every
// agent's session runs.
type typedSessions struct {
	mu     sync.Mutex
	sent   map[string][]string // by agent ID
	onSend func(agentID, text string)
	down   atomic.Bool // no session runs: nothing can be typed
}

func (s *typedSessions) Start(context.Context, engine.SessionSpec) error   { return nil }
func (s *typedSessions) Restart(context.Context, engine.SessionSpec) error { return nil }
func (s *typedSessions) Stop(context.Context, string, string) error        { return nil }
func (s *typedSessions) Running(string, string) bool                       { return !s.down.Load() }
func (s *typedSessions) Send(_ context.Context, _, agentID, text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent == nil {
		s.sent = map[string][]string{}
	}
	s.sent[agentID] = append(s.sent[agentID], text)
	if s.onSend != nil {
		s.onSend(agentID, text)
	}
	return nil
}

// all returns what was typed into the agent containing sub.
func (s *typedSessions) all(agentID, sub string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, x := range s.sent[agentID] {
		if strings.Contains(x, sub) {
			out = append(out, x)
		}
	}
	return out
}

// clock is a settable clock shared by the routers of a test.
type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// proxyOffice is an office of docs/protocol.md's matrix on one store.
type proxyOffice struct {
	t       testing.TB
	st      office.Store
	ss      *typedSessions
	r       *engine.Router
	stop    func()
	clk     *clock
	dataDir string
	office  office.Office
	ids     map[string]string
	chunk   atomic.Int64
	sweep   time.Duration // Config.Sweep (0: every Tick)
}

// seed004Agents: pm takes one piece of work at a time.
func seed004Agents() []office.Agent {
	return []office.Agent{
		{Name: "pm", Role: "pm", Capabilities: []string{"todowrite", "todoread", "bash"}, Priority: 1, Expertise: []string{"coding"}, MaxLoad: 1},
		{Name: "general", Role: "general", Capabilities: []string{"todowrite", "todoread", "webfetch"}, Priority: 2, Expertise: []string{"research"}},
		{Name: "planner", Role: "planner", Capabilities: []string{"todowrite", "todoread"}, Priority: 3, Expertise: []string{"planning"}},
		{Name: "senior-sw-engineer", Role: "developer", Capabilities: []string{"bash"}},
		{Name: "py-code-reviewer", Role: "reviewer"},
	}
}

// proxyStores runs f on each real store.
func proxyStores(t *testing.T, f func(t *testing.T, open func(t *testing.T) office.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "office.db")
		f(t, func(t *testing.T) office.Store {
			st, err := sqlite.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			return st
		})
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgDB(t)
		f(t, func(t *testing.T) office.Store {
			st, err := postgres.Open(context.Background(), url, postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return st
		})
	})
}

func newProxyOffice(t testing.TB, st office.Store, agents []office.Agent) *proxyOffice {
	return newProxyOfficeSweeping(t, st, agents, 0)
}

// newProxyOfficeSweeping is newProxyOffice with the router's Config.Sweep.
func newProxyOfficeSweeping(t testing.TB, st office.Store, agents []office.Agent, sweep time.Duration) *proxyOffice {
	p := &proxyOffice{t: t, st: st, ss: &typedSessions{}, clk: &clock{}, dataDir: t.TempDir(), ids: map[string]string{}, sweep: sweep}
	p.start()
	off, as, err := p.r.SyncOffice(context.Background(), engine.OfficeConfig{Office: office.Office{Name: "seed 004"}, Agents: agents})
	if err != nil {
		t.Fatal(err)
	}
	p.office = off
	for _, a := range as {
		p.ids[a.Name] = a.ID
	}
	return p
}

// start runs a router on the office's store (again, after stop: a server
// restart).
func (p *proxyOffice) start() {
	r, err := engine.New(engine.Config{Store: p.st, Sessions: p.ss, Tick: 20 * time.Millisecond, Sweep: p.sweep, DataDir: p.dataDir,
		Now: p.clk.now, ProxyWait: 10 * time.Minute, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		p.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	p.r = r
	p.stop = func() { cancel(); <-done }
	p.t.Cleanup(func() { p.stop() })
}

func (p *proxyOffice) say(name, text string) {
	id := fmt.Sprintf("%s-chunk-%d", name, p.chunk.Add(1))
	p.r.HandleText(session.Text{Key: session.Key{OfficeID: p.office.ID, AgentID: p.ids[name]}, ID: id, Lines: strings.Split(text, "\n"), TurnEnd: true})
}

// request prints a PROXY_REQUEST block with body as the agent name.
func (p *proxyOffice) request(name, body string) {
	p.say(name, "[PROXY_REQUEST]\n"+body+"\n[/PROXY_REQUEST]")
}

type proxyResponse struct {
	Success      bool     `json:"success"`
	Proxy        string   `json:"proxy"`
	Requester    string   `json:"requester"`
	TasksCreated int      `json:"tasks_created"`
	TaskIDs      []string `json:"task_ids"`
	Status       string   `json:"status"`
	RequestID    string   `json:"request_id"`
	ExpiresAt    string   `json:"expires_at"`
	BackupFile   string   `json:"backup_file"`
	Error        string   `json:"error"`
	Message      string   `json:"message"`
}

// response waits for the n-th [PROXY_RESPONSE] typed into the agent (1 is
// the first).
func (p *proxyOffice) response(name string, n int) proxyResponse {
	p.t.Helper()
	var got []string
	waitFor(p.t, fmt.Sprintf("PROXY_RESPONSE #%d to %s", n, name), 10*time.Second, func() bool {
		got = p.ss.all(p.ids[name], "[PROXY_RESPONSE]")
		return len(got) >= n
	})
	body := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(got[n-1], "[PROXY_RESPONSE]\n"), "\n[/PROXY_RESPONSE]"))
	var r proxyResponse
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		p.t.Fatalf("response %q: %v", got[n-1], err)
	}
	return r
}

// told waits for a text typed into the agent containing sub.
func (p *proxyOffice) told(name, sub string) string {
	p.t.Helper()
	var got []string
	waitFor(p.t, name+" told "+sub, 10*time.Second, func() bool {
		got = p.ss.all(p.ids[name], sub)
		return len(got) > 0
	})
	return got[0]
}

func plan(requester, content string, prefs string) string {
	return fmt.Sprintf(`{"action": "create_plan", "requester": %q, "tasks": [{"content": %q, "priority": "high", "estimated_time": "2h", "dependencies": []}], "preferences": %s}`, requester, content, prefs)
}

// TestProxyLoadCountsProxyWork: pm (max_load 1) holds a task for
// senior-sw-engineer, so the next request that prefers pm goes to the
// next proxy, and one that insists on pm waits until pm reports its task
// done. On the old office pm took every request.
func TestProxyLoadCountsProxyWork(t *testing.T) {
	proxyStores(t, func(t *testing.T, open func(*testing.T) office.Store) {
		p := newProxyOffice(t, open(t), seed004Agents())
		p.request("senior-sw-engineer", plan("senior-sw-engineer", "API 엔드포인트 구현", `{"preferred_proxy": "pm", "fallback_allowed": true}`))
		r1 := p.response("senior-sw-engineer", 1)
		if !r1.Success || r1.Proxy != "pm" || len(r1.TaskIDs) != 1 || !strings.HasPrefix(r1.TaskIDs[0], "sse-") {
			t.Fatalf("first response %+v", r1)
		}
		p.told("pm", r1.TaskIDs[0])

		p.request("senior-sw-engineer", plan("senior-sw-engineer", "tests", `{"preferred_proxy": "pm", "fallback_allowed": true}`))
		if r2 := p.response("senior-sw-engineer", 2); !r2.Success || r2.Proxy != "general" {
			t.Fatalf("second request while pm is busy went to %q: %+v", r2.Proxy, r2)
		}
		if n := len(p.ss.all(p.ids["pm"], "Proxy request")); n != 1 {
			t.Fatalf("pm (max_load 1) was given %d proxy requests", n)
		}

		p.request("senior-sw-engineer", plan("senior-sw-engineer", "docs", `{"preferred_proxy": "pm", "fallback_allowed": false}`))
		r3 := p.response("senior-sw-engineer", 3)
		if r3.Success || r3.Status != office.ProxyParked || r3.Proxy != "pm" || r3.ExpiresAt == "" || r3.RequestID == "" {
			t.Fatalf("request insisting on busy pm: %+v", r3)
		}
		// pm reports its task done: the load drops, the parked request goes.
		p.request("pm", fmt.Sprintf(`{"action": "update_status", "requester": "pm", "task_id": %q, "status": "completed", "metadata": {"completion_time": "45m"}}`, r1.TaskIDs[0]))
		if r := p.response("pm", 1); !r.Success || r.Status != "updated" {
			t.Fatalf("pm's update: %+v", r)
		}
		p.told("senior-sw-engineer", "pm updated a task it keeps for you")
		r4 := p.response("senior-sw-engineer", 4)
		if !r4.Success || r4.Proxy != "pm" || r4.RequestID != r3.RequestID {
			t.Fatalf("parked request after pm freed up: %+v", r4)
		}
		// The requester closes its own task kept by pm: pm is told.
		p.request("senior-sw-engineer", fmt.Sprintf(`{"action": "update_status", "requester": "senior-sw-engineer", "task_id": %q, "status": "cancelled"}`, r4.TaskIDs[0]))
		if r := p.response("senior-sw-engineer", 5); !r.Success || r.Proxy != "pm" {
			t.Fatalf("requester's update: %+v", r)
		}
		p.told("pm", r4.TaskIDs[0]+" → cancelled")
		// Nobody else may touch the task.
		p.request("general", fmt.Sprintf(`{"action": "update_status", "requester": "general", "task_id": %q, "status": "completed"}`, r4.TaskIDs[0]))
		if got := p.told("general", "refused"); !strings.Contains(got, "only they may update it") {
			t.Fatalf("stranger's update: %q", got)
		}
	})
}

// TestProxyHandOverOnTheEvent: a parked request is handed over when its
// proxy frees up, by the event that frees it, not by the sweep (an hour
// here): pm (max_load 1) closes the task it keeps (update_status), and
// later completes an invocation (DELIVER_RESULT).
func TestProxyHandOverOnTheEvent(t *testing.T) {
	proxyStores(t, func(t *testing.T, open func(*testing.T) office.Store) {
		p := newProxyOfficeSweeping(t, open(t), seed004Agents(), time.Hour)
		insist := `{"preferred_proxy": "pm", "fallback_allowed": false}`
		p.request("senior-sw-engineer", plan("senior-sw-engineer", "API", insist))
		r1 := p.response("senior-sw-engineer", 1)
		if r1.Proxy != "pm" || len(r1.TaskIDs) != 1 {
			t.Fatalf("first response %+v", r1)
		}
		p.request("senior-sw-engineer", plan("senior-sw-engineer", "tests", insist))
		if r := p.response("senior-sw-engineer", 2); r.Status != office.ProxyParked {
			t.Fatalf("second request while pm is busy: %+v", r)
		}
		p.request("pm", fmt.Sprintf(`{"action": "update_status", "requester": "pm", "task_id": %q, "status": "completed"}`, r1.TaskIDs[0]))
		handed := p.response("senior-sw-engineer", 3)
		if handed.Status != office.ProxyAssigned || handed.Proxy != "pm" || len(handed.TaskIDs) != 1 {
			t.Fatalf("after pm closed its task: %+v", handed)
		}
		p.request("pm", fmt.Sprintf(`{"action": "update_status", "requester": "pm", "task_id": %q, "status": "completed"}`, handed.TaskIDs[0]))
		p.response("pm", 2)

		// pm busy with a task from the reviewer: the next request parks
		// until pm delivers its result.
		p.say("py-code-reviewer", "[INVOKE:pm]\nReview the plan\n[/INVOKE]")
		p.told("pm", "Review the plan")
		p.request("senior-sw-engineer", plan("senior-sw-engineer", "docs", insist))
		if r := p.response("senior-sw-engineer", 4); r.Status != office.ProxyParked {
			t.Fatalf("request while pm works on an invocation: %+v", r)
		}
		p.say("pm", "[DELIVER_RESULT:py-code-reviewer]\ncontent: reviewed\n[/DELIVER_RESULT]")
		if r := p.response("senior-sw-engineer", 5); r.Status != office.ProxyAssigned || r.Proxy != "pm" {
			t.Fatalf("after pm's result: %+v", r)
		}
	})
}

// TestProxyLoadHoldsForInvocations: the proxy work pm holds makes it busy
// for an INVOKE too.
func TestProxyLoadHoldsForInvocations(t *testing.T) {
	proxyStores(t, func(t *testing.T, open func(*testing.T) office.Store) {
		agents := seed004Agents()
		agents = append(agents, office.Agent{Name: "pm2", Role: "pm", Capabilities: []string{"bash"}})
		p := newProxyOffice(t, open(t), agents)
		p.request("senior-sw-engineer", plan("senior-sw-engineer", "API", `{"preferred_proxy": "pm"}`))
		if r := p.response("senior-sw-engineer", 1); r.Proxy != "pm" {
			t.Fatalf("response %+v", r)
		}
		p.say("py-code-reviewer", "[INVOKE:pm]\nReview the plan\n[/INVOKE]")
		var invs []office.Invocation
		waitFor(t, "the invocation", 10*time.Second, func() bool {
			invs, _ = p.st.ListInvocations(context.Background(), office.InvocationFilter{OfficeID: p.office.ID})
			return len(invs) == 1
		})
		if invs[0].CalleeAgentID != p.ids["pm2"] {
			t.Fatalf("INVOKE:pm while pm holds proxy work went to %s", invs[0].CalleeAgentID)
		}
	})
}

// TestProxyTaskTypePicksExpert: task_type planning goes to the planning
// expert without a strategy flag (the old office gave it to pm, first by
// priority); an explicit strategy still wins.
func TestProxyTaskTypePicksExpert(t *testing.T) {
	proxyStores(t, func(t *testing.T, open func(*testing.T) office.Store) {
		p := newProxyOffice(t, open(t), seed004Agents())
		p.request("senior-sw-engineer", `{"action": "create_plan", "requester": "senior-sw-engineer", "task_type": "planning", "tasks": [{"content": "Sprint plan"}]}`)
		if r := p.response("senior-sw-engineer", 1); r.Proxy != "planner" {
			t.Fatalf("task_type planning went to %q", r.Proxy)
		}
		p.request("senior-sw-engineer", `{"action": "create_plan", "requester": "senior-sw-engineer", "tasks": [{"content": "Survey"}], "preferences": {"task_type": "research"}}`)
		if r := p.response("senior-sw-engineer", 2); r.Proxy != "general" {
			t.Fatalf("task_type research went to %q", r.Proxy)
		}
		p.request("senior-sw-engineer", `{"action": "create_plan", "requester": "senior-sw-engineer", "tasks": [{"content": "Roadmap"}], "preferences": {"task_type": "planning", "strategy": "priority"}}`)
		if r := p.response("senior-sw-engineer", 3); r.Proxy != "pm" {
			t.Fatalf("strategy priority went to %q", r.Proxy)
		}
	})
}

// TestProxyParkedSurvivesRestart: requests waiting for pm are rows: after
// a server restart the new router hands the first to pm when pm frees up,
// and the second, still waiting when its time is up, times out: backed up
// to a file, a person asked, the requester told where.
func TestProxyParkedSurvivesRestart(t *testing.T) {
	proxyStores(t, func(t *testing.T, open func(*testing.T) office.Store) {
		st := open(t)
		p := newProxyOffice(t, st, seed004Agents())
		ctx := context.Background()
		p.request("senior-sw-engineer", plan("senior-sw-engineer", "API", `{"preferred_proxy": "pm"}`))
		held := p.response("senior-sw-engineer", 1)
		p.request("py-code-reviewer", plan("py-code-reviewer", "Review", `{"preferred_proxy": "pm", "fallback_allowed": false}`))
		a := p.response("py-code-reviewer", 1)
		p.request("py-code-reviewer", plan("py-code-reviewer", "Style guide", `{"preferred_proxy": "pm", "fallback_allowed": false}`))
		b := p.response("py-code-reviewer", 2)
		if a.Status != office.ProxyParked || b.Status != office.ProxyParked {
			t.Fatalf("not parked: %+v %+v", a, b)
		}

		// The server stops and starts again on the same store.
		p.stop()
		p.ss = &typedSessions{}
		p.start()

		p.request("senior-sw-engineer", fmt.Sprintf(`{"action": "update_status", "requester": "senior-sw-engineer", "task_id": %q, "status": "completed"}`, held.TaskIDs[0]))
		ra := p.response("py-code-reviewer", 1)
		if !ra.Success || ra.Proxy != "pm" || ra.RequestID != a.RequestID {
			rows, _ := st.ListProxyRequests(ctx, office.ProxyRequestFilter{})
			for _, r := range rows {
				t.Logf("row %s %s %s %v %s", r.ID, r.Status, r.Reason, r.CreatedAt, r.Payload)
			}
			t.Fatalf("after the restart, the first parked request: %+v (a %s, b %s)", ra, a.RequestID, b.RequestID)
		}
		if got := p.ss.all(p.ids["py-code-reviewer"], "[PROXY_RESPONSE]"); len(got) != 1 {
			t.Fatalf("the second parked request was answered already: %q", got)
		}

		p.clk.advance(11 * time.Minute)
		rb := p.response("py-code-reviewer", 2)
		if rb.Success || rb.Status != office.ProxyTimedOut || rb.RequestID != b.RequestID || rb.BackupFile == "" ||
			!strings.Contains(rb.Error, "timed out") || !strings.Contains(rb.Message, rb.BackupFile) {
			t.Fatalf("timed out response: %+v", rb)
		}
		checkBackup(t, p, rb, "Style guide", "timed out")
		row, err := st.GetProxyRequest(ctx, b.RequestID)
		if err != nil || row.Status != office.ProxyTimedOut || row.BackupPath != rb.BackupFile {
			t.Fatalf("row %+v %v", row, err)
		}
		qs, _ := st.ListQuestions(ctx, office.QuestionFilter{OfficeID: p.office.ID, AgentID: p.ids["py-code-reviewer"]})
		if len(qs) != 1 || qs[0].Category != "proxy" || !strings.Contains(qs[0].Question, rb.BackupFile) {
			t.Fatalf("person asked: %+v", qs)
		}
	})
}

// checkBackup reads the backup file a response names: the request as the
// requester sent it, the reason, private to the server.
func checkBackup(t *testing.T, p *proxyOffice, r proxyResponse, content, reason string) {
	t.Helper()
	fi, err := os.Stat(r.BackupFile)
	if err != nil {
		t.Fatalf("backup file: %v", err)
	}
	if fi.Mode().Perm() != 0o600 || !strings.HasPrefix(r.BackupFile, p.dataDir) {
		t.Errorf("backup file %s mode %v, want 0600 under %s", r.BackupFile, fi.Mode().Perm(), p.dataDir)
	}
	b, _ := os.ReadFile(r.BackupFile)
	var f struct {
		RequestID string          `json:"request_id"`
		Requester string          `json:"requester"`
		Reason    string          `json:"reason"`
		Request   json.RawMessage `json:"request"`
		Tasks     []struct {
			ID      string `json:"id"`
			Content string `json:"content"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("backup %s: %v\n%s", r.BackupFile, err, b)
	}
	var req struct {
		Action string `json:"action"`
		Tasks  []struct {
			Content string `json:"content"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(f.Request, &req); err != nil || req.Action != "create_plan" || len(req.Tasks) != 1 || req.Tasks[0].Content != content {
		t.Errorf("backup request %s: %v", f.Request, err)
	}
	if f.RequestID != r.RequestID || f.Requester != r.Requester {
		t.Errorf("backup of request %s by %s, want %s by %s", f.RequestID, f.Requester, r.RequestID, r.Requester)
	}
	if !strings.Contains(f.Reason, reason) {
		t.Errorf("backup reason %q, want %q in it", f.Reason, reason)
	}
	if len(f.Tasks) != 1 || len(r.TaskIDs) != 1 || f.Tasks[0].ID != r.TaskIDs[0] {
		t.Errorf("backup tasks %+v, response task IDs %v", f.Tasks, r.TaskIDs)
	}
}

// TestProxyBackupWhenNoProxy: with every proxy down, a request is written
// to its backup file before the person is asked, and the requester is told
// where; the old office only asked the person.
func TestProxyBackupWhenNoProxy(t *testing.T) {
	proxyStores(t, func(t *testing.T, open func(*testing.T) office.Store) {
		st := open(t)
		p := newProxyOffice(t, st, seed004Agents())
		ctx := context.Background()
		for _, n := range []string{"pm", "general", "planner"} {
			if err := st.SetAgentStatus(ctx, p.ids[n], office.AgentDisabled); err != nil {
				t.Fatal(err)
			}
		}
		p.request("senior-sw-engineer", plan("senior-sw-engineer", "API 엔드포인트 구현", `{"preferred_proxy": "pm", "fallback_allowed": true}`))
		r := p.response("senior-sw-engineer", 1)
		if r.Success || r.Status != office.ProxyBackedUp || r.BackupFile == "" || !strings.Contains(r.Message, r.BackupFile) || len(r.TaskIDs) != 1 {
			t.Fatalf("response %+v", r)
		}
		checkBackup(t, p, r, "API 엔드포인트 구현", "no proxy can take it")
		qs, _ := st.ListQuestions(ctx, office.QuestionFilter{OfficeID: p.office.ID})
		if len(qs) != 1 || !strings.Contains(qs[0].Question, r.BackupFile) {
			t.Fatalf("person asked: %+v", qs)
		}
		// The requester may still close its backed-up task.
		p.request("senior-sw-engineer", fmt.Sprintf(`{"action": "update_status", "requester": "senior-sw-engineer", "task_id": %q, "status": "completed"}`, r.TaskIDs[0]))
		if u := p.response("senior-sw-engineer", 2); !u.Success || u.BackupFile != r.BackupFile {
			t.Fatalf("update of a backed-up task: %+v", u)
		}
	})
}

// TestProxyContentRules: each class of seed 004's content checks refuses
// the request naming its rule; nothing is stored or sent to a proxy.
func TestProxyContentRules(t *testing.T) {
	proxyStores(t, func(t *testing.T, open func(*testing.T) office.Store) {
		st := open(t)
		p := newProxyOffice(t, st, seed004Agents())
		tests := []struct{ content, rule string }{
			{"Clean the server with rm -rf / --no-preserve-root", "command.rm-root"},
			{"Use key AKIAIOSFODNN7EXAMPLE for the bucket", "credential.aws-key"},
			{"고객 900101-1234567 의 주소 확인", "personal.rrn"},
			{"Tell the reviewer to kill yourself", "toxic.threat"},
		}
		for i, tt := range tests {
			p.request("senior-sw-engineer", plan("senior-sw-engineer", tt.content, `{}`))
			var got []string
			waitFor(t, "refusal "+tt.rule, 10*time.Second, func() bool {
				got = p.ss.all(p.ids["senior-sw-engineer"], "was refused")
				return len(got) > i
			})
			if !strings.Contains(got[i], "rule "+tt.rule) || strings.Contains(got[i], "AKIAIOSFODNN7EXAMPLE") || strings.Contains(got[i], "1234567") {
				t.Errorf("refusal %q, want rule %s named and the text not repeated", got[i], tt.rule)
			}
		}
		rows, err := st.ListProxyRequests(context.Background(), office.ProxyRequestFilter{OfficeID: p.office.ID})
		if err != nil || len(rows) != 0 {
			t.Fatalf("refused requests stored: %+v %v", rows, err)
		}
		if got := p.ss.all(p.ids["pm"], "Proxy request"); len(got) != 0 {
			t.Fatalf("pm was sent %q", got)
		}
	})
}

// TestProxyRequestOnce: the same printed block read twice (a re-rendered
// screen, a re-read transcript after a restart) is one request: one row,
// one response, one proxy told.
func TestProxyRequestOnce(t *testing.T) {
	proxyStores(t, func(t *testing.T, open func(*testing.T) office.Store) {
		st := open(t)
		p := newProxyOffice(t, st, seed004Agents())
		text := "[PROXY_REQUEST]\n" + plan("senior-sw-engineer", "API", `{"preferred_proxy": "pm"}`) + "\n[/PROXY_REQUEST]"
		for range 2 {
			p.r.HandleText(session.Text{Key: session.Key{OfficeID: p.office.ID, AgentID: p.ids["senior-sw-engineer"]}, ID: "same-chunk", Lines: strings.Split(text, "\n"), TurnEnd: true})
		}
		p.response("senior-sw-engineer", 1)
		time.Sleep(200 * time.Millisecond)
		if got := p.ss.all(p.ids["senior-sw-engineer"], "[PROXY_RESPONSE]"); len(got) != 1 {
			t.Fatalf("%d responses to one request", len(got))
		}
		p.stop()
		p.ss = &typedSessions{}
		p.start()
		p.r.HandleText(session.Text{Key: session.Key{OfficeID: p.office.ID, AgentID: p.ids["senior-sw-engineer"]}, ID: "same-chunk", Lines: strings.Split(text, "\n"), TurnEnd: true})
		time.Sleep(300 * time.Millisecond)
		rows, err := st.ListProxyRequests(context.Background(), office.ProxyRequestFilter{OfficeID: p.office.ID})
		if err != nil || len(rows) != 1 {
			t.Fatalf("rows %+v %v", rows, err)
		}
		if got := p.ss.all(p.ids["senior-sw-engineer"], "[PROXY_RESPONSE]"); len(got) != 0 {
			t.Fatalf("answered again after the restart: %q", got)
		}
		if got := p.ss.all(p.ids["pm"], "Proxy request"); len(got) != 0 {
			t.Fatalf("pm told again after the restart: %q", got)
		}
	})
}

// BenchmarkProxyRequest: a create_plan printed by the requester (handed
// to the router) until its [PROXY_RESPONSE] is typed into the requester,
// with the proxy chosen from the office's load (proxy tasks and
// invocations read from the store), on each real store. pm takes any
// number of tasks, so every request is assigned.
//
//	go test ./engine -run XXX -bench BenchmarkProxyRequest -benchtime 200x
func BenchmarkProxyRequest(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			var st office.Store
			var err error
			if kind == "sqlite" {
				st, err = sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "office.db"))
			} else {
				st, err = postgres.Open(context.Background(), pgDB(b), postgres.Options{})
			}
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			agents := seed004Agents()
			agents[0].MaxLoad = 1 << 20
			p := newProxyOffice(b, st, agents)
			got := make(chan struct{}, 1)
			p.ss.onSend = func(agentID, text string) {
				if agentID == p.ids["senior-sw-engineer"] && strings.Contains(text, "[PROXY_RESPONSE]") {
					got <- struct{}{}
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				p.request("senior-sw-engineer", plan("senior-sw-engineer", fmt.Sprintf("task %d", i), `{"preferred_proxy": "pm"}`))
				select {
				case <-got:
				case <-time.After(10 * time.Second):
					b.Fatalf("no response to request %d", i)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
