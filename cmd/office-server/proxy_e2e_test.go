package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/proxy"
)

// The requests of docs/protocol.md, "Proxy requests", as seed 004 prints
// them, and variations on them.
var proxyRequests = map[string]string{
	// Seed 004's create_plan, exactly.
	"seed": `{
  "action": "create_plan",
  "requester": "senior-sw-engineer",
  "tasks": [
    {
      "content": "API 엔드포인트 구현",
      "priority": "high",
      "estimated_time": "2h",
      "dependencies": []
    }
  ],
  "preferences": {
    "preferred_proxy": "pm",
    "fallback_allowed": true
  }
}`,
	"second": `{
  "action": "create_plan",
  "requester": "senior-sw-engineer",
  "tasks": [
    {
      "content": "테스트 작성",
      "priority": "medium",
      "estimated_time": "1h",
      "dependencies": []
    }
  ],
  "preferences": {
    "preferred_proxy": "pm",
    "fallback_allowed": true
  }
}`,
	"planning": `{
  "action": "create_plan",
  "requester": "py-code-reviewer",
  "task_type": "planning",
  "tasks": [
    {
      "content": "리뷰 일정 계획",
      "priority": "low"
    }
  ]
}`,
	"insist": `{
  "action": "create_plan",
  "requester": "py-code-reviewer",
  "tasks": [
    {
      "content": "스타일 가이드 정리",
      "priority": "high"
    }
  ],
  "preferences": {
    "preferred_proxy": "pm",
    "fallback_allowed": false
  }
}`,
	"rmrf": `{
  "action": "create_plan",
  "requester": "senior-sw-engineer",
  "tasks": [
    {
      "content": "Free disk space: sudo rm -rf / --no-preserve-root",
      "priority": "high"
    }
  ]
}`,
	"key": `{
  "action": "create_plan",
  "requester": "senior-sw-engineer",
  "tasks": [
    {
      "content": "Deploy with AKIAIOSFODNN7EXAMPLE",
      "priority": "high"
    }
  ]
}`,
	"rrn": `{
  "action": "create_plan",
  "requester": "senior-sw-engineer",
  "tasks": [
    {
      "content": "고객 900101-1234567 주소 확인",
      "priority": "high"
    }
  ]
}`,
	"toxic": `{
  "action": "create_plan",
  "requester": "senior-sw-engineer",
  "tasks": [
    {
      "content": "리뷰어에게 죽어버려 라고 전해",
      "priority": "high"
    }
  ]
}`,
}

// requesterScript prints the request file named in a person's message
// ("SEND:<name>.") as a PROXY_REQUEST block, and logs every line typed
// into it.
const requesterScript = `dir=$1; log=$2
echo 'req>'
while IFS= read -r l; do
  printf '%s\n' "$l" >> "$log"
  for f in "$dir"/*.json; do
    n=$(basename "$f" .json)
    case "$l" in
      *"SEND:$n."*) printf '[PROXY_REQUEST]\n'; cat "$f"; printf '\n[/PROXY_REQUEST]\n';;
    esac
  done
  echo 'req>'
done
`

// proxyScript logs every line typed into it.
const proxyScript = `log=$1
echo 'proxy>'
while IFS= read -r l; do printf '%s\n' "$l" >> "$log"; echo 'proxy>'; done
`

// proxyOfficeRun is the built server running seed 004's office of
// command agents.
type proxyOfficeRun struct {
	dir, data, officeFile string
	bin                   string
	run                   *forwardRun
}

func (p *proxyOfficeRun) log(agent string) string { return filepath.Join(p.dir, agent+".log") }

