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
	chromium := testenv.Chromium(t)
	o := newPermOffice(t)
	bctx := chromeContext(t, chromium, 120*time.Second)
	o.allowByMember(bctx)
	o.allowForTheSession()
	o.denyFromConsole(bctx)
	timeoutID := o.timeout()
	o.alwaysAllowed()
	o.cancelledByRestart()
	o.grantOutlivesRestart()
	o.allowedWhileDown()
	o.deniedWhileDown()
	rtimeout := o.expiredWhileDown()
	o.freshConversationAsksAgain()
	o.checkEachOnce(timeoutID, rtimeout)
	o.cur.stop(t)
	t.Logf("request → row: %s", durations(o.toRow))
	t.Logf("answer → decision at the model: %s", durations(o.toDecision))
}

// permOffice is TestClaudePermissionRequests's office: the built server
// on PostgreSQL with po, a real Claude Code agent whose scripted model
// asks to run "mkdir -p dir-X && echo ran-X" when told "please run X".
type permOffice struct {
	t                *testing.T
	ctx              context.Context
	srv              *anthropictest.Server
	db               *pgx.Conn
	bin, work        string
	env, args        []string
	cur              *serverProc
	c                apiClient
	officeID, member string
	sessionQ, rdeny  string // the session grant's question; the request denied while down

	mu                sync.Mutex
	toolUseAt         map[string]time.Time // marker → when the model asked for the tool
	toRow, toDecision map[string]time.Duration
}

const permToken = "perm-token-0123456789abcdef"

const permRdenyReason = "the disk is full (rdeny)"

func newPermOffice(t *testing.T) *permOffice {
	claude := testenv.ClaudeBin(t)
	o := &permOffice{t: t, ctx: context.Background(), bin: buildServer(t), srv: anthropictest.New(t), work: t.TempDir(),
		toolUseAt: map[string]time.Time{}, toRow: map[string]time.Duration{}, toDecision: map[string]time.Duration{}}
	dbURL := testenv.NewDatabase(t)
	o.srv.Reply(o.model)
	db, err := pgx.Connect(o.ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(o.ctx) }) // after the failure's log below
	o.db = db
	home, data := t.TempDir(), t.TempDir()
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
      dir: "`+o.work+`"
      permission_mode: default
      permissions:
        allow: ["Bash(mkdir -p dir-always)"]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	o.env = []string{"HOME=" + home, "LANG=C.UTF-8", "OFFICE_ADMIN_TOKEN=" + permToken, "DATABASE_URL=" + dbURL,
		"ANTHROPIC_API_KEY=" + o.srv.Key, "ANTHROPIC_BASE_URL=" + o.srv.URL, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
	o.args = []string{"--office", officeFile, "--data-dir", data}
	o.cur = launchServer(t, o.bin, o.env, o.args...)
	o.cur.waitHealthy(t)
	first := o.cur
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", first.stderr.String())
			o.logFailure()
		}
	})
	o.c = apiClient{t: t, base: o.cur.base, token: permToken}
	var offices []struct{ ID string }
	o.c.wait("the office", 30*time.Second, func() bool { return o.c.do("GET", "/api/offices", "", &offices) == 200 && len(offices) == 1 })
	o.officeID = offices[0].ID
	o.waitReady("po ready", 90*time.Second)
	o.member = "00000000-0000-0000-0000-0000000000f1"
	mustExec(t, db, `insert into auth.users (id, email) values ($1, 'member@example.com')`, o.member)
	mustExec(t, db, `insert into office_members (office_id, user_id) values ($1, $2)`, o.officeID, o.member)
	return o
}

// model is the scripted Messages API: a tool use for each "please run X".
func (o *permOffice) model(r anthropictest.Request) anthropictest.Response {
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
			o.mu.Lock()
			o.toolUseAt[c] = time.Now()
			o.mu.Unlock()
			return anthropictest.Response{Text: "Running it.", ToolUses: []anthropictest.ToolUse{{
				Name: "Bash", Input: map[string]string{"command": "mkdir -p dir-" + c + " && echo ran-" + c, "description": "Make dir-" + c},
			}}}
		}
	}
	return anthropictest.Response{Text: "OK"}
}

