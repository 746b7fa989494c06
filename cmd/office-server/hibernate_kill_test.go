package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/anthropictest"
	"github.com/office-server/office-server/internal/testenv"
)

// TestClaudeKilledWhileGoingToSleep runs the built server with a real
// Claude Code agent (hibernate_after: 3s) behind a wrapper that takes its
// time to stop: on the stop's SIGHUP/SIGTERM it leaves a mark and holds
// the process until the session's SIGKILL after its grace, as a CLI busy
// writing its transcript would. Once the mark shows (the stop began, the
// row not yet hibernated) a person's message is committed and the server
// is killed (SIGKILL). The restarted server's row is true (a live row has
// a process, a hibernated one none), the message reaches the model once,
// in the resumed conversation, and the first message is not typed again.
// On SQLite and on PostgreSQL.
func TestClaudeKilledWhileGoingToSleep(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs Claude Code")
	}
	claude := testenv.ClaudeBin(t)
	bin := buildServer(t)
	t.Run("sqlite", func(t *testing.T) { runKilledWhileGoingToSleep(t, bin, claude, "") })
	t.Run("postgres", func(t *testing.T) { runKilledWhileGoingToSleep(t, bin, claude, testenv.NewDatabase(t)) })
}

func runKilledWhileGoingToSleep(t *testing.T, bin, claude, dbURL string) {
	srv := anthropictest.New(t)
	srv.Reply(func(anthropictest.Request) anthropictest.Response { return anthropictest.Response{Text: "OK"} })
	home, repo, data, tools := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	officeFile, mark := slowStopOffice(t, claude, repo, tools)
	const token = "hibernate-kill-token-0123456789ab"
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
	c := apiClient{t: t, base: p.base, token: token}
	var offices []struct{ ID string }
	c.wait("the office", 30*time.Second, func() bool { return c.do("GET", "/api/offices", "", &offices) == 200 && len(offices) == 1 })
	officeID := offices[0].ID
	po := (&hibRun{t: t, c: &c, officeID: officeID}).po
	c.wait("po ready", 90*time.Second, func() bool { return po().Status == "ready" })
	post(t, c, "/api/offices/"+officeID+"/messages", `{"agent":"po","content":"Note m-41a."}`)
	c.wait("the first message at the model", 90*time.Second, func() bool { return countLast(srv, "m-41a") >= 1 })
	before := po()

	// The stop begins: the wrapper got its signal and holds on.
	c.wait("the stop begun", 60*time.Second, func() bool { _, err := os.Stat(mark); return err == nil })
	post(t, c, "/api/offices/"+officeID+"/messages", `{"agent":"po","content":"Note m-52b."}`)
	if s := po(); s.Status == "hibernated" || s.Status == "stopped" {
		t.Fatalf("po's row says %s before the kill: the test missed the stop's window", s.Status)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	p2 := launchServer(t, bin, env, "--office", officeFile, "--data-dir", data)
	p2.waitHealthy(t)
	t.Cleanup(func() { p2.stop(t) })
	defer func() {
		if t.Failed() {
			t.Logf("restarted server's log:\n%s", p2.stderr.String())
		}
	}()
	c.base = p2.base
	// A zombie is gone: in the whole package's run an earlier test ran
	// serve in this process, which made it a child subreaper, so the
	// killed server's orphans end as its unreaped children.
	gone := func(pid int) bool { return pid > 0 && !alive(pid) }
	c.wait("the old process gone", 30*time.Second, func() bool { return gone(before.PID) })
	c.wait("the message after the restart at the model", 120*time.Second, func() bool { return countLast(srv, "m-52b") >= 1 })
	// The row is true: while it says live, its process runs; once it says
	// hibernated, none does.
	s := po()
	if s.Status != "hibernated" && (s.PID == 0 || gone(s.PID)) {
		t.Errorf("po's row says %s with pid %d, which does not run", s.Status, s.PID)
	}
	c.wait("po hibernated again", 90*time.Second, func() bool { s = po(); return s.Status == "hibernated" })
	live := s.PID
	for _, l := range strings.Split(p2.stderr.String(), "\n") {
		if strings.Contains(l, "agent hibernated") || strings.Contains(l, "agent starting") {
			t.Log(l)
		}
	}
	time.Sleep(2 * time.Second) // a second typing would show by now
	checkResumedOnce(t, srv)
	if live > 0 && !gone(live) {
		t.Errorf("po's row says hibernated and its process %d runs", live)
	}
	if s.AgentSessionID != before.AgentSessionID {
		t.Errorf("conversation id changed across the kill: %q, then %q", before.AgentSessionID, s.AgentSessionID)
	}
}

// slowStopOffice writes, into tools, a wrapper that runs Claude Code as
// its child on the same terminal (stdin passed on explicitly: a
// background list's is /dev/null) and, signalled to stop, notes it in
// mark and holds on for 30 s; and an office of po, that wrapper,
// hibernating after 3 s. It returns the office file and mark.
func slowStopOffice(t *testing.T, claude, repo, tools string) (string, string) {
	mark := filepath.Join(tools, "stopping")
	wrapper := filepath.Join(tools, "slow-stop-claude")
	script := fmt.Sprintf("#!/bin/sh\ntrap 'echo $$ >> %q; sleep 30' HUP TERM\nexec 3<&0\n%q \"$@\" <&3 3<&- &\nwait $!\n", mark, claude)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	officeFile := filepath.Join(t.TempDir(), "office.yaml")
	yaml := fmt.Sprintf(`office:
  name: Sleepy office
  hibernate_after: 3s
agents:
  - name: po
    launch: {kind: claude, command: %q, dir: %q}
`, wrapper, filepath.Join(repo, "po"))
	if err := os.WriteFile(officeFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return officeFile, mark
}

// checkResumedOnce: the model got each message once as a new prompt, and
// the request with the second carries the first (the conversation was
// resumed).
func checkResumedOnce(t *testing.T, srv *anthropictest.Server) {
	for _, tok := range []string{"m-41a", "m-52b"} {
		if n := countLast(srv, tok); n != 1 {
			t.Errorf("the model got %s as a new prompt %d times, want 1", tok, n)
		}
	}
	resumed := false
	for _, r := range srv.MainRequests() {
		if strings.Contains(r.LastUserText(), "m-52b") {
			resumed = carries(r, "m-41a")
		}
	}
	if !resumed {
		t.Error("the request with the second message does not carry the first: the conversation was not resumed")
	}
}

// carries reports whether any message of r holds tok.
func carries(r anthropictest.Request, tok string) bool {
	for _, m := range r.Messages {
		for _, b := range m.Content {
			if strings.Contains(b.Text, tok) {
				return true
			}
		}
	}
	return false
}
