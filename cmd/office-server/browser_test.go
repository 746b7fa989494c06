package main

import (
	"context"
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
// page and see the answer reach the agent.
func TestBrowserConsole(t *testing.T) {
	bin := testenv.Chromium(t)
	r := startMain(t)
	officeID := r.officeID(t)
	r.waitAgent(t, officeID, "echo")

	ctx := chromeContext(t, bin, 90*time.Second)
	screenshot := func(name string) { saveScreenshot(t, ctx, name) }
	defer func() {
		if t.Failed() {
			screenshot("console-failed.png")
		}
	}()

	// termHas waits until the open terminal shows want.
	termHas := func(want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		var text string
		for time.Now().Before(deadline) {
			var err error
			if text, err = chromedp.Run(ctx, chromedp.Evaluate[string](`window.consoleText()`)); err != nil {
				t.Fatalf("read terminal: %v", err)
			}
			if strings.Contains(text, want) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("terminal never showed %q; it shows:\n%s", want, text)
	}

	// Open with the token: the page sets the cookie and drops the token
	// from the address.
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

	// The echo agent's terminal: replay shows its banner.
	if err := clickRetry(ctx, `tr.agent[data-name="echo"] a.open`); err != nil {
		t.Fatal(err)
	}
	termHas("echo: ready")

	typeLine := func(s string) {
		t.Helper()
		var err error
		if hasXterm {
			// Text as an input method would insert it, then Enter as a key:
			// synthesized keyDown+char pairs are each seen by xterm.
			err = chromedp.Do(ctx, chromedp.Focus(chromedp.CSS(`#term .xterm-helper-textarea`)),
				chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
					_, err := cdp.Call(ctx, tg, input.InsertText, input.InsertTextParams{Text: s})
					return err
				}),
				chromedp.KeyEvent("\r"))
		} else {
			// Enter in the field submits the form through its handler.
			err = chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(`#plainline`), s+"\r"))
		}
		if err != nil {
			t.Fatalf("type %q: %v", s, err)
		}
	}

	// Read-only until control is taken: typing does nothing.
	if hasXterm {
		typeLine("readonly-typed")
		termHas("echo: ready")
		time.Sleep(500 * time.Millisecond)
		text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`window.consoleText()`))
		if strings.Contains(text, "readonly-typed") {
			t.Fatalf("a read-only viewer's keystrokes reached the agent:\n%s", text)
		}
	}

	// Take control and type.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#take`)), chromedp.WaitVisible(chromedp.CSS(`body[data-control="you"]`))); err != nil {
		t.Fatalf("take control: %v", err)
	}
	typeLine("hello-from-the-browser")
	termHas("echo: hello-from-the-browser")

	// po asked a question: answer it in the page, by its option button.
	q := r.waitQuestion(t, officeID, office.QuestionPending, 20*time.Second)
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(`#questions form.question button.option`)),
		chromedp.Click(chromedp.Search(`//form[contains(@class,"question")]//button[text()="Search"]`)),
	); err != nil {
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
	// The answer reached po: its terminal says so.
	if err := clickRetry(ctx, `tr.agent[data-name="po"] a.open`); err != nil {
		t.Fatal(err)
	}
	termHas(`po: the user chose "Search"`)
	termHas("=== PHASE 1 COMPLETE ===") // dev got the task and delivered
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.Search(`//table[@id="invocations"]//td[contains(.,"completed")]`))); err != nil {
		t.Fatalf("invocation not shown completed: %v", err)
	}
	// A message to an agent from the page reaches it (echo repeats it).
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`#msgagent`), r.agentID(t, officeID, "echo")),
		chromedp.SendKeys(chromedp.CSS(`#msgtext`), "a message from the page\r"),
	); err != nil {
		t.Fatalf("send a message: %v", err)
	}
	if err := clickRetry(ctx, `tr.agent[data-name="echo"] a.open`); err != nil {
		t.Fatal(err)
	}
	termHas("echo: > a message from the page") // the office quotes a person's words
	if err := clickRetry(ctx, `tr.agent[data-name="po"] a.open`); err != nil {
		t.Fatal(err)
	}
	termHas("=== PHASE 1 COMPLETE ===")
	screenshot("console.png")

	// The plain view (what the page falls back to without xterm.js):
	// output, control and typing work there too.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(r.base+"/?view#plain=1"),
		chromedp.WaitVisible(chromedp.CSS(`tr.agent[data-name="echo"] a.open`)),
		chromedp.Click(chromedp.CSS(`tr.agent[data-name="echo"] a.open`)),
		chromedp.WaitVisible(chromedp.CSS(`#plain`)),
	); err != nil {
		t.Fatalf("plain view: %v", err)
	}
	termHas("echo: hello-from-the-browser") // the replay
	hasXterm = false
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#take`)), chromedp.WaitVisible(chromedp.CSS(`body[data-control="you"]`))); err != nil {
		t.Fatalf("take control in the plain view: %v", err)
	}
	typeLine("typed-in-plain-view")
	termHas("echo: typed-in-plain-view")
	screenshot("console-plain.png")
}

// clickRetry clicks the element sel, again when the page replaced it
// between finding and clicking (the console re-renders its tables on every
// refresh).
func clickRetry(ctx context.Context, sel string) error {
	var err error
	for range 5 {
		if err = chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel))); err == nil || !strings.Contains(err.Error(), "find node") {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}
