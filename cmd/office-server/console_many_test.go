package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/office-server/office-server/internal/testenv"
)

// TestConsoleTwoHundredAgents opens the console of an office of 200
// agents: every row is listed, the "needs me" filter counts the one that
// waits, and a change of one agent's status (stopped from the API) shows
// in its row through the event stream, without polling. The times are
// logged (a loaded test machine: not a benchmark) and bounded loosely.
func TestConsoleTwoHundredAgents(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 200 agents")
	}
	bin := testenv.Chromium(t)
	var y strings.Builder
	y.WriteString("office:\n  name: Big office\nagents:\n")
	for i := range 200 {
		fmt.Fprintf(&y, "  - name: a%03d\n    launch: {kind: command, command: /bin/sh, args: [-c, \"echo 'a%03d>'; exec cat\"], prompt_pattern: \"^a%03d>$\"}\n", i, i, i)
	}
	r := startMainOffice(t, y.String())
	officeID := r.officeID(t)
	for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		var agents []struct {
			Session string `json:"session_status"`
		}
		r.get(t, "/api/offices/"+officeID+"/agents", &agents)
		ready := 0
		for _, a := range agents {
			if a.Session == "ready" {
				ready++
			}
		}
		if ready == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 200 agents ready", ready)
		}
	}
	ctx := chromeSized(t, bin, 1280, 800)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil { // the browser started
		t.Fatal(err)
	}
	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate(r.base+"/?token="+r.token)); err != nil {
		t.Fatal(err)
	}
	// Polled with Evaluate: chromedp's WaitVisible slows down on a page
	// whose 200 rows change every second (it follows every DOM change).
	waitJS := func(js string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("never true: %s", js)
			}
		}
	}
	waitJS(`document.querySelectorAll('#agents tbody tr').length === 200`)
	load := time.Since(start)
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#agents tbody tr').length`))
	if err != nil || n != 200 {
		t.Fatalf("%d rows (%v), want 200", n, err)
	}
	// A status change reaches the row by the event stream.
	start = time.Now()
	if st, body := r.do(t, "POST", "/api/offices/"+officeID+"/agents/a100/stop", ""); st/100 != 2 {
		t.Fatalf("stop: %d %s", st, body)
	}
	waitJS(`!!document.querySelector('tr.agent[data-name="a100"][data-status="stopped"]')`)
	update := time.Since(start)
	t.Logf("200 agents: page listed every row %v after navigating; a stop showed in its row %v after the request", load.Round(time.Millisecond), update.Round(time.Millisecond))
	if load > 10*time.Second || update > 3*time.Second {
		t.Errorf("too slow: load %v, update %v", load, update)
	}
	saveScreenshot(t, ctx, "console-200-agents.png")
}
