package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAgentTreeEndsWithServer (issue 12, break 9): an agent starts a
// grandchild that calls setsid and ignores SIGHUP and SIGTERM. When the
// built server is SIGKILLed, the keeper it runs every agent under still
// ends that grandchild and the agent; when the server stops cleanly, too;
// and when the watchdog was killed before the server (the server starts
// another, which learns the agents running).
func TestAgentTreeEndsWithServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildServer(t)
	for _, tc := range []struct {
		name         string
		how          syscall.Signal
		killWatchdog bool
	}{{"SIGKILL", syscall.SIGKILL, false}, {"SIGTERM", syscall.SIGTERM, false}, {"SIGKILL after the watchdog's", syscall.SIGKILL, true}} {
		how := tc.how
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "grandchild.pid")
			agentPidFile := filepath.Join(dir, "agent.pid")
			script := fmt.Sprintf(`echo $$ > %[2]s; setsid sh -c 'trap "" HUP TERM; echo $$ > %[1]s.tmp; mv %[1]s.tmp %[1]s; exec sleep 1000' & echo "a>"; while IFS= read -r l; do echo "a>"; done`, pidFile, agentPidFile)
			officeFile := filepath.Join(dir, "office.yaml")
			yaml := fmt.Sprintf("office:\n  name: Tree\nagents:\n  - name: a\n    role: A\n    launch: {kind: command, command: /bin/sh, args: [-c, %q], prompt_pattern: \"^a>$\"}\n", script)
			if err := os.WriteFile(officeFile, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			p := launchServer(t, bin, nil, "--office", officeFile, "--data-dir", filepath.Join(dir, "data"))
			p.waitHealthy(t)
			grandchild, agent := readPid(t, pidFile), readPid(t, agentPidFile)
			if !alive(grandchild) || !alive(agent) {
				t.Fatalf("grandchild %d or agent %d not running", grandchild, agent)
			}
			if tc.killWatchdog {
				old := watchdog(t, p.cmd.Process.Pid, "")
				if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				t.Logf("watchdog %d killed; the server started %d", old, watchdog(t, p.cmd.Process.Pid, strconv.Itoa(old)))
			}
			if err := p.cmd.Process.Signal(how); err != nil {
				t.Fatal(err)
			}
			<-p.exited
			deadline := time.Now().Add(10 * time.Second)
			for alive(grandchild) || alive(agent) {
				if time.Now().After(deadline) {
					_ = syscall.Kill(grandchild, syscall.SIGKILL)
					t.Fatalf("after %v of the server: grandchild alive %v, agent alive %v, 10s later; server log:\n%s", how, alive(grandchild), alive(agent), p.stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// readPid waits for a pid file and reads it.
func readPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie is dead: it only waits to be
// reaped).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// watchdog waits for the server's watchdog (other than the pid not) and
// returns its pid.
func watchdog(t *testing.T, server int, not string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if pid := childWith(server, "keeper\x00watch\x00"); pid != "" && pid != not && alive(atoi(pid)) {
			return atoi(pid)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no watchdog below the server %d", server)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
