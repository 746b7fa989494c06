package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/office-server/office-server/office"
)

// config is one run's settings.
type config struct {
	Server   string        // the office-server binary
	AgentBin string        // what runs the load agent (this program)
	Command  string        // a trivial agent instead of the load agent (cat): no answers
	Input    string        // the load agent's --input: echo, raw, canon
	Store    string        // sqlite, postgres
	BaseURL  string        // PostgreSQL maintenance database
	N        int           // agents
	Answers  int           // answers measured one at a time
	Invokes  int           // INVOKEs measured one at a time
	Proxies  int           // proxy rounds measured one at a time
	Idle     time.Duration // idle window
	Settle   time.Duration // pause between start-up and the idle window
	Ready    time.Duration // bound on start-up
	Dir      string        // scratch directory
	Profile  string        // directory for CPU profiles, or ""
	Logs     string        // directory for the server's debug logs, or ""
	Rep      int           // which run of this store and size (1, 2…)
}

// result is one row of the table.
type result struct {
	Store, Agents, Input string
	N                    int
	Started              int // agents running (ready) at the end of start-up
	Ready                time.Duration
	StartCPU             time.Duration // the server's CPU from its start until every agent was ready
	IdleCPU, IdleTreeCPU float64       // share of one core: server; agents and the watchdog
	RSSMB                float64
	Goroutines, Threads  int
	Typed, Enter         [2]time.Duration // p50, p99 commit → text in the PTY, → Enter
	Early, Answered      int
	BurstN               int           // answers in the burst
	BurstRate            float64       // messages per second
	BurstCPU             time.Duration // server CPU per message
	BurstEnter           [2]time.Duration
	Invoke               [2]time.Duration // p50, p99 INVOKE printed → task typed and Enter pressed in the target
	InvokeRow            [2]time.Duration // p50, p99 invocation row created → the same Enter
	Invoked              int
	IdleTx               float64          // database transactions per second at idle, -1 unknown
	OnBound, TypedAgain  int              // Enters pressed on the EnterDelay bound, texts typed again (the server's /metrics), -1 unknown
	ProxyReq, HandOver   [2]time.Duration // p50, p99 PROXY_REQUEST printed → the proxy's Enter; update_status printed → the parked request's Enter
	Told                 [2]time.Duration // p50, p99 update_status printed → both sides' Enter
	ProxyRounds          int
	PTYMax, PTYUsed      int
	Note                 string
}

// report is what a load agent says after an Enter (what: answer, task,
// result, other), or when it printed an INVOKE (what: printed; target
// the agent it named, enter the time it printed).
type report struct {
	name, what    string
	target        string
	landed, enter time.Time
	early         bool
}

// run does one run: start-up, idle, answers one at a time, a burst.
func run(ctx context.Context, c config) (res result, err error) {
	res = result{Store: c.Store, N: c.N, Agents: agentsText(c.Input), Input: c.Input, IdleTx: -1, OnBound: -1, TypedAgain: -1}
	if c.Command != "" {
		res.Agents = c.Command
	}
	for _, d := range []string{c.Profile, c.Logs} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return res, err
		}
	}
	dir, err := os.MkdirTemp(c.Dir, "office-load-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	reports, sock, closeSock, err := listenReports(filepath.Join(dir, "r.sock"), c.N)
	if err != nil {
		return res, err
	}
	defer closeSock()
	officeFile := filepath.Join(dir, "office.yaml")
	if err := writeOffice(officeFile, c.N, c.AgentBin, c.Command, c.Input, sock); err != nil {
		return res, err
	}
	be, err := newBackend(ctx, c.Store, filepath.Join(dir, "data"), c.BaseURL)
	if err != nil {
		return res, err
	}
	defer be.drop()
	t0 := time.Now()
	logFile := ""
	if c.Logs != "" {
		logFile = filepath.Join(c.Logs, fmt.Sprintf("%s-%d-r%d.log", c.Store, c.N, c.Rep))
	}
	srv, err := startServer(c.Server, officeFile, filepath.Join(dir, "data"), logFile, be.env)
	if err != nil {
		return res, err
	}
	defer srv.stop(60 * time.Second)
	if err := srv.waitHealthy(ctx, 60*time.Second); err != nil {
		return res, err
	}
	stage := func(name string) *profiler {
		return srv.profile(ctx, c.Profile, fmt.Sprintf("%s-%d-r%d-%s", c.Store, c.N, c.Rep, name))
	}
	prof := stage("startup")
	w, err := be.open(ctx)
	if err != nil {
		return res, fmt.Errorf("open the store as another process: %w", err)
	}
	defer w.Close()
	d := &drive{c: c, srv: srv, w: w, reports: reports, res: &res, stage: stage}
	err = d.startUp(ctx, t0)
	prof.end()
	if err != nil {
		return res, err
	}
	d.idle(ctx, be)
	if c.Command == "" && res.Started == c.N {
		if err := d.phases(ctx); err != nil {
			return res, err
		}
	}
	if v := srv.metric(ctx, "office_enter_on_bound_total"); v >= 0 {
		res.OnBound = int(v)
	}
	if v := srv.metric(ctx, "office_typed_again_total"); v >= 0 {
		res.TypedAgain = int(v)
	}
	return res, nil
}