type permQuestion struct {
	ID, Question, Category, Type, Status, Context string
	Options                                       []string
}

func (o *permOffice) session() string {
	var ss []struct{ Status string }
	o.c.do("GET", "/api/offices/"+o.officeID+"/sessions", "", &ss)
	if len(ss) != 1 {
		return ""
	}
	return ss[0].Status
}

func (o *permOffice) waitReady(what string, d time.Duration) {
	o.t.Helper()
	o.c.wait(what, d, func() bool { return o.session() == "ready" })
}

func (o *permOffice) send(text string) {
	o.t.Helper()
	if st := o.c.do("POST", "/api/offices/"+o.officeID+"/messages", `{"agent":"po","content":"`+text+`"}`, nil); st != 201 && st != 200 {
		o.t.Fatalf("post message: %d", st)
	}
}

// rowFor waits for the permission question of a command (none of not)
// and returns it with the time it was first seen.
func (o *permOffice) rowFor(marker string, not ...string) (permQuestion, time.Time) {
	o.t.Helper()
	var q permQuestion
	deadline := time.Now().Add(90 * time.Second)
	for {
		var opts []string
		err := o.db.QueryRow(o.ctx, `select id::text, question, coalesce(category, ''), question_type, status, coalesce(context, ''), options
			from user_questions where office_id = $1 and question like '%' || $2 || '%' and not (id::text = any($3))`, o.officeID, marker, append([]string{}, not...)).
			Scan(&q.ID, &q.Question, &q.Category, &q.Type, &q.Status, &q.Context, &opts)
		if err == nil {
			q.Options = opts
			return q, time.Now()
		}
		if time.Now().After(deadline) {
			o.t.Fatalf("no question row for %s: %v", marker, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// asked waits for the question of "please run c", sent now, and records
// the time from the model's tool use to the row.
func (o *permOffice) asked(c, marker string) permQuestion {
	o.t.Helper()
	o.send("please run " + c)
	q, seen := o.rowFor(marker)
	o.mu.Lock()
	o.toRow[c] = seen.Sub(o.toolUseAt[c])
	o.mu.Unlock()
	return q
}

// toolResults returns the tool_results with marker the model got.
func (o *permOffice) toolResults(marker string) (outs []string, errs []bool, first time.Time) {
	for _, r := range o.srv.MainRequests() {
		if out, isErr, ok := r.ToolResult(); ok && strings.Contains(out, marker) {
			if len(outs) == 0 {
				first = r.Time
			}
			outs, errs = append(outs, out), append(errs, isErr)
		}
	}
	return outs, errs, first
}

func (o *permOffice) waitResult(marker string) (string, bool, time.Time) {
	o.t.Helper()
	o.c.wait("a tool_result with "+marker, 90*time.Second, func() bool { out, _, _ := o.toolResults(marker); return len(out) > 0 })
	out, e, at := o.toolResults(marker)
	return out[0], e[0], at
}

// ran counts the results that are exactly a command's output.
func (o *permOffice) ran(marker string) int {
	n := 0
	outs, errs, _ := o.toolResults(marker)
	for i, out := range outs {
		if !errs[i] && strings.TrimSpace(out) == marker {
			n++
		}
	}
	return n
}

func (o *permOffice) status(id string) string {
	var s string
	_ = o.db.QueryRow(o.ctx, `select status from user_questions where id = $1`, id).Scan(&s)
	return s
}

func (o *permOffice) events(kind, id string) int {
	var n int
	_ = o.db.QueryRow(o.ctx, `select count(*) from office_events where office_id = $1 and kind = $2 and payload->>'question_id' = $3`, o.officeID, kind, id).Scan(&n)
	return n
}

// questionsAbout counts the permission questions whose command has dir.
func (o *permOffice) questionsAbout(dir string) int {
	var n int
	_ = o.db.QueryRow(o.ctx, `select count(*) from user_questions where office_id = $1 and question like '%' || $2 || '%'`, o.officeID, dir).Scan(&n)
	return n
}

func (o *permOffice) told(marker string) int { return countUserText(o.srv, marker) }

// 1. Allowed by a member's UPDATE under RLS; the request is at the top of
// the console with its buttons; members see it, other users do not.
func (o *permOffice) allowByMember(bctx context.Context) {
	t := o.t
	q := o.asked("allow", "mkdir -p dir-allow && echo ran-allow")
	if q.Category != "permission" || q.Type != "selection" || q.Status != "pending" ||
		!strings.HasPrefix(q.Question, "po wants to run a command: ") || strings.Join(q.Options, "|") != "allow once|allow for this session|deny" {
		t.Errorf("question row %+v: want a pending permission selection naming po and the command, options allow once / allow for this session / deny", q)
	}
	if !strings.Contains(q.Context, "Make dir-allow") || !strings.Contains(q.Context, "Tool: Bash") {
		t.Errorf("question context %q: want the agent's description and the tool", q.Context)
	}
	o.c.wait("the permission.requested event", 10*time.Second, func() bool { return o.events("permission.requested", q.ID) == 1 })
	stranger := "00000000-0000-0000-0000-0000000000f2"
	mustExec(t, o.db, `insert into auth.users (id, email) values ($1, 'stranger@example.com')`, stranger)
	for _, who := range []struct {
		user string
		want int
	}{{o.member, 1}, {stranger, 0}} {
		if got := visibleAs(t, o.db, who.user, q.ID); got != who.want {
			t.Errorf("user %s sees %d rows of the permission question, want %d", who.user, got, who.want)
		}
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(o.cur.base+"/?token="+permToken),
		chromedp.WaitVisible(chromedp.CSS(`#attention .card.permission[data-id="`+q.ID+`"] button.allow`)),
	); err != nil {
		t.Fatalf("console: the permission request is not shown at the top: %v", err)
	}
	saveScreenshot(t, bctx, "console-permission-request.png")
	answered := time.Now()
	answerWithRLS(t, o.db, o.member, q.ID, "allow once")
	out, isErr, at := o.waitResult("ran-allow")
	o.toDecision["allow (member RPC)"] = at.Sub(answered)
	if isErr || strings.TrimSpace(out) != "ran-allow" {
		t.Errorf("allowed: the model got %q (error %v), want the command's output", out, isErr)
	}
	if _, err := os.Stat(filepath.Join(o.work, "dir-allow")); err != nil {
		t.Errorf("the allowed command did not run: %v", err)
	}
	o.c.wait("the question delivered", 30*time.Second, func() bool { return o.status(q.ID) == "delivered" })
	o.waitReady("po ready after allow", 60*time.Second)
}

// 1b. Allowed for the session through the admin API: the same command
// again runs without a question.
func (o *permOffice) allowForTheSession() {
	t := o.t
	o.send("please run session")
	q, _ := o.rowFor("echo ran-session")
	o.sessionQ = q.ID
	answered := time.Now()
	if st := o.c.do("POST", "/api/questions/"+q.ID+"/answer", `{"response":"allow for this session"}`, nil); st != 200 {
		t.Fatalf("answer through the API: %d", st)
	}
	_, _, at := o.waitResult("ran-session")
	o.toDecision["session (API)"] = at.Sub(answered)
	o.waitReady("po ready after the session allow", 60*time.Second)
	o.send("please run session again")
	o.c.wait("the second run", 60*time.Second, func() bool { out, _, _ := o.toolResults("ran-session"); return len(out) == 2 })
	if out, e, _ := o.toolResults("ran-session"); o.questionsAbout("dir-session") != 1 || e[0] || e[1] || strings.TrimSpace(out[1]) != "ran-session" {
		t.Errorf("allowed for the session: %d questions (want 1), results %q errors %v", o.questionsAbout("dir-session"), out, e)
	}
	o.waitReady("po ready after the second run", 60*time.Second)
}

// 2. Denied from the console, with a reason typed through a refresh.
func (o *permOffice) denyFromConsole(bctx context.Context) {
	t := o.t
	q := o.asked("deny", "echo ran-deny")
	const reason = "not before the release (ran-deny)"
	card := `#attention .card.permission[data-id="` + q.ID + `"]`
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(chromedp.CSS(card+` input.reason`)),
		chromedp.SendKeys(chromedp.CSS(card+` input.reason`), reason),
		// The page refreshes on every event: a reason being typed must
		// survive it.
		chromedp.Sleep(3500*time.Millisecond),
	); err != nil {
		t.Fatalf("console: deny with a reason: %v", err)
	}
	answered := time.Now()
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(card+` button.deny`))); err != nil {
		t.Fatalf("console: click deny: %v", err)
	}
	out, isErr, at := o.waitResult("ran-deny")
	o.toDecision["deny (console)"] = at.Sub(answered)
	if !isErr || !strings.Contains(out, reason) {
		t.Errorf("denied: the model got %q (error %v), want an error with the reason %q", out, isErr, reason)
	}
	if _, err := os.Stat(filepath.Join(o.work, "dir-deny")); err == nil {
		t.Error("the denied command ran")
	}
	o.waitReady("po ready after deny", 60*time.Second)
	if err := chromedp.Do(bctx, chromedp.WaitNotPresent(chromedp.CSS(card))); err != nil {
		t.Errorf("the console still shows the answered request: %v", err)
	}
}

// 3. Nobody answers: the timeout (6 s, from the office) denies. It
// returns the question's id.
func (o *permOffice) timeout() string {
	t := o.t
	q := o.asked("timeout", "echo ran-timeout")
	out, isErr, _ := o.waitResult("within 6s")
	if !isErr || !strings.Contains(out, "No one in the office answered") {
		t.Errorf("timed out: the model got %q (error %v), want the timeout's deny", out, isErr)
	}
	if s := o.status(q.ID); s != "expired" {
		t.Errorf("timed-out question is %s, want expired", s)
	}
	o.waitReady("po ready after the timeout", 60*time.Second)
	return q.ID
}

// 4. Always allowed by the policy: no question.
func (o *permOffice) alwaysAllowed() {
	t := o.t
	o.send("please run always")
	out, isErr, _ := o.waitResult("ran-always")
	if isErr || strings.TrimSpace(out) != "ran-always" {
		t.Errorf("always allowed: the model got %q (error %v)", out, isErr)
	}
	if n := o.questionsAbout("dir-always"); n != 0 {
		t.Errorf("an always-allowed command made %d questions", n)
	}
	o.waitReady("po ready after always", 60*time.Second)
}

// restart kills the server (SIGKILL) while a request waits, runs
// meanwhile, and starts it again; its agent comes back with it, resuming
// its conversation.
func (o *permOffice) restart(meanwhile func()) {
	t := o.t
	t.Helper()
	// The prompt that led to the request is received (Claude Code wrote
	// it to its transcript) before the kill: a request waits far longer
	// than that, and a prompt not yet received would be typed again.
	o.c.wait("the prompt received", 30*time.Second, func() bool {
		var n int
		_ = o.db.QueryRow(o.ctx, `select count(*) from user_messages where office_id = $1 and status <> 'delivered'`, o.officeID).Scan(&n)
		return n == 0
	})
	if err := o.cur.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-o.cur.exited
	if meanwhile != nil {
		meanwhile()
	}
	np := launchServer(t, o.bin, o.env, o.args...)
	np.waitHealthy(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log of a restarted server:\n%s", np.stderr.String())
		}
	})
	o.cur, o.c = np, apiClient{t: t, base: np.base, token: permToken}
}

