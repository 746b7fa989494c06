package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
)

// TestBrowserConsole drives the console page in the real headless Chromium
// against the whole server (SQLite store, sessions in PTYs, the office
// router, built-in agents): open with the token, see an agent's terminal,
// check read-only, take control and type, answer a pending question in the
// page and see the answer reach the agent; at 1440x900 and at 1024x700,
// where what needs the person must still be in view without scrolling.
func TestBrowserConsole(t *testing.T) {
	bin := testenv.Chromium(t)
	for _, win := range []struct {
		w, h   int
		suffix string
	}{{1440, 900, ""}, {1024, 700, "-1024x700"}} {
		t.Run(fmt.Sprintf("%dx%d", win.w, win.h), func(t *testing.T) { browserConsole(t, bin, win.w, win.h, win.suffix) })
	}
}

func browserConsole(t *testing.T, bin string, width, height int, suffix string) {
	r := startMain(t)
	officeID := r.officeID(t)
	r.waitAgent(t, officeID, "echo")

	ctx := chromeSized(t, bin, width, height)
	p := &consolePage{t: t, ctx: ctx, r: r, suffix: suffix}
	defer func() {
		if t.Failed() {
			p.screenshot("console-failed.png")
		}
	}()
	p.openWithToken()
	// The echo agent's terminal: replay shows its banner.
	p.click(`tr.agent[data-name="echo"] a.open`)
	p.termHas("echo: ready")
	p.readOnlyThenControl()
	p.answerQuestion(officeID, width, height)
	p.messageAndHistory(officeID)
	p.restartFromRow(officeID)
	p.plainView()
}

// consolePage is the console open in Chromium, with the steps
// browserConsole takes on it.
type consolePage struct {
	t        *testing.T
	ctx      context.Context
	r        *liveServer
	suffix   string
	hasXterm bool
}

func (p *consolePage) screenshot(name string) {
	saveScreenshot(p.t, p.ctx, strings.Replace(name, ".png", p.suffix+".png", 1))
}

func (p *consolePage) click(sel string) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel))); err != nil {
		p.t.Fatalf("click %s: %v", sel, err)
	}
}

// termHas waits until the open terminal shows want.
func (p *consolePage) termHas(want string) {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var text string
	for time.Now().Before(deadline) {
		var err error
		if text, err = chromedp.Run(p.ctx, chromedp.Evaluate[string](`window.consoleText()`)); err != nil {
			p.t.Fatalf("read terminal: %v", err)
		}
		if strings.Contains(text, want) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.t.Fatalf("terminal never showed %q; it shows:\n%s", want, text)
}

func (p *consolePage) typeLine(s string) {
	p.t.Helper()
	var err error
	if p.hasXterm {
		// Text as an input method would insert it, then Enter as a key:
		// synthesized keyDown+char pairs are each seen by xterm.
		err = chromedp.Do(p.ctx, chromedp.Focus(chromedp.CSS(`#term .xterm-helper-textarea`)),
			chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				_, err := cdp.Call(ctx, tg, input.InsertText, input.InsertTextParams{Text: s})
				return err
			}),
			chromedp.KeyEvent("\r"))
	} else {
		// Enter in the field submits the form through its handler.
		err = chromedp.Do(p.ctx, chromedp.SendKeys(chromedp.CSS(`#plainline`), s+"\r"))
	}
	if err != nil {
		p.t.Fatalf("type %q: %v", s, err)
	}
}

// checkCount: the needs-you count in the header, the cards and the title
// all say want.
func (p *consolePage) checkCount(want int) {
	p.t.Helper()
	got, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`[document.querySelector('#needcount').dataset.count,
		String(document.querySelectorAll('#needlist > .card').length), document.title]`))
	if err != nil {
		p.t.Fatal(err)
	}
	if got[0] != fmt.Sprint(want) || got[1] != got[0] || !strings.HasPrefix(got[2], fmt.Sprintf("(%d) ", want)) {
		p.t.Fatalf("needs-you count %s, cards %s, title %q: want %d everywhere", got[0], got[1], got[2], want)
	}
}

