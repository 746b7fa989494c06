package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
)

// TestRunCommandEndToEnd is the README's run command on the embedded
// default: the built binary serves the example office (examples/
// demo-office.yaml) on SQLite in a fresh data directory; the health
// endpoints answer, the demo agents run and ask, an answer sent through
// the API goes round the office (po → dev → po), SIGTERM stops it cleanly,
// the token is printed once and never logged.
func TestRunCommandEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildServer(t)
	data := t.TempDir()

	start := func() (*serverProc, string, *lockedBuf, *lockedBuf) {
		t.Helper()
		p := launchServer(t, bin, nil, "--office", "examples/demo-office.yaml", "--data-dir", data)
		p.waitHealthy(t)
		return p, p.base, p.stdout, p.stderr
	}

	srv, base, stdout, stderr := start()
	m := regexp.MustCompile(`\?token=([0-9a-f]+)`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("console URL with token not printed; stdout:\n%s", stdout.String())
	}
	token := m[1]
	c := &apiClient{t: t, base: base, token: token}
	if st := c.do("GET", "/readyz", "", nil); st != 200 {
		t.Fatalf("/readyz = %d", st)
	}
	var offices []struct{ ID, Name string }
	c.do("GET", "/api/offices", "", &offices)
	if len(offices) != 1 || offices[0].Name != "Demo office" {
		t.Fatalf("offices = %+v", offices)
	}
	oid := offices[0].ID

	demoRound(c, oid, stderr)
	srv.stop(t)
	if strings.Contains(stderr.String(), token) {
		t.Fatal("the admin token appears in the logs")
	}
	if fi, err := os.Stat(filepath.Join(data, "admin-token")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin-token file: %v %v", fi, err)
	}

	// Second start on the same data: same token, not printed again; the
	// office and its history are still there.
	srv, base, stdout, stderr = start()
	c.base = base
	if strings.Contains(stdout.String(), token) {
		t.Fatalf("token printed again on the second start:\n%s", stdout.String())
	}
	if strings.Contains(stderr.String(), token) {
		t.Fatalf("token in the logs of the second start:\n%s", stderr.String())
	}
	var invs []office.Invocation
	if st := c.do("GET", "/api/offices/"+oid+"/invocations", "", &invs); st != 200 || len(invs) == 0 {
		t.Fatalf("after restart: invocations %d %+v", st, invs)
	}
	srv.stop(t)
}

// demoRound: the demo agents run, and po asks within seconds; an answer
// sent through the API goes round the office (po → dev → po), and the
// metrics count what happened.
func demoRound(c *apiClient, oid string, stderr *lockedBuf) {
	t := c.t
	// The agents run, and po asks within seconds.
	var q office.Question
	deadline := time.Now().Add(30 * time.Second)
	for {
		var qs []office.Question
		c.do("GET", "/api/offices/"+oid+"/questions?status=pending", "", &qs)
		if len(qs) > 0 {
			q = qs[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("po asked nothing in 30s; logs:\n%s", stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	var agents []struct {
		Name    string `json:"name"`
		Session string `json:"session_status"`
	}
	c.do("GET", "/api/offices/"+oid+"/agents", "", &agents)
	for _, a := range agents {
		if a.Session == office.SessionStopped || a.Session == "" {
			t.Errorf("agent %s is not running: %q", a.Name, a.Session)
		}
	}
	if st := c.do("POST", "/api/questions/"+q.ID+"/answer", `{"response":"Dark mode"}`, nil); st != 200 {
		t.Fatalf("answer = %d", st)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		var invs []office.Invocation
		c.do("GET", "/api/offices/"+oid+"/invocations?status=completed", "", &invs)
		if len(invs) > 0 {
			if !strings.Contains(invs[0].Reason, "Dark mode") {
				t.Fatalf("task = %q, want the answer in it", invs[0].Reason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no completed invocation in 30s; logs:\n%s", stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Metrics count what happened.
	res, err := http.Get(c.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`office_invocations{status="completed"} 1`, `office_answers_delivered_total 1`, `office_answer_delivery_seconds_count 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// buildServer builds the office-server binary into a temporary directory.
func buildServer(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "office-server-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "office-server")
		build := exec.Command("go", "build", "-o", builtBin, "./cmd/office-server")
		build.Dir = testenv.RepoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// The binary is built once per test run and shared by the tests.
var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// serverProc is an `office-server serve` process run by a test.
type serverProc struct {
	cmd            *exec.Cmd
	base           string // http://addr
	stdout, stderr *lockedBuf
	exited         chan struct{} // closed when the process has ended; then err is its Wait error
	err            error
}

// launchServer starts `bin serve` with args and a free loopback --addr,
// from the repository root, with no store or token from the environment
// but those in env. The test's cleanup kills it if it still runs.
func launchServer(t *testing.T, bin string, env []string, args ...string) *serverProc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", addr}, args...)...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(append(os.Environ(), "OFFICE_ADMIN_TOKEN=", "DATABASE_URL=", "SUPABASE_URL="), env...)
	p := &serverProc{cmd: cmd, base: "http://" + addr, stdout: &lockedBuf{}, stderr: &lockedBuf{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	// Its own process group, killed whole by the cleanup; and killed with
	// the test binary should that die first (a timeout), so that no server
	// outlives its test (its agents end with it: the keeper's watchdog).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-p.exited })
	return p
}

// waitHealthy waits until the server's /healthz answers 200.
func (p *serverProc) waitHealthy(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(p.base + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return
			}
		}
		select {
		case <-p.exited:
			t.Fatalf("server exited (%v); logs:\n%s", p.err, p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz never answered; logs:\n%s", p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (p *serverProc) stop(t *testing.T) {
	t.Helper()
	began := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
		if p.err != nil {
			t.Fatalf("exit after SIGTERM: %v; logs:\n%s", p.err, p.stderr.String())
		}
	case <-time.After(25 * time.Second):
		t.Fatalf("no exit within 25s of SIGTERM; logs:\n%s", p.stderr.String())
	}
	t.Logf("shutdown took %v", time.Since(began))
}
