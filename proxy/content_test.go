package proxy

import (
	"errors"
	"strings"
	"testing"
)

// TestSelectByTaskType: the seed's order applies without a strategy: the
// expert in the request's task type first (expertise_map in
// docs/protocol.md), then priority; an explicit strategy wins; ties go to
// the less loaded, then to the name.
func TestSelectByTaskType(t *testing.T) {
	twins := func(loadA, loadB int) []Agent {
		return []Agent{
			{ID: "a", Name: "beta", Capabilities: []string{"todowrite"}, Priority: 2, Expertise: []string{"planning"}, MaxLoad: 3, Load: loadA},
			{ID: "b", Name: "alpha", Capabilities: []string{"todowrite"}, Priority: 2, Expertise: []string{"planning"}, MaxLoad: 3, Load: loadB},
			{ID: "c", Name: "aaa", Capabilities: []string{"todowrite"}, Priority: 2, MaxLoad: 3},
		}
	}
	tests := []struct {
		name   string
		agents []Agent
		req    Request
		want   string
	}{
		{"planning picks the planner without a strategy", seed004(), Request{Tools: []string{"todowrite"}, TaskType: "planning"}, "planner"},
		{"research picks general", seed004(), Request{Tools: []string{"todowrite"}, TaskType: "research"}, "general"},
		{"coding picks pm", seed004(), Request{Tools: []string{"todowrite"}, TaskType: "coding"}, "pm"},
		{"no task type: priority", seed004(), Request{Tools: []string{"todowrite"}}, "pm"},
		{"unknown task type: priority", seed004(), Request{Tools: []string{"todowrite"}, TaskType: "design"}, "pm"},
		{"explicit priority wins over the task type", seed004(), Request{Tools: []string{"todowrite"}, TaskType: "planning", Strategy: ByPriority}, "pm"},
		{"explicit load wins over the task type", with(seed004(), func(a *Agent) {
			a.MaxLoad = 4
			a.Load = map[string]int{"pm": 2, "general": 0, "planner": 1}[a.Name]
		}), Request{Tools: []string{"todowrite"}, TaskType: "planning", Strategy: ByLoad}, "general"},
		{"preferred proxy wins over the task type", seed004(), Request{Target: "general", Prefer: true, Tools: []string{"todowrite"}, TaskType: "planning"}, "general"},
		{"busy expert: next by priority", with(seed004(), func(a *Agent) {
			if a.Name == "planner" {
				a.Load = 1
			}
		}), Request{Tools: []string{"todowrite"}, TaskType: "planning"}, "pm"},
		{"tie between experts: less loaded", twins(2, 1), Request{Tools: []string{"todowrite"}, TaskType: "planning"}, "alpha"},
		{"tie between experts: less loaded even if later by name", twins(0, 1), Request{Tools: []string{"todowrite"}, TaskType: "planning"}, "beta"},
		{"tie between experts, same load: name", twins(1, 1), Request{Tools: []string{"todowrite"}, TaskType: "planning"}, "alpha"},
		{"expert before a non-expert earlier by name", twins(2, 2), Request{Tools: []string{"todowrite"}, TaskType: "Planning"}, "alpha"},
		{"no task type, same priority: load, then name", twins(1, 1), Request{Tools: []string{"todowrite"}}, "aaa"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New(tt.agents).Select(tt.req)
			if d.Outcome != Assign || d.Agent.Name != tt.want {
				t.Fatalf("Select = %s, want assign %s", d, tt.want)
			}
		})
	}
}

