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
// ends that grandchild and the agent; when the server stops cleanly, too.
func TestAgentTreeEndsWithServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildServer(t)
	for _, how := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(how.String(), func(t *testing.T) {
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
