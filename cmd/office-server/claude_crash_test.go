package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/anthropictest"
	"github.com/office-server/office-server/internal/testenv"
)

// TestClaudeTaskSurvivesCrash runs the built `office-server serve`
// (embedded store, fresh HOME) with two real Claude Code agents. po gives
// dev a task; while dev's model is still answering, dev's Claude Code
// process is killed (SIGKILL). The server records the crash with its
// reason and restarts dev after its backoff; the invocation completes.
// Killed after Claude Code wrote the task to its transcript, dev resumes
// its conversation and is reminded of the task (the model gets the task
// once and the reminder once); killed before (the first prompt is not yet
// written), there is nothing to resume: dev starts a fresh conversation
// and the session types the task again (twice in all, no reminder). Which
// of the two a kill "at once" hits is read from the transcript after the
// kill; the "after the transcript" case waits for it.
func TestClaudeTaskSurvivesCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs Claude Code")
	}
	claude := testenv.ClaudeBin(t)
	bin := buildServer(t)
	t.Run("after the transcript", func(t *testing.T) { runCrash(t, bin, claude, true) })
	t.Run("at once", func(t *testing.T) { runCrash(t, bin, claude, false) })
}

func runCrash(t *testing.T, bin, claude string, afterTranscript bool) {
	srv, held := crashModel(t)

	home, repo := t.TempDir(), t.TempDir()
	officeFile := crashOffice(t, claude, repo)
	const token = "crash-token-0123456789abcdef"
	data := t.TempDir()
	p := launchServer(t, bin, []string{"HOME=" + home, "LANG=C.UTF-8", "OFFICE_ADMIN_TOKEN=" + token,
		"ANTHROPIC_API_KEY=" + srv.Key, "ANTHROPIC_BASE_URL=" + srv.URL, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"},
		"--office", officeFile, "--data-dir", data)
	p.waitHealthy(t)
	t.Cleanup(func() { p.stop(t) }) // the agents end with it (before the temporary dirs go)
	defer func() {
		if t.Failed() {
			t.Logf("server log:\n%s", p.stderr.String())
		}
	}()
	c := apiClient{t: t, base: p.base, token: token}
	var offices []struct{ ID string }
	c.wait("the office", 30*time.Second, func() bool { return c.do("GET", "/api/offices", "", &offices) == 200 && len(offices) == 1 })
	officeID := offices[0].ID
	type sess struct {
		AgentName string `json:"agent_name"`
		Status    string `json:"status"`
		Detail    string `json:"detail"`
		PID       int    `json:"pid"`
	}
	session := func(name string) sess {
		var ss []sess
		c.do("GET", "/api/offices/"+officeID+"/sessions", "", &ss)
		for _, s := range ss {
			if s.AgentName == name {
				return s
			}
		}
		return sess{}
	}
	c.wait("both agents ready", 90*time.Second, func() bool { return session("po").Status == "ready" && session("dev").Status == "ready" })
	if st := c.do("POST", "/api/offices/"+officeID+"/messages", `{"agent":"po","content":"Please get the changelog done."}`, nil); st != 201 && st != 200 {
		t.Fatalf("post message: %d", st)
	}
	select {
	case <-held:
	case <-time.After(90 * time.Second):
		t.Fatal("dev's model never got the task")
	}
	transcriptHasTask := func() bool { return devTranscriptHasTask(data) }
	if afterTranscript {
		c.wait("the task in dev's transcript", 30*time.Second, transcriptHasTask)
	}
	dev := session("dev")
	if dev.PID == 0 {
		t.Fatalf("dev's session has no pid: %+v", dev)
	}
	// The session's process is the agent (the keeper execs it in its own
	// place); kill its process group at once, as a crash of the agent would.
	if err := syscall.Kill(-dev.PID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill dev (pid %d): %v", dev.PID, err)
	}
	resumable := transcriptHasTask() // the process is gone: its file is final
	t.Logf("killed with the task in the transcript: %v", resumable)
	waitCrashEvent(c, officeID)
	var invs []struct {
		Status string `json:"status"`
	}
	c.wait("the invocation to complete", 120*time.Second, func() bool {
		invs = nil
		c.do("GET", "/api/offices/"+officeID+"/invocations", "", &invs)
		return len(invs) == 1 && invs[0].Status == "completed"
	})
	checkTaskOrReminder(t, srv, resumable)
	if s := session("dev"); s.PID == dev.PID || s.PID == 0 {
		t.Errorf("dev's session after the crash: %+v (old pid %d)", s, dev.PID)
	}
}

// crashModel is the model of po and dev: po invokes dev; dev's first
// answer to its task never comes (held is closed when it is asked);
// asked again, or reminded after a crash, dev delivers.
func crashModel(t *testing.T) (*anthropictest.Server, chan struct{}) {
	srv := anthropictest.New(t)
	hold := make(chan struct{}) // dev's first answer never comes: the process dies first
	var mu sync.Mutex
	tasks := 0
	held := make(chan struct{})
	srv.Reply(func(r anthropictest.Request) anthropictest.Response {
		u := r.LastUserText()
		switch {
		case strings.Contains(r.System, "You are po"):
			if strings.Contains(u, "Message from a person") {
				return anthropictest.Response{Text: "[INVOKE:dev]\nWrite the changelog.\n[/INVOKE:dev]"}
			}
		case strings.Contains(r.System, "You are dev"):
			deliver := anthropictest.Response{Text: "[DELIVER_RESULT:po]\ntype: markdown\ncontent: Changelog written.\n[/DELIVER_RESULT:po]"}
			if strings.Contains(u, "ended unexpectedly") {
				return deliver
			}
			if strings.Contains(u, "[OFFICE] Task ") {
				mu.Lock()
				tasks++
				first := tasks == 1
				mu.Unlock()
				if !first {
					return deliver
				}
				close(held)
				return anthropictest.Response{Hold: hold}
			}
		}
		return anthropictest.Response{Text: "OK"}
	})
	t.Cleanup(func() { close(hold) })
	return srv, held
}

// waitCrashEvent waits for the session.crashed event and checks its
// detail says the process was killed.
func waitCrashEvent(c apiClient, officeID string) {
	t := c.t
	var crash string
	c.wait("the crash event", 30*time.Second, func() bool {
		var evs []struct {
			Kind    string `json:"kind"`
			Payload struct {
				Detail string `json:"detail"`
			} `json:"payload"`
		}
		c.do("GET", "/api/offices/"+officeID+"/events?limit=500", "", &evs)
		for _, e := range evs {
			if e.Kind == "session.crashed" {
				crash = e.Payload.Detail
				return true
			}
		}
		return false
	})
	if !strings.Contains(crash, "killed") {
		t.Errorf("crash event detail %q does not say the process was killed", crash)
	}
}

// checkTaskOrReminder: dev's model got the task again in a fresh
// conversation, or, resumed, a reminder of the task it holds.
func checkTaskOrReminder(t *testing.T, srv *anthropictest.Server, resumable bool) {
	gotTasks, reminders := 0, 0
	for _, r := range srv.MainRequests() {
		if !strings.Contains(r.System, "You are dev") {
			continue
		}
		u := r.LastUserText()
		if strings.Contains(u, "ended unexpectedly") {
			reminders++
		} else if strings.Contains(u, "[OFFICE] Task ") {
			gotTasks++
		}
	}
	wantTasks, wantReminders := 2, 0 // a fresh conversation: the task typed again
	if resumable {
		wantTasks, wantReminders = 1, 1 // resumed: reminded of the task it holds
	}
	if gotTasks != wantTasks || reminders != wantReminders {
		t.Errorf("dev's model got the task %d times and the reminder %d times, want %d and %d", gotTasks, reminders, wantTasks, wantReminders)
	}
}

// crashOffice writes the office of po and dev, two Claude Code agents in
// repo, and returns its path.
func crashOffice(t *testing.T, claude, repo string) string {
	officeFile := filepath.Join(t.TempDir(), "office.yaml")
	yaml := `office:
  name: Crash office
agents:
  - name: po
    allowed_actions: [invoke]
    launch: {kind: claude, command: "` + claude + `", dir: "` + filepath.Join(repo, "po") + `"}
  - name: dev
    allowed_actions: [deliver_result]
    launch: {kind: claude, command: "` + claude + `", dir: "` + filepath.Join(repo, "dev") + `"}
`
	if err := os.WriteFile(officeFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return officeFile
}

// devTranscriptHasTask: dev's Claude Code transcript under the data dir
// holds the task as a user turn.
func devTranscriptHasTask(data string) bool {
	files, _ := filepath.Glob(filepath.Join(data, "claude", "*", "*", "claude", "projects", "*-dev", "*.jsonl"))
	for _, f := range files {
		if b, _ := os.ReadFile(f); strings.Contains(string(b), `"type":"user"`) && strings.Contains(string(b), "[OFFICE] Task ") {
			return true
		}
	}
	return false
}
