package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/office-server/office-server/internal/anthropictest"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/server"
)

// TestClaudeHibernate runs the built `office-server serve` with a real
// Claude Code agent whose office says hibernate_after: 3s, on SQLite and
// on PostgreSQL. The agent hibernates once idle (its process gone, its
// session row hibernated); a person's message wakes it with its
// conversation resumed and reaches the model once; the agent asks a
// question and, waiting for the answer, hibernates again; the answer
// wakes it and reaches the model once. Then the server is killed (SIGKILL)
// while the agent hibernates: the restarted server leaves it asleep, and
// the next message wakes it, delivered once, in the same conversation.
// A crash of the agent's process while it wakes loses nothing either, and
// opening the console's terminal of a hibernated agent wakes it.
func TestClaudeHibernate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs Claude Code")
	}
	claude := testenv.ClaudeBin(t)
	bin := buildServer(t)
	t.Run("sqlite", func(t *testing.T) { runHibernate(t, bin, claude, "") })
	t.Run("postgres", func(t *testing.T) { runHibernate(t, bin, claude, testenv.NewDatabase(t)) })
}

// hibSession is an agent's row in GET /sessions.
type hibSession struct {
	AgentName      string `json:"agent_name"`
	Status         string `json:"status"`
	Detail         string `json:"detail"`
	PID            int    `json:"pid"`
	AgentSessionID string `json:"agent_session_id"`
}

