package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/internal/geminitest"
	"github.com/office-server/office-server/internal/openaitest"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/server"
	"github.com/office-server/office-server/session/screen"
)

// cliModel is a scripted model for TestCLIPermissionRequests: "please run
// <word>" makes it ask for the shell command mkdir -p d-<word> && echo
// ran-<word>; a tool's result makes it say so; anything else "OK".
type cliModel struct {
	launch  func(t *testing.T) string   // the agent's launch line in the office file
	results func() []string             // the tool results the model got
	users   func() []string             // the user texts the model got
	askedAt func(word string) time.Time // when it asked for the command of word
	trace   func() string               // every request it got, for a failure's log
}

func scriptedCommand(word string) string { return "mkdir -p d-" + word + " && echo ran-" + word }

// wordIn returns the word of "please run <word>" in u.
func wordIn(u string) string {
	_, rest, ok := strings.Cut(u, "please run ")
	if !ok || strings.Contains(u, "was interrupted") || strings.Contains(u, "not approved") {
		return ""
	}
	return strings.Fields(rest + " x")[0]
}

type askTimes struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (a *askTimes) note(w string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.at == nil {
		a.at = map[string]time.Time{}
	}
	if _, ok := a.at[w]; !ok {
		a.at[w] = time.Now()
	}
}

func (a *askTimes) get(w string) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.at[w]
}

// geminiModel is Gemini CLI's: in a HOME the office makes (only the key and
// the model server's address in the launch environment), or in a person's
// (their API-key settings).
func geminiModel(t *testing.T, officeHome bool) cliModel {
	bin := testenv.CLIBin(t, "gemini")
	srv := geminitest.New(t)
	times := &askTimes{}
	srv.Reply(func(r geminitest.Request) geminitest.Response {
		if outs := r.FunctionResponses(); r.LastIsFunctionResponse() {
			return geminitest.Response{Text: "tool said: " + outs[len(outs)-1]}
		}
		if w := wordIn(r.LastUserText()); w != "" {
			times.note(w)
			return geminitest.Response{Calls: []geminitest.Call{{Name: "run_shell_command", Args: map[string]any{"command": scriptedCommand(w), "description": "make " + w}}}}
		}
		return geminitest.Response{Text: "OK"}
	})
	return cliModel{
		launch: func(t *testing.T) string {
			env := fmt.Sprintf("GOOGLE_GEMINI_BASE_URL: %q, GEMINI_API_KEY: %q", srv.URL, srv.Key)
			if !officeHome {
				home := t.TempDir()
				if err := geminitest.Prepare(home); err != nil {
					t.Fatal(err)
				}
				env += fmt.Sprintf(", HOME: %q", home)
			}
			return fmt.Sprintf("{kind: gemini, command: %q, dir: %q, env: {%s}}", bin, filepath.Join(t.TempDir(), "work"), env)
		},
		results: func() []string {
			var out []string
			for _, r := range srv.MainRequests() {
				if r.LastIsFunctionResponse() {
					out = append(out, r.FunctionResponses()[len(r.FunctionResponses())-1])
				}
			}
			return out
		},
		users: func() []string {
			var out []string
			for _, r := range srv.MainRequests() {
				out = append(out, r.LastUserText())
			}
			return out
		},
		askedAt: times.get,
		trace: func() string {
			var b strings.Builder
			for _, r := range srv.Requests() {
				fmt.Fprintf(&b, "%s %s main=%v tools=%d user=%q\n", r.Time.Format("15:04:05.000"), r.Path, r.Main, r.Tools, r.LastUserText())
			}
			fmt.Fprintf(&b, "other requests: %q", srv.Unknown())
			return b.String()
		},
	}
}

