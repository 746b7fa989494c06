package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"

	"github.com/office-server/office-server/internal/testenv"
)

// TestConsoleTilePreviews opens, in headless Chromium at 1280×800, an
// office of a full-screen program, 47 line agents and one that hibernates,
// each a tile with a small live preview of its screen. The hibernated
// tile says it sleeps and what wakes it; the filter finds it. Only the tiles in view are watched
// (the page's watch set, the server's gauge); a tile out of view is sent
// nothing, even when its agent writes; scrolled into view it shows its
// agent's screen, equal to tmux's rendering of what a late viewer of that
// terminal is sent; the tiles scrolled away are no longer watched. The
// full-screen program's preview equals tmux's rendering of its bytes from
// the start at 200×50, after 1.2 MiB of redraws and after more written
// while the page watches.
func TestConsoleTilePreviews(t *testing.T) {
	bin := testenv.Chromium(t)
	dir := t.TempDir()
	parts := [2][]byte{altProgram(1), altProgram(2)}
	yaml, names := previewOffice(t, dir, parts)
	r := startMainOffice(t, yaml)
	officeID := r.officeID(t)
	for _, n := range names {
		r.waitAgent(t, officeID, n)
	}
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(r.replay(t, officeID, "alt"), "PART1-DONE"); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("alt never wrote PART1-DONE")
		}
	}

	ctx := chromeSized(t, bin, 1280, 800)
	if err := chromedp.Do(ctx, chromedp.Navigate(r.base+"/?token="+r.token)); err != nil {
		t.Fatal(err)
	}
	p := page{t: t, ctx: ctx}
	p.wait(`document.querySelectorAll('#agents.grid tr.agent').length === 49 && window.consolePreviewStats().open && (window.consoleWatched() || []).length > 0`)
	hibernatedTile(p)

	// The watched tiles are those in view, and only those.
	v := previewRun{p: p, r: r, officeID: officeID}
	top := v.watchedIs("first screen")
	t.Logf("first screen: %d of 49 tiles in view and watched", len(top))
	if !slices.Contains(top, "alt") || slices.Contains(top, "p46") {
		t.Fatalf("watched %q: want alt (first) and not p46 (last)", top)
	}

	// The full-screen program's preview equals tmux's rendering of its
	// bytes, opened late, then live.
	v.previewEquals("opened late", "alt", tmuxScreen(t, parts[0], 200, 50))
	if err := os.WriteFile(filepath.Join(dir, "go-alt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	v.previewEquals("live", "alt", tmuxScreen(t, append(append([]byte{}, parts[0]...), parts[1]...), 200, 50))
	saveScreenshot(t, ctx, "console-previews.png")

	v.outOfView()
	v.scrolledIntoView()
	saveScreenshot(t, ctx, "console-previews-scrolled.png")

	// One click on a preview opens the terminal.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`tr.agent[data-name="p46"] td.preview`))); err != nil {
		t.Fatal(err)
	}
	p.wait(`state.term && state.term.agent.name === 'p46'`)
}