// 5a. Nobody answers before the restart: the question is cancelled (a
// member's late answer is refused) and the agent told, once.
func (o *permOffice) cancelledByRestart() {
	q := o.asked("restart", "echo ran-restart")
	o.restart(nil)
	o.c.wait("the request to be final", 60*time.Second, func() bool { return o.status(q.ID) == "cancelled" })
	o.c.wait("the agent to be told", 120*time.Second, func() bool { return o.told("ran-restart) was interrupted") > 0 })
	if err := tryAnswerWithRLS(o.db, o.member, q.ID, "allow once"); pgState(err) != "PT409" {
		o.t.Errorf("a member's answer to the interrupted request after the restart: %v, want PT409", err)
	}
	o.waitReady("po ready after the restart", 60*time.Second)
}

// 5b. "Allow for this session" outlived the restart: the conversation was
// resumed, so the same command runs without a question.
func (o *permOffice) grantOutlivesRestart() {
	o.send("please run session again after the restart")
	o.c.wait("the third run", 60*time.Second, func() bool { return o.ran("ran-session") == 3 })
	if n := o.questionsAbout("dir-session"); n != 1 {
		o.t.Errorf("after a restart the session grant did not hold: %d questions for its command, want 1", n)
	}
	o.waitReady("po ready after the granted run", 60*time.Second)
}

