package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/supabase/supabasetest"
)

// TestWebOfficePage drives the reference web office
// (examples/web-office/, docs/frontend.md) in the real headless Chromium:
// the page, served from its own origin as any static site, talks to the
// stand-in Supabase project with supabase-js, and the serve command runs
// the demo office behind the project. A member signs in with their token,
// sees po, dev and scout's refused INVOKE with why, answers po's question
// with an option button, and sees the invocation po gives dev appear in
// the page, then dev's result and po's next question: the page never
// polls, so they came over Realtime. Then they provide scout's package
// and send scout a message in the page, and both reach scout; answer a
// text question of scout's in the page's text box; and give
// scout's api key in the page, which goes to the office server's member
// endpoint (another origin, with the member's token) and is stored sealed.
func TestWebOfficePage(t *testing.T) {
	bin := testenv.Chromium(t)
	root := testenv.RepoRoot()
	const bundle = "/node_modules/@supabase/supabase-js/dist/umd/supabase.js"
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(bundle))); err != nil {
		testenv.Missing(t, "@supabase/supabase-js", "run scripts/setup.sh (npm ci installs it from package-lock.json)")
	}
	p := supabasetest.New(t)
	r := startSupabaseMainWith(t, p, demoOfficeWithScout(t, "tok-web-office"))
	r.waitReady(t, "at start")
	officeID := r.officeID(t)
	member := p.MemberOf(t, officeID, "web@example.com")
	q := r.waitQuestion(t, officeID, office.QuestionPending, 60*time.Second)
	if len(q.Options) == 0 {
		t.Fatalf("po's question %q has no options", q.Question)
	}

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
	conn, err := pgx.Connect(context.Background(), p.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	w := &webOffice{t: t, ctx: ctx, conn: conn, r: r, officeID: officeID, member: member}
	w.signIn(site.URL, p)
	w.answerPo(q)
	w.scoutPackageAndMessage()
	w.scoutTextQuestion()
	w.scoutSecret()
}

// webOffice is the reference web office open in Chromium, signed in as
// member, with the steps TestWebOfficePage takes on it.
type webOffice struct {
	t        *testing.T
	ctx      context.Context
	conn     *pgx.Conn
	r        *liveServer
	officeID string
	member   supabasetest.Member
}

// waitText waits until the element sel shows every string of want and
// returns its text.
func (w *webOffice) waitText(sel, what string, want ...string) string {
	t := w.t
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		text, err := chromedp.Run(w.ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).textContent`, sel)))
		if err != nil {
			t.Fatal(err)
		}
		all := true
		for _, w := range want {
			all = all && strings.Contains(text, w)
		}
		if all {
			return text
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed in the page; %s shows %q", what, sel, text)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitRow waits until sql, a boolean, is true in the project's database.
func (w *webOffice) waitRow(what, sql string, args ...any) {
	t := w.t
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ok bool
		if err := w.conn.QueryRow(context.Background(), sql, args...).Scan(&ok); err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (w *webOffice) signIn(siteURL string, p *supabasetest.Project) {
	if err := chromedp.Do(w.ctx,
		chromedp.Navigate(siteURL+"/examples/web-office/"),
		chromedp.SetValue(chromedp.CSS(`#url`), p.URL),
		chromedp.SetValue(chromedp.CSS(`#key`), p.PublishableKey),
		chromedp.SetValue(chromedp.CSS(`#token`), w.member.Token),
		chromedp.SetValue(chromedp.CSS(`#server`), w.r.base),
		chromedp.Click(chromedp.CSS(`#signin-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#agents tr[data-name="po"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#agents tr[data-name="dev"]`)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-live="yes"]`)),
	); err != nil {
		w.t.Fatalf("sign in and see the office: %v", err)
	}
}

// answerPo: scout's refused INVOKE is listed with why; po's task to dev
// is not there yet: it follows the answer, given with an option button
// and stamped with the member; then the task, dev's result and po's next
// question arrive live.
func (w *webOffice) answerPo(q office.Question) {
	t, ctx, r, member := w.t, w.ctx, w.r, w.member
	answer := q.Options[0]
	option := fmt.Sprintf(`#questions .question[data-id=%q] button.option`, q.ID)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(option))); err != nil {
		t.Fatalf("po's question in the page: %v", err)
	}
	if text := w.waitText("#invocations", "scout's refused INVOKE", "scout → (nobody)", "ghost"); strings.Contains(text, "po → dev") {
		t.Fatalf("po's task to dev listed before the answer: %q", text)
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
	w.waitText("#invocations", "po's task to dev", "po → dev", answer)
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

// scoutPackageAndMessage: scout's package request, provided in the page,
// is delivered to scout; a message to scout, written in the page, is
// typed into scout.
func (w *webOffice) scoutPackageAndMessage() {
	t, ctx := w.t, w.ctx
	w.waitText("#deps", "scout's dependency request", "scout needs package left-pad")
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`#deps .question input`), "left-pad"),
		chromedp.Click(chromedp.CSS(`#deps .question button.provide`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#deps .question`)),
	); err != nil {
		t.Fatalf("provide scout's package in the page: %v", err)
	}
	w.waitRow("the package delivered to scout", `select exists (select 1 from dependency_requests
		where office_id = $1 and name = 'left-pad' and status = 'provided' and delivered_at is not null)`, w.officeID)

	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const sel = document.querySelector('#message-agent')
		sel.value = [...sel.options].find((o) => o.textContent === 'scout').value
		document.querySelector('#message-text').value = 'hello scout'
		return true })()`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#message-form button[type=submit]`))); err != nil {
		t.Fatal(err)
	}
	w.waitRow("the message delivered to scout", `select exists (select 1 from user_messages
		where office_id = $1 and content = 'hello scout' and user_id = $2 and status = 'delivered')`, w.officeID, w.member.ID)
}

