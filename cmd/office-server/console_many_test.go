package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/office-server/office-server/internal/testenv"
)

// TestConsoleTwoHundredAgents opens the console of an office of 200
// agents: every row is listed, and a change of one agent's status (stopped
// from the API) shows in its row through the event stream, without
// polling. The tiles in view show their agents' screens and only those
// are watched: 60 agents given a message at once cost the page the
// updates of the tiles in view. The times, the page's main-thread time
// (Chromium's TaskDuration) and the preview bytes are logged (a loaded
// test machine: not a benchmark) and bounded loosely.
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
	waitJS(`window.consolePreviewStats().open && (window.consoleWatched() || []).length > 0 && Object.keys(window.consolePreviewStats().agents).length === window.consoleWatched().length`)
	previewsShown := time.Since(start)
	p := page{t: t, ctx: ctx}
	watched := p.strings(`window.consoleWatched()`)

	// Idle, then 60 agents given a message at once: what the page spends.
	type cost struct {
		task, bytes, serverBytes float64
		updates                  int
	}
	measure := func() cost {
		m := pageMetrics(t, ctx)
		return cost{task: m["TaskDuration"], bytes: float64(p.int(`window.consolePreviewStats().bytes`)),
			serverBytes: metricValue(t, r, "office_console_preview_bytes_total"), updates: p.int(`window.consolePreviewStats().updates`)}
	}
	window := func(d time.Duration, during func()) cost {
		a := measure()
		began := time.Now()
		if during != nil {
			during()
		}
		time.Sleep(d - time.Since(began))
		b := measure()
		secs := time.Since(began).Seconds()
		return cost{task: (b.task - a.task) / secs, bytes: (b.bytes - a.bytes) / secs, serverBytes: (b.serverBytes - a.serverBytes) / secs, updates: b.updates - a.updates}
	}
	// message gives agents a message each, at once.
	message := func(from, to int) {
		var wg sync.WaitGroup
		for i := from; i < to; i++ {
			name := fmt.Sprintf("a%03d", i)
			wg.Go(func() {
				if st, body := r.do(t, "POST", "/api/offices/"+officeID+"/messages", `{"agent":"`+name+`","content":"hello `+name+`"}`); st/100 != 2 {
					t.Errorf("message: %d %s", st, body)
				}
			})
		}
		wg.Wait()
	}
	time.Sleep(5 * time.Second) // the page's first reads and the history settled
	idle := window(5*time.Second, nil)
	busy := window(5*time.Second, func() { message(0, 60) })
	// The tiles in view follow their screens; the others were sent nothing.
	for _, name := range watched {
		waitJS(`(window.consolePreview(` + strconv.Quote(name) + `) || '').includes('hello ` + name + `')`)
	}
	updated := p.strings(`Object.keys(window.consolePreviewStats().agents).map(agentName).sort()`)
	for _, name := range updated {
		if !slices.Contains(watched, name) {
			t.Errorf("%s, out of view, was sent its screen", name)
		}
	}
	saveScreenshot(t, ctx, "console-200-agents-previews.png")
	// The same without previews (the grid's previews button).
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#previews`))); err != nil {
		t.Fatal(err)
	}
	waitJS(`window.consoleWatched().length === 0`)
	time.Sleep(time.Second)
	off := window(5*time.Second, func() { message(60, 120) })
	t.Logf("200 agents, previews: %d tiles in view and watched, their screens shown %v after navigating; idle: main thread %.1f%%, %.0f preview B/s; "+
		"60 agents given a message at once: main thread %.1f%% over 5 s, %.0f preview B/s received (%.0f B/s sent by the server), %d screen updates; "+
		"the same without previews: main thread %.1f%%, %.0f preview B/s",
		len(watched), previewsShown.Round(time.Millisecond), idle.task*100, idle.bytes, busy.task*100, busy.bytes, busy.serverBytes, busy.updates, off.task*100, off.bytes)
	if idle.bytes != 0 || off.bytes != 0 {
		t.Errorf("idle, the page was sent %.0f preview B/s; without previews %.0f B/s", idle.bytes, off.bytes)
	}

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
