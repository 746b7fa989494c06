package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// median folds several runs of one store and size into one row: each
// column's median; counts of answers and early Enters summed; the fewest
// agents started; the notes joined.
func median(rs []result) result {
	if len(rs) == 1 {
		return rs[0]
	}
	out := rs[0]
	dur := func(f func(result) time.Duration) time.Duration {
		v := make([]time.Duration, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	num := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	out.Ready = dur(func(r result) time.Duration { return r.Ready })
	out.StartCPU = dur(func(r result) time.Duration { return r.StartCPU })
	out.IdleCPU = num(func(r result) float64 { return r.IdleCPU })
	out.IdleTreeCPU = num(func(r result) float64 { return r.IdleTreeCPU })
	out.RSSMB = num(func(r result) float64 { return r.RSSMB })
	out.Goroutines = int(num(func(r result) float64 { return float64(r.Goroutines) }))
	out.Threads = int(num(func(r result) float64 { return float64(r.Threads) }))
	for i := range 2 {
		out.Typed[i] = dur(func(r result) time.Duration { return r.Typed[i] })
		out.Enter[i] = dur(func(r result) time.Duration { return r.Enter[i] })
		out.BurstEnter[i] = dur(func(r result) time.Duration { return r.BurstEnter[i] })
		out.Invoke[i] = dur(func(r result) time.Duration { return r.Invoke[i] })
		out.InvokeRow[i] = dur(func(r result) time.Duration { return r.InvokeRow[i] })
		out.ProxyReq[i] = dur(func(r result) time.Duration { return r.ProxyReq[i] })
		out.HandOver[i] = dur(func(r result) time.Duration { return r.HandOver[i] })
		out.Told[i] = dur(func(r result) time.Duration { return r.Told[i] })
	}
	out.BurstRate = num(func(r result) float64 { return r.BurstRate })
	out.BurstCPU = dur(func(r result) time.Duration { return r.BurstCPU })
	out.IdleTx = num(func(r result) float64 { return r.IdleTx })
	out.Early, out.Answered, out.BurstN, out.Invoked, out.OnBound, out.TypedAgain = 0, 0, 0, 0, 0, 0
	var notes []string
	for _, r := range rs {
		out.Early += r.Early
		out.OnBound += r.OnBound
		out.TypedAgain += r.TypedAgain
		out.Answered += r.Answered
		out.BurstN += r.BurstN
		out.Invoked += r.Invoked
		out.Started = min(out.Started, r.Started)
		if r.Note != "" {
			notes = append(notes, r.Note)
		}
	}
	out.Note = strings.Join(notes, "; ")
	return out
}

// printScaling prints, per store, what one more agent costs between
// consecutive sizes: start-up time per extra agent, and the server's CPU
// per burst message at each size, with the ratio of the largest size's to
// the smallest's (the goal: flat within ±20%). With several runs, each
// figure is the median row's and the range over the runs follows.
func printScaling(w io.Writer, rows []result, runs map[[3]string][]result) {
	by := map[string][]result{}
	var stores []string
	for _, r := range rows {
		st := r.Store
		if r.Input != "" && r.Input != "echo" {
			st += " (" + r.Agents + ")"
		}
		if len(by[st]) == 0 {
			stores = append(stores, st)
		}
		by[st] = append(by[st], r)
	}
	fmt.Fprintln(w, "\nscaling (goal: flat within ±20% from the smallest size to the largest):")
	for _, st := range stores {
		rs := slices.Clone(by[st])
		slices.SortFunc(rs, func(a, b result) int { return a.N - b.N })
		if len(rs) < 2 {
			continue
		}
		start, ratio := steps(rs, runs, perAgent)
		startCPU, ratioCPU := steps(rs, runs, cpuPerAgent)
		var cpu []string
		for _, r := range rs {
			if r.BurstRate > 0 {
				cpu = append(cpu, fmt.Sprintf("%d: %.3f ms%s", r.N, ms(r.BurstCPU), spread(runs, r, r, func(_, x result) float64 { return ms(x.BurstCPU) })))
			}
		}
		fmt.Fprintf(w, "%s: start-up per extra agent %s%s; the server's CPU in it %s%s", st, strings.Join(start, ", "), ratio, strings.Join(startCPU, ", "), ratioCPU)
		fmt.Fprintf(w, "; server CPU per burst message %s", strings.Join(cpu, ", "))
		if lo, hi := rs[0], rs[len(rs)-1]; lo.BurstRate > 0 && hi.BurstRate > 0 {
			fmt.Fprintf(w, " (×%.2f from %d to %d)", ms(hi.BurstCPU)/ms(lo.BurstCPU), lo.N, hi.N)
		}
		fmt.Fprintln(w)
	}
}

// steps gives f between consecutive sizes ("10→200 8.27 ms", with the
// runs' range) and, for more than one step, the last over the first.
func steps(rs []result, runs map[[3]string][]result, f func(a, b result) float64) ([]string, string) {
	var out []string
	var first, last float64
	for i := 1; i < len(rs); i++ {
		a, b := rs[i-1], rs[i]
		v := f(a, b)
		if i == 1 {
			first = v
		}
		last = v
		out = append(out, fmt.Sprintf("%d→%d %.2f ms%s", a.N, b.N, v, spread(runs, a, b, f)))
	}
	if len(out) < 2 || first == 0 {
		return out, ""
	}
	return out, fmt.Sprintf(" (×%.2f)", last/first)
}

// cpuPerAgent is the server CPU each agent from a.N to b.N added to the
// start-up, in ms: the server's own cost, apart from the machine's other
// work (over Supabase, the stand-in in the driver's process).
func cpuPerAgent(a, b result) float64 {
	if b.N == a.N {
		return 0
	}
	return ms(b.StartCPU-a.StartCPU) / float64(b.N-a.N)
}

// perAgent is the start-up time each agent from a.N to b.N added, in ms.
func perAgent(a, b result) float64 {
	return ms(b.Ready-a.Ready) / float64(b.N-a.N)
}

// spread is " (runs lo–hi)" of f over the runs of a's and b's size taken
// pairwise, or "" for a single run.
func spread(runs map[[3]string][]result, a, b result, f func(a, b result) float64) string {
	ra, rb := runs[runKey(a)], runs[runKey(b)]
	if len(ra) < 2 || len(ra) != len(rb) {
		return ""
	}
	v := make([]float64, len(ra))
	for i := range ra {
		v[i] = f(ra[i], rb[i])
	}
	return fmt.Sprintf(" (runs %.2f–%.2f)", slices.Min(v), slices.Max(v))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// runKey is the key of r's store, size and kind of agent in the runs.
func runKey(r result) [3]string { return [3]string{r.Store, fmt.Sprint(r.N), r.Input} }
