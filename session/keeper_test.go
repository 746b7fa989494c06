//go:build linux

package session

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

// The test binary is its own keeper: started as `test-binary --keeper
// MODE ...` it runs RunKeeper.
var testKeeper = []string{os.Args[0], "--keeper"}

func init() {
	if len(os.Args) > 1 && os.Args[1] == "--keeper" {
		os.Exit(RunKeeper(os.Args[2:], os.Stderr))
	}
}

// freshEnv marks a test binary run by runFresh.
const freshEnv = "SESSION_TEST_FRESH"

// runFresh runs the test named pattern in a new test process and fails t
// with its output if it fails. This process is a child subreaper once any
// test used the keeper, and then sweeps every orphan it gets: a test that
// needs a process without a keeper anywhere runs there.
func runFresh(t *testing.T, pattern string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", pattern, "-test.count", "1", "-test.v")
	cmd.Env = append(os.Environ(), freshEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("%s in a new process: %v\n%s", pattern, err, out)
	}
}

// TestKeeperEndsTheTree: a session stopped, or an agent that exits, ends
// the agent's descendants that left its process group and ignore SIGHUP
// and SIGTERM, also one whose parent is gone (a daemon: it is the agent's
// child meanwhile, not init's); without a keeper the same descendant
// survives (the test can fail; run in a process that never used the
// keeper). The descendant lets go of the terminal: one that held it would
// also keep a session without a keeper from ever finishing its Stop (its
// PTY reader never sees the end), which with the keeper cannot happen
// either.
func TestKeeperEndsTheTree(t *testing.T) {
	for _, tc := range []struct {
		name                          string
		keeper, holdsTTY, daemon, end bool
	}{
		{name: "keeper", keeper: true},
		{name: "no keeper"},
		{name: "keeper, descendant holds the terminal", keeper: true, holdsTTY: true},
		{name: "keeper, daemon", keeper: true, daemon: true},
		{name: "keeper, daemon, agent exits", keeper: true, daemon: true, end: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.keeper && os.Getenv(freshEnv) == "" {
				runFresh(t, "^TestKeeperEndsTheTree$/^no_keeper$")
				return
			}
			r := newRecorder()
			o := Options{}
			if tc.keeper {
				o.Keeper = testKeeper
			}
			m := newTestManager(t, r, o)
			pidFile := filepath.Join(t.TempDir(), "pid")
			redirect := " </dev/null >/dev/null 2>&1"
			if tc.holdsTTY {
				redirect = ""
			}
			child := `setsid sh -c 'trap "" HUP TERM; echo $$ > ` + pidFile + `.tmp; mv ` + pidFile + `.tmp ` + pidFile + `; exec sleep 1000'` + redirect + ` &`
			if tc.daemon {
				child = "(" + child + ")" // the subshell ends at once: an orphan
			}
			rest := `printf '> '
while IFS= read -r l; do printf '> '; done
`
			if tc.end {
				rest = "sleep 0.5\nexit 0\n"
			}
			key := Key{"o", tc.name}
			s, err := m.Start(context.Background(), key, Spec{Kind: KindCommand, Command: script(t, child+"\necho ready\n"+rest), PromptPattern: `^>$`})
			if err != nil {
				t.Fatal(err)
			}
			agent := s.Info().PID
			pid := waitPidFile(t, pidFile)
			t.Cleanup(func() { _ = killPid(pid) })
			if tc.daemon && !tc.end {
				// Its parent ended: the agent, a child subreaper, is its parent now.
				for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					ppid, _, err := procStat(pid)
					if err == nil && ppid == agent {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("the daemon's parent is %d (%v), not the agent %d", ppid, err, agent)
					}
				}
			}
			if tc.end {
				r.waitFor(t, "exited", 10*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionExited })
			} else {
				r.waitFor(t, "ready", 5*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionReady })
				if !running(pid) {
					t.Fatal("the descendant ended before the stop")
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := m.Stop(ctx, key); err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.Now().Add(3 * time.Second)
			for running(pid) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if running(pid) == tc.keeper {
				t.Errorf("keeper %v: the setsid'd descendant is running %v after the end", tc.keeper, running(pid))
			}
		})
	}
}

// TestKeeperSparesOtherDaemons: a program that runs agents under the keeper
// (and so is a child subreaper) and starts a daemon of its own, outside
// any agent (tmux's server, say), keeps it: only what ended agents leave
// is swept.
func TestKeeperSparesOtherDaemons(t *testing.T) {
	m := newTestManager(t, newRecorder(), Options{Keeper: testKeeper})
	if _, err := m.Start(context.Background(), Key{"o", "a"}, Spec{Kind: KindCommand, Command: script(t, "exec sleep 100")}); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	daemon := `setsid sh -c 'echo $$ > ` + pidFile + `.tmp; mv ` + pidFile + `.tmp ` + pidFile + `; exec sleep 1000' </dev/null >/dev/null 2>&1 &`
	if err := exec.Command("sh", "-c", daemon).Run(); err != nil {
		t.Fatal(err)
	}
	pid := waitPidFile(t, pidFile)
	t.Cleanup(func() { _ = killPid(pid) })
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ppid, _, err := procStat(pid); err == nil && ppid == os.Getpid() {
			break // an orphan, ours
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon did not become this process's child")
		}
	}
	reaper.sweep()
	_ = exec.Command("true").Run() // a SIGCHLD: another sweep
	time.Sleep(300 * time.Millisecond)
	if !running(pid) {
		t.Error("the program's own daemon was killed as an agent's leftover")
	}
}

