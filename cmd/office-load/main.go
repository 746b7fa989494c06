// Command office-load measures the real office-server as its users feel it
// (issue 17). It runs the built `office-server serve` with N cheap agents
// (launch kind command: this program's `agent` mode) on each store, answers
// their questions from its own connection to the database (another
// process, as a frontend's backend or a script), and prints a table: time
// until every agent is ready, CPU at idle (the server's, and its agents'
// and the keeper's watchdog's), RSS, goroutines, threads, answer committed → text in the
// agent's PTY and → Enter (p50/p99, one at a time), INVOKE printed by one
// agent → the task entered in another (p50/p99, one at a time), a burst
// of N answers (messages per second, server CPU per message, commit →
// Enter), and the database's transactions per second at idle. After the
// table it prints what one more agent costs between sizes. With -repeat
// each row is the median of several runs.
//
//	go build -o bin/ ./cmd/office-server ./cmd/office-load
//	bin/office-load -n 10,200,1000 -stores sqlite,postgres
//
// With -agent cat the agents are a trivial program instead (nothing is
// answered): for start-up, memory and thread counts at large N.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		os.Exit(agentMain(os.Args[2:], os.Stdin, os.Stdout))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Main(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "office-load:", err)
		os.Exit(1)
	}
}

// Main parses args, runs every store × N, and prints the table to stdout
// (progress to stderr).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("office-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	self, _ := os.Executable()
	ns := fs.String("n", "10,200,1000", "agent counts, comma-separated")
	stores := fs.String("stores", "sqlite,postgres", "stores: sqlite, postgres, supabase (the server's Supabase mode against the repository's stand-in project, over PostgreSQL)")
	c := config{}
	fs.StringVar(&c.Server, "server", filepath.Join(filepath.Dir(self), "office-server"), "the office-server binary")
	fs.StringVar(&c.AgentBin, "agent-bin", self, "the program run as the load agent (`<bin> agent`)")
	fs.StringVar(&c.Command, "agent", "", "a trivial agent command instead of the load agent (e.g. cat)")
	inputs := fs.String("input", "echo,raw,canon", "the load agents' kinds of input, comma-separated, a row each: echo (shows what it is typed), raw (raw mode, shows nothing), canon (canonical mode, echo off)")
	fs.StringVar(&c.BaseURL, "database-url", envOr("DATABASE_URL_TEST", "postgres://office:office@127.0.0.1:5432/office_test?sslmode=disable"), "PostgreSQL server (a database of its own is created per run)")
	fs.IntVar(&c.Answers, "answers", 100, "answers timed one at a time")
	fs.IntVar(&c.Invokes, "invokes", 100, "INVOKEs timed one at a time (printed → the task entered in an idle target)")
	fs.IntVar(&c.Proxies, "proxies", 20, "proxy rounds timed one at a time (a request, a parked one, two update_status)")
	fs.DurationVar(&c.Idle, "idle", 20*time.Second, "idle window")
	fs.DurationVar(&c.Settle, "settle", 2*time.Second, "pause between start-up and the idle window")
	fs.DurationVar(&c.Ready, "ready-timeout", 10*time.Minute, "bound on start-up")
	fs.StringVar(&c.Dir, "dir", "", "scratch directory (default: the system's)")
	fs.StringVar(&c.Profile, "profile", "", "write the server's CPU profiles of start-up, the idle window and the burst to this directory (1 s pieces: go tool pprof DIR/sqlite-1000-startup-*)")
	fs.StringVar(&c.Logs, "server-log", "", "keep the server's log of each run, at debug level, in this directory (DIR/sqlite-10-r1.log)")
	claudeN := fs.Int("claude", 0, "also time this many INVOKEs from a real Claude Code caller (transcript line → task Enter in an idle load agent; embedded store, scripted model)")
	claudeBin := fs.String("claude-bin", envOr("OFFICE_CLAUDE_BIN", "claude"), "the Claude Code binary for -claude (env OFFICE_CLAUDE_BIN)")
	hibN := fs.Int("hibernate", 0, "measure hibernation with this many real Claude Code agents instead (PSS live and hibernated, wake → message at the model; embedded store, scripted model)")
	hibAfter := fs.Duration("hibernate-after", 60*time.Second, "with -hibernate: the agents' hibernate_after (all must be ready before it)")
	maxLive := fs.Int("max-live", 0, "with -hibernate: the server's --max-live")
	wakes := fs.Int("wakes", 20, "with -hibernate: wake-ups timed, one at a time, each to a hibernated agent (at most one per agent)")
	repeat := fs.Int("repeat", 1, "runs of each store and size; the table gives each column's median, the upper one for an even count (runs interleaved: every size once, then again)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, err := os.Stat(c.Server); err != nil {
		return fmt.Errorf("office-server binary: %w (build it: go build -o bin/ ./cmd/office-server ./cmd/office-load)", err)
	}
	if *repeat < 1 {
		return fmt.Errorf("bad -repeat %d", *repeat)
	}
	if *hibN > 0 {
		return hibernateLine(ctx, &hibernateRun{c: c, bin: *claudeBin, n: *hibN, after: *hibAfter, maxLive: *maxLive, wakes: *wakes}, stdout, stderr)
	}
	sizes, kinds, err := parseSizes(*ns, *inputs, *claudeN > 0, c.Command != "")
	if err != nil {
		return err
	}
	runs := map[[3]string][]result{}
	var order [][3]string
	for rep := range *repeat {
		for _, st := range strings.Split(*stores, ",") {
			for _, n := range sizes {
				for _, in := range kinds {
					c.Store, c.N, c.Rep, c.Input = strings.TrimSpace(st), n, rep+1, in
					fmt.Fprintf(stderr, "office-load: %s, %d agents (%s; run %d of %d)…\n", c.Store, n, agentsText(in), rep+1, *repeat)
					r, err := run(ctx, c)
					if err != nil {
						return fmt.Errorf("%s, %d agents (%s): %w", c.Store, n, agentsText(in), err)
					}
					k := [3]string{c.Store, strconv.Itoa(n), in}
					if rep == 0 {
						order = append(order, k)
					}
					runs[k] = append(runs[k], r)
				}
			}
		}
	}
	var results []result
	for _, k := range order {
		results = append(results, median(runs[k]))
	}
	if len(results) > 0 {
		printTable(stdout, results, *repeat)
		printProxyTable(stdout, results)
		printScaling(stdout, results, runs)
	}
	if *claudeN > 0 {
		return claudeLine(ctx, &claudeRun{c: c, bin: *claudeBin, n: *claudeN}, stdout, stderr)
	}
	return nil
}