func runHibernate(t *testing.T, bin, claude, dbURL string) {
	srv := anthropictest.New(t)
	srv.Reply(hibModel)
	home, repo, data := t.TempDir(), t.TempDir(), t.TempDir()
	officeFile := filepath.Join(t.TempDir(), "office.yaml")
	yaml := fmt.Sprintf(`office:
  name: Sleepy office
  hibernate_after: 3s
agents:
  - name: po
    allowed_actions: [ask_user]
    launch: {kind: claude, command: %q, dir: %q}
`, claude, filepath.Join(repo, "po"))
	if err := os.WriteFile(officeFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	const token = "hibernate-token-0123456789abcdef"
	env := []string{"HOME=" + home, "LANG=C.UTF-8", "OFFICE_ADMIN_TOKEN=" + token,
		"ANTHROPIC_API_KEY=" + srv.Key, "ANTHROPIC_BASE_URL=" + srv.URL, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
	if dbURL != "" {
		env = append(env, "DATABASE_URL="+dbURL)
	}
	p := launchServer(t, bin, env, "--office", officeFile, "--data-dir", data)
	p.waitHealthy(t)
	defer func() {
		if t.Failed() {
			t.Logf("server log:\n%s", p.stderr.String())
		}
	}()
	c := &apiClient{t: t, base: p.base, token: token}
	var offices []struct{ ID string }
	c.wait("the office", 30*time.Second, func() bool { return c.do("GET", "/api/offices", "", &offices) == 200 && len(offices) == 1 })
	h := &hibRun{t: t, c: c, srv: srv, officeID: offices[0].ID}
	c.wait("po ready", 90*time.Second, func() bool { return h.po().Status == "ready" })
	first := h.po()
	h.asleep("po hibernated when idle", first)
	if s := h.po(); !strings.Contains(s.Detail, "hibernate_after 3s") {
		t.Errorf("hibernated row's detail %q does not say why", s.Detail)
	}
	h.questionAndAnswer()
	h.crashDuringResume()

	// SIGKILL the server while po hibernates; the restarted server leaves
	// it asleep until a message comes.
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	p2 := launchServer(t, bin, env, "--office", officeFile, "--data-dir", data)
	p2.waitHealthy(t)
	t.Cleanup(func() { p2.stop(t) }) // the agent ends with it (before the temporary dirs go)
	defer func() {
		if t.Failed() {
			t.Logf("restarted server's log:\n%s", p2.stderr.String())
		}
	}()
	c.base = p2.base
	h.afterRestart()
	h.exactlyOnce()
	for _, l := range strings.Split(p.stderr.String()+p2.stderr.String(), "\n") {
		if strings.Contains(l, "agent hibernated") || strings.Contains(l, "agent woken") {
			t.Log(l)
		}
	}
	if s := h.po(); s.AgentSessionID != first.AgentSessionID {
		t.Errorf("conversation id changed across hibernation: %q, then %q", first.AgentSessionID, s.AgentSessionID)
	}
	ws := h.consoleWakes(token)
	defer ws.Close()
	if s := h.po(); s.AgentSessionID != first.AgentSessionID {
		t.Errorf("conversation id changed across hibernation: %q, then %q", first.AgentSessionID, s.AgentSessionID)
	}
}

// hibModel is po's model: asked to ask, it asks about the logo.
func hibModel(r anthropictest.Request) anthropictest.Response {
	u := r.LastUserText()
	switch {
	case strings.Contains(u, "Message from a person") && strings.Contains(u, "ask me"):
		return anthropictest.Response{Text: "[ASK_USER]\nquestion: Which colour should the logo be?\n[/ASK_USER]"}
	case strings.Contains(u, "Answer to question"):
		return anthropictest.Response{Text: "Noted: the logo will be that colour."}
	}
	return anthropictest.Response{Text: "OK"}
}

// hibRun is the office of runHibernate: po, a Claude Code agent that
// hibernates after 3 s idle.
type hibRun struct {
	t        *testing.T
	c        *apiClient
	srv      *anthropictest.Server
	officeID string
}

// po is po's session row.
func (h *hibRun) po() hibSession {
	var ss []hibSession
	h.c.do("GET", "/api/offices/"+h.officeID+"/sessions", "", &ss)
	for _, s := range ss {
		if s.AgentName == "po" {
			return s
		}
	}
	return hibSession{}
}

// asleep waits for po hibernated, and old's process gone.
func (h *hibRun) asleep(what string, old hibSession) {
	t := h.t
	t.Helper()
	h.c.wait(what, 60*time.Second, func() bool { return h.po().Status == "hibernated" })
	if err := syscall.Kill(old.PID, 0); old.PID > 0 && !errors.Is(err, syscall.ESRCH) {
		t.Errorf("%s: po's process %d still exists (kill 0: %v)", what, old.PID, err)
	}
}

// questionAndAnswer: a message wakes po; it asks a question and, waiting
// for the answer, hibernates again; the answer wakes it.
func (h *hibRun) questionAndAnswer() {
	t, c, officeID := h.t, h.c, h.officeID
	post(t, *c, "/api/offices/"+officeID+"/messages", `{"agent":"po","content":"Please ask me about the logo (m-7f3a)."}`)
	var qs []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	c.wait("po's question", 90*time.Second, func() bool {
		return c.do("GET", "/api/offices/"+officeID+"/questions?status=pending", "", &qs) == 200 && len(qs) == 1
	})
	woken := h.po()
	h.asleep("po hibernated waiting for the answer", woken)

	post(t, *c, "/api/questions/"+qs[0].ID+"/answer", `{"response":"Teal (a-51c9)"}`)
	c.wait("the answer delivered", 90*time.Second, func() bool {
		var q struct{ Status string }
		return c.do("GET", "/api/questions/"+qs[0].ID, "", &q) == 200 && q.Status == "delivered"
	})
	c.wait("the model's reply to the answer", 60*time.Second, func() bool { return countLast(h.srv, "a-51c9") >= 1 })
	h.asleep("po hibernated after the answer", h.po())
}

// crashDuringResume: the woken process is killed before its first turn
// ends; the session restarts it and the message still reaches the model.
func (h *hibRun) crashDuringResume() {
	t, c := h.t, h.c
	post(t, *c, "/api/offices/"+h.officeID+"/messages", `{"agent":"po","content":"Status please (m-9b2d)."}`)
	var waking hibSession
	c.wait("po waking", 60*time.Second, func() bool {
		waking = h.po()
		return waking.Status != "hibernated" && waking.PID != 0
	})
	if err := syscall.Kill(-waking.PID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the waking po (pid %d): %v", waking.PID, err)
	}
	t.Logf("killed po while %s", waking.Status)
	c.wait("the message after the crash at the model", 90*time.Second, func() bool { return countLast(h.srv, "m-9b2d") >= 1 })
	h.asleep("po hibernated after the crash", h.po())
}

// afterRestart: the restarted server leaves po asleep until a message
// comes; then all three messages are delivered.
func (h *hibRun) afterRestart() {
	t, c, officeID := h.t, h.c, h.officeID
	time.Sleep(3 * time.Second) // an autostart would have begun by now
	if s := h.po(); s.Status != "hibernated" {
		t.Errorf("after the restart po is %q, want it still hibernated", s.Status)
	}
	post(t, *c, "/api/offices/"+officeID+"/messages", `{"agent":"po","content":"Are you there? (m-c02e)"}`)
	c.wait("the message after the restart at the model", 90*time.Second, func() bool { return countLast(h.srv, "m-c02e") >= 1 })
	c.wait("both messages delivered", 30*time.Second, func() bool {
		var evs []struct {
			Kind string `json:"kind"`
		}
		c.do("GET", "/api/offices/"+officeID+"/events?limit=500", "", &evs)
		n := 0
		for _, e := range evs {
			if e.Kind == "message.delivered" {
				n++
			}
		}
		return n == 3
	})
	time.Sleep(2 * time.Second) // a second typing would show by now
}

// exactlyOnce: each text was the last user text of one request only, and
// every wake resumed the one conversation (each request after the first
// wake carries the earlier texts).
func (h *hibRun) exactlyOnce() {
	t, srv := h.t, h.srv
	for _, tok := range []string{"m-7f3a", "a-51c9", "m-9b2d", "m-c02e"} {
		if n := countLast(srv, tok); n != 1 {
			t.Errorf("the model got %s as a new prompt %d times, want 1", tok, n)
		}
	}
	var last anthropictest.Request
	for _, r := range srv.MainRequests() {
		if strings.Contains(r.LastUserText(), "m-c02e") {
			last = r
		}
	}
	var history strings.Builder
	for _, m := range last.Messages {
		for _, b := range m.Content {
			history.WriteString(b.Text)
		}
	}
	if !strings.Contains(history.String(), "m-7f3a") || !strings.Contains(history.String(), "a-51c9") {
		t.Errorf("the request after the last wake does not carry the earlier conversation: %.400q", history.String())
	}
}

// consoleWakes: opening the console's terminal of the hibernated agent
// wakes it, and the terminal shows its prompt. It returns the open
// terminal.
func (h *hibRun) consoleWakes(token string) *websocket.Conn {
	t, c := h.t, h.c
	h.asleep("po hibernated before the console", h.po())
	hd := http.Header{}
	hd.Set("Authorization", "Bearer "+token)
	ws, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(c.base, "http")+"/ws/offices/"+h.officeID+"/agents/po", hd)
	if err != nil {
		t.Fatalf("console of the hibernated po: %v (%v)", err, res)
	}
	c.wait("po awake for the console", 60*time.Second, func() bool { return h.po().Status == "ready" })
	screen := ""
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for !strings.Contains(screen, "❯") {
		_, p, err := ws.ReadMessage()
		if err != nil {
			ws.Close()
			t.Fatalf("console of the woken po: %v; screen so far %q", err, screen)
		}
		if len(p) > 0 && p[0] == server.FrameOutput {
			screen += string(p[1:])
		}
	}
	return ws
}

// post POSTs body to path and fails t unless it was taken.
func post(t *testing.T, c apiClient, path, body string) {
	t.Helper()
	if st := c.do("POST", path, body, nil); st != 200 && st != 201 {
		t.Fatalf("POST %s: %d", path, st)
	}
}

// countLast counts the model requests whose last user text holds tok:
// the times it was typed into the agent as a new prompt.
func countLast(srv *anthropictest.Server, tok string) int {
	n := 0
	for _, r := range srv.MainRequests() {
		if strings.Contains(r.LastUserText(), tok) {
			n++
		}
	}
	return n
}

// TestClaudeMaxLive runs the built server with three real Claude Code
// agents and --max-live 2 (no hibernate_after): the third is not started
// at start (hibernated, its row says why); a message to it waits while
// the least recently used idle agent hibernates, then reaches the model
// once; never more than two agents are live; a message to the one put to
// sleep wakes it the same way.
func TestClaudeMaxLive(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs Claude Code")
	}
	claude := testenv.ClaudeBin(t)
	bin := buildServer(t)
	srv := anthropictest.New(t)
	srv.Reply(func(anthropictest.Request) anthropictest.Response { return anthropictest.Response{Text: "OK"} })
	home, repo := t.TempDir(), t.TempDir()
	yaml := "office:\n  name: Capped office\nagents:\n"
	for _, n := range []string{"a", "b", "c"} {
		yaml += fmt.Sprintf("  - name: %s\n    launch: {kind: claude, command: %q, dir: %q}\n", n, claude, filepath.Join(repo, n))
	}
	const token = "maxlive-token-0123456789abcdef"
	p := launchClaudeOffice(t, bin, yaml, home, srv, token, "OFFICE_MAX_LIVE=2")
	c := apiClient{t: t, base: p.base, token: token}
	var offices []struct{ ID string }
	c.wait("the office", 30*time.Second, func() bool { return c.do("GET", "/api/offices", "", &offices) == 200 && len(offices) == 1 })
	officeID := offices[0].ID
	mostLive := 0
	sessions := func() map[string]hibSession {
		var ss []hibSession
		c.do("GET", "/api/offices/"+officeID+"/sessions", "", &ss)
		out, live := map[string]hibSession{}, 0
		for _, s := range ss {
			out[s.AgentName] = s
			if s.Status != "hibernated" && s.Status != "stopped" && s.PID != 0 {
				live++
			}
		}
		mostLive = max(mostLive, live)
		return out
	}
	c.wait("a and b ready, c hibernated", 90*time.Second, func() bool {
		s := sessions()
		return s["a"].Status == "ready" && s["b"].Status == "ready" && s["c"].Status == "hibernated"
	})
	if d := sessions()["c"].Detail; !strings.Contains(d, "max_live 2") {
		t.Errorf("c's row says %q, want why it was not started", d)
	}
	wakeOnce := func(agent, tok string) {
		t.Helper()
		post(t, c, "/api/offices/"+officeID+"/messages", fmt.Sprintf(`{"agent":%q,"content":"Hello (%s)."}`, agent, tok))
		c.wait(tok+" at the model", 120*time.Second, func() bool { sessions(); return countLast(srv, tok) >= 1 })
	}
	wakeOnce("c", "m-c1")
	s := sessions()
	slept := ""
	for _, n := range []string{"a", "b"} {
		if s[n].Status == "hibernated" {
			slept = n
			if !strings.Contains(s[n].Detail, "make room") {
				t.Errorf("%s's row says %q, want hibernated to make room", n, s[n].Detail)
			}
		}
	}
	if slept == "" {
		t.Fatalf("neither a nor b hibernated for c: %+v", s)
	}
	wakeOnce(slept, "m-"+slept+"2")
	time.Sleep(2 * time.Second)
	sessions()
	for _, tok := range []string{"m-c1", "m-" + slept + "2"} {
		if n := countLast(srv, tok); n != 1 {
			t.Errorf("the model got %s %d times, want 1", tok, n)
		}
	}
	if mostLive > 2 {
		t.Errorf("%d agents were live at once, want at most 2", mostLive)
	}
	checkWakeWaited(c, officeID)
}

// checkWakeWaited: an event says why a wake-up waited.
func checkWakeWaited(c apiClient, officeID string) {
	t := c.t
	var evs []struct {
		Kind    string `json:"kind"`
		AgentID string `json:"agent_id"`
		Payload struct {
			Detail string `json:"detail"`
		} `json:"payload"`
	}
	c.do("GET", "/api/offices/"+officeID+"/events?limit=500", "", &evs)
	waited := false
	for _, e := range evs {
		if e.Kind == "session.hibernated" && strings.Contains(e.Payload.Detail, "waiting to wake") {
			waited = true
		}
	}
	if !waited {
		t.Error("no event says why a wake-up waited")
	}
}