// 5c. A member allows it while no server runs: after the restart the
// agent is told, once; it asks again, is allowed, and the command's
// output reaches the model once.
func (o *permOffice) allowedWhileDown() {
	first := o.asked("rallow", "echo ran-rallow").ID
	o.restart(func() { answerWithRLS(o.t, o.db, o.member, first, "allow once") })
	q, _ := o.rowFor("echo ran-rallow", first)
	if n := o.told("ran-rallow) was interrupted by a restart; meanwhile a person allowed it"); n != 1 {
		o.t.Errorf("the agent was told %d times of the answer given while the server was down, want once", n)
	}
	answered := time.Now()
	answerWithRLS(o.t, o.db, o.member, q.ID, "allow once")
	o.c.wait("the retried command's output", 60*time.Second, func() bool { return o.ran("ran-rallow") == 1 })
	var at time.Time
	for _, r := range o.srv.MainRequests() {
		if out, isErr, ok := r.ToolResult(); ok && !isErr && strings.TrimSpace(out) == "ran-rallow" {
			at = r.Time
		}
	}
	o.toDecision["allow after a restart (member RPC)"] = at.Sub(answered)
	o.c.wait("both questions delivered", 30*time.Second, func() bool { return o.status(first) == "delivered" && o.status(q.ID) == "delivered" })
	o.waitReady("po ready after rallow", 60*time.Second)
}