// parseSizes reads -n (agent counts; empty with -claude: only the Claude
// Code caller) and -input (the load agents' kinds; one "" with -agent).
func parseSizes(ns, inputs string, claudeOnly, command bool) (sizes []int, kinds []string, err error) {
	for _, f := range strings.Split(ns, ",") {
		if ns == "" && claudeOnly {
			break // only the Claude Code caller
		}
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, nil, fmt.Errorf("bad -n %q", f)
		}
		sizes = append(sizes, n)
	}
	kinds = strings.Split(inputs, ",")
	if command {
		kinds = []string{""}
	}
	for _, k := range kinds {
		if k != "" && k != "echo" && k != "raw" && k != "canon" {
			return nil, nil, fmt.Errorf("bad -input %q (echo, raw, canon)", k)
		}
	}
	return sizes, kinds, nil
}

// claudeLine runs the Claude Code caller and prints its figures.
func claudeLine(ctx context.Context, r *claudeRun, stdout, stderr io.Writer) error {
	cr, err := r.run(ctx, stderr)
	if err != nil {
		return fmt.Errorf("claude caller: %w", err)
	}
	fmt.Fprintf(stdout, "\nClaude Code caller (%s, embedded store), %d INVOKEs → task Enter in an idle load agent:\n"+
		"- from the INVOKE line's timestamp in its transcript: p50 %.2f ms, p99 %.2f ms\n"+
		"- from the line being in the transcript file (read every 2 ms): p50 %.2f ms, p99 %.2f ms\n",
		cr.Version, cr.N, ms(cr.Invoke[0]), ms(cr.Invoke[1]), ms(cr.FromWrite[0]), ms(cr.FromWrite[1]))
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// printTable prints results as a Markdown table, with the machine.
func printTable(w io.Writer, rs []result, repeat int) {
	fmt.Fprintf(w, "machine: %s, %d cores (%s/%s); kernel PTY limit %s\n", cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, ptyLine())
	if repeat > 1 {
		fmt.Fprintf(w, "each row: the median of %d runs per column (Enter early: the sum)\n", repeat)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| store | agents | ready | idle CPU server / agents | RSS | goroutines | threads | commit → typed p50/p99 | commit → Enter p50/p99 | Enter early | burst msg/s | CPU/msg | burst Enter p50/p99 | INVOKE printed → task Enter p50/p99 | invocation row → task Enter p50/p99 | Enter on the bound / typed again | DB tx/s idle |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %d (%s) | %s | %.2f%% / %.2f%% | %.0f MB | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Store, r.N, r.Agents, readyText(r), 100*r.IdleCPU, 100*r.IdleTreeCPU, r.RSSMB, r.Goroutines, r.Threads,
			pair(r.Typed, r.Answered), pair(r.Enter, r.Answered), earlyText(r), rateText(r.BurstRate), msText(r.BurstCPU, r.BurstRate > 0),
			pair(r.BurstEnter, r.BurstN), pair(r.Invoke, r.Invoked), pair(r.InvokeRow, r.Invoked), countsText(r), txText(r.IdleTx))
	}
	for _, r := range rs {
		if r.Note != "" {
			fmt.Fprintf(w, "\n%s, %d agents: %s (kernel PTYs: %d of %d in use; /proc/sys/kernel/pty/max)\n", r.Store, r.N, r.Note, r.PTYUsed, r.PTYMax)
		}
	}
}

func readyText(r result) string {
	s := r.Ready.Round(10 * time.Millisecond).String()
	if r.Started < r.N {
		return fmt.Sprintf("%d of %d in %s", r.Started, r.N, s)
	}
	return s
}

func pair(p [2]time.Duration, n int) string {
	if n == 0 {
		return "—"
	}
	return msText(p[0], true) + " / " + msText(p[1], true)
}

func msText(d time.Duration, ok bool) string {
	if !ok {
		return "—"
	}
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + " ms"
}

func earlyText(r result) string {
	if r.Answered == 0 {
		return "—"
	}
	return fmt.Sprintf("%d of %d", r.Early, r.Answered+r.BurstN+r.Invoked)
}

// countsText is the server's count of Enters pressed on the EnterDelay
// bound and of texts typed again.
func countsText(r result) string {
	if r.OnBound < 0 || r.TypedAgain < 0 {
		return "—"
	}
	return fmt.Sprintf("%d / %d", r.OnBound, r.TypedAgain)
}

func rateText(v float64) string {
	if v == 0 {
		return "—"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

func txText(v float64) string {
	if v < 0 {
		return "—"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return "unknown CPU"
}

func ptyLine() string {
	max, used := ptyLimit()
	return fmt.Sprintf("%d (%d in use now)", max, used)
}
