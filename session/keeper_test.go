//go:build linux

package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The test binary is its own keeper: started with keeperEnv set (the
// session passes the spec's environment on), it runs RunKeeper.
const keeperEnv = "SESSION_TEST_KEEPER=1"

func init() {
	if os.Getenv("SESSION_TEST_KEEPER") == "1" && len(os.Args) > 1 && os.Args[1] == "--grace" {
		os.Exit(RunKeeper(os.Args[1:], os.Stderr))
	}
}

// TestKeeperEndsTheTree: a session stopped ends the agent's descendants
// that left its process group and ignore SIGHUP and SIGTERM; without a
// keeper the same descendant survives (the test can fail). The descendant
// lets go of the terminal: one that held it would also keep a session
// without a keeper from ever finishing its Stop (its PTY reader never sees
// the end), which with the keeper cannot happen either.
func TestKeeperEndsTheTree(t *testing.T) {
	for _, tc := range []struct {
		name             string
		keeper, holdsTTY bool
	}{
		{"keeper", true, false},
		{"no keeper", false, false},
		{"keeper, descendant holds the terminal", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorder()
			o := Options{}
			if tc.keeper {
				o.Keeper = []string{os.Args[0]}
			}
			m := newTestManager(t, r, o)
			pidFile := filepath.Join(t.TempDir(), "pid")
			redirect := " </dev/null >/dev/null 2>&1"
			if tc.holdsTTY {
				redirect = ""
			}
			body := `setsid sh -c 'trap "" HUP TERM; echo $$ > ` + pidFile + `.tmp; mv ` + pidFile + `.tmp ` + pidFile + `; exec sleep 1000'` + redirect + ` &
echo ready
printf '> '
while IFS= read -r l; do printf '> '; done
`
			key := Key{"o", tc.name}
			if _, err := m.Start(context.Background(), key, Spec{Kind: KindCommand, Command: script(t, body), PromptPattern: `^>$`, Env: []string{keeperEnv}}); err != nil {
				t.Fatal(err)
			}
			pid := waitPidFile(t, pidFile)
			t.Cleanup(func() { _ = killPid(pid) })
			r.waitFor(t, "ready", 5*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == StatusReady })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := m.Stop(ctx, key); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(3 * time.Second)
			for running(pid) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if running(pid) == tc.keeper {
				t.Errorf("keeper %v: the setsid'd descendant is running %v after the stop", tc.keeper, running(pid))
			}
		})
	}
}

// TestKeeperKeepsTheExit: under the keeper, an agent's exit code and death
// by a signal reach the session as they did without it.
func TestKeeperKeepsTheExit(t *testing.T) {
	for body, want := range map[string]int{"exit 3": 3, "kill -KILL $$": -1} {
		t.Run(body, func(t *testing.T) {
			r := newRecorder()
			m := newTestManager(t, r, Options{Keeper: []string{os.Args[0]}, RestartBackoff: time.Hour})
			s, err := m.Start(context.Background(), Key{"o", "a"}, Spec{Kind: KindCommand, Command: script(t, "sleep 0.2\n"+body+"\n"), Env: []string{keeperEnv}})
			if err != nil {
				t.Fatal(err)
			}
			r.waitFor(t, "crashed", 5*time.Second, func(st []Status, _ []Text) bool { return lastStatus(st) == StatusCrashed })
			if got := s.Info().ExitCode; got != want {
				t.Errorf("exit code %d, want %d", got, want)
			}
		})
	}
}

// TestKeeperMissingCommand: under the keeper, a command that does not
// exist fails the start with the reason, as without it (not a crash loop).
func TestKeeperMissingCommand(t *testing.T) {
	m := newTestManager(t, newRecorder(), Options{Keeper: []string{os.Args[0]}})
	_, err := m.Start(context.Background(), Key{"o", "a"}, Spec{Kind: KindCommand, Command: "/nonexistent/agent-cli", Env: []string{keeperEnv}})
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("start of a missing command: %v, want the reason", err)
	}
}

// TestKeeperGOMAXPROCS: the keeper runs with GOMAXPROCS=1 (less memory),
// and the agent under it with the GOMAXPROCS it was given, or none.
func TestKeeperGOMAXPROCS(t *testing.T) {
	t.Setenv("GOMAXPROCS", "") // set or not where the test runs: the spec says
	os.Unsetenv("GOMAXPROCS")
	for _, tc := range []struct{ env, want string }{{"", "none"}, {"GOMAXPROCS=3", "3"}} {
		t.Run(tc.want, func(t *testing.T) {
			r := newRecorder()
			m := newTestManager(t, r, Options{Keeper: []string{os.Args[0]}})
			out := filepath.Join(t.TempDir(), "env")
			env := []string{keeperEnv}
			if tc.env != "" {
				env = append(env, tc.env)
			}
			s, err := m.Start(context.Background(), Key{"o", "a"}, Spec{Kind: KindCommand, Command: script(t, `echo "${GOMAXPROCS-none}" > `+out+`.tmp; mv `+out+`.tmp `+out+`; exec sleep 100`), Env: env})
			if err != nil {
				t.Fatal(err)
			}
			keeper, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", s.Info().PID))
			if !slices.Contains(strings.Split(string(keeper), "\x00"), "GOMAXPROCS=1") {
				t.Errorf("the keeper's environment lacks GOMAXPROCS=1: %q", keeper)
			}
			var got []byte
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if got, err = os.ReadFile(out); err == nil {
					break
				}
			}
			if strings.TrimSpace(string(got)) != tc.want {
				t.Errorf("the agent's GOMAXPROCS: %q, want %q", got, tc.want)
			}
		})
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
