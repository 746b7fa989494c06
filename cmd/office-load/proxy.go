package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/office-server/office-server/office"
)

// proxies runs Proxies rounds of the proxy protocol (seed 004), one at a
// time, with three agents waiting at their prompts: A, B and a proxy P.
//
//  1. A is answered "proxy P": it prints a [PROXY_REQUEST] create_plan for
//     P; timed from the block printed to P's Enter of the request.
//  2. B is answered the same: P keeps A's task (its capacity is one), so
//     B's request is parked.
//  3. P is answered "close task": it prints an update_status closing A's
//     task. Timed from that block printed: to the later of P's Enter of
//     its [PROXY_RESPONSE] and A's of the notice (both sides told), and to
//     P's Enter of B's request (the parked request handed over).
//  4. P closes B's task too (both sides told, again).
func (d *drive) proxies(ctx context.Context) error {
	if d.c.N < 3 || d.c.Proxies <= 0 {
		return nil
	}
	names := d.agentNames(ctx)
	var req, handed, told []time.Duration
	for rounds := 0; rounds < d.c.Proxies; rounds++ {
		qs, err := d.waitingAgents(ctx, 3, nil)
		if err != nil {
			return err
		}
		a, b, p := qs[0], qs[1], qs[2]
		an, bn, pn := names[a.AgentID], names[b.AgentID], names[p.AgentID]
		if err := d.answer(ctx, a, "proxy "+pn); err != nil {
			return err
		}
		rs, err := d.awaitAll(ctx, fmt.Sprintf("%s's request to %s", an, pn),
			is("proxy", an), is("proxyreq:"+an, pn), is("response", an))
		if err != nil {
			return err
		}
		req = append(req, rs[1].enter.Sub(rs[0].enter))
		if err := d.answer(ctx, b, "proxy "+pn); err != nil {
			return err
		}
		if _, err := d.awaitAll(ctx, fmt.Sprintf("%s's request to %s, parked", bn, pn), is("proxy", bn), is("response", bn)); err != nil {
			return err
		}
		if err := d.answer(ctx, p, "close task"); err != nil {
			return err
		}
		rs, err = d.awaitAll(ctx, fmt.Sprintf("%s closes %s's task", pn, an),
			is("closed", pn), is("response", pn), is("told", an), is("proxyreq:"+bn, pn), is("response", bn))
		if err != nil {
			return err
		}
		told = append(told, later(rs[1].enter, rs[2].enter).Sub(rs[0].enter))
		handed = append(handed, rs[3].enter.Sub(rs[0].enter))
		// P asked again after its response: close B's task with that.
		next, err := d.waitingAgents(ctx, 1, func(q office.Question) bool { return q.AgentID == p.AgentID && q.ID != p.ID })
		if err != nil {
			return err
		}
		if err := d.answer(ctx, next[0], "close task"); err != nil {
			return err
		}
		rs, err = d.awaitAll(ctx, fmt.Sprintf("%s closes %s's task", pn, bn), is("closed", pn), is("response", pn), is("told", bn))
		if err != nil {
			return err
		}
		told = append(told, later(rs[1].enter, rs[2].enter).Sub(rs[0].enter))
	}
	d.res.ProxyRounds = len(req)
	d.res.ProxyReq, d.res.HandOver, d.res.Told = pcts(req), pcts(handed), pcts(told)
	return nil
}

// newestEach keeps the newest question of each agent.
func newestEach(qs []office.Question) []office.Question {
	qs = slices.Clone(qs)
	slices.SortStableFunc(qs, func(a, b office.Question) int { return b.CreatedAt.Compare(a.CreatedAt) })
	seen := map[string]bool{}
	return slices.DeleteFunc(qs, func(q office.Question) bool {
		dup := seen[q.AgentID]
		seen[q.AgentID] = true
		return dup
	})
}

// waitingAgents returns n questions of distinct agents (the newest of
// each) that keep matches (nil: any), waiting until there are so many.
func (d *drive) waitingAgents(ctx context.Context, n int, keep func(office.Question) bool) ([]office.Question, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		qs, err := d.pending(ctx)
		if err != nil {
			return nil, err
		}
		if keep != nil {
			qs = slices.DeleteFunc(qs, func(q office.Question) bool { return !keep(q) })
		}
		out := newestEach(qs)
		if len(out) >= n {
			return out[:n], nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("proxies: %d agents waiting with a question after 10 s, want %d", len(out), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (d *drive) answer(ctx context.Context, q office.Question, text string) error {
	if _, ok, err := d.w.AnswerQuestion(ctx, q.ID, text, ""); err != nil || !ok {
		return fmt.Errorf("answer %s: %v (answered %v)", q.ID, err, ok)
	}
	return nil
}

// is matches a report of kind what from the agent name.
func is(what, name string) func(report) bool {
	return func(r report) bool { return r.what == what && r.name == name }
}

// awaitAll waits for one report matching each of want, in any order, and
// returns them in want's order; other reports are dropped.
func (d *drive) awaitAll(ctx context.Context, what string, want ...func(report) bool) ([]report, error) {
	got := make([]report, len(want))
	have := make([]bool, len(want))
	left := len(want)
	// The bound leaves room for a server that hands parked requests over
	// only at its sweep (every 15 s).
	timeout := time.After(30 * time.Second)
	for left > 0 {
		select {
		case r := <-d.reports:
			for i, w := range want {
				if !have[i] && w(r) {
					got[i], have[i] = r, true
					left--
					break
				}
			}
		case <-timeout:
			return nil, fmt.Errorf("%s: %d of %d reports after 30 s; server log: %s", what, len(want)-left, len(want), lastLines(d.srv.logs.String(), 20))
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return got, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// printProxyTable prints the proxy rounds' figures, a row per run that
// had them.
func printProxyTable(w io.Writer, rs []result) {
	var rows []string
	for _, r := range rs {
		if r.ProxyRounds > 0 {
			rows = append(rows, fmt.Sprintf("| %s | %d (%s) | %s | %s | %s |", r.Store, r.N, r.Agents,
				pair(r.ProxyReq, r.ProxyRounds), pair(r.HandOver, r.ProxyRounds), pair(r.Told, r.ProxyRounds)))
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nproxy protocol (one round at a time; goals: request → proxy Enter p99 ≤ 100 ms, hand-over ≤ 1 s, both told ≤ 100 ms):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| store | agents | PROXY_REQUEST printed → proxy's Enter p50/p99 | update_status printed → parked request's Enter in the proxy p50/p99 | update_status printed → both sides' Enter p50/p99 |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	fmt.Fprintln(w, strings.Join(rows, "\n"))
}
