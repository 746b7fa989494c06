package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/testenv"
)

// The test binary is also the load agent the server runs (`<bin> agent`).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		os.Exit(agentMain(os.Args[2:], os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// TestDriverTable runs the driver on the built server with 3 agents on
// each store (Supabase: the stand-in project), for each kind of load agent
// (echoing, showing nothing, canonical with echo off), and checks the
// table: one row per run, every column filled with a plausible number,
// every answer and task typed and entered once, none early, no Enter on
// the EnterDelay bound and nothing typed again.
func TestDriverTable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "office-server")
	build := exec.Command("go", "build", "-o", bin, "./cmd/office-server")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	base := testenv.PostgresURL(t)
	self, _ := os.Executable()
	var out, errs bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	err := Main(ctx, []string{"-server", bin, "-agent-bin", self, "-n", "3", "-stores", "sqlite,postgres,supabase",
		"-answers", "6", "-invokes", "4", "-proxies", "3", "-idle", "1s", "-database-url", base, "-dir", t.TempDir()}, &out, &errs)
	if err != nil {
		t.Fatalf("driver: %v\n%s", err, errs.String())
	}
	t.Logf("\n%s", out.String())
	var rows, proxyRows [][]string
	inProxy := false
	for _, l := range strings.Split(out.String(), "\n") {
		inProxy = inProxy || strings.HasPrefix(l, "proxy protocol")
		if strings.HasPrefix(l, "| sqlite") || strings.HasPrefix(l, "| postgres") || strings.HasPrefix(l, "| supabase") {
			f := strings.Split(strings.Trim(l, "| "), " | ")
			if want := map[bool]int{false: 17, true: 5}[inProxy]; len(f) != want {
				t.Fatalf("row has %d columns, want %d: %q", len(f), want, l)
			}
			if inProxy {
				proxyRows = append(proxyRows, f)
			} else {
				rows = append(rows, f)
			}
		}
	}
	if len(proxyRows) != 9 {
		t.Fatalf("%d proxy rows, want 9:\n%s", len(proxyRows), out.String())
	}
	if len(rows) != 9 {
		t.Fatalf("%d rows, want 9:\n%s", len(rows), out.String())
	}
	for _, r := range rows {
		checkLoadRow(t, r)
	}
	// The proxy rounds: a parked request handed over within 5 s is
	// handed over on the event, not at the sweep (15 s).
	for _, r := range proxyRows {
		for col := 2; col <= 4; col++ {
			v := cellNums(r[col])
			if len(v) != 2 || v[0] <= 0 || v[0] > v[1] || v[1] > 5000 {
				t.Errorf("%s, %s: proxy column %d = %q, want 0 < p50 ≤ p99 < 5 s", r[0], r[1], col, r[col])
			}
		}
	}
}

// TestScaling: the median row of three runs, and the per-agent start-up
// cost and CPU per message between sizes, with the runs' range.
func TestScaling(t *testing.T) {
	mk := func(n int, ready, cpu time.Duration, early int) result {
		return result{Store: "sqlite", N: n, Started: n, Ready: ready, StartCPU: 100*time.Millisecond + time.Duration(n)*2*time.Millisecond, BurstCPU: cpu, BurstRate: 100, BurstN: n, Answered: 10, Early: early}
	}
	runs := map[[3]string][]result{
		{"sqlite", "10"}:   {mk(10, 500*time.Millisecond, 500*time.Microsecond, 0), mk(10, 400*time.Millisecond, 400*time.Microsecond, 1), mk(10, 600*time.Millisecond, 600*time.Microsecond, 0)},
		{"sqlite", "1000"}: {mk(1000, 10400*time.Millisecond, 700*time.Microsecond, 0), mk(1000, 8400*time.Millisecond, 500*time.Microsecond, 0), mk(1000, 9400*time.Millisecond, 600*time.Microsecond, 0)},
	}
	lo, hi := median(runs[[3]string{"sqlite", "10", ""}]), median(runs[[3]string{"sqlite", "1000", ""}])
	if lo.Ready != 500*time.Millisecond || lo.BurstCPU != 500*time.Microsecond || lo.Early != 1 || lo.Answered != 30 {
		t.Errorf("median of 10: ready %v, CPU/msg %v, early %d, answered %d; want 500ms, 500µs, 1 (summed), 30 (summed)", lo.Ready, lo.BurstCPU, lo.Early, lo.Answered)
	}
	var out bytes.Buffer
	printScaling(&out, []result{lo, hi}, runs)
	// (9.4 s − 0.5 s) / 990 agents = 8.99 ms; runs pairwise: 9.9/990, 8.0/990, 8.8/990.
	for _, want := range []string{
		"sqlite: start-up per extra agent 10→1000 8.99 ms (runs 8.08–10.00); ",
		// The server's own CPU: (2.1 s − 0.12 s) / 990 agents.
		"the server's CPU in it 10→1000 2.00 ms (runs 2.00–2.00); ",
		"server CPU per burst message 10: 0.500 ms (runs 0.40–0.60), 1000: 0.600 ms (runs 0.50–0.70) (×1.20 from 10 to 1000)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("scaling lines lack %q:\n%s", want, out.String())
		}
	}
}

var cellNum = regexp.MustCompile(`[0-9.]+`)

// cellNums reads the numbers of a table cell.
func cellNums(s string) []float64 {
	var v []float64
	for _, m := range cellNum.FindAllString(s, -1) {
		f, _ := strconv.ParseFloat(m, 64)
		v = append(v, f)
	}
	return v
}

// checkLoadRow checks one store's row of the driver's table.
func checkLoadRow(t *testing.T, r []string) {
	if !strings.HasPrefix(r[1], "3 (load agent") || !strings.HasSuffix(r[2], "s") || strings.Contains(r[2], "of") {
		t.Errorf("%s: agents %q, ready %q", r[0], r[1], r[2])
	}
	for _, col := range []int{7, 8, 12, 13, 14} { // p50 / p99 pairs
		v := cellNums(r[col])
		if len(v) != 2 || v[0] <= 0 || v[0] > v[1] || v[1] > 5000 {
			t.Errorf("%s: column %d = %q, want 0 < p50 ≤ p99 < 5 s", r[0], col, r[col])
		}
	}
	if r[9] != "0 of 13" {
		t.Errorf("%s: early Enters %q, want 0 of 13 (6 answers, 4 tasks and a burst of 3)", r[0], r[9])
	}
	for _, col := range []int{4, 5, 6, 10} { // RSS, goroutines, threads, burst rate
		if v := cellNums(r[col]); len(v) == 0 || v[0] <= 0 {
			t.Errorf("%s: column %d = %q, want > 0", r[0], col, r[col])
		}
	}
	// The office's part of an INVOKE is within the whole.
	if whole, part := cellNums(r[13]), cellNums(r[14]); len(whole) == 2 && len(part) == 2 && part[0] > whole[0] {
		t.Errorf("%s: invocation row → Enter p50 %v ms over INVOKE printed → Enter p50 %v ms", r[0], part[0], whole[0])
	}
	if r[15] != "0 / 0" {
		t.Errorf("%s, %s: Enters on the bound / typed again = %q, want 0 / 0", r[0], r[1], r[15])
	}
	// Not measured over Supabase: the stand-in's own WAL polls would count.
	if v := cellNums(r[16]); r[0] != "supabase" && len(v) != 1 || r[0] == "supabase" && r[16] != "—" {
		t.Errorf("%s: DB tx/s idle = %q, want a number (— for supabase)", r[0], r[16])
	}
}