// scoutTextQuestion: a text question (scout's, written as the office
// writes one) is answered in the page's text box; an empty answer to a
// required question is refused with why, and the question stays.
func (w *webOffice) scoutTextQuestion() {
	t, ctx := w.t, w.ctx
	var textQ string
	if err := w.conn.QueryRow(context.Background(), `insert into user_questions (office_id, agent_id, question, question_type, required, expires_at)
		select office_id, id, 'Which colour?', 'text', true, now() + interval '1 hour' from office_agents
		where office_id = $1 and name = 'scout' returning id::text`, w.officeID).Scan(&textQ); err != nil {
		t.Fatal(err)
	}
	textBox := fmt.Sprintf(`#questions .question[data-id=%q]`, textQ)
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(textBox+` input.text`)),
		chromedp.Click(chromedp.CSS(textBox+` button.answer`)),
	); err != nil {
		t.Fatalf("answer scout's text question empty: %v", err)
	}
	w.waitText(textBox+` .error`, "the refusal of an empty answer", "empty")
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(textBox+` input.text`), "teal blue"),
		chromedp.Click(chromedp.CSS(textBox+` button.answer`)),
		chromedp.WaitNotPresent(chromedp.CSS(textBox)),
	); err != nil {
		t.Fatalf("answer scout's text question in the page: %v", err)
	}
	w.waitRow("the text answer delivered to scout", `select exists (select 1 from user_questions
		where id = $1 and response = 'teal blue' and answered_by = $2 and status = 'delivered')`, textQ, w.member.ID)
}

// scoutSecret: a secret scout asks for, given in the page, goes to the
// office server (another origin: CORS) with the member's token, and is
// stored sealed under the server's key.
func (w *webOffice) scoutSecret() {
	t := w.t
	var depKey string
	if err := w.conn.QueryRow(context.Background(), `insert into dependency_requests (office_id, agent_id, type, name, description, expires_at)
		select office_id, id, 'api_key', 'DEPLOY_KEY', 'scout deploys', now() + interval '1 hour' from office_agents
		where office_id = $1 and name = 'scout' returning id::text`, w.officeID).Scan(&depKey); err != nil {
		t.Fatal(err)
	}
	secretBox := fmt.Sprintf(`#deps .question[data-id=%q]`, depKey)
	if err := chromedp.Do(w.ctx,
		chromedp.WaitVisible(chromedp.CSS(secretBox+` input[type=password]`)),
		chromedp.SetValue(chromedp.CSS(secretBox+` input`), "sk-web-office-secret-42"),
		chromedp.Click(chromedp.CSS(secretBox+` button.provide`)),
		chromedp.WaitNotPresent(chromedp.CSS(secretBox)),
	); err != nil {
		t.Fatalf("provide scout's api key in the page: %v", err)
	}
	checkSealedSecret(t, w.conn, depKey, "sk-web-office-secret-42")
}