// openWithToken: the page sets the cookie and drops the token from the
// address.
func (p *consolePage) openWithToken() {
	t, ctx, r := p.t, p.ctx, p.r
	if err := chromedp.Do(ctx,
		chromedp.Navigate(r.base+"/?token="+r.token),
		chromedp.WaitVisible(chromedp.CSS(`tr.agent[data-name="echo"] a.open`)),
	); err != nil {
		t.Fatalf("open console: %v", err)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(loc, r.token) {
		t.Fatalf("token still in the address: %s", loc)
	}
	hasXterm, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!window.Terminal`))
	if err != nil {
		t.Fatal(err)
	}
	if !hasXterm {
		t.Log("xterm.js not installed (run scripts/setup.sh): testing the plain-text fallback view")
	}
	p.hasXterm = hasXterm
}

// readOnlyThenControl: typing does nothing until control is taken; then
// it reaches the agent.
func (p *consolePage) readOnlyThenControl() {
	t, ctx := p.t, p.ctx
	if p.hasXterm {
		p.typeLine("readonly-typed")
		p.termHas("echo: ready")
		time.Sleep(500 * time.Millisecond)
		text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`window.consoleText()`))
		if strings.Contains(text, "readonly-typed") {
			t.Fatalf("a read-only viewer's keystrokes reached the agent:\n%s", text)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#take`)), chromedp.WaitVisible(chromedp.CSS(`body[data-control="you"]`))); err != nil {
		t.Fatalf("take control: %v", err)
	}
	p.typeLine("hello-from-the-browser")
	sameStatus(t, ctx, "echo", "waiting for input") // working, then ready again
	p.termHas("echo: hello-from-the-browser")
}

// answerQuestion: po asked a question: it is first on the page, counted
// in the header and the title; a refused answer keeps what was typed;
// answered by its option button, it reaches po.
func (p *consolePage) answerQuestion(officeID string, width, height int) {
	t, ctx, r := p.t, p.ctx, p.r
	q := r.waitQuestion(t, officeID, office.QuestionPending, 20*time.Second)
	card := `#attention form.question[data-id="` + q.ID + `"]`
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(card+` button.option`))); err != nil {
		t.Fatalf("the question is not in the needs-you list: %v", err)
	}
	p.checkCount(1)
	inView, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const b = document.querySelector('`+card+` button.option').getBoundingClientRect();
		return b.top >= 0 && b.bottom <= window.innerHeight; })()`))
	if err != nil || !inView {
		t.Errorf("at %dx%d the question's answer buttons are not in view without scrolling (%v)", width, height, err)
	}
	p.screenshot("console-question.png")
	// A refused answer keeps what was typed and says why, in the card.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(card+` input.answer`), "a feature nobody offered"),
		chromedp.Click(chromedp.CSS(card+` button.answer-submit`)),
	); err != nil {
		t.Fatalf("answer in page: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.Search(`//form[@data-id="`+q.ID+`"]//div[@class="error"][contains(.,"is not one of the options")]`))); err != nil {
		t.Fatalf("the refused answer's reason is not shown in its card: %v", err)
	}
	if typed, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('`+card+` input.answer').value`)); typed != "a feature nobody offered" {
		t.Fatalf("after a refused answer the field holds %q, want what was typed", typed)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(card+` button.option[data-option="Search"]`))); err != nil {
		t.Fatalf("answer in page: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var got office.Question
		r.get(t, "/api/questions/"+q.ID, &got)
		if got.Status == office.QuestionDelivered {
			if got.Response != "Search" {
				t.Fatalf("response = %q, want Search", got.Response)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("question %s is %s, never delivered", q.ID, got.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The question left the list; the answer reached po: its terminal says so.
	if err := chromedp.Do(ctx, chromedp.WaitNotPresent(chromedp.CSS(card))); err != nil {
		t.Fatalf("the answered question is still listed: %v", err)
	}
	p.click(`tr.agent[data-name="po"] a.open`)
	p.termHas(`po: the user chose "Search"`)
	p.termHas("=== PHASE 1 COMPLETE ===") // dev got the task and delivered
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.Search(`//table[@id="invocations"]//td[contains(.,"completed")]`))); err != nil {
		t.Fatalf("invocation not shown completed: %v", err)
	}
}

// messageAndHistory: a message to an agent from the page reaches it
// (echo repeats it); the history reads as sentences, the result is listed.
func (p *consolePage) messageAndHistory(officeID string) {
	t, ctx, r := p.t, p.ctx, p.r
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`#msgagent`), r.agentID(t, officeID, "echo")),
		chromedp.SendKeys(chromedp.CSS(`#msgtext`), "a message from the page\r"),
	); err != nil {
		t.Fatalf("send a message: %v", err)
	}
	p.click(`tr.agent[data-name="echo"] a.open`)
	p.termHas("echo: > a message from the page") // the office quotes a person's words
	p.click(`tr.agent[data-name="po"] a.open`)
	p.termHas("=== PHASE 1 COMPLETE ===")
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.Search(`//ol[@id="events"]/li[contains(.,"dev is at step 3/3: running the tests")]`)),
		chromedp.WaitVisible(chromedp.Search(`//table[@id="results"]//td[contains(.,"dev → po")]`)),
	); err != nil {
		t.Fatalf("history or results: %v", err)
	}
	p.screenshot("console.png")
}

