package main

import (
	"context"
	"fmt"
	"time"

	"github.com/office-server/office-server/office"
)

// invokes gives Invokes tasks one at a time and times INVOKE printed →
// the task typed and Enter pressed in the target, an idle agent waiting
// at its prompt. For each, an agent's question is answered "invoke
// <other>"; the agent prints [INVOKE:<other>] (and reports when), the
// target reports its task's Enter and delivers a result, and the caller,
// given the result, asks again.
func (d *drive) invokes(ctx context.Context) error {
	if d.c.N < 2 || d.c.Invokes <= 0 {
		return nil
	}
	var took, fromRow []time.Duration
	ids := d.agentIDs(ctx)
	for len(took) < d.c.Invokes {
		qs, err := d.pending(ctx)
		if err != nil {
			return err
		}
		if len(qs) < 2 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		byID := d.agentNames(ctx)
		for i := 0; i+1 < len(qs) && len(took) < d.c.Invokes; i += 2 {
			caller, target := byID[qs[i].AgentID], byID[qs[i+1].AgentID]
			if caller == "" || target == "" || caller == target {
				continue
			}
			if _, ok, err := d.w.AnswerQuestion(ctx, qs[i].ID, "invoke "+target, ""); err != nil || !ok {
				return fmt.Errorf("answer %s: %v (answered %v)", qs[i].ID, err, ok)
			}
			printed, entered, early, err := d.awaitInvoke(ctx, caller, target)
			if err != nil {
				return err
			}
			took = append(took, entered.Sub(printed))
			row, err := d.invocationRow(ctx, ids[target])
			if err != nil {
				return err
			}
			fromRow = append(fromRow, entered.Sub(row))
			if early {
				d.res.Early++
			}
			time.Sleep(10 * time.Millisecond) // one at a time
		}
	}
	d.res.Invoked = len(took)
	d.res.Invoke = pcts(took)
	d.res.InvokeRow = pcts(fromRow)
	return nil
}

// invocationRow returns when the newest invocation of target was created:
// the office had read the INVOKE then.
func (d *drive) invocationRow(ctx context.Context, target string) (time.Time, error) {
	invs, err := d.w.ListInvocations(ctx, office.InvocationFilter{OfficeID: d.officeID, CalleeAgentID: target})
	if err != nil {
		return time.Time{}, err
	}
	if len(invs) == 0 {
		return time.Time{}, fmt.Errorf("no invocation of %s in the store", target)
	}
	return invs[len(invs)-1].CreatedAt, nil
}

// awaitInvoke waits for one INVOKE's round: the caller printed it, the
// target's task was entered, the caller's result was entered. It returns
// when it was printed, when the task was entered, and whether that Enter
// came early.
func (d *drive) awaitInvoke(ctx context.Context, caller, target string) (printed, entered time.Time, early bool, err error) {
	resulted := false
	timeout := time.After(10 * time.Second)
	for printed.IsZero() || entered.IsZero() || !resulted {
		select {
		case r := <-d.reports:
			switch {
			case r.what == "printed" && r.name == caller && r.target == target:
				printed = r.enter
			case r.what == "task" && r.name == target:
				entered, early = r.enter, r.early
			case r.what == "result" && r.name == caller:
				resulted = true
			}
		case <-timeout:
			return printed, entered, false, fmt.Errorf("INVOKE %s → %s: printed %v, task entered %v, result entered %v after 10 s; server log: %s",
				caller, target, !printed.IsZero(), !entered.IsZero(), resulted, lastLines(d.srv.logs.String(), 20))
		case <-ctx.Done():
			return printed, entered, false, ctx.Err()
		}
	}
	return printed, entered, early, nil
}

// agentNames maps agent ids to names.
func (d *drive) agentNames(ctx context.Context) map[string]string {
	out := map[string]string{}
	for name, id := range d.agentIDs(ctx) {
		out[id] = name
	}
	return out
}