// writeOffice writes the office file: the two requesters, and the proxies
// of the capability matrix unless requestersOnly (then the proxies are no
// longer declared, and the server disables them).
func (p *proxyOfficeRun) writeOffice(t *testing.T, requestersOnly bool) {
	t.Helper()
	req := filepath.Join(p.dir, "requester.sh")
	prx := filepath.Join(p.dir, "proxy.sh")
	for f, s := range map[string]string{req: requesterScript, prx: proxyScript} {
		if err := os.WriteFile(f, []byte(s), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	launchReq := func(name string) string {
		return fmt.Sprintf(`{kind: command, command: /bin/sh, args: [%q, %q, %q], prompt_pattern: "^req>$"}`, req, filepath.Join(p.dir, "requests"), p.log(name))
	}
	launchProxy := func(name string) string {
		return fmt.Sprintf(`{kind: command, command: /bin/sh, args: [%q, %q], prompt_pattern: "^proxy>$"}`, prx, p.log(name))
	}
	yaml := fmt.Sprintf(`office:
  name: Seed 004
agents:
  - name: senior-sw-engineer
    role: developer
    capabilities: [bash]
    launch: %s
  - name: py-code-reviewer
    role: reviewer
    launch: %s
`, launchReq("senior-sw-engineer"), launchReq("py-code-reviewer"))
	if !requestersOnly {
		yaml += fmt.Sprintf(`  - name: pm
    role: pm
    capabilities: [todowrite, todoread, bash]
    priority: 1
    expertise: [coding]
    max_load: 1
    launch: %s
  - name: general
    role: general
    capabilities: [todowrite, todoread, webfetch]
    priority: 2
    expertise: [research]
    launch: %s
  - name: planner
    role: planner
    capabilities: [todowrite, todoread]
    priority: 3
    expertise: [planning]
    launch: %s
`, launchProxy("pm"), launchProxy("general"), launchProxy("planner"))
	}
	if err := os.WriteFile(p.officeFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (p *proxyOfficeRun) start(t *testing.T, args ...string) {
	t.Helper()
	const token = "proxy-token-0123456789abcdef"
	f := &forwardRun{token: token}
	f.p = launchServer(t, p.bin, []string{"OFFICE_ADMIN_TOKEN=" + token}, append([]string{"--office", p.officeFile, "--data-dir", p.data}, args...)...)
	f.p.waitHealthy(t)
	var offices []struct{ ID string }
	f.api(t, "GET", "/api/offices", nil, &offices)
	if len(offices) != 1 {
		t.Fatalf("offices: %+v", offices)
	}
	f.officeID = offices[0].ID
	p.run = f
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", f.p.stderr.String())
		}
	})
}

// send has a person tell the requester to print request name.
func (p *proxyOfficeRun) send(t *testing.T, requester, name string) {
	t.Helper()
	if st := p.run.api(t, "POST", "/api/offices/"+p.run.officeID+"/messages", map[string]string{"agent": requester, "content": "SEND:" + name + "."}, nil); st != 201 {
		t.Fatalf("post message: %d", st)
	}
}

// lines waits until the agent's log has n lines containing sub, and
// returns them.
func (p *proxyOfficeRun) lines(t *testing.T, agent, sub string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(p.log(agent))
		var got []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, sub) {
				got = append(got, l)
			}
		}
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was typed %d lines with %q, want %d; its log:\n%s", agent, len(got), sub, n, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type e2eResponse struct {
	Success    bool     `json:"success"`
	Proxy      string   `json:"proxy"`
	Requester  string   `json:"requester"`
	TaskIDs    []string `json:"task_ids"`
	Status     string   `json:"status"`
	RequestID  string   `json:"request_id"`
	ExpiresAt  string   `json:"expires_at"`
	BackupFile string   `json:"backup_file"`
	Error      string   `json:"error"`
}

// response waits for the n-th [PROXY_RESPONSE] typed into the requester
// (its JSON is the line after the tag).
func (p *proxyOfficeRun) response(t *testing.T, requester string, n int) e2eResponse {
	t.Helper()
	got := p.lines(t, requester, `"requester":"`+requester+`"`, n)
	var r e2eResponse
	if err := json.Unmarshal([]byte(strings.TrimSpace(got[n-1])), &r); err != nil {
		t.Fatalf("response %q: %v", got[n-1], err)
	}
	return r
}

