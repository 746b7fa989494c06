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
// each store and checks the table: one row per run, every column filled
// with a plausible number, every answer typed and entered once, none
// early.
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
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := Main(ctx, []string{"-server", bin, "-agent-bin", self, "-n", "3", "-stores", "sqlite,postgres",
		"-answers", "6", "-idle", "1s", "-database-url", base, "-dir", t.TempDir()}, &out, &errs)
	if err != nil {
		t.Fatalf("driver: %v\n%s", err, errs.String())
	}
	t.Logf("\n%s", out.String())
	var rows [][]string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "| sqlite") || strings.HasPrefix(l, "| postgres") {
			f := strings.Split(strings.Trim(l, "| "), " | ")
			if len(f) != 14 {
				t.Fatalf("row has %d columns, want 14: %q", len(f), l)
			}
			rows = append(rows, f)
		}
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2:\n%s", len(rows), out.String())
	}
	num := regexp.MustCompile(`[0-9.]+`)
	ms := func(s string) []float64 {
		var v []float64
		for _, m := range num.FindAllString(s, -1) {
			f, _ := strconv.ParseFloat(m, 64)
			v = append(v, f)
		}
		return v
	}
	for _, r := range rows {
		if r[1] != "3 (load agent)" || !strings.HasSuffix(r[2], "s") || strings.Contains(r[2], "of") {
			t.Errorf("%s: agents %q, ready %q", r[0], r[1], r[2])
		}
		for _, col := range []int{7, 8, 12} { // p50 / p99 pairs
			v := ms(r[col])
			if len(v) != 2 || v[0] <= 0 || v[0] > v[1] || v[1] > 5000 {
				t.Errorf("%s: column %d = %q, want 0 < p50 ≤ p99 < 5 s", r[0], col, r[col])
			}
		}
		if r[9] != "0 of 9" {
			t.Errorf("%s: early Enters %q, want 0 of 9 (6 answers and a burst of 3)", r[0], r[9])
		}
		for _, col := range []int{4, 5, 6, 10} { // RSS, goroutines, threads, burst rate
			if v := ms(r[col]); len(v) == 0 || v[0] <= 0 {
				t.Errorf("%s: column %d = %q, want > 0", r[0], col, r[col])
			}
		}
		if v := ms(r[13]); len(v) != 1 {
			t.Errorf("%s: DB tx/s idle = %q, want a number", r[0], r[13])
		}
	}
}