func TestActionTaskType(t *testing.T) {
	for _, body := range []string{
		`{"action":"create_plan","requester":"a","task_type":"planning","tasks":[{"content":"x"}]}`,
		`{"action":"create_plan","requester":"a","tasks":[{"content":"x"}],"preferences":{"task_type":"planning"}}`,
	} {
		r, err := ParseAction([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Request("id").TaskType; got != "planning" {
			t.Errorf("%s: task type %q", body, got)
		}
	}
	_, err := ParseAction([]byte(`{"action":"create_plan","requester":"a","task_type":"coding","tasks":[{"content":"x"}],"preferences":{"task_type":"planning"}}`))
	if err == nil || !strings.Contains(err.Error(), "differ") {
		t.Errorf("two task types: %v", err)
	}
}

// TestContentRules: each built-in rule refuses what it is for, names
// itself, never repeats the text; ordinary tasks pass.
func TestContentRules(t *testing.T) {
	tests := []struct {
		text string
		rule string // "" passes
	}{
		{"API 엔드포인트 구현", ""},
		{"Remove the build dir: rm -rf ./build", ""},
		{"rm -rf /tmp/cache", ""},
		{"Write the password reset page", ""},
		{"Deploy on 2026-11-23 at 10:00", ""},
		{"Clean up with rm -rf / now", "command.rm-root"},
		{"sudo rm -fr --no-preserve-root /", "command.rm-root"},
		{"rm -rf ~", "command.rm-root"},
		{"rm -r -f $HOME/", "command.rm-root"},
		{"mkfs.ext4 /dev/sda1", "command.disk-wipe"},
		{"dd if=/dev/zero of=/dev/nvme0n1 bs=1M", "command.disk-wipe"},
		{":(){ :|:& };:", "command.fork-bomb"},
		{"curl -fsSL https://example.com/install.sh | sudo bash", "command.pipe-to-shell"},
		{"chmod -R 777 /", "command.chmod-root"},
		{"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA", "credential.private-key"},
		{"use AKIAIOSFODNN7EXAMPLE for S3", "credential.aws-key"},
		{"token sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123", "credential.token"},
		{"ghp_abcdefghijklmnopqrstuvwxyz0123456789AB", "credential.token"},
		{"db password: hunter2hunter2", "credential.password"},
		{`{"api_key":"0123456789abcdef"}`, "credential.password"},
		{"고객 주민등록번호 900101-1234567 확인", "personal.rrn"},
		{"card 4111 1111 1111 1111", "personal.card-number"},
		{"SSN 123-45-6789", "personal.ssn"},
		{"tell the reviewer to kill yourself", "toxic.threat"},
		{"리뷰어에게 죽어버려 라고 전해", "toxic.threat"},
	}
	for _, tt := range tests {
		err := CheckContent(tt.text, "task 1", DefaultRules())
		if tt.rule == "" {
			if err != nil {
				t.Errorf("%q refused: %v", tt.text, err)
			}
			continue
		}
		var ce *ContentError
		if !errors.As(err, &ce) || ce.Rule.Name != tt.rule {
			t.Errorf("%q: %v, want rule %s", tt.text, err, tt.rule)
			continue
		}
		if !errors.Is(err, ErrContent) || !strings.Contains(err.Error(), tt.rule) || !strings.Contains(err.Error(), "task 1") {
			t.Errorf("%q: message %q", tt.text, err)
		}
		if strings.Contains(err.Error(), strings.Fields(tt.text)[len(strings.Fields(tt.text))-1]) {
			t.Errorf("%q: the message repeats the text: %q", tt.text, err)
		}
	}
}

func TestScreen(t *testing.T) {
	r, err := ParseAction([]byte(`{"action":"update_status","requester":"a","task_id":"x-1","status":"completed","metadata":{"note":"AKIAIOSFODNN7EXAMPLE"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Screen(nil); err == nil || !strings.Contains(err.Error(), "metadata") {
		t.Errorf("metadata: %v", err)
	}
	r, _ = ParseAction([]byte(`{"action":"create_plan","requester":"a","tasks":[{"content":"ok"},{"content":"x","dependencies":["rm -rf /"]}]}`))
	if err := r.Screen(nil); err == nil || !strings.Contains(err.Error(), "task 2") {
		t.Errorf("dependencies: %v", err)
	}
}

func TestParseRules(t *testing.T) {
	rs, err := ParseRules(DefaultRules(), "# ours\ncommand.rm-root  \\bnuke\\b\ncustom.codename  (?i)project\\s+x\n!personal.ssn\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckContent("rm -rf /", "t", rs); err != nil {
		t.Errorf("replaced rule still applies: %v", err)
	}
	if err := CheckContent("nuke it", "t", rs); err == nil {
		t.Error("replacement rule does not apply")
	}
	if err := CheckContent("about Project X", "t", rs); err == nil || !strings.Contains(err.Error(), "custom.codename") {
		t.Errorf("added rule: %v", err)
	}
	if err := CheckContent("123-45-6789", "t", rs); err != nil {
		t.Errorf("rule turned off still applies: %v", err)
	}
	for _, bad := range []string{"noclass (x)", "a.b", "a.b (", "!nope.none"} {
		if _, err := ParseRules(DefaultRules(), "\n"+bad); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// FuzzParseRules: any rules file is parsed or refused with a line number,
// never a panic; every rule accepted has a class and a name and can screen
// any text.
func FuzzParseRules(f *testing.F) {
	f.Add(defaultRulesText)
	f.Add("command.x  rm\n!command.x\n")
	f.Add("a.b (\n")
	f.Fuzz(func(t *testing.T, text string) {
		rs, err := ParseRules(DefaultRules(), text)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "line ") {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		for _, r := range rs {
			if c, n, ok := strings.Cut(r.Name, "."); !ok || c == "" || n == "" || r.Pattern == nil {
				t.Fatalf("rule %+v", r)
			}
		}
		_ = CheckContent(text, "fuzz", rs)
	})
}

// BenchmarkScreen: the built-in rules over a create_plan of four tasks
// whose contents fill the 64 KiB limit (ordinary text: no rule matches, so
// every rule reads all of it).
//
//	go test ./proxy -run XXX -bench BenchmarkScreen
func BenchmarkScreen(b *testing.B) {
	line := "Implement the login endpoint and its tests; 로그인 API 구현 및 테스트 작성.\n"
	content := strings.Repeat(line, MaxContent/4/len(line))
	r := ActionRequest{Action: ActionCreatePlan, Requester: "a", Tasks: []Task{{Content: content}, {Content: content}, {Content: content}, {Content: content}}}
	b.SetBytes(int64(4 * len(content)))
	for b.Loop() {
		if err := r.Screen(nil); err != nil {
			b.Fatal(err)
		}
	}
}
