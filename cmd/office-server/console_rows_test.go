package main

import (
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

// TestConsoleRowUpdates counts, in headless Chromium, what the page asks
// the server for each change of a row: a new question (among six
// pending) is read alone by its id; an answered one leaves its list with
// no request; a call and its result are read by their ids. The requests
// and their bytes are counted from the page's resource timings.
func TestConsoleRowUpdates(t *testing.T) {
	bin := testenv.Chromium(t)
	dir := t.TempDir()
	scripts := map[string]string{
		// ask.sh asks a question for each version it is told ("> v2"),
		// not for the answers it is given.
		"ask.sh": strings.Replace(askOnMessage, `'> '*)`, `'> v'*)`, 1),
		// boss gives worker a task when told "go"; worker answers it once.
		"boss.sh": `echo 'boss>'
while IFS= read -r l; do case "$l" in '> go'*) printf '[INVOKE:worker]\nWrite the release notes\n[/INVOKE:worker]\n';; esac; echo 'boss>'; done
`,
		"worker.sh": `echo 'worker>'; done=
while IFS= read -r l; do case "$l" in *'Write the release notes'*) [ -z "$done" ] && printf '[DELIVER_RESULT:boss]\nthe notes are written\n[/DELIVER_RESULT:boss]\n'; done=1;; esac; echo 'worker>'; done
`,
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var y strings.Builder
	y.WriteString("office:\n  name: Rows office\nagents:\n")
	for i := range 6 {
		fmt.Fprintf(&y, "  - name: asker%d\n    launch: {kind: command, command: /bin/sh, args: [%q], prompt_pattern: \"^q>$\"}\n", i, filepath.Join(dir, "ask.sh"))
	}
	for _, n := range []string{"boss", "worker"} {
		fmt.Fprintf(&y, "  - name: %s\n    launch: {kind: command, command: /bin/sh, args: [%q], prompt_pattern: \"^%s>$\"}\n", n, filepath.Join(dir, n+".sh"), n)
	}
	r := startMainOffice(t, y.String())
	officeID := r.officeID(t)
	for _, n := range []string{"asker0", "asker5", "boss", "worker"} {
		r.waitAgent(t, officeID, n)
	}
	message := func(agent, text string) {
		t.Helper()
		if st, body := r.do(t, "POST", "/api/offices/"+officeID+"/messages", `{"agent":"`+agent+`","content":"`+text+`"}`); st/100 != 2 {
			t.Fatalf("message: %d %s", st, body)
		}
	}
	for i := range 5 {
		message(fmt.Sprintf("asker%d", i), fmt.Sprintf("v%d", i))
	}
	ctx := chromeSized(t, bin, 1280, 800)
	if err := chromedp.Do(ctx, chromedp.Navigate(r.base+"/?token="+r.token)); err != nil {
		t.Fatal(err)
	}
	p := page{t: t, ctx: ctx}
	p.wait(`document.querySelectorAll('#needlist .card.question').length === 5 && document.querySelector('#live').textContent === 'live'`)
	time.Sleep(time.Second) // the first reads settled

	rp := rowsPage{p: p}
	change, only := rp.change, rp.only

	d := change("a new question", `document.querySelectorAll('#needlist .card.question').length === 6`, func() { message("asker5", "v5") })
	only("a new question", d, "/api/questions/")
	d = change("an answer", `document.querySelectorAll('#needlist .card.question').length === 5`, func() {
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#needlist .card.question[data-agent="asker5"] button.option[data-option="yes"]`))); err != nil {
			t.Fatal(err)
		}
	})
	only("an answer", d, "/api/questions/") // the answer's own POST; nothing is read
	if u := d[firstKey(d)]; u.N != 1 {
		t.Errorf("an answer: %d request(s), want its POST alone", u.N)
	}
	d = change("a call and its result", `!!document.querySelector('#invocations tr[data-status="completed"]') && document.querySelectorAll('#results tbody tr').length === 1`, func() { message("boss", "go") })
	only("a call and its result", d, "/api/invocations/", "/api/results/")
}

// use is what the page requested of one path: count and bytes.
type use struct{ N, Bytes int }

// rowsPage is the console open on TestConsoleRowUpdates' office.
type rowsPage struct{ p page }

// requests are the page's /api/ requests so far: count and bytes by path.
func (rp rowsPage) requests() map[string]use {
	p, t := rp.p, rp.p.t
	got := p.string(`JSON.stringify((() => { const n = {}; for (const e of performance.getEntriesByType('resource')) {
  const u = new URL(e.name); if (!u.pathname.startsWith('/api/')) continue;
  const k = u.pathname; n[k] = n[k] || { N: 0, Bytes: 0 }; n[k].N++; n[k].Bytes += e.transferSize; } return n; })())`)
	m := map[string]use{}
	if err := json.Unmarshal([]byte(got), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// change runs a change, waits for the page to show it and a quiet half
// second, and returns what the page requested meanwhile.
func (rp rowsPage) change(label, shown string, do func()) map[string]use {
	p, t := rp.p, rp.p.t
	requests := rp.requests
	t.Helper()
	before := requests()
	do()
	p.wait(shown)
	time.Sleep(500 * time.Millisecond)
	after := requests()
	d := map[string]use{}
	n, bytes := 0, 0
	for path, u := range after {
		if b := before[path]; u.N != b.N {
			d[path] = use{u.N - b.N, u.Bytes - b.Bytes}
			n, bytes = n+u.N-b.N, bytes+u.Bytes-b.Bytes
		}
	}
	got, _ := json.Marshal(d)
	t.Logf("%s: %d request(s), %d bytes: %s", label, n, bytes, got)
	return d
}

// only: the page requested paths under want only, one of each.
func (rp rowsPage) only(label string, d map[string]use, want ...string) {
	t := rp.p.t
	t.Helper()
	for path := range d {
		ok := false
		for _, w := range want {
			ok = ok || strings.HasPrefix(path, w)
		}
		if !ok {
			t.Errorf("%s: the page requested %s; want only %q", label, path, want)
		}
	}
	if len(d) != len(want) {
		t.Errorf("%s: %d path(s) requested, want %d (%q)", label, len(d), len(want), want)
	}
}

func firstKey[V any](m map[string]V) string {
	for k := range m {
		return k
	}
	return ""
}
