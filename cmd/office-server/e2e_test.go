package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
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
	root := testenv.RepoRoot()
	bin := filepath.Join(t.TempDir(), "office-server")
	build := exec.Command("go", "build", "-o", bin, "./cmd/office-server")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	data := t.TempDir()

	start := func() (*exec.Cmd, string, *lockedBuf, *lockedBuf) {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		cmd := exec.Command(bin, "serve", "--office", "examples/demo-office.yaml", "--data-dir", data, "--addr", addr)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "OFFICE_ADMIN_TOKEN=", "DATABASE_URL=", "SUPABASE_URL=")
		stdout, stderr := &lockedBuf{}, &lockedBuf{}
		cmd.Stdout, cmd.Stderr = stdout, stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
		base := "http://" + addr
		deadline := time.Now().Add(30 * time.Second)
		for {
			res, err := http.Get(base + "/healthz")
			if err == nil {
				res.Body.Close()
				if res.StatusCode == 200 {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("/healthz never answered; logs:\n%s", stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		return cmd, base, stdout, stderr
	}
	stop := func(cmd *exec.Cmd, stderr *lockedBuf) {
		t.Helper()
		began := time.Now()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("exit after SIGTERM: %v; logs:\n%s", err, stderr.String())
			}
		case <-time.After(25 * time.Second):
			t.Fatalf("no exit within 25s of SIGTERM; logs:\n%s", stderr.String())
		}
		t.Logf("shutdown took %v", time.Since(began))
	}

	cmd, base, stdout, stderr := start()
	m := regexp.MustCompile(`\?token=([0-9a-f]+)`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("console URL with token not printed; stdout:\n%s", stdout.String())
	}
	token := m[1]
	api := func(method, path, body string, v any) int {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if v != nil && res.StatusCode < 300 {
			if err := json.Unmarshal(b, v); err != nil {
				t.Fatalf("%s %s: %v: %s", method, path, err, b)
			}
		}
		return res.StatusCode
	}
	if st := api("GET", "/readyz", "", nil); st != 200 {
		t.Fatalf("/readyz = %d", st)
	}
	var offices []office.Office
	api("GET", "/api/offices", "", &offices)
	if len(offices) != 1 || offices[0].Name != "Demo office" {
		t.Fatalf("offices = %+v", offices)
	}
	oid := offices[0].ID

	// The agents run, and po asks within seconds.
	var q office.Question
	deadline := time.Now().Add(30 * time.Second)
	for {
		var qs []office.Question
		api("GET", "/api/offices/"+oid+"/questions?status=pending", "", &qs)
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
	api("GET", "/api/offices/"+oid+"/agents", "", &agents)
	for _, a := range agents {
		if a.Session == office.SessionStopped || a.Session == "" {
			t.Errorf("agent %s is not running: %q", a.Name, a.Session)
		}
	}
	if st := api("POST", "/api/questions/"+q.ID+"/answer", `{"response":"Dark mode"}`, nil); st != 200 {
		t.Fatalf("answer = %d", st)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		var invs []office.Invocation
		api("GET", "/api/offices/"+oid+"/invocations?status=completed", "", &invs)
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
	res, err := http.Get(base + "/metrics")
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
	stop(cmd, stderr)
	if strings.Contains(stderr.String(), token) {
		t.Fatal("the admin token appears in the logs")
	}
	if fi, err := os.Stat(filepath.Join(data, "admin-token")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin-token file: %v %v", fi, err)
	}

	// Second start on the same data: same token, not printed again; the
	// office and its history are still there.
	cmd, base, stdout, stderr = start()
	if strings.Contains(stdout.String(), token) {
		t.Fatalf("token printed again on the second start:\n%s", stdout.String())
	}
	var invs []office.Invocation
	if st := api("GET", "/api/offices/"+oid+"/invocations", "", &invs); st != 200 || len(invs) == 0 {
		t.Fatalf("after restart: invocations %d %+v", st, invs)
	}
	stop(cmd, stderr)
}