// restartFromRow: restarted from its row (two clicks: restart, confirm),
// po starts over and asks its first question again: the question the old
// process left is cancelled, and the history says why. Bookkeeping is
// hidden by default; the history filters by agent.
func (p *consolePage) restartFromRow(officeID string) {
	t, ctx, r := p.t, p.ctx, p.r
	left := r.waitQuestion(t, officeID, office.QuestionPending, 20*time.Second)
	p.click(`tr.agent[data-name="po"] button.restart`) // asks to be confirmed
	if b, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('tr.agent[data-name="po"] button.restart').textContent`)); b != "confirm restart" {
		t.Errorf("after one click the restart button says %q, want \"confirm restart\"", b)
	}
	p.click(`tr.agent[data-name="po"] button.restart`)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.Search(`//ol[@id="events"]/li[@data-kind="question.cancelled"][contains(.,"po asked the same question again (question ")]`))); err != nil {
		t.Fatalf("the cancelled question's reason is not in the history: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitNotPresent(chromedp.CSS(`#attention form.question[data-id="`+left.ID+`"]`))); err != nil {
		t.Fatalf("the cancelled question is still listed: %v", err)
	}
	p.checkCount(1) // the new question only
	hidden, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#events li[data-kind="message.delivered"], #events li[data-kind="question.delivered"], #events li[data-kind^="transcript."]').length`))
	if err != nil || hidden != 0 {
		t.Errorf("%d bookkeeping events shown by default (%v)", hidden, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const s = document.querySelector('#evagent');
		s.value = '`+r.agentID(t, officeID, "dev")+`'; return s.dispatchEvent(new Event('change')); })()`)); err != nil {
		t.Fatalf("filter the history: %v", err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#events li')].map((li) => li.textContent)`))
	if err != nil || len(rows) == 0 {
		t.Fatalf("filtered history: %v %v", rows, err)
	}
	for _, row := range rows {
		if !strings.Contains(row, "dev") {
			t.Errorf("history filtered to dev shows %q", row)
		}
	}
}

// plainView: the plain view (what the page falls back to without
// xterm.js): output, control and typing work there too.
func (p *consolePage) plainView() {
	t, ctx, r := p.t, p.ctx, p.r
	if err := chromedp.Do(ctx,
		chromedp.Navigate(r.base+"/?view#plain=1"),
		chromedp.WaitVisible(chromedp.CSS(`tr.agent[data-name="echo"] a.open`)),
		chromedp.Click(chromedp.CSS(`tr.agent[data-name="echo"] a.open`)),
		chromedp.WaitVisible(chromedp.CSS(`#plain`)),
	); err != nil {
		t.Fatalf("plain view: %v", err)
	}
	p.termHas("echo: hello-from-the-browser") // the replay
	p.hasXterm = false
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#take`)), chromedp.WaitVisible(chromedp.CSS(`body[data-control="you"]`))); err != nil {
		t.Fatalf("take control in the plain view: %v", err)
	}
	p.typeLine("typed-in-plain-view")
	p.termHas("echo: typed-in-plain-view")
	p.screenshot("console-plain.png")
}

// sameStatus reads, every 20 ms, the status the open terminal's header
// shows and the one the agent's row in the table shows: they must be the
// same at every moment (one source). It watches for at least a second and
// until the status has settled on until, or fails after 20 s. (A builtin
// agent's turn now ends within milliseconds of its prompt, so its working
// state may come and go between two looks.)
func sameStatus(t *testing.T, ctx context.Context, agent, until string) {
	t.Helper()
	seen := map[string]bool{}
	began := time.Now()
	for end := began.Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[document.querySelector('#termstatus').textContent.split(' · ')[0],
			document.querySelector('tr.agent[data-name="`+agent+`"] .pill').textContent]`))
		if err != nil {
			t.Fatalf("read statuses: %v", err)
		}
		if got[0] != got[1] {
			t.Fatalf("%s's terminal header says %q while its row says %q", agent, got[0], got[1])
		}
		seen[got[0]] = true
		if time.Since(began) > time.Second && got[0] == until {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s's status did not settle on %q within 20 s (seen %v)", agent, until, seen)
		}
	}
}