// qwenModel is Qwen Code's, in a person's HOME.
func qwenModel(t *testing.T) cliModel {
	bin := testenv.CLIBin(t, "qwen")
	srv := openaitest.New(t)
	srv.Side(openaitest.QwenSide)
	times := &askTimes{}
	srv.Reply(func(r openaitest.Request) openaitest.Response {
		switch {
		case strings.HasPrefix(r.System, "You are a security classifier"):
			return openaitest.Response{Calls: []openaitest.Call{{Name: "respond_in_schema", Arguments: `{"shouldBlock":"unsure"}`}}}
		case r.LastIsToolOutput():
			outs := r.FunctionOutputs()
			return openaitest.Response{Text: "tool said: " + outs[len(outs)-1]}
		}
		if w := wordIn(r.LastUserText()); w != "" {
			times.note(w)
			args, _ := json.Marshal(map[string]any{"command": scriptedCommand(w), "description": "make " + w})
			return openaitest.Response{Calls: []openaitest.Call{{Name: "run_shell_command", Arguments: string(args)}}}
		}
		return openaitest.Response{Text: "OK"}
	})
	return cliModel{
		launch: func(t *testing.T) string {
			home := t.TempDir()
			if err := openaitest.PrepareQwen(home); err != nil {
				t.Fatal(err)
			}
			var env []string
			for _, kv := range srv.QwenEnv(home) {
				k, v, _ := strings.Cut(kv, "=")
				env = append(env, fmt.Sprintf("%s: %q", k, v))
			}
			return fmt.Sprintf("{kind: qwen, command: %q, dir: %q, env: {%s}}", bin, filepath.Join(t.TempDir(), "work"), strings.Join(env, ", "))
		},
		results: func() []string {
			var out []string
			for _, r := range srv.MainRequests() {
				if r.LastIsToolOutput() {
					outs := r.FunctionOutputs()
					out = append(out, outs[len(outs)-1])
				}
			}
			return out
		},
		users: func() []string {
			var out []string
			for _, r := range srv.MainRequests() {
				out = append(out, r.LastUserText())
			}
			return out
		},
		askedAt: times.get,
	}
}

// TestCLIPermissionRequests runs the built `office-server serve` on
// PostgreSQL with one real CLI agent at a time, in its default approval
// mode, whose model asks to run shell commands: Gemini CLI in a HOME the
// office made (its BeforeTool hook), Gemini CLI in a person's HOME (its
// dialog, read from the screen and answered with keys) and Qwen Code (its
// PermissionRequest hook). For each, as for Claude Code: a request is a
// permission question row; a member's "allow once" (UPDATE under RLS)
// runs it and its output reaches the model once; a deny with a reason
// keeps it from running and the model gets the reason once; "allow for
// this session" runs it, and the same command again runs without a
// question; nobody answering denies at the office's timeout; the office's
// deny rule refuses without a question; the server SIGKILLed while a
// request waits cancels it after the restart and tells the agent once.
// It logs request → row and answer → decision latencies.
func TestCLIPermissionRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs Gemini CLI and Qwen Code on PostgreSQL")
	}
	for _, c := range []struct {
		name  string
		model func(t *testing.T) cliModel
		via   string
	}{
		{"gemini-hook", func(t *testing.T) cliModel { return geminiModel(t, true) }, "hook"},
		{"gemini-screen", func(t *testing.T) cliModel { return geminiModel(t, false) }, "screen"},
		{"qwen-hook", qwenModel, "hook"},
	} {
		t.Run(c.name, func(t *testing.T) { cliPermissionRound(t, c.model(t), c.via) })
	}
}

func cliPermissionRound(t *testing.T, m cliModel, via string) {
	o := newCLIPermOffice(t, m)
	o.allowOnce()
	o.denyWithReason(via)
	o.allowForTheSession()
	o.timeout()
	o.denyRule()
	o.cancelledByRestart()
	time.Sleep(2 * time.Second) // anything told twice would show by now
	if n := o.results("ran-one"); n != 1 {
		t.Errorf("the model got the allowed command's output %d times, want once", n)
	}
	if n := o.told("ran-five) was interrupted"); n != 1 {
		t.Errorf("the agent was told of the interrupted request %d times, want once", n)
	}
	if vias := o.vias(); strings.Join(vias, ",") != via {
		t.Errorf("the events name the path %q, want %q", vias, via)
	}
	t.Logf("%s: request → row %s; answer → decision at the model %s", t.Name(), spread(o.toRow), spread(o.toDecision))
}

