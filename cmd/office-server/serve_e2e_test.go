package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/internal/anthropictest"
)

// e2eServe is the built `office-server serve --office officeFile` run
// with exactly the environment env (the end-to-end tests of real CLIs).
type e2eServe struct {
	t      *testing.T
	cmd    *exec.Cmd
	exited chan error
	base   string
	token  string
}

// startServe starts it; the test's cleanup kills it and, when the test
// failed, logs the server's stderr and calls onFail (when not nil).
func startServe(t *testing.T, bin, officeFile string, env []string, token string, onFail func()) *e2eServe {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	data := t.TempDir()
	cmd := exec.Command(bin, "serve", "--office", officeFile, "--data-dir", data, "--addr", addr)
	cmd.Env = env
	cmd.Dir = t.TempDir()
	stdout, stderr := &lockedBuf{}, &lockedBuf{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // a killed test leaves no server behind
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("server log:\n%s", stderr.String())
			if onFail != nil {
				onFail()
			}
		}
	})
	return &e2eServe{t: t, cmd: cmd, exited: exited, base: "http://" + addr, token: token}
}

// api sends body as JSON and decodes a 2xx answer into v; it returns the
// status, 0 when the server does not answer.
func (c *e2eServe) api(method, path string, body, v any) int {
	c.t.Helper()
	return apiClient{t: c.t, base: c.base, token: c.token}.try(method, path, body, v)
}

func (c *e2eServe) wait(what string, d time.Duration, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitReady waits for the one office and n of its agents ready, failing
// at once if one is in a status of bad; it returns the office's id.
func (c *e2eServe) waitReady(n int, d time.Duration, bad ...string) string {
	t := c.t
	var offices []struct{ ID, Name string }
	c.wait("the API", 60*time.Second, func() bool { return c.api("GET", "/api/offices", nil, &offices) == 200 && len(offices) == 1 })
	officeID := offices[0].ID
	type sess struct {
		AgentName string `json:"agent_name"`
		Status    string `json:"status"`
		Detail    string `json:"detail"`
	}
	began := time.Now()
	c.wait("the agents ready", d, func() bool {
		var sessions []sess
		c.api("GET", "/api/offices/"+officeID+"/sessions", nil, &sessions)
		ready := 0
		for _, s := range sessions {
			if slices.Contains(bad, s.Status) {
				t.Fatalf("agent %s is %s: %s", s.AgentName, s.Status, s.Detail)
			}
			if s.Status == "ready" {
				ready++
			}
		}
		return ready == n
	})
	t.Logf("%d agents ready %v after the API answered", n, time.Since(began).Round(time.Millisecond))
	return officeID
}

// stop sends SIGTERM and fails the test unless the server exits cleanly
// within 30 s.
func (c *e2eServe) stop() {
	t := c.t
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-c.exited:
		c.exited <- err
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30s of SIGTERM")
	}
}

// checkStoppedRows: the office has n session rows, each stopped with pid 0.
func checkStoppedRows(t *testing.T, db *pgx.Conn, officeID string, want int) {
	rows, err := db.Query(context.Background(), `select status, pid from agent_sessions where office_id = $1`, officeID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var st string
		var pid int
		if err := rows.Scan(&st, &pid); err != nil {
			t.Fatal(err)
		}
		n++
		if st != "stopped" || pid != 0 {
			t.Errorf("after SIGTERM a session row is %s with pid %d, want stopped with pid 0", st, pid)
		}
	}
	if n != want {
		t.Errorf("%d session rows, want %d", n, want)
	}
}

// memberDB connects to dbURL for the test and adds member (with email) to
// the office as an auth user and office member.
func memberDB(t *testing.T, dbURL, officeID, member, email string) *pgx.Conn {
	ctx := context.Background()
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(ctx) })
	mustExec(t, db, `insert into auth.users (id, email) values ($1, $2)`, member, email)
	mustExec(t, db, `insert into office_members (office_id, user_id) values ($1, $2)`, officeID, member)
	return db
}

// launchClaudeOffice writes officeYAML to a file and launches the built
// server on it from home, its Claude Code agents talking to srv, with the
// admin token; the test's cleanup stops it (its agents end with it), and
// a failed test logs the server's stderr. extra is more of the server's
// environment.
func launchClaudeOffice(t *testing.T, bin, officeYAML, home string, srv *anthropictest.Server, token string, extra ...string) *serverProc {
	officeFile := filepath.Join(t.TempDir(), "office.yaml")
	if err := os.WriteFile(officeFile, []byte(officeYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	p := launchServer(t, bin, append([]string{"HOME=" + home, "LANG=C.UTF-8", "OFFICE_ADMIN_TOKEN=" + token,
		"ANTHROPIC_API_KEY=" + srv.Key, "ANTHROPIC_BASE_URL=" + srv.URL, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}, extra...),
		"--office", officeFile, "--data-dir", t.TempDir())
	p.waitHealthy(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", p.stderr.String())
		}
		p.stop(t)
	})
	return p
}