// previewOffice writes the programs of TestConsoleTilePreviews into dir:
// a full-screen one (alt: part 1, then part 2 once go-alt exists), 47 line
// agents and nap, which hibernates when idle for a second. It returns the
// office and the line agents' names.
func previewOffice(t *testing.T, dir string, parts [2][]byte) (string, []string) {
	for i, data := range parts {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("alt%d", i+1)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(dir, "alt.sh")
	body := fmt.Sprintf("cat %[1]s/alt1; while [ ! -e %[1]s/go-alt ]; do sleep 0.1; done; cat %[1]s/alt2; exec sleep 100000\n", dir)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	// A line agent repeats each line it is given, then its prompt again.
	lines := filepath.Join(dir, "lines.sh")
	if err := os.WriteFile(lines, []byte(`echo "$1>"; while IFS= read -r l; do echo "got: $l"; echo "$1>"; done`+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var y strings.Builder
	fmt.Fprintf(&y, "office:\n  name: Preview office\nagents:\n  - name: alt\n    launch: {kind: command, command: /bin/sh, args: [%q]}\n", script)
	fmt.Fprintf(&y, "  - name: nap\n    hibernate_after: 1s\n    launch: {kind: command, command: /bin/sh, args: [%q, nap], prompt_pattern: \"^nap>$\"}\n", lines)
	var names []string
	for i := range 47 {
		n := fmt.Sprintf("p%02d", i)
		names = append(names, n)
		fmt.Fprintf(&y, "  - name: %s\n    launch: {kind: command, command: /bin/sh, args: [%q, %s], prompt_pattern: \"^%s>$\"}\n", n, lines, n, n)
	}
	return y.String(), names
}

// hibernatedTile: a hibernated agent's tile says it sleeps and what wakes
// it, with no screen; the filter finds it.
func hibernatedTile(p page) {
	t, ctx := p.t, p.ctx
	p.wait(`!!document.querySelector('tr.agent[data-name="nap"][data-status="hibernated"] td.preview[data-live="no"]')`)
	if got := p.string(`getComputedStyle(document.querySelector('tr.agent[data-name="nap"] td.preview'), '::before').content`); !strings.Contains(got, "wakes it") {
		t.Errorf("the hibernated tile's preview says %s, want what wakes it", got)
	}
	if got := p.string(`document.querySelector('tr.agent[data-name="nap"] button.start').hidden ? '' : document.querySelector('tr.agent[data-name="nap"] button.start').textContent`); got != "wake" {
		t.Errorf("the hibernated tile offers %q, want wake", got)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#agentfilter button[data-filter="hibernated"]`))); err != nil {
		t.Fatal(err)
	}
	p.wait(`[...document.querySelectorAll('#agents tr.agent')].map((e) => e.dataset.name).join() === 'nap' && document.querySelector('#agentfilter button[data-filter="hibernated"]').textContent === 'hibernated (1)'`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#agentfilter button[data-filter="all"]`))); err != nil {
		t.Fatal(err)
	}
	p.wait(`document.querySelectorAll('#agents tr.agent').length === 49`)
}

// previewRun is the console open on TestConsoleTilePreviews' office.
type previewRun struct {
	p        page
	r        *liveServer
	officeID string
}

// inView names the tiles whose preview is in view.
func (v previewRun) inView() []string {
	return v.p.strings(`(() => { const box = document.querySelector('#left').getBoundingClientRect();
  return [...document.querySelectorAll('#agents td.preview')].filter((td) => { const b = td.getBoundingClientRect();
    return b.height > 0 && b.bottom > Math.max(box.top, 0) && b.top < Math.min(box.bottom, innerHeight); }).map((td) => td.closest('tr').dataset.name).sort(); })()`)
}

// watchedIs waits until the page watches the tiles in view, and the
// server as many screens; some tiles and not all must be in view.
func (v previewRun) watchedIs(label string) []string {
	t := v.p.t
	t.Helper()
	var got, want []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got, want = v.p.strings(`window.consoleWatched().sort()`), v.inView()
		if slices.Equal(got, want) && previewGauge(t, v.r) == len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the page watches %q, the server %d screens; in view: %q", label, got, previewGauge(t, v.r), want)
		}
	}
	if len(want) == 0 || len(want) >= 49 {
		t.Fatalf("%s: %d tiles in view, want some and not all", label, len(want))
	}
	return got
}

// previewEquals waits up to 30 s for name's preview to equal want.
func (v previewRun) previewEquals(label, name, want string) {
	t := v.p.t
	t.Helper()
	var got string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if got = normScreen(v.p.string(`window.consolePreview(` + strconv.Quote(name) + `) || ''`)); got == want {
			t.Logf("%s: %s's preview equals tmux (%d rows)", label, name, strings.Count(want, "\n")+1)
			return
		}
	}
	t.Fatalf("%s: %s's preview:\n%s\ntmux:\n%s", label, name, got, want)
}

