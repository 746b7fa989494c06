package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/office-server/office-server/internal/testenv"
)

// askOnMessage asks a question each time it is given a message (the office
// types a message's text as lines quoted with "> ").
const askOnMessage = `echo 'q>'
while IFS= read -r l; do
  case "$l" in '> '*) printf '[ASK_USER]\nquestion: Ship %s now?\ntype: selection\noptions: yes, no\n[/ASK_USER]\n' "${l#> }"; echo 'q>';; esac
done
`

// TestConsoleGridLive opens the console in headless Chromium on an office
// of eight agents and checks what the grid shows is live without polling:
// one tile per agent; a stop shows in its tile within a second, measured
// by the page (a MutationObserver stamps the moment the tile changes);
// a new question raises the needs-me count within a second of the
// question's creation, the page reading that question alone; the page requests nothing while nothing happens
// (requests counted by path from the page's resource timings); two
// terminals open side by side both show new output.
func TestConsoleGridLive(t *testing.T) {
	bin := testenv.Chromium(t)
	dir := t.TempDir()
	asker := filepath.Join(dir, "ask.sh")
	if err := os.WriteFile(asker, []byte(askOnMessage), 0o755); err != nil {
		t.Fatal(err)
	}
	var y strings.Builder
	y.WriteString("office:\n  name: Grid office\nagents:\n")
	fmt.Fprintf(&y, "  - name: asker\n    launch: {kind: command, command: /bin/sh, args: [%q], prompt_pattern: \"^q>$\"}\n", asker)
	for i := range 7 {
		fmt.Fprintf(&y, "  - name: g%d\n    launch: {kind: command, command: /bin/sh, args: [-c, \"echo 'g%d>'; exec cat\"], prompt_pattern: \"^g%d>$\"}\n", i, i, i)
	}
	r := startMainOffice(t, y.String())
	officeID := r.officeID(t)
	for _, n := range []string{"asker", "g0", "g1", "g2", "g3", "g4", "g5", "g6"} {
		r.waitAgent(t, officeID, n)
	}
	ctx := chromeSized(t, bin, 1280, 800)
	if err := chromedp.Do(ctx, chromedp.Navigate(r.base+"/?token="+r.token)); err != nil {
		t.Fatal(err)
	}
	g := &gridPage{t: t, ctx: ctx, r: r, officeID: officeID}
	g.waitJS(`document.querySelectorAll('#agents.grid tr.agent[data-status="ready"]').length === 8 && document.querySelector('#live').textContent === 'live'`)
	// The tiles are a grid: several side by side on one line.
	perLine := g.evalInt(`(() => { const tops = [...document.querySelectorAll('#agents tr.agent')].map((e) => e.getBoundingClientRect().top); return tops.filter((x) => x === tops[0]).length; })()`)
	if perLine < 2 {
		t.Errorf("%d tile(s) on the first line of the grid, want several side by side", perLine)
	}
	saveScreenshot(t, ctx, "console-grid.png")

	// The page stamps, in its own clock (the machine's), when a tile or
	// the needs-me count changes.
	g.evalInt(`window.stamps = {};
new MutationObserver((ms) => { for (const m of ms) {
  const e = m.target;
  if (e.matches('tr.agent')) window.stamps[e.dataset.name + ':' + e.dataset.status] = window.stamps[e.dataset.name + ':' + e.dataset.status] || Date.now();
  if (e.id === 'needcount') window.stamps['need:' + e.dataset.count] = window.stamps['need:' + e.dataset.count] || Date.now();
} }).observe(document.body, { subtree: true, attributes: true, attributeFilter: ['data-status', 'data-count'] }); 1`)

	g.quiet()
	stopShown := g.stopShown()
	needShown := g.questionShown()
	g.twoTerminals()
	t.Logf("grid of 8: a stop showed in its tile %v after the request; a question raised the needs-me count %v after its creation",
		stopShown.Round(time.Millisecond), needShown.Round(time.Millisecond))
}

// gridPage is the console open on TestConsoleGridLive's office.
type gridPage struct {
	t        *testing.T
	ctx      context.Context
	r        *liveServer
	officeID string
}

func (g *gridPage) evalInt(js string) int64 {
	g.t.Helper()
	n, err := chromedp.Run(g.ctx, chromedp.Evaluate[int64](js))
	if err != nil {
		g.t.Fatalf("%s: %v", js, err)
	}
	return n
}

// waitJS waits up to 30 s for js to be true in the page.
func (g *gridPage) waitJS(js string) {
	g.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ok, err := chromedp.Run(g.ctx, chromedp.Evaluate[bool](js)); err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			page, _ := chromedp.Run(g.ctx, chromedp.Evaluate[string](`document.querySelector('#live').textContent + ' | ' + document.querySelector('#agentserror').textContent + ' | ' + document.querySelector('#note').textContent + ' | ' + [...document.querySelectorAll('tr.agent')].map((e) => e.dataset.name + ':' + e.dataset.status).join(' ')`))
			g.t.Fatalf("never true: %s\npage: %s", js, page)
		}
	}
}

// requests counts the page's requests by path, from its resource timings.
func (g *gridPage) requests() map[string]int {
	n, err := chromedp.Run(g.ctx, chromedp.Evaluate[map[string]int](`(() => { const n = {}; for (const e of performance.getEntriesByType('resource')) { const p = new URL(e.name).pathname; n[p] = (n[p] || 0) + 1; } return n; })()`))
	if err != nil {
		g.t.Fatal(err)
	}
	return n
}