// TestProxyEndToEnd runs seed 004's office of command agents in the built
// binary, each printing the seed's JSON: pm (max_load 1) busy with one
// plan sends the next to general; task_type planning goes to the planner;
// a request insisting on busy pm is parked, survives a restart of the
// server and times out with a [PROXY_RESPONSE] naming its backup file;
// with the proxies gone a request is backed up at once; each content rule
// refuses its request.
func TestProxyEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	p := &proxyOfficeRun{dir: dir, data: filepath.Join(dir, "data"), officeFile: filepath.Join(dir, "office.yaml"), bin: buildServer(t)}
	if err := os.Mkdir(filepath.Join(dir, "requests"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range proxyRequests {
		if err := os.WriteFile(filepath.Join(dir, "requests", name+".json"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p.writeOffice(t, false)
	const wait = 20 * time.Second
	p.start(t, "--proxy-wait", wait.String())
	for _, a := range []string{"senior-sw-engineer", "py-code-reviewer", "pm", "general", "planner"} {
		p.run.waitReady(t, a)
	}

	// Load: pm holds the seed's plan, so the next one goes to general.
	p.send(t, "senior-sw-engineer", "seed")
	if r := p.response(t, "senior-sw-engineer", 1); !r.Success || r.Proxy != "pm" || len(r.TaskIDs) != 1 || !strings.HasPrefix(r.TaskIDs[0], "sse-") {
		t.Fatalf("seed request: %+v", r)
	}
	p.lines(t, "pm", "API 엔드포인트 구현", 1)
	p.send(t, "senior-sw-engineer", "second")
	if r := p.response(t, "senior-sw-engineer", 2); !r.Success || r.Proxy != "general" {
		t.Fatalf("second request while pm (max_load 1) is busy: %+v", r)
	}
	p.lines(t, "general", "테스트 작성", 1)

	// Expertise by task type, without a strategy.
	p.send(t, "py-code-reviewer", "planning")
	if r := p.response(t, "py-code-reviewer", 1); !r.Success || r.Proxy != "planner" {
		t.Fatalf("task_type planning: %+v", r)
	}

	// Parked: it waits for pm.
	p.send(t, "py-code-reviewer", "insist")
	parked := p.response(t, "py-code-reviewer", 2)
	if parked.Success || parked.Status != "parked" || parked.Proxy != "pm" || parked.ExpiresAt == "" {
		t.Fatalf("insisting on busy pm: %+v", parked)
	}
	expires, err := time.Parse(time.RFC3339, parked.ExpiresAt)
	if err != nil {
		t.Fatal(err)
	}

	// The server restarts while the request waits.
	p.run.p.stop(t)
	if time.Now().After(expires) {
		t.Fatalf("the parked request expired (%s) before the restart: the machine is too slow for this test's %s", parked.ExpiresAt, wait)
	}
	p.start(t, "--proxy-wait", wait.String())
	p.run.waitReady(t, "senior-sw-engineer")

	p.contentRules(t) // while the parked request waits

	timedOut := p.response(t, "py-code-reviewer", 3)
	if timedOut.Success || timedOut.Status != "timed_out" || timedOut.RequestID != parked.RequestID || timedOut.BackupFile == "" {
		t.Fatalf("after the restart and the wait: %+v", timedOut)
	}
	checkBackupFile(t, timedOut, p.data, "스타일 가이드 정리")
	p.run.p.stop(t)

	p.proxiesGone(t)
}

// contentRules: each content rule refuses its request, named; a refused
// request is not answered.
func (p *proxyOfficeRun) contentRules(t *testing.T) {
	for i, c := range []struct{ req, rule string }{
		{"rmrf", "command.rm-root"}, {"key", "credential.aws-key"}, {"rrn", "personal.rrn"}, {"toxic", "toxic.threat"},
	} {
		p.send(t, "senior-sw-engineer", c.req)
		got := p.lines(t, "senior-sw-engineer", "was refused", i+1)
		if !strings.Contains(got[i], "rule "+c.rule) {
			t.Errorf("%s refused as %q, want rule %s", c.req, got[i], c.rule)
		}
	}
	if got := p.lines(t, "senior-sw-engineer", `"requester":"senior-sw-engineer"`, 2); len(got) != 2 {
		t.Errorf("a refused request was answered: %q", got)
	}

}

// proxiesGone: with the proxies gone from the office, a request is backed
// up at once, and a person is asked about it once.
func (p *proxyOfficeRun) proxiesGone(t *testing.T) {
	p.writeOffice(t, true)
	p.start(t)
	p.run.waitReady(t, "senior-sw-engineer")
	p.send(t, "senior-sw-engineer", "seed")
	backed := p.response(t, "senior-sw-engineer", 3)
	if backed.Success || backed.Status != "backed_up" || backed.BackupFile == "" || !strings.Contains(backed.Error, "no proxy can take it") {
		t.Fatalf("with no proxy: %+v", backed)
	}
	checkBackupFile(t, backed, p.data, "API 엔드포인트 구현")
	var qs []struct {
		Category string `json:"category"`
		Question string `json:"question"`
	}
	p.run.api(t, "GET", "/api/offices/"+p.run.officeID+"/questions?status=pending", nil, &qs)
	asked := 0
	for _, q := range qs {
		if q.Category == "proxy" && strings.Contains(q.Question, backed.BackupFile) {
			asked++
		}
	}
	if asked != 1 {
		t.Errorf("a person was asked %d times about %s: %+v", asked, backed.BackupFile, qs)
	}
	p.run.p.stop(t)
}

// checkBackupFile reads the backup file a response names: under the data
// dir, private, holding the request as printed and the reason.
func checkBackupFile(t *testing.T, r e2eResponse, data, content string) {
	t.Helper()
	abs, _ := filepath.Abs(data)
	if !strings.HasPrefix(r.BackupFile, abs+string(filepath.Separator)) {
		t.Errorf("backup file %s is not under the data dir %s", r.BackupFile, abs)
	}
	fi, err := os.Stat(r.BackupFile)
	if err != nil {
		t.Fatalf("backup file: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("backup file mode %v, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(r.BackupFile)
	var f struct {
		RequestID string          `json:"request_id"`
		Reason    string          `json:"reason"`
		Request   json.RawMessage `json:"request"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("backup %s: %v", b, err)
	}
	if f.RequestID != r.RequestID || f.Reason == "" || !strings.Contains(string(f.Request), content) {
		t.Errorf("backup file %s:\n%s", r.BackupFile, b)
	}
}

// TestContentRulesFlag: --content-rules adds rules, replaces or turns off
// built-in ones; a bad file stops the server at start naming its line.
func TestContentRulesFlag(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "rules.txt")
	if err := os.WriteFile(good, []byte("# ours\ncustom.codename  (?i)project\\s+nightjar\n!personal.ssn\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rules, err := contentRules(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := proxy.CheckContent("about Project Nightjar", "task 1", rules); err == nil || !strings.Contains(err.Error(), "custom.codename") {
		t.Errorf("added rule: %v", err)
	}
	if err := proxy.CheckContent("123-45-6789", "task 1", rules); err != nil {
		t.Errorf("rule turned off: %v", err)
	}
	if err := proxy.CheckContent("rm -rf /", "task 1", rules); err == nil {
		t.Error("built-in rules lost")
	}
	if testing.Short() {
		return
	}
	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte("custom.ok x\ncustom.broken (\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := launchServer(t, buildServer(t), nil, "--data-dir", filepath.Join(dir, "data"), "--content-rules", bad)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the server started with a bad rules file")
	}
	if p.err == nil || !strings.Contains(p.stderr.String(), "line 2") || !strings.Contains(p.stderr.String(), bad) {
		t.Fatalf("exit %v; stderr:\n%s", p.err, p.stderr.String())
	}
}