// say sends line to agent and waits until its terminal shows it.
func (v previewRun) say(agent, line string) {
	t, r := v.p.t, v.r
	if st, body := r.do(t, "POST", "/api/offices/"+v.officeID+"/messages", `{"agent":"`+agent+`","content":"`+line+`"}`); st/100 != 2 {
		t.Fatalf("message: %d %s", st, body)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(r.replay(t, v.officeID, agent), line); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed %q", agent, line)
		}
	}
}

// outOfView: a tile out of view is sent nothing while its agent writes.
func (v previewRun) outOfView() {
	v.say("p46", "hello p46")
	time.Sleep(time.Second) // four preview rounds
	if n := v.p.int(`window.consolePreviewStats().agents[state.agents.find((a) => a.name === 'p46').id] || 0`); n != 0 {
		v.p.t.Errorf("p46, out of view, was sent %d preview update(s)", n)
	}
}

// scrolledIntoView: scrolled into view, a tile shows its screen and
// follows what its agent writes next; the tiles scrolled away are no
// longer watched.
func (v previewRun) scrolledIntoView() {
	t, r, officeID := v.p.t, v.r, v.officeID
	v.p.int(`document.querySelector('#agents tr.agent[data-name="p46"]').scrollIntoView({ block: 'end' }), 1`)
	bottom := v.watchedIs("scrolled to the end")
	if !slices.Contains(bottom, "p46") || slices.Contains(bottom, "alt") {
		t.Fatalf("after scrolling to p46 the page watches %q: want p46 and not alt", bottom)
	}
	v.previewEquals("scrolled into view", "p46", tmuxScreen(t, []byte(r.replay(t, officeID, "p46")), 200, 50))
	if !strings.Contains(v.p.string(`window.consolePreview('p46')`), "hello p46") {
		t.Error("p46's preview does not show the message")
	}
	v.say("p46", "second line")
	v.previewEquals("live", "p46", tmuxScreen(t, []byte(r.replay(t, officeID, "p46")), 200, 50))
}

// page evaluates JavaScript in a test's page.
type page struct {
	t   *testing.T
	ctx context.Context
}

func (p page) wait(js string) {
	p.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ok, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](js)); err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			tiles, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('#agents tr.agent')].slice(0, 6).map((e) => e.dataset.name + ':' + e.dataset.status + ':' + (e.querySelector('td.preview') || {dataset: {}}).dataset.live).join(' ')`))
			p.t.Fatalf("never true: %s\nfirst tiles: %s", js, tiles)
		}
	}
}

func (p page) string(js string) string { return evalIn[string](p, js) }
func (p page) int(js string) int       { return evalIn[int](p, js) }
func (p page) strings(js string) []string {
	return evalIn[[]string](p, js)
}

func evalIn[T any](p page, js string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		p.t.Fatalf("%s: %v", js, err)
	}
	return v
}

// pageMetrics reads Chromium's run-time metrics of the page (Performance
// domain): TaskDuration (seconds the main thread was busy), ScriptDuration,
// LayoutDuration, JSHeapUsedSize, Nodes…
func pageMetrics(t *testing.T, ctx context.Context) map[string]float64 {
	t.Helper()
	m, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) (map[string]float64, error) {
		if _, err := cdp.Call(ctx, tg, performance.Enable, performance.EnableParams{}); err != nil {
			return nil, err
		}
		res, err := cdp.Call(ctx, tg, performance.GetMetrics, cdp.Empty{})
		if err != nil {
			return nil, err
		}
		out := map[string]float64{}
		for _, m := range res.Metrics {
			out[m.Name] = m.Value
		}
		return out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// previewGauge reads office_console_preview_screens from the server.
func previewGauge(t *testing.T, r *liveServer) int {
	t.Helper()
	return int(metricValue(t, r, "office_console_preview_screens"))
}

// metricValue reads a metric without labels from the server's /metrics.
func metricValue(t *testing.T, r *liveServer, name string) float64 {
	t.Helper()
	_, body := r.do(t, "GET", "/metrics", "")
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}