// quiet: nothing happens, and the page asks the server for nothing.
func (g *gridPage) quiet() {
	t := g.t
	// (after the page's first reads have settled: a second with none)
	before := g.requests()
	for settled := time.Now().Add(10 * time.Second); time.Now().Before(settled); {
		time.Sleep(time.Second)
		now := g.requests()
		if fmt.Sprint(now) == fmt.Sprint(before) {
			break
		}
		before = now
	}
	time.Sleep(6 * time.Second)
	after := g.requests()
	for p, n := range after {
		if strings.HasPrefix(p, "/api/") && n != before[p] {
			kinds, _ := chromedp.Run(g.ctx, chromedp.Evaluate[string](`state.events.slice(-20).map((e) => e.created_at + ' ' + e.kind).join('\n')`))
			t.Errorf("while nothing happened the page requested %s %d time(s) in 6 s; last events:\n%s", p, n-before[p], kinds)
		}
	}
}

// stopShown: a stop shows in the tile within a second; it returns how
// long it took.
func (g *gridPage) stopShown() time.Duration {
	t := g.t
	sent := time.Now()
	if st, body := g.r.do(t, "POST", "/api/offices/"+g.officeID+"/agents/g3/stop", ""); st/100 != 2 {
		t.Fatalf("stop: %d %s", st, body)
	}
	g.waitJS(`!!window.stamps['g3:stopped']`)
	stoppedAt := g.evalInt(`window.stamps['g3:stopped']`)
	stopShown := time.UnixMilli(stoppedAt).Sub(sent)
	if stopShown > time.Second {
		t.Errorf("the stop showed in its tile %v after the request, want within 1s", stopShown)
	}
	return stopShown
}

// questionShown: a new question raises the needs-me count within a
// second of its creation, and has the page read that question, by its
// id, and nothing else. It returns how long the count took.
func (g *gridPage) questionShown() time.Duration {
	t, r, officeID := g.t, g.r, g.officeID
	before := g.requests()
	if st, body := r.do(t, "POST", "/api/offices/"+officeID+"/messages", `{"agent":"asker","content":"v2"}`); st/100 != 2 {
		t.Fatalf("message: %d %s", st, body)
	}
	q := r.waitQuestion(t, officeID, "pending", 30*time.Second)
	g.waitJS(`!!window.stamps['need:1']`)
	needAt := g.evalInt(`window.stamps['need:1']`)
	needShown := time.UnixMilli(needAt).Sub(q.CreatedAt)
	if needShown > time.Second {
		t.Errorf("the needs-me count rose %v after the question was created, want within 1s", needShown)
	}
	g.waitJS(`!!document.querySelector('tr.agent[data-name="asker"][data-waits="yes"]')`)
	after := g.requests()
	asked := diff(before, after)
	got, _ := json.Marshal(asked)
	t.Logf("requests for the question: %s", got)
	for p := range asked {
		if p != "/api/questions/"+q.ID {
			kinds, _ := chromedp.Run(g.ctx, chromedp.Evaluate[string](`state.events.slice(-8).map((e) => e.kind).join(' ')`))
			t.Errorf("for a question the page requested %s: %s (last events: %s)", p, got, kinds)
		}
	}
	if len(asked) == 0 {
		t.Errorf("for a question the page requested nothing")
	}
	saveScreenshot(t, g.ctx, "console-grid-needs.png")
	return needShown
}

// twoTerminals: two terminals side by side, both live (g1 pinned, g2
// open); a tile's peek adds a third, small, live.
func (g *gridPage) twoTerminals() {
	t, ctx, r, officeID := g.t, g.ctx, g.r, g.officeID
	for _, step := range []chromedp.Action[chromedp.Void]{
		chromedp.Click(chromedp.CSS(`tr.agent[data-name="g1"] a.open`)),
		chromedp.WaitVisible(chromedp.CSS(`#termbar[data-session]`)),
		chromedp.Click(chromedp.CSS(`#pin`)),
		chromedp.Click(chromedp.CSS(`tr.agent[data-name="g2"] a.open`)),
	} {
		if err := chromedp.Do(ctx, step); err != nil {
			t.Fatal(err)
		}
	}
	g.waitJS(`state.term && state.term.agent.name === 'g2' && !!state.minis[` + "`${state.agents.find((a) => a.name === 'g1').id}`" + `]`)
	for _, a := range []string{"g1", "g2"} {
		if st, body := r.do(t, "POST", "/api/offices/"+officeID+"/messages", `{"agent":"`+a+`","content":"hello from `+a+`"}`); st/100 != 2 {
			t.Fatalf("message: %d %s", st, body)
		}
	}
	text := `(t) => { const b = t.xterm.buffer.active; let s = ''; for (let i = 0; i < b.length; i++) { const l = b.getLine(i); if (l) s += l.translateToString(true) + '\n'; } return s; }`
	g.waitJS(`(` + text + `)(state.term).includes('hello from g2') && (` + text + `)(state.minis[state.agents.find((a) => a.name === 'g1').id]).includes('hello from g1')`)
	// g0's peek: its prompt, then its output.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`tr.agent[data-name="g0"] button.peek`))); err != nil {
		t.Fatal(err)
	}
	peeked := `state.minis[state.agents.find((a) => a.name === 'g0').id]`
	g.waitJS(`!!` + peeked + ` && (` + text + `)(` + peeked + `).includes('g0>')`)
	if st, body := r.do(t, "POST", "/api/offices/"+officeID+"/messages", `{"agent":"g0","content":"hello from g0"}`); st/100 != 2 {
		t.Fatalf("message: %d %s", st, body)
	}
	g.waitJS(`(` + text + `)(` + peeked + `).includes('hello from g0') && state.term.agent.name === 'g2'`)
	saveScreenshot(t, ctx, "console-grid-two-terminals.png")
}

func diff(before, after map[string]int) map[string]int {
	d := map[string]int{}
	for p, n := range after {
		if n != before[p] {
			d[p] = n - before[p]
		}
	}
	return d
}