// 5d. A member denies it, with a reason, while no server runs: the agent
// is told the reason, once; nothing runs.
func (o *permOffice) deniedWhileDown() {
	o.rdeny = o.asked("rdeny", "echo ran-rdeny").ID
	o.restart(func() { answerWithRLS(o.t, o.db, o.member, o.rdeny, "deny: "+permRdenyReason) })
	o.c.wait("the deny told", 120*time.Second, func() bool { return o.told("meanwhile a person denied it: "+permRdenyReason) > 0 })
	o.c.wait("the denied question delivered", 30*time.Second, func() bool { return o.status(o.rdeny) == "delivered" })
	o.waitReady("po ready after rdeny", 60*time.Second)
}

// 5e. Its timeout passes while no server runs: after the restart the
// question is expired (not cancelled) and the agent told, once. It
// returns the question's id.
func (o *permOffice) expiredWhileDown() string {
	o.send("please run rtimeout")
	q, seen := o.rowFor("echo ran-rtimeout")
	o.mu.Lock()
	o.toRow["rtimeout"] = seen.Sub(o.toolUseAt["rtimeout"])
	o.mu.Unlock()
	o.restart(func() { time.Sleep(time.Until(seen.Add(7 * time.Second))) })
	o.c.wait("the expiry", 60*time.Second, func() bool { return o.status(q.ID) == "expired" })
	o.c.wait("the expiry told", 120*time.Second, func() bool { return o.told("ran-rtimeout) was interrupted") > 0 })
	o.waitReady("po ready after rtimeout", 60*time.Second)
	return q.ID
}

