package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/office-server/office-server/internal/anthropictest"
)

// hibernateRun measures hibernation (docs/notes/hibernate.md) with real
// Claude Code agents against a scripted model in this process, on the
// embedded store: the proportional set size (PSS, shared pages counted
// once) of the server and every process below it with all agents live
// and idle, then with all of them hibernated; the server's CPU while all
// sleep; and wake latency, a person's message posted to a hibernated agent
// → the message in the model's request, one wake at a time.
type hibernateRun struct {
	c       config
	bin     string        // the claude binary
	n       int           // agents
	after   time.Duration // their hibernate_after
	maxLive int           // the server's --max-live
	wakes   int           // wake-ups timed
}

// hibernateResult is the run's figures.
type hibernateResult struct {
	Version           string
	N, MaxLive        int
	Ready             time.Duration // all agents ready
	LiveMiB, SleepMiB float64       // PSS of the server's tree, all live / all hibernated
	Live, LiveProcs   int           // agents live and processes in the tree then
	SleepCPU          float64       // the tree's CPU share with all hibernated
	Wake              [2]time.Duration
	Wakes             int
	PeakMiB           float64 // the most PSS of the tree seen after a wake
}

// wakeToken marks the k-th wake-up's message.
var wakeToken = regexp.MustCompile(`wake-(\d+)-mark`)

func (r *hibernateRun) run(ctx context.Context, stderr io.Writer) (res hibernateResult, err error) {
	res.Version, res.N, res.MaxLive = claudeVersion(r.bin), r.n, r.maxLive
	tb := &driverTB{log: io.Discard}
	defer tb.close()
	model := anthropictest.New(tb)
	var mu sync.Mutex
	arrived := map[int]time.Time{}
	model.Reply(func(q anthropictest.Request) anthropictest.Response {
		if m := wakeToken.FindStringSubmatch(q.LastUserText()); m != nil {
			k, _ := strconv.Atoi(m[1])
			mu.Lock()
			if _, ok := arrived[k]; !ok {
				arrived[k] = time.Now()
			}
			mu.Unlock()
		}
		return anthropictest.Response{Text: "OK"}
	})
	dir, err := os.MkdirTemp(r.c.Dir, "office-load-hibernate-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	officeFile, env, err := r.prepare(dir, model)
	if err != nil {
		return res, err
	}
	logFile := ""
	if r.c.Logs != "" {
		if err := os.MkdirAll(r.c.Logs, 0o755); err != nil {
			return res, err
		}
		logFile = filepath.Join(r.c.Logs, fmt.Sprintf("hibernate-%d-max%d.log", r.n, r.maxLive))
	}
	srv, err := startServer(r.c.Server, officeFile, filepath.Join(dir, "data"), logFile, env)
	if err != nil {
		return res, err
	}
	defer srv.stop(60 * time.Second)
	if err := srv.waitHealthy(ctx, 60*time.Second); err != nil {
		return res, err
	}
	id, err := srv.officeID(ctx)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(stderr, "office-load: hibernation, %d Claude Code agents (%s), hibernate_after %s, max-live %d…\n", r.n, res.Version, r.after, r.maxLive)
	t0 := time.Now()
	// Every agent ready, or hibernated by the cap (beyond --max-live at
	// the start, or to keep a slot free): the live ones are then counted.
	live, err := r.await(ctx, srv, id, r.n, r.after+r.c.Ready, func(ready, asleep int) bool { return ready > 0 && ready+asleep == r.n })
	if err != nil {
		return res, err
	}
	res.Ready, res.Live = time.Since(t0), live
	res.LiveMiB, res.LiveProcs = treePSS(srv.pid())
	if _, err := r.await(ctx, srv, id, r.n, 2*r.after+time.Minute, func(_, asleep int) bool { return asleep == r.n }); err != nil {
		return res, err
	}
	time.Sleep(time.Second) // the last stops' processes are reaped
	res.SleepMiB, _ = treePSS(srv.pid())
	cpu0, _ := procCPU(srv.pid())
	tree0, _ := treeCPU(srv.pid())
	time.Sleep(5 * time.Second)
	cpu1, _ := procCPU(srv.pid())
	tree1, _ := treeCPU(srv.pid())
	res.SleepCPU = float64(cpu1-cpu0+tree1-tree0) / float64(5*time.Second)

	// Wake-ups one at a time, each to an agent asleep.
	return r.wakeAll(ctx, srv, id, res, func(k int) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		at, ok := arrived[k]
		return at, ok
	})
}