// phases times the answers, the INVOKEs and the proxy rounds one at a
// time, then the burst (which leaves N agents asking again at once).
func (d *drive) phases(ctx context.Context) error {
	for _, phase := range []func(context.Context) error{d.answers, d.invokes, d.proxies, d.burst} {
		if err := phase(ctx); err != nil {
			return err
		}
	}
	return nil
}

// agentsText names the load agent of the table's rows by its --input.
func agentsText(input string) string {
	switch input {
	case "raw":
		return "load agent, shows nothing"
	case "canon":
		return "load agent, canonical, no echo"
	}
	return "load agent"
}

// listenReports listens on a unix datagram socket for the agents' reports.
func listenReports(path string, n int) (<-chan report, string, func(), error) {
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, "", nil, err
	}
	_ = conn.SetReadBuffer(4 << 20)
	ch := make(chan report, n+1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 512)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				return
			}
			if r, ok := parseReport(string(buf[:k])); ok {
				ch <- r
			}
		}
	}()
	return ch, path, func() { conn.Close(); <-done }, nil
}

func parseReport(s string) (report, bool) {
	f := strings.Fields(s)
	if len(f) == 4 && (f[0] == "printed" || f[0] == "proxy" || f[0] == "closed") {
		at, err := strconv.ParseInt(f[3], 10, 64)
		return report{what: f[0], name: f[1], target: f[2], enter: time.Unix(0, at)}, err == nil
	}
	if len(f) != 5 {
		return report{}, false
	}
	l, err1 := strconv.ParseInt(f[1], 10, 64)
	e, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return report{}, false
	}
	return report{name: f[0], landed: time.Unix(0, l), enter: time.Unix(0, e), early: f[3] == "1", what: f[4]}, true
}

// drive is one run's measuring side.
type drive struct {
	c        config
	srv      *serverProc
	w        writer
	reports  <-chan report
	res      *result
	officeID string
	stage    func(name string) *profiler // starts a CPU profile, or nil
}

// startUp waits until every agent is ready: the load agent has asked its
// first question, a trivial agent's session is ready.
func (d *drive) startUp(ctx context.Context, t0 time.Time) error {
	id, err := d.srv.officeID(ctx)
	if err != nil {
		return err
	}
	d.officeID = id
	deadline := time.Now().Add(d.c.Ready)
	last, lastAt := -1, time.Now()
	for {
		n, err := d.readyCount(ctx)
		if err != nil {
			return err
		}
		d.res.Started = n
		if n == d.c.N {
			d.res.Ready = time.Since(t0)
			d.res.StartCPU, _ = procCPU(d.srv.pid())
			break
		}
		if n != last {
			last, lastAt = n, time.Now()
		}
		// Given up: past the bound, or no progress for a long while
		// (a limit was hit).
		if time.Now().After(deadline) || time.Since(lastAt) > 60*time.Second {
			d.res.Ready = time.Since(t0)
			_, detail, _ := d.sessionCount(ctx)
			d.res.PTYMax, d.res.PTYUsed = ptyLimit()
			d.res.Note = fmt.Sprintf("%d of %d agents ready after %s; %s; %s; server log ends: %s", n, d.c.N, d.res.Ready.Round(time.Second), detail, d.failedAgent(ctx), lastLines(d.srv.logs.String(), 5))
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-d.srv.exited:
			return fmt.Errorf("server exited during start-up (%v): %s", d.srv.err, d.srv.logs.String())
		case <-time.After(250 * time.Millisecond):
		}
	}
	d.res.PTYMax, d.res.PTYUsed = ptyLimit()
	return nil
}