// TestKeeperStuckWatchdog: a watchdog that reads nothing (stopped) holds
// the server up for at most watchdogStall once its socket is full (else
// every agent's start would wait for ever); it is then killed and another
// one started.
func TestKeeperStuckWatchdog(t *testing.T) {
	m := newTestManager(t, newRecorder(), Options{Keeper: testKeeper})
	if _, err := m.Start(context.Background(), Key{"o", "a"}, Spec{Kind: KindCommand, Command: script(t, "exec sleep 100")}); err != nil {
		t.Fatal(err)
	}
	reaper.mu.Lock() // watchdogStall is read under it
	stuck, stall := reaper.watchPid, watchdogStall
	watchdogStall = 300 * time.Millisecond
	reaper.mu.Unlock()
	defer func() {
		reaper.mu.Lock()
		watchdogStall = stall
		reaper.mu.Unlock()
	}()
	if err := syscall.Kill(stuck, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(stuck, syscall.SIGKILL) })
	// Agents' ends, of no agent: enough to fill the socket's buffer.
	t0 := time.Now()
	reaper.mu.Lock()
	for range 20000 {
		if reaper.watchPid != stuck {
			break
		}
		reaper.tellLocked('-', 1, nil)
	}
	killed := reaper.watchPid != stuck
	reaper.mu.Unlock()
	if !killed {
		t.Fatal("20,000 messages to a stopped watchdog, and it was not replaced")
	}
	if took := time.Since(t0); took > watchdogStall+2*time.Second {
		t.Errorf("the server waited %s for a stopped watchdog", took)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		reaper.mu.Lock()
		now := reaper.watchPid
		reaper.mu.Unlock()
		if now != 0 && now != stuck && running(now) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new watchdog after the stuck one (%d)", stuck)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if running(stuck) {
		t.Error("the stuck watchdog still runs")
	}
}

// TestKeeperKeepsTheExit: under the keeper, an agent's exit code and death
// by a signal reach the session as they did without it.
func TestKeeperKeepsTheExit(t *testing.T) {
	for body, want := range map[string]int{"exit 3": 3, "kill -KILL $$": -1} {
		t.Run(body, func(t *testing.T) {
			r := newRecorder()
			m := newTestManager(t, r, Options{Keeper: testKeeper, RestartBackoff: time.Hour})
			s, err := m.Start(context.Background(), Key{"o", "a"}, Spec{Kind: KindCommand, Command: script(t, "sleep 0.2\n"+body+"\n")})
			if err != nil {
				t.Fatal(err)
			}
			r.waitFor(t, "crashed", 15*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == office.SessionCrashed })
			if got := s.Info().ExitCode; got != want {
				t.Errorf("exit code %d, want %d", got, want)
			}
		})
	}
}

// TestKeeperMissingCommand: under the keeper, a command that does not
// exist fails the start with the reason, as without it (not a crash loop).
func TestKeeperMissingCommand(t *testing.T) {
	m := newTestManager(t, newRecorder(), Options{Keeper: testKeeper})
	_, err := m.Start(context.Background(), Key{"o", "a"}, Spec{Kind: KindCommand, Command: "/nonexistent/agent-cli"})
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("start of a missing command: %v, want the reason", err)
	}
}

// TestKeeperAddsNoProcess (issue 17): under the keeper, a session's
// process is the agent itself, with the environment it was given
// (GOMAXPROCS included, or none), and 20 sessions share one watchdog; a
// Go keeper per agent took 6–8 threads each.
func TestKeeperAddsNoProcess(t *testing.T) {
	t.Setenv("GOMAXPROCS", "") // set or not where the test runs: the spec says
	os.Unsetenv("GOMAXPROCS")
	m := newTestManager(t, newRecorder(), Options{Keeper: testKeeper})
	dir := t.TempDir()
	var pids []int
	for i := range 20 {
		out := filepath.Join(dir, fmt.Sprint(i))
		var env []string
		if i%2 == 1 {
			env = []string{"GOMAXPROCS=3"}
		}
		s, err := m.Start(context.Background(), Key{"o", fmt.Sprint(i)}, Spec{Kind: KindCommand, Command: script(t, `echo "${GOMAXPROCS-none}" > `+out+`.tmp; mv `+out+`.tmp `+out+`; exec sleep 100`), Env: env})
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, s.Info().PID)
	}
	for i, pid := range pids {
		want := "none"
		if i%2 == 1 {
			want = "3"
		}
		var got []byte
		var err error
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if got, err = os.ReadFile(filepath.Join(dir, fmt.Sprint(i))); err == nil {
				break
			}
		}
		if strings.TrimSpace(string(got)) != want {
			t.Errorf("agent %d's GOMAXPROCS: %q, want %q", i, got, want)
		}
		var exe string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if exe, _ = os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); filepath.Base(exe) == "sleep" {
				break
			}
		}
		if filepath.Base(exe) != "sleep" {
			t.Errorf("agent %d: the session's process %d is %s, not the agent (sleep)", i, pid, exe)
		}
		if kids := treeOf([]int{pid}); len(kids) != 0 {
			t.Errorf("agent %d: processes below the agent: %v", i, kids)
		}
	}
	watchdogs := 0
	for _, c := range childrenOf(os.Getpid()) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c))
		if strings.Contains(string(b), "\x00--keeper\x00watch") {
			watchdogs++
		}
	}
	if watchdogs != 1 {
		t.Errorf("%d watchdogs for 20 agents, want 1", watchdogs)
	}
}

func waitPidFile(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running reports whether pid runs (a zombie does not).
func running(pid int) bool {
	_, state, err := procStat(pid)
	return err == nil && state != 'Z'
}

func killPid(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