// wakeAll posts a message to each hibernated agent in turn and times it
// to the model (arrived: when the k-th wake's message reached it).
func (r *hibernateRun) wakeAll(ctx context.Context, srv *serverProc, id string, res hibernateResult, arrived func(k int) (time.Time, bool)) (hibernateResult, error) {
	var took []time.Duration
	for k := 1; k <= min(r.wakes, r.n); k++ {
		at := time.Now()
		msg := map[string]string{"agent": hibAgent(k - 1), "content": fmt.Sprintf("Are you there? wake-%d-mark", k)}
		if err := srv.post(ctx, "/api/offices/"+id+"/messages", msg); err != nil {
			return res, err
		}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			if got, ok := arrived(k); ok {
				took = append(took, got.Sub(at))
				pss, _ := treePSS(srv.pid())
				res.PeakMiB = max(res.PeakMiB, pss)
				break
			}
			if time.Now().After(deadline) {
				return res, fmt.Errorf("wake %d: the message never reached the model; server log ends: %s", k, lastLines(srv.logs.String(), 5))
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	res.Wake, res.Wakes = pcts(took), len(took)
	return res, nil
}

// prepare writes the office file (n Claude Code agents h0001…) and
// returns it with the server's environment.
func (r *hibernateRun) prepare(dir string, model *anthropictest.Server) (string, []string, error) {
	home := filepath.Join(dir, "home")
	var b strings.Builder
	fmt.Fprintf(&b, "office:\n  name: Sleepy load office\n  hibernate_after: %s\nagents:\n", r.after)
	for i := range r.n {
		wd := filepath.Join(dir, "work", hibAgent(i))
		if err := os.MkdirAll(wd, 0o700); err != nil {
			return "", nil, err
		}
		fmt.Fprintf(&b, "  - name: %s\n    launch: {kind: claude, command: %q, dir: %q}\n", hibAgent(i), r.bin, wd)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", nil, err
	}
	officeFile := filepath.Join(dir, "office.yaml")
	if err := os.WriteFile(officeFile, []byte(b.String()), 0o600); err != nil {
		return "", nil, err
	}
	env := append([]string{"DATABASE_URL=", "SUPABASE_URL=", "OFFICE_MAX_LIVE=" + strconv.Itoa(r.maxLive)}, model.Env(home)...)
	return officeFile, env, nil
}

func hibAgent(i int) string { return fmt.Sprintf("h%04d", i+1) }

// await waits until done holds of the office's n sessions (how many are
// ready, how many hibernated), and returns how many are ready then.
func (r *hibernateRun) await(ctx context.Context, srv *serverProc, officeID string, n int, d time.Duration, done func(ready, asleep int) bool) (int, error) {
	deadline := time.Now().Add(d)
	for {
		var ss []struct {
			Status string `json:"status"`
		}
		ready, asleep := 0, 0
		if err := srv.get(ctx, "/api/offices/"+officeID+"/sessions", &ss); err == nil {
			for _, s := range ss {
				switch s.Status {
				case "ready":
					ready++
				case "hibernated":
					asleep++
				}
			}
		}
		if done(ready, asleep) {
			return ready, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("of %d agents %d ready and %d hibernated after %s; server log ends: %s", n, ready, asleep, d, lastLines(srv.logs.String(), 5))
		}
		select {
		case <-srv.exited:
			return 0, fmt.Errorf("server exited (%v): %s", srv.err, srv.logs.String())
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// treePSS returns the proportional set size of root and every process
// below it, in MiB (shared pages divided among their sharers, so a sum
// counts them once), and how many processes that is.
func treePSS(root int) (float64, int) {
	var kb int64
	n := 0
	for _, pid := range append([]int{root}, descendants(root)...) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Pss:"); ok {
				f := strings.Fields(v)
				if len(f) > 0 {
					x, _ := strconv.ParseInt(f[0], 10, 64)
					kb += x
					n++
				}
			}
		}
	}
	return float64(kb) / 1024, n
}

// descendants returns every live process below root.
func descendants(root int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := procStatFields(pid)
		if err != nil {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], pid)
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, children[p]...)
		queue = append(queue, children[p]...)
	}
	return out
}

// hibernateLine runs r and prints its table.
func hibernateLine(ctx context.Context, r *hibernateRun, stdout, stderr io.Writer) error {
	h, err := r.run(ctx, stderr)
	if err != nil {
		return fmt.Errorf("hibernation: %w", err)
	}
	capText := "none"
	if h.MaxLive > 0 {
		capText = strconv.Itoa(h.MaxLive)
	}
	fmt.Fprintf(stdout, "\nHibernation, %d Claude Code agents (%s, embedded store, scripted model), max-live %s:\n\n", h.N, h.Version, capText)
	fmt.Fprintln(stdout, "| agents | ready after | PSS all live (agents, processes) | PSS all hibernated | per live agent | CPU all hibernated | wake → message at the model p50/p99 (wakes) | PSS peak over the wakes |")
	fmt.Fprintln(stdout, "|---|---|---|---|---|---|---|---|")
	fmt.Fprintf(stdout, "| %d | %.1f s | %.0f MiB (%d, %d) | %.0f MiB | %.0f MiB | %.2f%% | %.0f / %.0f ms (%d) | %.0f MiB |\n",
		h.N, h.Ready.Seconds(), h.LiveMiB, h.Live, h.LiveProcs, h.SleepMiB, (h.LiveMiB-h.SleepMiB)/float64(h.Live), 100*h.SleepCPU,
		ms(h.Wake[0]), ms(h.Wake[1]), h.Wakes, h.PeakMiB)
	return nil
}
