package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// serverProc is one run of the real `office-server serve`.
type serverProc struct {
	cmd    *exec.Cmd
	base   string
	token  string
	logs   *tailBuf
	exited chan struct{}
	err    error
}

// startServer runs bin serve on a free loopback port with the office file,
// the data directory and env. With logFile the server logs at debug level
// into it as well (its last 64 KiB still go with an error).
func startServer(bin, officeFile, dataDir, logFile string, env []string) (*serverProc, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	token := randomToken()
	level := "warn"
	var logTo io.WriteCloser
	if logFile != "" {
		f, err := os.Create(logFile)
		if err != nil {
			return nil, err
		}
		level, logTo = "debug", f
	}
	cmd := exec.Command(bin, "serve", "--addr", addr, "--office", officeFile, "--data-dir", dataDir, "--log-level", level)
	cmd.Env = append(append(os.Environ(), "OFFICE_ADMIN_TOKEN="+token), env...)
	p := &serverProc{cmd: cmd, base: "http://" + addr, token: token, logs: &tailBuf{max: 64 << 10}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = io.Discard, p.logs
	if logTo != nil {
		cmd.Stderr = io.MultiWriter(p.logs, logTo)
	}
	// The driver killed outright (SIGKILL, a test's timeout) takes the
	// server with it; the keeper's watchdog ends its agents when its
	// socket closes. Without this a killed run leaves N agents running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		p.err = cmd.Wait()
		if logTo != nil {
			logTo.Close()
		}
		close(p.exited)
	}()
	return p, nil
}

func randomToken() string {
	b := make([]byte, 16)
	f, _ := os.Open("/dev/urandom")
	if f != nil {
		_, _ = io.ReadFull(f, b)
		f.Close()
	}
	return fmt.Sprintf("%x", b)
}

// pid is the server's process id.
func (p *serverProc) pid() int { return p.cmd.Process.Pid }

// stop ends the server with SIGTERM (SIGKILL after timeout) and reports
// how long it took.
func (p *serverProc) stop(timeout time.Duration) time.Duration {
	t0 := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	return time.Since(t0)
}

// get GETs path with the admin token into v.
func (p *serverProc) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", p.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != 200 {
		return fmt.Errorf("GET %s: %d %s", path, res.StatusCode, bytes.TrimSpace(b))
	}
	if s, ok := v.(*string); ok {
		*s = string(b)
		return nil
	}
	return json.Unmarshal(b, v)
}

// waitHealthy waits for /healthz.
func (p *serverProc) waitHealthy(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		res, err := http.Get(p.base + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("server exited (%v): %s", p.err, p.logs.String())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("/healthz never answered: %s", p.logs.String())
}

// metric reads one unlabelled value from /metrics (go_goroutines…).
func (p *serverProc) metric(ctx context.Context, name string) float64 {
	var text string
	if err := p.get(ctx, "/metrics", &text); err != nil {
		return -1
	}
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return -1
}

// agentStatus is what the API says of one agent.
type agentStatus struct {
	Name    string `json:"name"`
	Session string `json:"session_status"`
	Detail  string `json:"session_detail"`
}

// officeID returns the id of the server's only office.
func (p *serverProc) officeID(ctx context.Context) (string, error) {
	var offices []struct {
		ID string `json:"id"`
	}
	if err := p.get(ctx, "/api/offices", &offices); err != nil {
		return "", err
	}
	if len(offices) != 1 {
		return "", fmt.Errorf("%d offices, want 1", len(offices))
	}
	return offices[0].ID, nil
}

// tailBuf keeps the last max bytes written to it.
type tailBuf struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuf) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuf) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// writeOffice writes the office file: n agents named a00001…, each the
// load agent (or command, for a trivial agent) reporting to sock.
func writeOffice(path string, n int, agentBin, command, input, sock string) error {
	var b strings.Builder
	b.WriteString("office:\n  name: Load office\n  question_ttl: 30m\nagents:\n")
	for i := range n {
		name := agentName(i)
		fmt.Fprintf(&b, "  - name: %s\n    role: Load agent\n    capabilities: [ask_user, todowrite, todoread]\n    launch:\n      kind: command\n", name)
		if command != "" {
			fmt.Fprintf(&b, "      command: %s\n", command)
			continue
		}
		// The prompt pattern: ready when the prompt shows, not merely
		// after a quiet start (a loaded machine starts 1,000 agents slowly).
		if input == "" {
			input = "echo"
		}
		fmt.Fprintf(&b, "      command: %s\n      args: [agent, --name, %s, --input, %s, --report, %q]\n      prompt_pattern: '^>$'\n", agentBin, name, input, sock)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

func agentName(i int) string { return fmt.Sprintf("a%05d", i+1) }

// profiler records the server's CPU profile in 1 s pieces (Go profiles
// one window at a time) until stopped: DIR/<store>-<n>-<stage>-<k>.pprof,
// which go tool pprof reads together.
type profiler struct {
	stop chan struct{}
	done chan struct{}
}

// profile starts recording stage into dir; nil when dir is "".
func (p *serverProc) profile(ctx context.Context, dir, stage string) *profiler {
	if dir == "" {
		return nil
	}
	pr := &profiler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(pr.done)
		for k := 1; ; k++ {
			var body string
			if err := p.get(ctx, "/debug/pprof/profile?seconds=1", &body); err == nil {
				_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%03d.pprof", stage, k)), []byte(body), 0o644)
			}
			select {
			case <-pr.stop:
				return
			case <-ctx.Done():
				return
			default:
			}
		}
	}()
	return pr
}

// end stops recording after the current piece.
func (pr *profiler) end() {
	if pr == nil {
		return
	}
	close(pr.stop)
	<-pr.done
}