// 6. A fresh conversation ends "allow for this session": the command is
// asked again. (The server keeps a conversation across restarts, even its
// transcript, in the database; here its id is cleared while po is
// stopped, so that the next start begins a new one, as when a
// conversation cannot be resumed.)
func (o *permOffice) freshConversationAsksAgain() {
	t := o.t
	if st := o.c.do("POST", "/api/offices/"+o.officeID+"/agents/po/stop", "", nil); st != 202 {
		t.Fatalf("stop po: %d", st)
	}
	o.c.wait("po stopped", 30*time.Second, func() bool { return o.session() == "stopped" })
	mustExec(t, o.db, `update agent_sessions set agent_session_id = '' where office_id = $1`, o.officeID)
	if st := o.c.do("POST", "/api/offices/"+o.officeID+"/agents/po/start", "", nil); st != 202 {
		t.Fatalf("start po: %d", st)
	}
	o.waitReady("po ready in a fresh conversation", 90*time.Second)
	o.c.wait("the grants ended", 30*time.Second, func() bool {
		var ended int
		_ = o.db.QueryRow(o.ctx, `select count(*) from office_events where office_id = $1 and kind = 'permission.grants_ended'`, o.officeID).Scan(&ended)
		return ended == 1
	})
	o.send("please run session in the fresh conversation")
	q, _ := o.rowFor("echo ran-session", o.sessionQ)
	if st := o.c.do("POST", "/api/questions/"+q.ID+"/answer", `{"response":"deny: a fresh conversation asks again"}`, nil); st != 200 {
		t.Fatalf("answer through the API: %d", st)
	}
	o.waitResult("a fresh conversation asks again")
	time.Sleep(3 * time.Second) // time for anything typed twice
}

// checkEachOnce checks that each decision reached the model once and
// nothing was typed for these questions but the restart notices.
func (o *permOffice) checkEachOnce(timeoutID, rtimeout string) {
	t := o.t
	for _, m := range []string{"ran-allow", "ran-deny", "within 6s", "ran-always", "a fresh conversation asks again"} {
		if out, _, _ := o.toolResults(m); len(out) != 1 {
			t.Errorf("the model got %d tool_results with %q, want 1", len(out), m)
		}
	}
	if n := o.ran("ran-session"); n != 3 {
		t.Errorf("the session-granted command ran %d times, want 3", n)
	}
	for _, m := range []string{"ran-restart) was interrupted", "ran-rallow) was interrupted", "meanwhile a person denied it: " + permRdenyReason, "ran-rtimeout) was interrupted"} {
		if k := o.told(m); k != 1 {
			t.Errorf("the agent was told %q %d times, want once", m, k)
		}
	}
	for _, d := range []string{"dir-restart", "dir-rdeny", "dir-rtimeout"} {
		if _, err := os.Stat(filepath.Join(o.work, d)); err == nil {
			t.Errorf("%s was made, though its request was not allowed", d)
		}
	}
	for _, s := range []string{"Answer to question", "expired without an answer"} {
		if k := countUserText(o.srv, s); k != 0 {
			t.Errorf("%q was typed into the agent %d times for permission questions", s, k)
		}
	}
	if k := o.events("permission.denied", timeoutID); k != 1 {
		t.Errorf("%d permission.denied events for the timed-out request, want 1", k)
	}
	if k := o.events("permission.expired", rtimeout); k != 1 {
		t.Errorf("%d permission.expired events for the request that timed out while the server was down, want 1", k)
	}
}

// logFailure logs the model's requests and the questions, for a failure.
func (o *permOffice) logFailure() {
	t := o.t
	for _, r := range o.srv.MainRequests() {
		out, isErr, ok := r.ToolResult()
		t.Logf("model request %d at %s, %d messages: user %.100q; tool_result %v %v %.100q", r.Seq, r.Time.Format("15:04:05.000"), len(r.Messages), r.LastUserText(), ok, isErr, out)
	}
	rows, _ := o.db.Query(o.ctx, `select created_at, status, coalesce(response, ''), question from user_questions where office_id = $1 order by created_at`, o.officeID)
	if rows == nil {
		return
	}
	for rows.Next() {
		var at time.Time
		var st, resp, qs string
		_ = rows.Scan(&at, &st, &resp, &qs)
		t.Logf("question at %s: %s %q: %s", at.Format("15:04:05.000"), st, resp, qs)
	}
	rows.Close()
}

// durations lists m's entries, sorted, rounded to the millisecond.
func durations(m map[string]time.Duration) string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s=%v", k, v.Round(time.Millisecond)))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
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
