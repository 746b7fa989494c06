package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// idScript prints the agent's HOME and uid, then reads lines behind the
// prompt "NAME>".
func idScript(name string) string {
	return fmt.Sprintf(`{kind: command, command: /bin/sh, args: [-c, "echo \"home=$HOME uid=$(id -u) end\"; echo '%[1]s>'; while IFS= read -r l; do echo '%[1]s>'; done"], prompt_pattern: "^%[1]s>$"}`, name)
}

// TestAgentIsolation (issue 12, break 10), on the built server: every
// agent gets a HOME of its own under the data dir, not the server's; an
// agent with `user:` runs as that OS user, its HOME and workspace given to
// it; a server that may not change users refuses such an agent with an
// error that says what to do.
func TestAgentIsolation(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildServer(t)
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	yaml := "office:\n  name: Iso\nagents:\n" +
		"  - {name: a, role: A, launch: " + idScript("a") + "}\n" +
		"  - {name: b, role: B, launch: " + idScript("b") + "}\n"
	if os.Geteuid() == 0 {
		yaml += "  - {name: c, role: C, launch: " + strings.TrimSuffix(idScript("c"), "}") + ", user: nobody}}\n"
	}
	officeFile := filepath.Join(dir, "office.yaml")
	if err := os.WriteFile(officeFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	const token = "isolation-token-0123456789abcdef"
	f := &forwardRun{token: token}
	f.p = launchServer(t, bin, []string{"OFFICE_ADMIN_TOKEN=" + token}, "--office", officeFile, "--data-dir", data)
	f.p.waitHealthy(t)
	t.Cleanup(func() {
		f.p.stop(t)
		if t.Failed() {
			t.Logf("server log:\n%s", f.p.stderr.String())
		}
	})
	var offices []struct{ ID string }
	f.api(t, "GET", "/api/offices", nil, &offices)
	f.officeID = offices[0].ID

	seen := func(agent string) (home, uid string) { t.Helper(); return f.seenID(t, agent) }
	homeA, uidA := seen("a")
	homeB, _ := seen("b")
	serverHome, _ := os.UserHomeDir()
	for _, h := range []string{homeA, homeB} {
		if h == serverHome || !strings.HasPrefix(h, data+string(filepath.Separator)) {
			t.Errorf("agent HOME %q: want one of its own under the data dir %s (server's HOME %s)", h, data, serverHome)
		}
		if st, err := os.Stat(h); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("agent HOME %s: %v %v, want a 0700 directory", h, st.Mode(), err)
		}
	}
	if homeA == homeB {
		t.Errorf("agents a and b share HOME %s", homeA)
	}
	if uidA != fmt.Sprint(os.Geteuid()) {
		t.Errorf("agent a runs as uid %s, want the server's %d", uidA, os.Geteuid())
	}
	checkDataModes(t, data)
	if os.Geteuid() == 0 {
		homeC, uidC := seen("c")
		if uidC != nobody.Uid {
			t.Errorf("agent c (user: nobody) runs as uid %s, want %s", uidC, nobody.Uid)
		}
		if st, err := os.Stat(homeC); err != nil || fmt.Sprint(st.Sys().(*syscall.Stat_t).Uid) != nobody.Uid {
			t.Errorf("agent c's HOME %s is not nobody's: %v", homeC, err)
		}
		// The watchdog that ends the agents with the server stays the
		// server's: the agent cannot end it and leave its descendants
		// behind.
		if pid := childWith(f.p.cmd.Process.Pid, "keeper\x00watch\x00"); pid == "" {
			t.Errorf("the server runs no watchdog (keeper watch)")
		} else if b, _ := os.ReadFile("/proc/" + pid + "/status"); !regexp.MustCompile(`(?m)^Uid:\s+0\s`).Match(b) {
			t.Errorf("the watchdog (pid %s) does not run as the server's user:\n%s", pid, b)
		}
		refusedAsNonRoot(t, bin, nobody)
	}
}

// idOf matches what idScript's agent prints.
var idOf = regexp.MustCompile(`home=(\S*) uid=(\d+) end`)

// seenID waits for agent ready and returns the HOME and uid it printed.
func (f *forwardRun) seenID(t *testing.T, agent string) (home, uid string) {
	t.Helper()
	f.waitReady(t, agent)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := idOf.FindStringSubmatch(f.replay(t, agent)); m != nil {
			return m[1], m[2]
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %s never printed its HOME; server log:\n%s", agent, f.p.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkDataModes: the server's files are its user's only; the data dir
// is passable, never listable, by an agent of another user.
func checkDataModes(t *testing.T, data string) {
	for _, name := range []string{"office.db", "office.db-wal", "office.db-shm", "secrets-key"} {
		if st, err := os.Stat(filepath.Join(data, name)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", name, st.Mode(), err)
		}
	}
	if st, err := os.Stat(data); err != nil || st.Mode().Perm()&0o006 != 0 {
		t.Errorf("data dir: mode %v (%v), want no read or write for others", st.Mode(), err)
	}
}

// refusedAsNonRoot runs the built server as nobody with an agent that
// asks for another user: the agent does not start and the log says why
// and what to do.
func refusedAsNonRoot(t *testing.T, bin string, nobody *user.User) {
	dir, err := os.MkdirTemp("", "office-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var uid, gid uint32
	fmt.Sscan(nobody.Uid, &uid)
	fmt.Sscan(nobody.Gid, &gid)
	for _, d := range []string{dir, filepath.Dir(bin)} { // nobody runs the server
		_ = os.Chmod(d, 0o755)
	}
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	officeFile := filepath.Join(dir, "office.yaml")
	yaml := "office:\n  name: NonRoot\nagents:\n  - {name: r, role: R, launch: " + strings.TrimSuffix(idScript("r"), "}") + ", user: root}}\n"
	if err := os.WriteFile(officeFile, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	p := launchServerAs(t, bin, &syscall.Credential{Uid: uid, Gid: gid}, dir, "--office", officeFile, "--data-dir", filepath.Join(dir, "data"))
	p.waitHealthy(t)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.stderr.String(), "cannot run agents as another user") {
		if time.Now().After(deadline) {
			t.Fatalf("no clear error for user: root on a server run as nobody; log:\n%s", p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(p.stderr.String(), "CAP_SETUID") {
		t.Errorf("the error does not say what to do:\n%s", p.stderr.String())
	}
}

// launchServerAs is launchServer for a server run as another user, from dir.
func launchServerAs(t *testing.T, bin string, cred *syscall.Credential, dir string, args ...string) *serverProc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", addr}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OFFICE_ADMIN_TOKEN=nonroot-token-0123456789abcdef", "DATABASE_URL=", "SUPABASE_URL=", "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	q := &serverProc{cmd: cmd, base: "http://" + addr, stdout: &lockedBuf{}, stderr: &lockedBuf{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = q.stdout, q.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { q.err = cmd.Wait(); close(q.exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-q.exited })
	return q
}

// childWith returns the pid of a child of ppid whose command line holds
// s, or "".
func childWith(ppid int, s string) string {
	lists, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", ppid))
	for _, l := range lists {
		b, _ := os.ReadFile(l)
		for _, pid := range strings.Fields(string(b)) {
			if c, err := os.ReadFile("/proc/" + pid + "/cmdline"); err == nil && strings.Contains(string(c), s) {
				return pid
			}
		}
	}
	return ""
}
