package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/supabase/supabasetest"
)

// TestWebOfficePage drives the reference web office
// (examples/web-office/, docs/frontend.md) in the real headless Chromium:
// the page, served from its own origin as any static site, talks to the
// stand-in Supabase project with supabase-js, and the serve command runs
// the demo office behind the project. A member signs in with their token,
// sees po and dev, answers po's question with an option button, and sees
// the invocation po gives dev appear in the page, then dev's result and
// po's next question: the page never polls, so they came over Realtime.
func TestWebOfficePage(t *testing.T) {
	bin := testenv.Chromium(t)
	root := testenv.RepoRoot()
	const bundle = "/node_modules/@supabase/supabase-js/dist/umd/supabase.js"
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(bundle))); err != nil {
		testenv.Missing(t, "@supabase/supabase-js", "run scripts/setup.sh (npm ci installs it from package-lock.json)")
	}
	p := supabasetest.New(t)
	r := startSupabaseMain(t, p)
	r.waitReady(t, "at start")
	officeID := r.officeID(t)
	member := p.MemberOf(t, officeID, "web@example.com")
	q := r.waitQuestion(t, officeID, office.QuestionPending, 60*time.Second)
	if len(q.Options) == 0 {
		t.Fatalf("po's question %q has no options", q.Question)
	}
	answer := q.Options[0]

	// The page and the supabase-js bundle, nothing else of the repository.
	files := http.FileServer(http.Dir(root))
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != bundle && !strings.HasPrefix(req.URL.Path, "/examples/web-office/") {
			http.NotFound(w, req)
			return
		}
		files.ServeHTTP(w, req)
	}))
	defer site.Close()

	ctx := chromeContext(t, bin, 120*time.Second)
	defer func() {
		if t.Failed() {
			saveScreenshot(t, ctx, "web-office-failed.png")
		}
	}()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(site.URL+"/examples/web-office/"),
		chromedp.SetValue(chromedp.CSS(`#url`), p.URL),
		chromedp.SetValue(chromedp.CSS(`#anon`), p.AnonKey),
		chromedp.SetValue(chromedp.CSS(`#token`), member.Token),
		chromedp.Click(chromedp.CSS(`#signin-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#agents tr[data-name="po"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#agents tr[data-name="dev"]`)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-live="yes"]`)),
	); err != nil {
		t.Fatalf("sign in and see the office: %v", err)
	}
	option := fmt.Sprintf(`#questions .question[data-id=%q] button.option`, q.ID)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(option))); err != nil {
		t.Fatalf("po's question in the page: %v", err)
	}
	// The invocation is not there yet: it follows the answer.
	before, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#invocations tr').length`))
	if err != nil {
		t.Fatal(err)
	}
	if before != 0 {
		t.Fatalf("%d invocations before the answer", before)
	}
	saveScreenshot(t, ctx, "web-office-question.png")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(option))); err != nil {
		t.Fatalf("click %q: %v", answer, err)
	}
	// The answer went through answer_question, stamped with the member.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got office.Question
		r.get(t, "/api/questions/"+q.ID, &got)
		if got.Response == answer && got.AnsweredBy == member.ID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("question after the click: status %q response %q by %q; want %q by %s", got.Status, got.Response, got.AnsweredBy, answer, member.ID)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// po gives dev the task; the page shows it without being asked to.
	deadline = time.Now().Add(60 * time.Second)
	for {
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#invocations').textContent`))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(text, answer) && strings.Contains(text, "po → dev") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the invocation never appeared in the page; invocations: %q", text)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// And the question left the pending list.
	if err := chromedp.Do(ctx, chromedp.WaitNotPresent(chromedp.CSS(fmt.Sprintf(`#questions .question[data-id=%q]`, q.ID)))); err != nil {
		t.Fatalf("answered question still listed: %v", err)
	}
	// dev delivers, po asks again: the result and the next question arrive
	// live as well.
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(`#results tr[data-id]`)),
		chromedp.WaitVisible(chromedp.CSS(`#invocations tr[data-status="completed"]`)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#questions .question:not([data-id=%q]) button.option`, q.ID))),
	); err != nil {
		t.Fatalf("the result and po's next question in the page: %v", err)
	}
	saveScreenshot(t, ctx, "web-office.png")
}
