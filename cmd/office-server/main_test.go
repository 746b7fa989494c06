package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/server"
)

// TestMain lets the test binary act as the builtin agents: the server runs
// its own executable (here, this test binary) as `agent --script NAME`.
func TestMain(m *testing.M) {
	if code, ok := keeperMain(os.Args[1:]); ok {
		os.Exit(code)
	}
	if code, ok := hookMain(os.Args[1:]); ok {
		os.Exit(code)
	}
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// lockedBuf collects output written from several goroutines.
type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// testOffice is an office file with a fast po and an echo agent.
const testOffice = `
office:
  name: Test office
agents:
  - name: po
    role: Product owner
    launch: {kind: builtin, script: po, args: [--step, 100ms]}
  - name: dev
    role: Developer
    launch: {kind: builtin, script: dev, args: [--step, 100ms]}
  - name: echo
    role: Echo
    launch: {kind: builtin, script: echo}
`

// liveServer is a Main serving in the background for a test.
type liveServer struct {
	m     *Main
	base  string
	token string
	logs  *lockedBuf
	out   *lockedBuf
	stop  func() error
}

// startMain runs the serve command on the embedded store with the test
// office until the test ends.
func startMain(t *testing.T, extra ...string) *liveServer {
	t.Helper()
	dir := t.TempDir()
	officePath := filepath.Join(dir, "office.yaml")
	if err := os.WriteFile(officePath, []byte(testOffice), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseServeConfig(append([]string{"--data-dir", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0", "--office", officePath, "--shutdown-timeout", "10s"}, extra...),
		func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return runMain(t, cfg, filepath.Join(dir, "data"))
}

// runMain runs the serve command with cfg in the background until the test
// ends, waits until it listens, and reads the admin token it keeps in
// dataDir. Its cleanup stops the server (and prints its logs when the test
// failed); registered after the caller's own cleanups, it runs before them.
func runMain(t *testing.T, cfg serveConfig, dataDir string) *liveServer {
	t.Helper()
	r := &liveServer{logs: &lockedBuf{}, out: &lockedBuf{}}
	r.m = &Main{Config: cfg, Stdout: r.out, Stderr: r.logs}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.m.Run(ctx) }()
	var once sync.Once
	var stopErr error
	r.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(30 * time.Second):
				stopErr = fmt.Errorf("serve did not stop within 30s")
			}
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
		if t.Failed() {
			t.Logf("server logs:\n%s", r.logs.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for r.m.Addr() == nil {
		select {
		case err := <-done:
			t.Fatalf("serve ended: %v\n%s", err, r.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not listen")
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.base = "http://" + r.m.Addr().String()
	tok, err := os.ReadFile(filepath.Join(dataDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	r.token = strings.TrimSpace(string(tok))
	return r
}

// client calls r's API as the admin.
func (r *liveServer) client(t *testing.T) apiClient {
	return apiClient{t: t, base: r.base, token: r.token}
}

// get decodes a GET of the API, which must answer 200, into v.
func (r *liveServer) get(t *testing.T, path string, v any) {
	t.Helper()
	r.client(t).get(path, v)
}

// officeID returns the one office's id.
func (r *liveServer) officeID(t *testing.T) string {
	t.Helper()
	var offices []struct{ ID string }
	r.get(t, "/api/offices", &offices)
	if len(offices) != 1 {
		t.Fatalf("offices = %+v, want one", offices)
	}
	return offices[0].ID
}

// agentID returns the id of the named agent.
func (r *liveServer) agentID(t *testing.T, officeID, name string) string {
	t.Helper()
	var a office.Agent
	r.get(t, "/api/offices/"+officeID+"/agents/"+name, &a)
	return a.ID
}

// waitAgent waits until the named agent's session runs and returns its id.
func (r *liveServer) waitAgent(t *testing.T, officeID, name string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var agents []struct {
			ID      string `json:"id"`
			Name    string `json:"name"`
			Session string `json:"session_status"`
		}
		r.get(t, "/api/offices/"+officeID+"/agents", &agents)
		for _, a := range agents {
			if a.Name == name && (a.Session == office.SessionReady || a.Session == office.SessionBusy) {
				return a.ID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %s not running after 20s: %+v", name, agents)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// replay returns what a console viewer of the agent receives in its
// first moments: the scrollback replay.
func (r *liveServer) replay(t *testing.T, officeID, agent string) string {
	t.Helper()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+r.token)
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(r.base, "http")+"/ws/offices/"+officeID+"/agents/"+agent, h)
	if err != nil {
		t.Fatalf("console: %v", err)
	}
	defer ws.Close()
	var out strings.Builder
	_ = ws.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	for {
		_, p, err := ws.ReadMessage()
		if err != nil {
			return out.String()
		}
		if len(p) > 0 && p[0] == server.FrameOutput {
			out.Write(p[1:])
		}
	}
}

// waitQuestion waits for a question of the office in the given status.
func (r *liveServer) waitQuestion(t *testing.T, officeID, status string, timeout time.Duration) office.Question {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var qs []office.Question
		r.get(t, "/api/offices/"+officeID+"/questions?status="+status, &qs)
		if len(qs) > 0 {
			return qs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s question within %v", status, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestParseOfficeFile(t *testing.T) {
	tests := []struct{ name, yaml, err string }{
		{"ok", testOffice, ""},
		{"no office name", "agents: []", "office.name: required"},
		{"unknown key", "office: {name: x}\nagents: [{name: a, colour: red}]", `line 2: unknown key "colour" in agents[0]; valid keys: allowed_actions,`},
		{"typo", "office:\n  name: x\n  question_tll: 10m", `f.yaml: line 3: unknown key "question_tll" in office (did you mean "question_ttl"?); valid keys: hibernate_after, name, permissions, question_ttl`},
		{"typo in launch", "office: {name: x}\nagents:\n  - name: a\n    launch: {kind: builtin, scrpt: po}", `line 4: unknown key "scrpt" in agents[0].launch (did you mean "script"?)`},
		{"bad duration", "office:\n  name: x\n  question_ttl: 10 min", "line 3: `10 min` is not a duration (write it like 30s, 10m or 1h30m)"},
		{"duplicate", "office: {name: x}\nagents: [{name: a}, {name: A}]", `agent "A" declared twice`},
		{"bad kind", "office: {name: x}\nagents: [{name: a, launch: {kind: docker}}]", `launch.kind: unknown kind "docker"`},
		{"builtin without script", "office: {name: x}\nagents: [{name: a, launch: {kind: builtin}}]", "launch: kind builtin needs a script"},
		{"command without command", "office: {name: x}\nagents: [{name: a, launch: {kind: command}}]", "launch: kind command needs a command"},
		{"no agent name", "office: {name: x}\nagents: [{role: a}]", "agents[0]: name is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, agents, err := parseOfficeFile("f.yaml", []byte(tt.yaml))
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if o.Name != "Test office" || len(agents) != 3 || agents[0].Launch.Script != "po" || agents[0].Launch.Args[1] != "100ms" {
					t.Fatalf("parsed %+v %+v", o, agents)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("err = %v, want %q", err, tt.err)
			}
		})
	}
}

// TestExampleOffices: the office files in examples/ parse.
func TestExampleOffices(t *testing.T) {
	for _, name := range []string{"demo-office.yaml", "claude-office.yaml"} {
		o, agents, err := loadOfficeFile(filepath.Join(testenv.RepoRoot(), "examples", name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if o.Name == "" || len(agents) < 2 {
			t.Fatalf("%s: office %+v with %d agents", name, o, len(agents))
		}
	}
}

// TestOfficeFilePermissions: the office's permission policy is every
// agent's default (rules added, the agent's timeout wins); a rule that is
// not one, or a timeout out of range, is an error naming the place.
func TestOfficeFilePermissions(t *testing.T) {
	_, agents, err := parseOfficeFile("o.yaml", []byte(`office:
  name: O
  permissions: {timeout: 2m, deny: ["Bash(git push:*)"]}
agents:
  - name: a
    launch: {permissions: {allow: ["Bash(go test:*)", "Read"], timeout: 30s}}
  - name: b
`))
	if err != nil {
		t.Fatal(err)
	}
	a, b := agents[0].Launch.Permissions, agents[1].Launch.Permissions
	if a == nil || strings.Join(a.Allow, ",") != "Bash(go test:*),Read" || strings.Join(a.Deny, ",") != "Bash(git push:*)" || a.Timeout != 30*time.Second {
		t.Errorf("agent a's policy %+v", a)
	}
	if b == nil || len(b.Allow) != 0 || strings.Join(b.Deny, ",") != "Bash(git push:*)" || b.Timeout != 2*time.Minute {
		t.Errorf("agent b's policy %+v", b)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"office: {name: O}\nagents: [{name: a, launch: {permissions: {allow: [\"rm -rf /\"]}}}]", `permissions.allow[0] "rm -rf /": not a permission rule`},
		{"office: {name: O, permissions: {ask: [\"\"]}}", `office.permissions.ask[0]`},
		{"office: {name: O}\nagents: [{name: a, launch: {permissions: {timeout: 48h}}}]", `permissions.timeout 48h0m0s`},
		{"office: {name: O}\nagents: [{name: a, launch: {permissions: {allow_all: true}}}]", `unknown key "allow_all" in agents[0].launch.permissions; valid keys: allow, ask, deny, timeout`},
	} {
		if _, _, err := parseOfficeFile("o.yaml", []byte(bad.yaml)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: err %v, want %q", bad.yaml, err, bad.want)
		}
	}
}

func TestParseServeConfig(t *testing.T) {
	env := map[string]string{"OFFICE_ADDR": "127.0.0.1:9", "OFFICE_ADMIN_TOKEN": "tok", "OFFICE_ALLOWED_ORIGINS": "http://a, http://b"}
	c, err := parseServeConfig([]string{"--data-dir", "/x"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:9" || c.DataDir != "/x" || c.AdminToken != "tok" || len(c.Origins) != 2 || c.storeKind() != "sqlite" {
		t.Fatalf("config = %+v", c)
	}
	if c, _ := parseServeConfig(nil, func(string) string { return "" }, io.Discard); c.Addr != "127.0.0.1:8080" || c.DataDir != "./data" {
		t.Fatalf("defaults = %+v", c)
	}
	env = map[string]string{"SUPABASE_URL": "https://x"}
	if _, err := parseServeConfig(nil, func(k string) string { return env[k] }, io.Discard); err == nil || !strings.Contains(err.Error(), "SUPABASE_SERVICE_ROLE_KEY") {
		t.Fatalf("supabase without key: err = %v", err)
	}
}

func TestSecretFile(t *testing.T) {
	dir := t.TempDir()
	v1, created, err := secretFile(dir, "k", func() string { return "one" })
	if err != nil || !created || v1 != "one" {
		t.Fatalf("first = %q %v %v", v1, created, err)
	}
	fi, _ := os.Stat(filepath.Join(dir, "k"))
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	v2, created, err := secretFile(dir, "k", func() string { return "two" })
	if err != nil || created || v2 != "one" {
		t.Fatalf("second = %q %v %v, want the kept one", v2, created, err)
	}
}

// TestAgentLifecycleAPI stops, starts and restarts an agent through the
// API and types into it, against the real session layer.
func TestAgentLifecycleAPI(t *testing.T) {
	r := startMain(t)
	oid := r.officeID(t)
	r.waitAgent(t, oid, "echo")
	post := func(path, body string) int {
		t.Helper()
		return r.client(t).do("POST", path, body, nil)
	}
	status := func() string {
		var a struct {
			Session string `json:"session_status"`
		}
		r.get(t, "/api/offices/"+oid+"/agents/echo", &a)
		return a.Session
	}
	waitStatus := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			got := status()
			for _, w := range want {
				if got == w {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("echo session %q, want %v", got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if st := post("/api/offices/"+oid+"/agents/echo/stop", ""); st != http.StatusAccepted {
		t.Fatalf("stop = %d", st)
	}
	waitStatus(office.SessionStopped)
	if st := post("/api/offices/"+oid+"/agents/echo/input", `{"text":"hi"}`); st != http.StatusServiceUnavailable {
		t.Fatalf("input to a stopped agent = %d, want 503", st)
	}
	if st := post("/api/offices/"+oid+"/agents/echo/start", ""); st != http.StatusAccepted {
		t.Fatalf("start = %d", st)
	}
	waitStatus(office.SessionReady, office.SessionBusy)
	if st := post("/api/offices/"+oid+"/agents/echo/restart", ""); st != http.StatusAccepted {
		t.Fatalf("restart = %d", st)
	}
	waitStatus(office.SessionReady, office.SessionBusy)
	if st := post("/api/offices/"+oid+"/agents/echo/input", `{"text":"typed through the API"}`); st != http.StatusAccepted {
		t.Fatalf("input = %d", st)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(r.replay(t, oid, "echo"), "echo: typed through the API") {
		if time.Now().After(deadline) {
			t.Fatalf("the agent never echoed the API input:\n%s", r.replay(t, oid, "echo"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st := post("/api/offices/"+oid+"/agents/nobody/start", ""); st != http.StatusNotFound {
		t.Fatalf("start unknown agent = %d, want 404", st)
	}
}

// TestServePostgres runs the serve command on a fresh PostgreSQL database
// (migrations applied at start, LISTEN/NOTIFY change feed): ready, and the
// demo round trip works.
func TestServePostgres(t *testing.T) {
	url := testenv.NewDatabase(t)
	r := startMain(t, "--database-url", url)
	demoRoundTrip(t, r)
}

// demoRoundTrip waits until r is ready, answers the test office's first
// question through the API, and waits until po's task to dev, carrying the
// answer, is completed: the answer reaches po through the change feed.
func demoRoundTrip(t *testing.T, r *liveServer) {
	t.Helper()
	oid := r.officeID(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := apiClient{t: t, base: r.base}.do("GET", "/readyz", nil, nil)
		if st == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d on postgres", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	q := r.waitQuestion(t, oid, office.QuestionPending, 20*time.Second)
	if st, b := r.client(t).text("POST", "/api/questions/"+q.ID+"/answer", `{"response":"Login page"}`); st != 200 {
		t.Fatalf("answer = %d %s", st, b)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		var invs []office.Invocation
		r.get(t, "/api/offices/"+oid+"/invocations?status=completed", &invs)
		if len(invs) > 0 && strings.Contains(invs[0].Reason, "Login page") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no completed invocation on postgres")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestHelp: help, -h and --help list the subcommands and exit 0; a
// command's --help prints its flags and exits 0.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		var out, errOut strings.Builder
		if code := run(context.Background(), args, strings.NewReader(""), &out, &errOut); code != 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut.String())
		}
		for _, want := range []string{"serve ", "migrate ", "parse ", "agent ", "version "} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: output does not list %q:\n%s", args, want, out.String())
			}
		}
	}
	var out, errOut strings.Builder
	if code := run(context.Background(), []string{"serve", "--help"}, strings.NewReader(""), &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "-addr") {
		t.Errorf("serve --help: exit %d, stderr %q", code, errOut.String())
	}
	if code := run(context.Background(), []string{"bogus"}, strings.NewReader(""), &out, &errOut); code != 2 {
		t.Errorf("an unknown command exits %d, want 2", code)
	}
}

// TestAnnounceTokenModes: the start-up line says where the token is in
// each mode: shown once when made, in the data directory's file after,
// the operator's own with OFFICE_ADMIN_TOKEN (no file named, none made).
func TestAnnounceTokenModes(t *testing.T) {
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	for _, tt := range []struct {
		name, envToken string
		created        bool
		want, not      string
	}{
		{"first start", "", true, "office console: http://127.0.0.1:8080/?token=abc123\n(the token is kept in /d/admin-token; it is not shown again)", ""},
		{"later start", "", false, "office console: http://127.0.0.1:8080/?token=<the token in /d/admin-token>", "abc123"},
		{"OFFICE_ADMIN_TOKEN", "abc123", false, "office console: http://127.0.0.1:8080/?token=<the value of OFFICE_ADMIN_TOKEN>", "admin-token"},
	} {
		var out strings.Builder
		m := &Main{Config: serveConfig{DataDir: "/d", AdminToken: tt.envToken}, Stdout: &out}
		m.announce(addr, "abc123", tt.created, slog.New(slog.DiscardHandler))
		if !strings.Contains(out.String(), tt.want) || tt.not != "" && strings.Contains(out.String(), tt.not) {
			t.Errorf("%s: printed %q, want %q without %q", tt.name, out.String(), tt.want, tt.not)
		}
	}
}
