package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/office-server/office-server/internal/anthropictest"
	"github.com/office-server/office-server/internal/testenv"
)

// TestConsoleResolvesClaudePermissionPrompt runs the built `office-server
// serve` (embedded store, the README's way) from a fresh HOME with one real
// Claude Code agent in the default permission mode, whose scripted model
// asks to run a Bash command. Claude Code stops at its permission dialog:
// the session is needs_attention with the dialog's text in the API, the
// events and at the top of the console (headless Chromium); a person's
// message sent meanwhile is not typed into the dialog; the operator clicks
// the dialog's first choice (Yes), a button on its card; the command runs, the model gets its output,
// the agent is ready again and the waiting message then reaches the model
// exactly once.
// toolMarker is what toolModel's command prints.
const toolMarker = "tool-ran-42"

func TestConsoleResolvesClaudePermissionPrompt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs Claude Code and Chromium")
	}
	claude := testenv.ClaudeBin(t)
	chromium := testenv.Chromium(t)
	bin := buildServer(t)
	srv := toolModel(t)
	home, work := t.TempDir(), t.TempDir()
	const token = "console-token-0123456789abcdef"
	p := launchClaudeOffice(t, bin, `office:
  name: Permission office
agents:
  - name: po
    role: Product owner
    launch: {kind: claude, command: "`+claude+`", dir: "`+work+`", permission_mode: default}
`, home, srv, token)
	c := apiClient{t: t, base: p.base, token: token}
	api, wait := c.do, c.wait
	var offices []struct{ ID string }
	wait("the office", 30*time.Second, func() bool { return api("GET", "/api/offices", "", &offices) == 200 && len(offices) == 1 })
	officeID := offices[0].ID
	type sess struct {
		Status string `json:"status"`
		Detail string `json:"detail"`
	}
	session := func() sess {
		var ss []sess
		api("GET", "/api/offices/"+officeID+"/sessions", "", &ss)
		if len(ss) != 1 {
			return sess{}
		}
		return ss[0]
	}
	wait("po ready", 90*time.Second, func() bool { return session().Status == "ready" })

	send := func(text string) {
		t.Helper()
		if st := api("POST", "/api/offices/"+officeID+"/messages", `{"agent":"po","content":"`+text+`"}`, nil); st != 201 && st != 200 {
			t.Fatalf("post message: %d", st)
		}
	}
	send("Please make the folder.")
	wait("the permission dialog", 90*time.Second, func() bool { return session().Status == "needs_attention" })
	if d := session().Detail; !strings.Contains(d, "Do you want to proceed") || !strings.Contains(d, "mkdir -p made-by-tool") {
		t.Fatalf("needs_attention detail does not show the dialog:\n%s", d)
	}
	checkDialogEvent(c, officeID)
	// A message sent while the dialog is up waits: nothing is typed into it.
	send("Second message.")

	ctx := chromeContext(t, chromium, 120*time.Second)
	defer func() {
		if t.Failed() {
			saveScreenshot(t, ctx, "console-permission-failed.png")
		}
	}()
	card := attentionCard(t, ctx, p.base+"/?token="+token)
	time.Sleep(2 * time.Second) // time for a wrongly typed message to show
	if n := countUserText(srv, "Second message"); n != 0 {
		t.Fatalf("the second message reached the model while the dialog was up (%d)", n)
	}
	if s := session(); s.Status != "needs_attention" {
		t.Fatalf("while the dialog is up the session is %s, want needs_attention", s.Status)
	}
	chooseYes(t, ctx, card)
	wait("the tool's output to reach the model", 60*time.Second, func() bool { return toolOutputReached(srv) })
	if _, err := os.Stat(filepath.Join(work, "made-by-tool")); err != nil {
		t.Errorf("the allowed command did not run: %v", err)
	}
	wait("the waiting message to reach the model", 60*time.Second, func() bool { return countUserText(srv, "Second message") > 0 })
	wait("po ready again", 30*time.Second, func() bool { return session().Status == "ready" })
	if err := chromedp.Do(ctx, chromedp.WaitNotVisible(chromedp.CSS(`#attention`))); err != nil {
		t.Errorf("the console still shows po as needing attention: %v", err)
	}
	time.Sleep(2 * time.Second)
	if n := countUserText(srv, "Second message"); n != 1 {
		t.Errorf("the second message reached the model %d times, want once", n)
	}
}

