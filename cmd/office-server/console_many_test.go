package main

import (
	"context"
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
	waitAllReady(t, r, officeID, 200)
	ctx := chromeSized(t, bin, 1280, 800)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil { // the browser started
		t.Fatal(err)
	}
	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate(r.base+"/?token="+r.token)); err != nil {
		t.Fatal(err)
	}
	m := &manyRun{t: t, ctx: ctx, r: r, officeID: officeID, p: page{t: t, ctx: ctx}}
	m.waitJS(`document.querySelectorAll('#agents tbody tr').length === 200`)
	load := time.Since(start)
	m.waitJS(`window.consolePreviewStats().open && (window.consoleWatched() || []).length > 0 && Object.keys(window.consolePreviewStats().agents).length === window.consoleWatched().length`)
	previewsShown := time.Since(start)
	watched := m.p.strings(`window.consoleWatched()`)

	// Idle, then 60 agents given a message at once: what the page spends.
	time.Sleep(5 * time.Second) // the page's first reads and the history settled
	idle := m.window(5*time.Second, nil)
	busy := m.window(5*time.Second, func() { m.message(0, 60) })
	// The tiles in view follow their screens; the others were sent nothing.
	for _, name := range watched {
		m.waitJS(`(window.consolePreview(` + strconv.Quote(name) + `) || '').includes('hello ` + name + `')`)
	}
	updated := m.p.strings(`Object.keys(window.consolePreviewStats().agents).map(agentName).sort()`)
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
	m.waitJS(`window.consoleWatched().length === 0`)
	time.Sleep(time.Second)
	off := m.window(5*time.Second, func() { m.message(60, 120) })
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
	m.waitJS(`!!document.querySelector('tr.agent[data-name="a100"][data-status="stopped"]')`)
	update := time.Since(start)
	t.Logf("200 agents: page listed every row %v after navigating; a stop showed in its row %v after the request", load.Round(time.Millisecond), update.Round(time.Millisecond))
	if load > 10*time.Second || update > 3*time.Second {
		t.Errorf("too slow: load %v, update %v", load, update)
	}
	saveScreenshot(t, ctx, "console-200-agents.png")
}

// waitAllReady waits up to 120 s for n agents of the office ready.
func waitAllReady(t *testing.T, r *liveServer, officeID string, n int) {
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
		if ready == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d agents ready", ready, n)
		}
	}
}

// manyRun is the console open on TestConsoleTwoHundredAgents' office.
type manyRun struct {
	t        *testing.T
	ctx      context.Context
	r        *liveServer
	officeID string
	p        page
}

// waitJS polls js with Evaluate: chromedp's WaitVisible slows down on a
// page whose 200 rows change every second (it follows every DOM change).
func (m *manyRun) waitJS(js string) {
	m.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ok, _ := chromedp.Run(m.ctx, chromedp.Evaluate[bool](js)); ok {
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("never true: %s", js)
		}
	}
}

// cost is what the page spends: main-thread time, preview bytes received
// and sent by the server, screen updates.
type cost struct {
	task, bytes, serverBytes float64
	updates                  int
}

func (m *manyRun) measure() cost {
	mt := pageMetrics(m.t, m.ctx)
	return cost{task: mt["TaskDuration"], bytes: float64(m.p.int(`window.consolePreviewStats().bytes`)),
		serverBytes: metricValue(m.t, m.r, "office_console_preview_bytes_total"), updates: m.p.int(`window.consolePreviewStats().updates`)}
}

// window is the cost per second over d, during which during runs.
func (m *manyRun) window(d time.Duration, during func()) cost {
	a := m.measure()
	began := time.Now()
	if during != nil {
		during()
	}
	time.Sleep(d - time.Since(began))
	b := m.measure()
	secs := time.Since(began).Seconds()
	return cost{task: (b.task - a.task) / secs, bytes: (b.bytes - a.bytes) / secs, serverBytes: (b.serverBytes - a.serverBytes) / secs, updates: b.updates - a.updates}
}

// message gives agents a message each, at once.
func (m *manyRun) message(from, to int) {
	var wg sync.WaitGroup
	for i := from; i < to; i++ {
		name := fmt.Sprintf("a%03d", i)
		wg.Go(func() {
			if st, body := m.r.do(m.t, "POST", "/api/offices/"+m.officeID+"/messages", `{"agent":"`+name+`","content":"hello `+name+`"}`); st/100 != 2 {
				m.t.Errorf("message: %d %s", st, body)
			}
		})
	}
	wg.Wait()
}
