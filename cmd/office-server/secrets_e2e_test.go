package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/internal/testenv"
)

// spyOffice is an office of one command agent that writes what it was
// given (two env values and an argument) to a file and then waits at its
// prompt: the env holds a ${NAME} reference and a literal, the argument a
// reference.
func spyOffice(t *testing.T, out string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "office.yaml")
	y := fmt.Sprintf(`office: {name: Secrets}
agents:
  - name: spy
    launch:
      kind: command
      command: /bin/sh
      args: [-c, 'printf "%%s|%%s|%%s" "$TOKEN" "$LIT" "$1" > "$OUT"; echo "spy>"; while read l; do echo "spy>"; done', sh, "${OFFICE_TEST_ARG}"]
      env: {TOKEN: "${OFFICE_TEST_TOKEN}", LIT: literal-canary-3f9a, OUT: %q}
      prompt_pattern: "^spy>$"
`, out)
	if err := os.WriteFile(f, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// waitFile waits for path to exist with content and returns it.
func waitFile(t *testing.T, p *serverProc, path string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never written; logs:\n%s", path, p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLaunchSecretsNotStored: with the built server on SQLite, an agent
// gets the server's environment for its ${NAME} references (env and args)
// and its literal env value; the admin API and the database file hold the
// references and a sealed value, never one of the three values. With
// --node, agent_sessions.node names the server.
func TestLaunchSecretsNotStored(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildServer(t)
	data := t.TempDir()
	got := filepath.Join(t.TempDir(), "got.txt")
	p := launchServer(t, bin, []string{"OFFICE_TEST_TOKEN=env-canary-71c2", "OFFICE_TEST_ARG=arg-canary-0d4e"},
		"--office", spyOffice(t, got), "--data-dir", data, "--node", "node-spy-1")
	p.waitHealthy(t)
	if s := waitFile(t, p, got); s != "env-canary-71c2|literal-canary-3f9a|arg-canary-0d4e" {
		t.Fatalf("the agent got %q", s)
	}
	token := regexp.MustCompile(`\?token=([0-9a-f]+)`).FindStringSubmatch(p.stdout.String())
	if token == nil {
		t.Fatalf("no token printed: %s", p.stdout.String())
	}
	api := apiClient{t: t, base: p.base, token: token[1]}
	var offices []struct{ ID string }
	if api.get("/api/offices", &offices); len(offices) != 1 {
		t.Fatalf("offices: %+v", offices)
	}
	_, agents := api.text("GET", "/api/offices/"+offices[0].ID+"/agents", nil)
	for _, want := range []string{`${OFFICE_TEST_TOKEN}`, `${OFFICE_TEST_ARG}`, `"LIT":"sealed:`} {
		if !strings.Contains(agents, want) {
			t.Errorf("the agents' launch spec lacks %s: %s", want, agents)
		}
	}
	var rows []struct {
		Node string `json:"node"`
	}
	pollUntil(t, "agent_sessions.node", func() bool {
		api.do("GET", "/api/offices/"+offices[0].ID+"/sessions", nil, &rows)
		return len(rows) == 1 && rows[0].Node == "node-spy-1"
	})
	p.stop(t)
	canaries := []string{"env-canary-71c2", "literal-canary-3f9a", "arg-canary-0d4e"}
	for _, c := range canaries {
		if strings.Contains(agents, c) {
			t.Errorf("the admin API shows %s", c)
		}
	}
	files, _ := filepath.Glob(filepath.Join(data, "office.db*"))
	if len(files) == 0 {
		t.Fatal("no database file")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range canaries {
			if bytes.Contains(b, []byte(c)) {
				t.Errorf("%s holds %s in clear", f, c)
			}
		}
	}
}

// TestPostgresNodeMetricsLogs: the built server on PostgreSQL, with --node.
// Every session row it writes names the node; its literal launch env is
// sealed in the row; /metrics has the build, the leases, the store's
// requests, the HTTP requests by route and status, the events by kind
// and the change feed's reconnections (one, after the test ends the
// feed's connection); at the default level the log has a line per agent
// start and ready with its name and none per HTTP request.
func TestPostgresNodeMetricsLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildServer(t)
	url := testenv.NewDatabase(t)
	data := t.TempDir()
	got := filepath.Join(t.TempDir(), "got.txt")
	env := []string{"DATABASE_URL=" + url, "OFFICE_SECRETS_KEY=" + strings.Repeat("ab", 32), "OFFICE_TEST_TOKEN=t", "OFFICE_TEST_ARG=a"}
	p := launchServer(t, bin, env, "--office", spyOffice(t, got), "--data-dir", data, "--node", "pg-node-7")
	p.waitHealthy(t)
	waitFile(t, p, got)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	pollUntil(t, "agent_sessions.node on postgres", func() bool {
		var node string
		err := conn.QueryRow(ctx, `select s.node from agent_sessions s join office_agents a on a.id = s.agent_id where a.name = 'spy'`).Scan(&node)
		return err == nil && node == "pg-node-7"
	})
	var lit string
	if err := conn.QueryRow(ctx, `select launch_spec #>> '{env,LIT}' from office_agents where name = 'spy'`).Scan(&lit); err != nil || !strings.HasPrefix(lit, "sealed:") {
		t.Errorf("launch_spec env LIT = %q, %v; want it sealed", lit, err)
	}
	// End the server's connections, the change feed's among them: the
	// server connects again and counts it.
	var ended int
	if err := conn.QueryRow(ctx, `select count(pg_terminate_backend(pid)) from pg_stat_activity
		where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend'`).Scan(&ended); err != nil || ended == 0 {
		t.Fatalf("end the feed's connection: %d ended, %v", ended, err)
	}
	metrics := func() string {
		res, err := http.Get(p.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	var m string
	pollUntil(t, "office_change_feed_reconnects_total 1 and spy ready", func() bool {
		m = metrics()
		return strings.Contains(m, "office_change_feed_reconnects_total 1") && strings.Contains(m, `office_sessions{status="ready"} 1`) &&
			strings.Contains(m, `office_events_total{kind="session.ready"}`)
	})
	for _, re := range []string{
		`office_build_info\{goversion="go[0-9.]+",revision="[0-9a-f]*",version="[^"]+"\} 1`,
		`office_leases_held 1`,
		`office_leases_gained_total 1`,
		`office_leases_lost_total 0`,
		`office_store_request_seconds_count\{op="ListDue"\} [1-9]`,
		`office_store_request_seconds_count\{op="(AppendEvent|SetSessionStatus)"\} [1-9]`,
		`office_store_errors_total\{code="not_found",op="GetSessionByAgent"\} [1-9]`,
		`office_http_requests_total\{route="GET /healthz",status="200"\} [1-9]`,
		`office_http_request_seconds_count\{route="GET /healthz"\} [1-9]`,
		`office_events_total\{kind="session.ready"\} [1-9]`,
		`office_sessions\{status="ready"\} 1`,
	} {
		if !regexp.MustCompile(re).MatchString(m) {
			t.Errorf("/metrics lacks %s", re)
		}
	}
	if strings.Contains(m, `office_messages_total{kind="session.`) {
		t.Error("office_messages_total counts session events")
	}
	logs := p.stderr.String()
	for _, re := range []string{`msg="agent starting".* office_name=Secrets .*agent_name=spy`, `msg="agent ready".* office_name=Secrets .*agent_name=spy`} {
		if !regexp.MustCompile(re).MatchString(logs) {
			t.Errorf("the log lacks %s:\n%s", re, logs)
		}
	}
	if strings.Contains(logs, "msg=http ") {
		t.Errorf("HTTP requests logged at info level:\n%s", logs)
	}
	p.stop(t)
}

// pollUntil polls cond for up to 20 s.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