// chooseYes resolves the dialog where it is shown: the card's first
// choice (1. Yes), a button that sends the keys choosing it.
func chooseYes(t *testing.T, ctx context.Context, card string) {
	choice := `#attention .card[data-name="po"] button.choice[data-choice="1"]`
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(choice))); err != nil {
		t.Fatalf("the dialog's choices are not buttons on its card: %v\n%s", err, card)
	}
	if label, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('`+choice+`').textContent`)); label != "1. Yes" {
		t.Errorf("the first choice's button says %q, want \"1. Yes\"", label)
	}
	saveScreenshot(t, ctx, "console-permission.png")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(choice))); err != nil {
		t.Fatalf("resolve the dialog in the console: %v", err)
	}
}

// toolOutputReached: a request to the model carries the command's output.
func toolOutputReached(srv *anthropictest.Server) bool {
	for _, r := range srv.MainRequests() {
		if out, ok := lastToolResult(r); ok && strings.Contains(out, toolMarker) {
			return true
		}
	}
	return false
}

// toolModel is po's model: asked to make the folder, it runs a Bash
// command that prints toolMarker; then it repeats the command's output and
// acknowledges the second message.
func toolModel(t *testing.T) *anthropictest.Server {
	srv := anthropictest.New(t)
	srv.Reply(func(r anthropictest.Request) anthropictest.Response {
		if out, ok := lastToolResult(r); ok {
			return anthropictest.Response{Text: "The command said: " + out}
		}
		u := r.LastUserText()
		switch {
		case strings.Contains(u, "Please make the folder"):
			return anthropictest.Response{Text: "Making it.", ToolUses: []anthropictest.ToolUse{{
				Name:  "Bash",
				Input: map[string]string{"command": "mkdir -p made-by-tool && echo " + toolMarker, "description": "Make the folder"},
			}}}
		case strings.Contains(u, "Second message"):
			return anthropictest.Response{Text: "Got the second message."}
		}
		return anthropictest.Response{Text: "OK"}
	})

	return srv
}

// checkDialogEvent: a session.needs_attention event holds the dialog's
// text.
func checkDialogEvent(c apiClient, officeID string) {
	t := c.t
	var events []struct {
		Type    string          `json:"kind"`
		Payload json.RawMessage `json:"payload"`
	}
	c.do("GET", "/api/offices/"+officeID+"/events?limit=200", "", &events)
	seen := false
	for _, e := range events {
		seen = seen || (e.Type == "session.needs_attention" && strings.Contains(string(e.Payload), "Do you want to proceed"))
	}
	if !seen {
		t.Errorf("no session.needs_attention event with the dialog's text in %d events", len(events))
	}
}

// attentionCard opens the console at url: the agent needing attention is
// at the top, its card shows the dialog, the title counts it. It returns
// the card's text.
func attentionCard(t *testing.T, ctx context.Context, url string) string {
	if err := chromedp.Do(ctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(`#attention .card[data-name="po"]`)),
	); err != nil {
		t.Fatalf("console: the agent needing attention is not shown at the top: %v", err)
	}
	card, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#attention .card[data-name="po"]').innerText`))
	if err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.title`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(card, "Do you want to proceed") || !strings.HasPrefix(title, "(1)") {
		t.Errorf("attention card %q, title %q: want the dialog's text and a count in the title", card, title)
	}
	return card
}

// lastToolResult returns the text of a tool_result block in the request's
// last message, if it has one.
func lastToolResult(r anthropictest.Request) (string, bool) {
	if len(r.Messages) == 0 {
		return "", false
	}
	for _, b := range r.Messages[len(r.Messages)-1].Content {
		if b.Type != "tool_result" {
			continue
		}
		var s string
		if json.Unmarshal(b.Content, &s) == nil {
			return s, true
		}
		var parts []struct{ Text string }
		_ = json.Unmarshal(b.Content, &parts)
		var out []string
		for _, p := range parts {
			out = append(out, p.Text)
		}
		return strings.Join(out, "\n"), true
	}
	return "", false
}

// countUserText counts the main requests whose last user text contains s:
// how many times a typed message reached the model as a new prompt.
func countUserText(srv *anthropictest.Server, s string) int {
	n := 0
	for _, r := range srv.MainRequests() {
		if strings.Contains(r.LastUserText(), s) {
			n++
		}
	}
	return n
}

// chromeContext starts the real headless Chromium at bin for one test and
// returns a browser tab's context, cancelled after timeout or at the test's
// end.
func chromeContext(t *testing.T, bin string, timeout time.Duration) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, tcancel := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { tcancel(); cancel(); acancel() })
	return ctx
}

// saveScreenshot writes the page as testartifacts/name (kept by CI as an
// artifact; the README shows some of them).
func saveScreenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	dir := filepath.Join(testenv.RepoRoot(), "testartifacts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	t.Logf("screenshot: %s", p)
}

// wait polls cond every 100 ms and fails the test after d.
func (c apiClient) wait(what string, d time.Duration, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