// failedAgent says why one failed agent failed (its session detail) and
// what the API answers when asked to start it again.
func (d *drive) failedAgent(ctx context.Context) string {
	var agents []agentStatus
	if err := d.srv.get(ctx, "/api/offices/"+d.officeID+"/agents", &agents); err != nil {
		return err.Error()
	}
	for _, a := range agents {
		if a.Session != office.SessionFailed {
			continue
		}
		again := "accepted"
		if err := d.srv.post(ctx, "/api/offices/"+d.officeID+"/agents/"+a.Name+"/start", struct{}{}); err != nil {
			again = err.Error() // POST …: 503 {"error": …}
		}
		return fmt.Sprintf("agent %s failed: %q; starting it again: %s", a.Name, a.Detail, again)
	}
	return "no agent failed"
}

// readyCount counts ready agents: load agents with a question pending
// (read from the driver's own store connection, not the server's API, so
// the count costs the server nothing), or sessions ready.
func (d *drive) readyCount(ctx context.Context) (int, error) {
	if d.c.Command == "" {
		qs, err := d.w.ListQuestions(ctx, office.QuestionFilter{OfficeID: d.officeID, Status: []string{office.QuestionPending}})
		if err != nil {
			return 0, err
		}
		seen := map[string]bool{}
		for _, q := range qs {
			seen[q.AgentID] = true
		}
		return len(seen), nil
	}
	n, _, err := d.sessionCount(ctx)
	return n, err
}

// sessionCount counts agents whose session is ready, from the API, and
// says how many are in each other state.
func (d *drive) sessionCount(ctx context.Context) (int, string, error) {
	var agents []agentStatus
	if err := d.srv.get(ctx, "/api/offices/"+d.officeID+"/agents", &agents); err != nil {
		return 0, "", err
	}
	by := map[string]int{}
	for _, a := range agents {
		by[a.Session]++
	}
	var parts []string
	for st, k := range by {
		parts = append(parts, fmt.Sprintf("%s %d", st, k))
	}
	slices.Sort(parts)
	return by[office.SessionReady], "sessions: " + strings.Join(parts, ", "), nil
}

// idle measures the server at rest: CPU (its own, and its agents' and
// the watchdog's), memory, goroutines, threads, database transactions.
func (d *drive) idle(ctx context.Context, be *backend) {
	time.Sleep(d.c.Settle) // let the start-up's last turns settle
	prof := d.stage("idle")
	defer prof.end()
	pid := d.srv.pid()
	cpu0, _ := procCPU(pid)
	tree0, _ := treeCPU(pid)
	var tx0 int64 = -1
	if be.txCount != nil {
		if n, err := be.txCount(ctx); err == nil {
			tx0 = n
		}
	}
	t0 := time.Now()
	var tx int64 = -1
	if be.kind == "sqlite" {
		tx = sqliteTx(ctx, pid, d.c.Idle)
	} else {
		time.Sleep(d.c.Idle)
	}
	cpu1, _ := procCPU(pid)
	tree1, _ := treeCPU(pid)
	el := time.Since(t0)
	if be.txCount != nil && tx0 >= 0 {
		if tx1, err := be.txCount(ctx); err == nil {
			// Less the driver's own first look. PostgreSQL 15's backends
			// publish their counts at most once a second (and an idle one
			// after up to 10 s), so a short window can read 0 or less:
			// nothing published yet, not "unknown".
			tx = max(tx1-tx0-1, 0)
		}
	}
	d.res.IdleCPU = float64(cpu1-cpu0) / float64(el)
	d.res.IdleTreeCPU = float64(tree1-tree0) / float64(el)
	if tx >= 0 {
		d.res.IdleTx = float64(max(tx, 0)) / el.Seconds()
	}
	d.res.RSSMB = float64(procStatus(pid, "VmRSS")) / 1024
	d.res.Threads = int(procStatus(pid, "Threads"))
	d.res.Goroutines = int(d.srv.metric(ctx, "go_goroutines"))
}

// pending lists the office's pending questions, newest round per agent.
func (d *drive) pending(ctx context.Context) ([]office.Question, error) {
	return d.w.ListQuestions(ctx, office.QuestionFilter{OfficeID: d.officeID, Status: []string{office.QuestionPending}})
}