// cliPermOffice is one round of TestCLIPermissionRequests: the built
// server on PostgreSQL with qa, one real CLI agent whose model (m) runs
// "mkdir -p d-X && echo ran-X" when told "please run X".
type cliPermOffice struct {
	t                 *testing.T
	ctx               context.Context
	m                 cliModel
	db                *pgx.Conn
	bin               string
	env, args         []string
	cur               *serverProc
	c                 apiClient
	officeID, member  string
	toRow, toDecision []time.Duration
}

const cliPermToken = "cli-perm-token-0123456789abcdef"

type cliPermRow struct{ ID, Question, Status string }

func newCLIPermOffice(t *testing.T, m cliModel) *cliPermOffice {
	o := &cliPermOffice{t: t, ctx: context.Background(), m: m, bin: buildServer(t)}
	dbURL := testenv.NewDatabase(t)
	db, err := pgx.Connect(o.ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(o.ctx) }) // after the failure's log below
	o.db = db
	officeFile := filepath.Join(t.TempDir(), "office.yaml")
	if err := os.WriteFile(officeFile, []byte(`office:
  name: CLI permission office
  permissions:
    timeout: 6s
    deny: ["Bash(mkdir -p d-never:*)"]
agents:
  - name: qa
    role: Tester
    launch: `+m.launch(t)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o.env = []string{"HOME=" + t.TempDir(), "LANG=C.UTF-8", "OFFICE_ADMIN_TOKEN=" + cliPermToken, "DATABASE_URL=" + dbURL, "OFFICE_SECRETS_KEY=" + e2eSecretsKey}
	o.args = []string{"--office", officeFile, "--data-dir", t.TempDir()}
	o.cur = launchServer(t, o.bin, o.env, o.args...)
	o.cur.waitHealthy(t)
	o.c = apiClient{t: t, base: o.cur.base, token: cliPermToken}
	t.Cleanup(func() {
		if t.Failed() {
			o.logFailure()
		}
	})
	var offices []struct{ ID string }
	o.c.wait("the office", 30*time.Second, func() bool { return o.c.do("GET", "/api/offices", "", &offices) == 200 && len(offices) == 1 })
	o.officeID = offices[0].ID
	o.ready("at start")
	o.member = "00000000-0000-0000-0000-0000000000c1"
	mustExec(t, db, `insert into auth.users (id, email) values ($1, 'cli-member@example.com')`, o.member)
	mustExec(t, db, `insert into office_members (office_id, user_id) values ($1, $2)`, o.officeID, o.member)
	return o
}

// logFailure logs the server, the model's side, the session, the last
// events and the agent's screen, for a failure.
func (o *cliPermOffice) logFailure() {
	t := o.t
	t.Logf("server log:\n%s", o.cur.stderr.String())
	t.Logf("model results %q; user texts %q", o.m.results(), o.m.users())
	if o.m.trace != nil {
		t.Logf("model requests:\n%s", o.m.trace())
	}
	if o.officeID == "" {
		return
	}
	var ss, evs []map[string]any
	o.c.do("GET", "/api/offices/"+o.officeID+"/sessions", "", &ss)
	o.c.do("GET", "/api/offices/"+o.officeID+"/events?limit=40", "", &evs)
	t.Logf("sessions %v", ss)
	for _, e := range evs {
		t.Logf("event %v %v", e["kind"], e["payload"])
	}
	if len(ss) == 1 {
		t.Logf("qa's screen:\n%s", agentScreen(t, o.cur.base, cliPermToken, o.officeID, fmt.Sprint(ss[0]["agent_id"])))
	}
}

func (o *cliPermOffice) session() string {
	var ss []struct{ Status, Detail string }
	o.c.do("GET", "/api/offices/"+o.officeID+"/sessions", "", &ss)
	if len(ss) != 1 {
		return ""
	}
	if ss[0].Status == "failed" {
		o.t.Fatalf("qa failed: %s", ss[0].Detail)
	}
	return ss[0].Status
}

func (o *cliPermOffice) ready(what string) {
	o.t.Helper()
	o.c.wait("qa ready "+what, 120*time.Second, func() bool { return o.session() == "ready" })
}

func (o *cliPermOffice) send(text string) {
	o.t.Helper()
	if st := o.c.do("POST", "/api/offices/"+o.officeID+"/messages", `{"agent":"qa","content":"`+text+`"}`, nil); st != 201 && st != 200 {
		o.t.Fatalf("post message: %d", st)
	}
}

// rows lists the permission questions about d-word, oldest first.
func (o *cliPermOffice) rows(word string) []cliPermRow {
	var out []cliPermRow
	rs, err := o.db.Query(o.ctx, `select id::text, question, status from user_questions where office_id = $1 and category = 'permission' and question like '%' || $2 || '%' order by created_at`, o.officeID, "d-"+word)
	if err != nil {
		return nil
	}
	defer rs.Close()
	for rs.Next() {
		var r cliPermRow
		_ = rs.Scan(&r.ID, &r.Question, &r.Status)
		out = append(out, r)
	}
	return out
}

// asked sends "please run word" and waits for its pending permission
// question, recording the time from the model's tool call to the row.
func (o *cliPermOffice) asked(word string) cliPermRow {
	o.t.Helper()
	o.send("please run " + word)
	var r []cliPermRow
	o.c.wait("the permission row of "+word, 120*time.Second, func() bool { r = o.rows(word); return len(r) > 0 && r[len(r)-1].Status == "pending" })
	o.toRow = append(o.toRow, time.Since(o.m.askedAt(word)))
	return r[len(r)-1]
}

func (o *cliPermOffice) results(marker string) int { return countWith(o.m.results(), marker) }
func (o *cliPermOffice) told(marker string) int    { return countWith(o.m.users(), marker) }

// countWith counts the texts that contain marker.
func countWith(texts []string, marker string) int {
	n := 0
	for _, s := range texts {
		if strings.Contains(s, marker) {
			n++
		}
	}
	return n
}

// ran reports whether the command of word made its directory in qa's
// workspace.
func (o *cliPermOffice) ran(word string) bool {
	var dir string
	_ = o.db.QueryRow(o.ctx, `select launch_spec->>'dir' from office_agents where office_id = $1`, o.officeID).Scan(&dir)
	_, err := os.Stat(filepath.Join(dir, "d-"+word))
	return err == nil
}

func (o *cliPermOffice) decided(answered time.Time, cond func() bool) {
	o.t.Helper()
	o.c.wait("the decision to reach the model", 120*time.Second, cond)
	o.toDecision = append(o.toDecision, time.Since(answered))
}

func (o *cliPermOffice) status(id string) string {
	var st string
	_ = o.db.QueryRow(o.ctx, `select status from user_questions where id = $1`, id).Scan(&st)
	return st
}

// Allow once, by a member's UPDATE under RLS.
func (o *cliPermOffice) allowOnce() {
	r := o.asked("one")
	if !strings.HasPrefix(r.Question, "qa wants to run a command: "+scriptedCommand("one")) {
		o.t.Errorf("question %q: want qa and the command", r.Question)
	}
	answered := time.Now()
	answerWithRLS(o.t, o.db, o.member, r.ID, "allow once")
	o.decided(answered, func() bool { return o.results("ran-one") > 0 })
	if !o.ran("one") {
		o.t.Error("the allowed command did not run")
	}
	o.ready("after one")
}

// Deny with a reason: through a hook the model gets it as the tool's
// result; through the screen as a notice.
func (o *cliPermOffice) denyWithReason(via string) {
	const reason = "not on Fridays (two refused)"
	r := o.asked("two")
	answered := time.Now()
	answerWithRLS(o.t, o.db, o.member, r.ID, "deny: "+reason)
	if via == "hook" {
		o.decided(answered, func() bool { return o.results(reason) > 0 })
	} else {
		o.decided(answered, func() bool { return o.told(reason) > 0 })
	}
	if o.ran("two") {
		o.t.Error("the denied command ran")
	}
	o.ready("after two")
}

// Allow for this session, then the same command again: not asked.
func (o *cliPermOffice) allowForTheSession() {
	r := o.asked("three")
	answerWithRLS(o.t, o.db, o.member, r.ID, "allow for this session")
	o.c.wait("three ran", 120*time.Second, func() bool { return o.results("ran-three") == 1 })
	o.ready("after three")
	o.send("please run three again")
	o.c.wait("three ran again", 120*time.Second, func() bool { return o.results("ran-three") >= 2 })
	if n := len(o.rows("three")); n != 1 {
		o.t.Errorf("allowed for the session, the same command was asked %d times, want once", n)
	}
	o.ready("after three again")
}

// Nobody answers: the office's timeout (6 s) denies.
func (o *cliPermOffice) timeout() {
	r := o.asked("four")
	o.c.wait("the timeout's deny", 120*time.Second, func() bool {
		return o.results("No one in the office answered") > 0 || o.told("No one in the office answered") > 0
	})
	if o.ran("four") {
		o.t.Error("a command nobody allowed ran")
	}
	if st := o.status(r.ID); st != "expired" {
		o.t.Errorf("timed-out question %s, want expired", st)
	}
	o.ready("after four")
}

// The office's deny rule: refused without a question.
func (o *cliPermOffice) denyRule() {
	o.send("please run never")
	o.c.wait("the rule's deny", 120*time.Second, func() bool {
		return o.results("Bash(mkdir -p d-never:*)") > 0 || o.told("Bash(mkdir -p d-never:*)") > 0
	})
	if n := len(o.rows("never")); n != 0 || o.ran("never") {
		o.t.Errorf("a command the office's rule denies: %d questions, ran %v", n, o.ran("never"))
	}
	o.ready("after never")
}

// The server is SIGKILLed while a request waits: after the restart the
// question is cancelled and the agent told, once.
func (o *cliPermOffice) cancelledByRestart() {
	t := o.t
	r := o.asked("five")
	if err := o.cur.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-o.cur.exited
	o.cur = launchServer(t, o.bin, o.env, o.args...)
	o.cur.waitHealthy(t)
	o.c = apiClient{t: t, base: o.cur.base, token: cliPermToken}
	o.c.wait("the interrupted request cancelled", 120*time.Second, func() bool { return o.status(r.ID) == "cancelled" })
	o.c.wait("the agent told", 180*time.Second, func() bool { return o.told("ran-five) was interrupted") > 0 })
	o.ready("after the restart")
	if o.ran("five") {
		t.Error("a command nobody allowed ran across the restart")
	}
}

// vias lists the paths (hook, screen) the permission events name.
func (o *cliPermOffice) vias() []string {
	var vias []string
	rs, err := o.db.Query(o.ctx, `select distinct payload->>'via' from office_events where office_id = $1 and kind like 'permission.%' and payload ? 'via'`, o.officeID)
	if err != nil {
		return nil
	}
	defer rs.Close()
	for rs.Next() {
		var v string
		_ = rs.Scan(&v)
		vias = append(vias, v)
	}
	return vias
}

// agentScreen is what the console shows of an agent: its screen drawn
// from the snapshot a viewer joining now is sent.
func agentScreen(t *testing.T, base, token, officeID, agentID string) string {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/ws/offices/"+officeID+"/agents/"+agentID, h)
	if err != nil {
		return "console: " + err.Error()
	}
	defer ws.Close()
	scr := screen.New(200, 50)
	_ = ws.SetReadDeadline(time.Now().Add(time.Second))
	for {
		_, b, err := ws.ReadMessage()
		if err != nil {
			break
		}
		if len(b) > 0 && b[0] == server.FrameOutput {
			_, _ = scr.Write(b[1:])
		}
	}
	return strings.TrimRight(strings.Join(scr.Lines(), "\n"), "\n ")
}
