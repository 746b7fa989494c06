package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/office-server/office-server/internal/anthropictest"
	"github.com/office-server/office-server/internal/testenv"
)

// TestClaudePermissionRequests runs the built `office-server serve` on
// PostgreSQL with one real Claude Code agent in the default permission
// mode, whose scripted model asks to run Bash commands, and a policy in
// the office file (one command always allowed, a 6 s timeout). Each
// request becomes a permission question naming the agent and the command,
// with an office event; then:
//   - a member answers "allow once" by an SQL UPDATE under RLS: the command
//     runs and the model gets its output, once;
//   - "allow for this session" through the admin API: the same command
//     again runs without a question;
//   - a person denies it from the console (headless Chromium: the request
//     is at the top with its buttons) with a reason: the model gets an
//     is_error result carrying the reason, once;
//   - nobody answers: after the timeout the model gets a deny saying so,
//     once, and the question is expired;
//   - the always-allowed command runs with no question at all;
//   - the server is killed (SIGKILL) while a request waits and started
//     again, four times: nobody answered (the question is cancelled, a
//     member's late answer refused with PT409, the agent told once); a
//     member allowed it meanwhile (the agent is told once, asks again, is
//     allowed, and the output reaches the model once); a member denied it
//     with a reason meanwhile (the reason is told once, nothing runs); its
//     timeout passed meanwhile (expired, told once);
//   - "allow for this session" still holds after a restart (the
//     conversation is resumed), and a fresh conversation asks again.
//
// No "[OFFICE] Answer to question" and no expiry notice is ever typed for
// these questions. It logs the time from the request to its row and from
// an answer to the decision reaching the model (docs/performance.md, "Permission
// requests").
func TestClaudePermissionRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs Claude Code, PostgreSQL and Chromium")
	}
	claude := testenv.ClaudeBin(t)
	chromium := testenv.Chromium(t)
	bin := buildServer(t)
	dbURL := testenv.NewDatabase(t)

	srv := anthropictest.New(t)
	var mu sync.Mutex
	toolUseAt := map[string]time.Time{} // marker → when the model asked for the tool
	srv.Reply(func(r anthropictest.Request) anthropictest.Response {
		if strings.Contains(r.LastUserText(), "ran-rallow) was interrupted by a restart; meanwhile a person allowed it") {
			return anthropictest.Response{Text: "Trying it again.", ToolUses: []anthropictest.ToolUse{{
				Name: "Bash", Input: map[string]string{"command": "mkdir -p dir-rallow && echo ran-rallow", "description": "Make dir-rallow"},
			}}}
		}
		if out, isErr, ok := r.ToolResult(); ok {
			return anthropictest.Response{Text: fmt.Sprintf("tool said (error %v): %s", isErr, out)}
		}
		u := r.LastUserText()
		if strings.Contains(u, "was interrupted") {
			return anthropictest.Response{Text: "Noted the interruption."}
		}
		if strings.Contains(u, "please run session") { // twice, the same command
			return anthropictest.Response{Text: "Running it.", ToolUses: []anthropictest.ToolUse{{
				Name: "Bash", Input: map[string]string{"command": "mkdir -p dir-session && echo ran-session", "description": "Make dir-session"},
			}}}
		}
		for _, c := range []string{"allow", "deny", "timeout", "always", "restart", "rallow", "rdeny", "rtimeout"} {
			if strings.Contains(u, "please run "+c) {
				mu.Lock()
				toolUseAt[c] = time.Now()
				mu.Unlock()
				return anthropictest.Response{Text: "Running it.", ToolUses: []anthropictest.ToolUse{{
					Name: "Bash", Input: map[string]string{"command": "mkdir -p dir-" + c + " && echo ran-" + c, "description": "Make dir-" + c},
				}}}
			}
		}
		return anthropictest.Response{Text: "OK"}
	})

	home, work, data := t.TempDir(), t.TempDir(), t.TempDir()
	officeFile := filepath.Join(t.TempDir(), "office.yaml")
	if err := os.WriteFile(officeFile, []byte(`office:
  name: Permission office
  permissions:
    timeout: 6s
agents:
  - name: po
    role: Product owner
    launch:
      kind: claude
      command: "`+claude+`"
      dir: "`+work+`"
      permission_mode: default
      permissions:
        allow: ["Bash(mkdir -p dir-always)"]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	const token = "perm-token-0123456789abcdef"
	env := []string{"HOME=" + home, "LANG=C.UTF-8", "OFFICE_ADMIN_TOKEN=" + token, "DATABASE_URL=" + dbURL,
		"ANTHROPIC_API_KEY=" + srv.Key, "ANTHROPIC_BASE_URL=" + srv.URL, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
	args := []string{"--office", officeFile, "--data-dir", data}
	p := launchServer(t, bin, env, args...)
	p.waitHealthy(t)
	defer func() {
		if t.Failed() {
			t.Logf("server log:\n%s", p.stderr.String())
		}
	}()
	c := apiClient{t: t, base: p.base, token: token}
	var offices []struct{ ID string }
	c.wait("the office", 30*time.Second, func() bool { return c.do("GET", "/api/offices", "", &offices) == 200 && len(offices) == 1 })
	officeID := offices[0].ID
	session := func() string {
		var ss []struct{ Status string }
		c.do("GET", "/api/offices/"+officeID+"/sessions", "", &ss)
		if len(ss) != 1 {
			return ""
		}
		return ss[0].Status
	}
	c.wait("po ready", 90*time.Second, func() bool { return session() == "ready" })

	ctx := context.Background()
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	member := "00000000-0000-0000-0000-0000000000f1"
	mustExec(t, db, `insert into auth.users (id, email) values ($1, 'member@example.com')`, member)
	mustExec(t, db, `insert into office_members (office_id, user_id) values ($1, $2)`, officeID, member)

	send := func(text string) {
		t.Helper()
		if st := c.do("POST", "/api/offices/"+officeID+"/messages", `{"agent":"po","content":"`+text+`"}`, nil); st != 201 && st != 200 {
			t.Fatalf("post message: %d", st)
		}
	}
	type question struct {
		ID, Question, Category, Type, Status, Context string
		Options                                       []string
	}
	// rowFor waits for the permission question of a command and returns
	// it with the time it was first seen.
	rowFor := func(marker string, not ...string) (question, time.Time) {
		t.Helper()
		var q question
		deadline := time.Now().Add(90 * time.Second)
		for {
			var opts []string
			err := db.QueryRow(ctx, `select id::text, question, coalesce(category, ''), question_type, status, coalesce(context, ''), options
				from user_questions where office_id = $1 and question like '%' || $2 || '%' and not (id::text = any($3))`, officeID, marker, append([]string{}, not...)).
				Scan(&q.ID, &q.Question, &q.Category, &q.Type, &q.Status, &q.Context, &opts)
			if err == nil {
				q.Options = opts
				return q, time.Now()
			}
			if time.Now().After(deadline) {
				t.Fatalf("no question row for %s: %v", marker, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// toolResults returns the tool_results with marker the model got.
	toolResults := func(marker string) (outs []string, errs []bool, first time.Time) {
		for _, r := range srv.MainRequests() {
			if out, isErr, ok := r.ToolResult(); ok && strings.Contains(out, marker) {
				if len(outs) == 0 {
					first = r.Time
				}
				outs, errs = append(outs, out), append(errs, isErr)
			}
		}
		return outs, errs, first
	}
	waitResult := func(marker string) (string, bool, time.Time) {
		t.Helper()
		c.wait("a tool_result with "+marker, 90*time.Second, func() bool { o, _, _ := toolResults(marker); return len(o) > 0 })
		o, e, at := toolResults(marker)
		return o[0], e[0], at
	}
	status := func(id string) string {
		var s string
		_ = db.QueryRow(ctx, `select status from user_questions where id = $1`, id).Scan(&s)
		return s
	}
	events := func(kind, id string) int {
		var n int
		_ = db.QueryRow(ctx, `select count(*) from office_events where office_id = $1 and kind = $2 and payload->>'question_id' = $3`, officeID, kind, id).Scan(&n)
		return n
	}
	toRow, toDecision := map[string]time.Duration{}, map[string]time.Duration{}
	// ran counts the results that are exactly a command's output.
	ran := func(marker string) int {
		n := 0
		outs, errs, _ := toolResults(marker)
		for i, o := range outs {
			if !errs[i] && strings.TrimSpace(o) == marker {
				n++
			}
		}
		return n
	}
	rowTime := func(c string, seen time.Time) {
		mu.Lock()
		toRow[c] = seen.Sub(toolUseAt[c])
		mu.Unlock()
	}

	// 1. Allowed by a member's UPDATE under RLS.
	send("please run allow")
	q, seen := rowFor("mkdir -p dir-allow && echo ran-allow")
	mu.Lock()
	toRow["allow"] = seen.Sub(toolUseAt["allow"])
	mu.Unlock()
	if q.Category != "permission" || q.Type != "selection" || q.Status != "pending" ||
		!strings.HasPrefix(q.Question, "po wants to run a command: ") || strings.Join(q.Options, "|") != "allow once|allow for this session|deny" {
		t.Errorf("question row %+v: want a pending permission selection naming po and the command, options allow once / allow for this session / deny", q)
	}
	if !strings.Contains(q.Context, "Make dir-allow") || !strings.Contains(q.Context, "Tool: Bash") {
		t.Errorf("question context %q: want the agent's description and the tool", q.Context)
	}
	c.wait("the permission.requested event", 10*time.Second, func() bool { return events("permission.requested", q.ID) == 1 })
	// RLS: members read it; a signed-in user of no office sees nothing.
	stranger := "00000000-0000-0000-0000-0000000000f2"
	mustExec(t, db, `insert into auth.users (id, email) values ($1, 'stranger@example.com')`, stranger)
	for _, who := range []struct {
		user string
		want int
	}{{member, 1}, {stranger, 0}} {
		if got := visibleAs(t, db, who.user, q.ID); got != who.want {
			t.Errorf("user %s sees %d rows of the permission question, want %d", who.user, got, who.want)
		}
	}

	// The console shows it at the top, with its buttons.
	bctx := chromeContext(t, chromium, 120*time.Second)
	if err := chromedp.Do(bctx,
		chromedp.Navigate(p.base+"/?token="+token),
		chromedp.WaitVisible(chromedp.CSS(`#attention .card.permission[data-id="`+q.ID+`"] button.allow`)),
	); err != nil {
		t.Fatalf("console: the permission request is not shown at the top: %v", err)
	}
	saveScreenshot(t, bctx, "console-permission-request.png")

	answered := time.Now()
	answerWithRLS(t, db, member, q.ID, "allow once")
	out, isErr, at := waitResult("ran-allow")
	toDecision["allow (member RPC)"] = at.Sub(answered)
	if isErr || strings.TrimSpace(out) != "ran-allow" {
		t.Errorf("allowed: the model got %q (error %v), want the command's output", out, isErr)
	}
	if _, err := os.Stat(filepath.Join(work, "dir-allow")); err != nil {
		t.Errorf("the allowed command did not run: %v", err)
	}
	c.wait("the question delivered", 30*time.Second, func() bool { return status(q.ID) == "delivered" })
	c.wait("po ready after allow", 60*time.Second, func() bool { return session() == "ready" })

	// 1b. Allowed for the session through the admin API: the same command
	// again runs without a question.
	send("please run session")
	q, _ = rowFor("echo ran-session")
	sessionQ := q.ID
	answered = time.Now()
	if st := c.do("POST", "/api/questions/"+q.ID+"/answer", `{"response":"allow for this session"}`, nil); st != 200 {
		t.Fatalf("answer through the API: %d", st)
	}
	_, _, at = waitResult("ran-session")
	toDecision["session (API)"] = at.Sub(answered)
	c.wait("po ready after the session allow", 60*time.Second, func() bool { return session() == "ready" })
	send("please run session again")
	c.wait("the second run", 60*time.Second, func() bool { o, _, _ := toolResults("ran-session"); return len(o) == 2 })
	var asked int
	_ = db.QueryRow(ctx, `select count(*) from user_questions where office_id = $1 and question like '%dir-session%'`, officeID).Scan(&asked)
	if o, e, _ := toolResults("ran-session"); asked != 1 || e[0] || e[1] || strings.TrimSpace(o[1]) != "ran-session" {
		t.Errorf("allowed for the session: %d questions (want 1), results %q errors %v", asked, o, e)
	}
	c.wait("po ready after the second run", 60*time.Second, func() bool { return session() == "ready" })

	// 2. Denied from the console, with a reason.
	send("please run deny")
	q, seen = rowFor("echo ran-deny")
	mu.Lock()
	toRow["deny"] = seen.Sub(toolUseAt["deny"])
	mu.Unlock()
	const reason = "not before the release (ran-deny)"
	card := `#attention .card.permission[data-id="` + q.ID + `"]`
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(chromedp.CSS(card+` input.reason`)),
		chromedp.SendKeys(chromedp.CSS(card+` input.reason`), reason),
		// The page refreshes every 3 s and on every event: a reason being
		// typed must survive it.
		chromedp.Sleep(3500*time.Millisecond),
	); err != nil {
		t.Fatalf("console: deny with a reason: %v", err)
	}
	answered = time.Now()
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(card+` button.deny`))); err != nil {
		t.Fatalf("console: click deny: %v", err)
	}
	out, isErr, at = waitResult("ran-deny")
	toDecision["deny (console)"] = at.Sub(answered)
	if !isErr || !strings.Contains(out, reason) {
		t.Errorf("denied: the model got %q (error %v), want an error with the reason %q", out, isErr, reason)
	}
	if _, err := os.Stat(filepath.Join(work, "dir-deny")); err == nil {
		t.Error("the denied command ran")
	}
	c.wait("po ready after deny", 60*time.Second, func() bool { return session() == "ready" })
	if err := chromedp.Do(bctx, chromedp.WaitNotPresent(chromedp.CSS(card))); err != nil {
		t.Errorf("the console still shows the answered request: %v", err)
	}

	// 3. Nobody answers: the timeout (6 s, from the office) denies.
	send("please run timeout")
	q, seen = rowFor("echo ran-timeout")
	rowTime("timeout", seen)
	timeoutID := q.ID
	out, isErr, _ = waitResult("within 6s")
	if !isErr || !strings.Contains(out, "No one in the office answered") {
		t.Errorf("timed out: the model got %q (error %v), want the timeout's deny", out, isErr)
	}
	if s := status(q.ID); s != "expired" {
		t.Errorf("timed-out question is %s, want expired", s)
	}
	c.wait("po ready after the timeout", 60*time.Second, func() bool { return session() == "ready" })

	// 4. Always allowed by the policy: no question.
	send("please run always")
	out, isErr, _ = waitResult("ran-always")
	if isErr || strings.TrimSpace(out) != "ran-always" {
		t.Errorf("always allowed: the model got %q (error %v)", out, isErr)
	}
	var n int
	_ = db.QueryRow(ctx, `select count(*) from user_questions where office_id = $1 and question like '%dir-always%'`, officeID).Scan(&n)
	if n != 0 {
		t.Errorf("an always-allowed command made %d questions", n)
	}
	c.wait("po ready after always", 60*time.Second, func() bool { return session() == "ready" })

	// 5. The server is killed (SIGKILL) while a request waits, and comes
	// back; its agent comes back with it, resuming its conversation.
	cur := p
	restart := func(meanwhile func()) {
		t.Helper()
		// The prompt that led to the request is received (Claude Code wrote
		// it to its transcript) before the kill: a request waits far longer
		// than that, and a prompt not yet received would be typed again.
		c.wait("the prompt received", 30*time.Second, func() bool {
			var n int
			_ = db.QueryRow(ctx, `select count(*) from user_messages where office_id = $1 and status <> 'delivered'`, officeID).Scan(&n)
			return n == 0
		})
		if err := cur.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-cur.exited
		if meanwhile != nil {
			meanwhile()
		}
		np := launchServer(t, bin, env, args...)
		np.waitHealthy(t)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("log of a restarted server:\n%s", np.stderr.String())
			}
		})
		cur, c = np, apiClient{t: t, base: np.base, token: token}
	}
	told := func(marker string) int { return countUserText(srv, marker) }

	// 5a. Nobody answers before the restart: the question is cancelled (a
	// member's late answer is refused) and the agent told, once.
	send("please run restart")
	q, seen = rowFor("echo ran-restart")
	rowTime("restart", seen)
	restart(nil)
	c.wait("the request to be final", 60*time.Second, func() bool { return status(q.ID) == "cancelled" })
	c.wait("the agent to be told", 120*time.Second, func() bool { return told("ran-restart) was interrupted") > 0 })
	if err := tryAnswerWithRLS(db, member, q.ID, "allow once"); pgState(err) != "PT409" {
		t.Errorf("a member's answer to the interrupted request after the restart: %v, want PT409", err)
	}
	c.wait("po ready after the restart", 60*time.Second, func() bool { return session() == "ready" })

	// 5b. "Allow for this session" outlived the restart: the conversation
	// was resumed, so the same command runs without a question.
	send("please run session again after the restart")
	c.wait("the third run", 60*time.Second, func() bool { return ran("ran-session") == 3 })
	_ = db.QueryRow(ctx, `select count(*) from user_questions where office_id = $1 and question like '%dir-session%'`, officeID).Scan(&asked)
	if asked != 1 {
		t.Errorf("after a restart the session grant did not hold: %d questions for its command, want 1", asked)
	}
	c.wait("po ready after the granted run", 60*time.Second, func() bool { return session() == "ready" })

	// 5c. A member allows it while no server runs: after the restart the
	// agent is told, once; it asks again, is allowed, and the command's
	// output reaches the model once.
	send("please run rallow")
	q, seen = rowFor("echo ran-rallow")
	rowTime("rallow", seen)
	first := q.ID
	restart(func() { answerWithRLS(t, db, member, first, "allow once") })
	q, _ = rowFor("echo ran-rallow", first)
	if n := told("ran-rallow) was interrupted by a restart; meanwhile a person allowed it"); n != 1 {
		t.Errorf("the agent was told %d times of the answer given while the server was down, want once", n)
	}
	answered = time.Now()
	answerWithRLS(t, db, member, q.ID, "allow once")
	c.wait("the retried command's output", 60*time.Second, func() bool { return ran("ran-rallow") == 1 })
	for _, r := range srv.MainRequests() {
		if o, isErr, ok := r.ToolResult(); ok && !isErr && strings.TrimSpace(o) == "ran-rallow" {
			at = r.Time
		}
	}
	toDecision["allow after a restart (member RPC)"] = at.Sub(answered)
	c.wait("both questions delivered", 30*time.Second, func() bool { return status(first) == "delivered" && status(q.ID) == "delivered" })
	c.wait("po ready after rallow", 60*time.Second, func() bool { return session() == "ready" })

	// 5d. A member denies it, with a reason, while no server runs: the
	// agent is told the reason, once; nothing runs.
	send("please run rdeny")
	q, seen = rowFor("echo ran-rdeny")
	rowTime("rdeny", seen)
	rdeny := q.ID
	const rdenyReason = "the disk is full (rdeny)"
	restart(func() { answerWithRLS(t, db, member, rdeny, "deny: "+rdenyReason) })
	c.wait("the deny told", 120*time.Second, func() bool { return told("meanwhile a person denied it: "+rdenyReason) > 0 })
	c.wait("the denied question delivered", 30*time.Second, func() bool { return status(rdeny) == "delivered" })
	c.wait("po ready after rdeny", 60*time.Second, func() bool { return session() == "ready" })

	// 5e. Its timeout passes while no server runs: after the restart the
	// question is expired (not cancelled) and the agent told, once.
	send("please run rtimeout")
	q, seen = rowFor("echo ran-rtimeout")
	rowTime("rtimeout", seen)
	rtimeout := q.ID
	restart(func() { time.Sleep(time.Until(seen.Add(7 * time.Second))) })
	c.wait("the expiry", 60*time.Second, func() bool { return status(rtimeout) == "expired" })
	c.wait("the expiry told", 120*time.Second, func() bool { return told("ran-rtimeout) was interrupted") > 0 })
	c.wait("po ready after rtimeout", 60*time.Second, func() bool { return session() == "ready" })

	// 6. A fresh conversation ends "allow for this session": the command
	// is asked again. (The server keeps a conversation across restarts,
	// even its transcript, in the database; here its id is cleared while
	// po is stopped, so that the next start begins a new one, as when a
	// conversation cannot be resumed.)
	if st := c.do("POST", "/api/offices/"+officeID+"/agents/po/stop", "", nil); st != 202 {
		t.Fatalf("stop po: %d", st)
	}
	c.wait("po stopped", 30*time.Second, func() bool { return session() == "stopped" })
	mustExec(t, db, `update agent_sessions set agent_session_id = '' where office_id = $1`, officeID)
	if st := c.do("POST", "/api/offices/"+officeID+"/agents/po/start", "", nil); st != 202 {
		t.Fatalf("start po: %d", st)
	}
	c.wait("po ready in a fresh conversation", 90*time.Second, func() bool { return session() == "ready" })
	var ended int
	c.wait("the grants ended", 30*time.Second, func() bool {
		_ = db.QueryRow(ctx, `select count(*) from office_events where office_id = $1 and kind = 'permission.grants_ended'`, officeID).Scan(&ended)
		return ended == 1
	})
	send("please run session in the fresh conversation")
	q, _ = rowFor("echo ran-session", sessionQ)
	if st := c.do("POST", "/api/questions/"+q.ID+"/answer", `{"response":"deny: a fresh conversation asks again"}`, nil); st != 200 {
		t.Fatalf("answer through the API: %d", st)
	}
	waitResult("a fresh conversation asks again")
	time.Sleep(3 * time.Second) // time for anything typed twice

	// Each exactly once; nothing typed for these questions but the
	// restart notices.
	for _, m := range []string{"ran-allow", "ran-deny", "within 6s", "ran-always", "a fresh conversation asks again"} {
		if o, _, _ := toolResults(m); len(o) != 1 {
			t.Errorf("the model got %d tool_results with %q, want 1", len(o), m)
		}
	}
	if n := ran("ran-session"); n != 3 {
		t.Errorf("the session-granted command ran %d times, want 3", n)
	}
	for _, m := range []string{"ran-restart) was interrupted", "ran-rallow) was interrupted", "meanwhile a person denied it: " + rdenyReason, "ran-rtimeout) was interrupted"} {
		if k := told(m); k != 1 {
			t.Errorf("the agent was told %q %d times, want once", m, k)
		}
	}
	for _, d := range []string{"dir-restart", "dir-rdeny", "dir-rtimeout"} {
		if _, err := os.Stat(filepath.Join(work, d)); err == nil {
			t.Errorf("%s was made, though its request was not allowed", d)
		}
	}
	for _, s := range []string{"Answer to question", "expired without an answer"} {
		if k := countUserText(srv, s); k != 0 {
			t.Errorf("%q was typed into the agent %d times for permission questions", s, k)
		}
	}
	if k := events("permission.denied", timeoutID); k != 1 {
		t.Errorf("%d permission.denied events for the timed-out request, want 1", k)
	}
	if k := events("permission.expired", rtimeout); k != 1 {
		t.Errorf("%d permission.expired events for the request that timed out while the server was down, want 1", k)
	}
	if t.Failed() {
		for _, r := range srv.MainRequests() {
			out, isErr, ok := r.ToolResult()
			t.Logf("model request %d at %s, %d messages: user %.100q; tool_result %v %v %.100q", r.Seq, r.Time.Format("15:04:05.000"), len(r.Messages), r.LastUserText(), ok, isErr, out)
		}
		rows, _ := db.Query(ctx, `select created_at, status, coalesce(response, ''), question from user_questions where office_id = $1 order by created_at`, officeID)
		for rows.Next() {
			var at time.Time
			var st, resp, qs string
			_ = rows.Scan(&at, &st, &resp, &qs)
			t.Logf("question at %s: %s %q: %s", at.Format("15:04:05.000"), st, resp, qs)
		}
		rows.Close()
	}
	cur.stop(t)
	keys := func(m map[string]time.Duration) string {
		var out []string
		for k, v := range m {
			out = append(out, fmt.Sprintf("%s=%v", k, v.Round(time.Millisecond)))
		}
		sort.Strings(out)
		return strings.Join(out, " ")
	}
	t.Logf("request → row: %s", keys(toRow))
	t.Logf("answer → decision at the model: %s", keys(toDecision))
}

// tryAnswerWithRLS answers as a member through answer_question and
// returns its error.
func tryAnswerWithRLS(db *pgx.Conn, member, id, response string) error {
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `select set_config('request.jwt.claims', $1, true)`, `{"sub":"`+member+`","role":"authenticated"}`); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "set local role authenticated"); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `select public.answer_question($1, $2)`, id, response); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// pgState is the SQLSTATE of a PostgreSQL error, or "".
func pgState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// visibleAs counts the rows of question id that user reads under RLS.
func visibleAs(t *testing.T, db *pgx.Conn, user, id string) int {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `select set_config('request.jwt.claims', $1, true)`, `{"sub":"`+user+`","role":"authenticated"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "set local role authenticated"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow(ctx, `select count(*) from user_questions where id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