// answers answers Answers questions one at a time, each to an agent
// waiting for it, and times commit → text in the agent's PTY → Enter.
func (d *drive) answers(ctx context.Context) error {
	var typed, enter []time.Duration
	for len(enter) < d.c.Answers {
		qs, err := d.pending(ctx)
		if err != nil {
			return err
		}
		if len(qs) == 0 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		for _, q := range qs {
			if len(enter) >= d.c.Answers {
				break
			}
			if _, ok, err := d.w.AnswerQuestion(ctx, q.ID, "yes, go on", ""); err != nil || !ok {
				return fmt.Errorf("answer %s: %v (answered %v)", q.ID, err, ok)
			}
			committed := time.Now()
			r, err := d.await(ctx, 1, 10*time.Second)
			if err != nil {
				return err
			}
			typed = append(typed, r[0].landed.Sub(committed))
			enter = append(enter, r[0].enter.Sub(committed))
			if r[0].early {
				d.res.Early++
			}
			time.Sleep(10 * time.Millisecond) // one at a time, not a burst
		}
	}
	d.res.Answered = len(enter)
	d.res.Typed = pcts(typed)
	d.res.Enter = pcts(enter)
	return nil
}

// await waits for n reports.
func (d *drive) await(ctx context.Context, n int, bound time.Duration) ([]report, error) {
	var out []report
	timeout := time.After(bound)
	for len(out) < n {
		select {
		case r := <-d.reports:
			out = append(out, r)
		case <-timeout:
			return out, fmt.Errorf("%d of %d answers reached their agents in %s; server log: %s", len(out), n, bound, lastLines(d.srv.logs.String(), 20))
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
	return out, nil
}

// burst answers every agent's question at once (8 writers) and measures
// how fast the office types them all, and its CPU per message.
func (d *drive) burst(ctx context.Context) error {
	var qs []office.Question
	deadline := time.Now().Add(d.c.Ready)
	for {
		var err error
		if qs, err = d.pending(ctx); err != nil {
			return err
		}
		qs = newestEach(qs) // the proxy rounds leave some agents two
		if len(qs) >= d.c.N || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(qs) == 0 {
		return errors.New("burst: no agent is waiting for an answer")
	}
	time.Sleep(time.Second) // the last questions' turns settle
	prof := d.stage("burst")
	defer prof.end()
	pid := d.srv.pid()
	cpu0, _ := procCPU(pid)
	t0 := time.Now()
	committed := make([]time.Time, len(qs))
	work := make(chan int)
	var wg sync.WaitGroup
	var werr error
	var once sync.Once
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if _, ok, err := d.w.AnswerQuestion(ctx, qs[i].ID, "burst", ""); err != nil || !ok {
					once.Do(func() { werr = fmt.Errorf("answer %s: %v (answered %v)", qs[i].ID, err, ok) })
				}
				committed[i] = time.Now()
			}
		}()
	}
	for i := range qs {
		work <- i
	}
	close(work)
	wg.Wait()
	if werr != nil {
		return werr
	}
	rs, err := d.await(ctx, len(qs), 5*time.Minute)
	if err != nil {
		return err
	}
	cpu1, _ := procCPU(pid)
	at := map[string]time.Time{}
	for i, q := range qs {
		at[q.AgentID] = committed[i]
	}
	byName := d.agentIDs(ctx)
	var enter []time.Duration
	last := t0
	for _, r := range rs {
		if c, ok := at[byName[r.name]]; ok {
			enter = append(enter, r.enter.Sub(c))
		}
		if r.early {
			d.res.Early++
		}
		if r.enter.After(last) {
			last = r.enter
		}
	}
	span := last.Sub(t0)
	d.res.BurstN = len(rs)
	d.res.BurstRate = float64(len(rs)) / span.Seconds()
	d.res.BurstCPU = (cpu1 - cpu0) / time.Duration(len(rs))
	d.res.BurstEnter = pcts(enter)
	return nil
}

// agentIDs maps agent names to ids.
func (d *drive) agentIDs(ctx context.Context) map[string]string {
	out := map[string]string{}
	as, err := d.w.ListAgents(ctx, d.officeID)
	if err != nil {
		return out
	}
	for _, a := range as {
		out[a.Name] = a.ID
	}
	return out
}

// pcts returns the p50 and p99 of ds.
func pcts(ds []time.Duration) [2]time.Duration {
	if len(ds) == 0 {
		return [2]time.Duration{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.5) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return [2]time.Duration{at(0.50), at(0.99)}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
