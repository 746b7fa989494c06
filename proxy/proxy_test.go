package proxy

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// seed004 is the capability matrix of docs/protocol.md, Proxy requests.
func seed004() []Agent {
	return []Agent{
		{ID: "1", Name: "pm", Role: "pm", Capabilities: []string{"todowrite", "todoread", "bash"}, Priority: 1, Expertise: []string{"coding"}},
		{ID: "2", Name: "general", Role: "general", Capabilities: []string{"todowrite", "todoread", "webfetch"}, Priority: 2, Expertise: []string{"research"}},
		{ID: "3", Name: "planner", Role: "planner", Capabilities: []string{"todowrite", "todoread"}, Priority: 3, Expertise: []string{"planning"}},
		{ID: "4", Name: "senior-sw-engineer", Role: "developer", Capabilities: []string{"bash"}},
		{ID: "5", Name: "py-code-reviewer", Role: "reviewer"},
	}
}

func with(agents []Agent, f func(a *Agent)) []Agent {
	for i := range agents {
		f(&agents[i])
	}
	return agents
}

func TestSelect(t *testing.T) {
	busy := func(names ...string) func(*Agent) {
		return func(a *Agent) {
			for _, n := range names {
				if a.Name == n {
					a.Load = a.Capacity()
				}
			}
		}
	}
	down := func(names ...string) func(*Agent) {
		return func(a *Agent) {
			for _, n := range names {
				if a.Name == n {
					a.Down = true
				}
			}
		}
	}
	tests := []struct {
		name    string
		agents  []Agent
		req     Request
		outcome Outcome
		agent   string
	}{
		{"priority picks pm", seed004(), Request{Tools: []string{"todowrite"}}, Assign, "pm"},
		{"priority skips busy pm", with(seed004(), busy("pm")), Request{Tools: []string{"todowrite"}}, Assign, "general"},
		{"priority needs webfetch", seed004(), Request{Tools: []string{"TodoWrite", "webfetch"}}, Assign, "general"},
		{"all proxies busy parks", with(seed004(), busy("pm", "general", "planner")), Request{Tools: []string{"todowrite"}}, Park, ""},
		{"all proxies down asks user", with(seed004(), down("pm", "general", "planner")), Request{Tools: []string{"todowrite"}}, AskUser, ""},
		{"nobody has the tool asks user", seed004(), Request{Tools: []string{"docker"}}, AskUser, ""},
		{"named case-insensitively", seed004(), Request{Target: "PY-Code-Reviewer"}, Assign, "py-code-reviewer"},
		{"named busy falls back to same role", append(with(seed004(), busy("senior-sw-engineer")), Agent{ID: "6", Name: "junior", Role: "developer", Capabilities: []string{"bash"}}), Request{Target: "senior-sw-engineer"}, Assign, "junior"},
		{"named busy without peer parks", with(seed004(), busy("py-code-reviewer")), Request{Target: "py-code-reviewer"}, Park, ""},
		{"named busy no fallback parks", append(with(seed004(), busy("senior-sw-engineer")), Agent{ID: "6", Name: "junior", Role: "developer"}), Request{Target: "senior-sw-engineer", NoFallback: true}, Park, ""},
		{"named down without peer asks user", with(seed004(), down("py-code-reviewer")), Request{Target: "py-code-reviewer"}, AskUser, ""},
		{"role resolves", seed004(), Request{Target: "Developer"}, Assign, "senior-sw-engineer"},
		{"capability resolves", seed004(), Request{Target: "webfetch"}, Assign, "general"},
		{"unknown target asks user", seed004(), Request{Target: "designer"}, AskUser, ""},
		{"unknown preferred falls back", seed004(), Request{Target: "designer", Prefer: true, Tools: []string{"todowrite"}}, Assign, "pm"},
		{"preferred busy falls back", with(seed004(), busy("planner")), Request{Target: "planner", Prefer: true, Tools: []string{"todowrite"}}, Assign, "pm"},
		{"named lacking tool goes by capability", seed004(), Request{Target: "senior-sw-engineer", Tools: []string{"todowrite"}}, AskUser, ""},
		{"exclude requester", seed004(), Request{Tools: []string{"todowrite"}, Exclude: []string{"1"}}, Assign, "general"},
		{"load picks least loaded", with(seed004(), func(a *Agent) {
			a.MaxLoad = 4
			a.Load = map[string]int{"pm": 3, "general": 1, "planner": 2}[a.Name]
		}), Request{Tools: []string{"todowrite"}, Strategy: ByLoad}, Assign, "general"},
		{"load tie goes by priority", with(seed004(), func(a *Agent) { a.MaxLoad = 2 }), Request{Tools: []string{"todowrite"}, Strategy: ByLoad}, Assign, "pm"},
		{"load relative to capacity", with(seed004(), func(a *Agent) {
			a.MaxLoad = map[string]int{"pm": 10, "general": 2, "planner": 2}[a.Name]
			a.Load = map[string]int{"pm": 3, "general": 1, "planner": 1}[a.Name]
		}), Request{Tools: []string{"todowrite"}, Strategy: ByLoad}, Assign, "pm"},
		{"expertise planning", seed004(), Request{Tools: []string{"todowrite"}, Strategy: ByExpertise, TaskType: "planning"}, Assign, "planner"},
		{"expertise research", seed004(), Request{Strategy: ByExpertise, TaskType: "Research"}, Assign, "general"},
		{"expertise unknown falls back to priority", seed004(), Request{Tools: []string{"todowrite"}, Strategy: ByExpertise, TaskType: "design"}, Assign, "pm"},
		{"expert busy falls back to priority", with(seed004(), busy("planner")), Request{Tools: []string{"todowrite"}, Strategy: ByExpertise, TaskType: "planning"}, Assign, "pm"},
		{"empty office asks user", nil, Request{}, AskUser, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New(tt.agents).Select(tt.req)
			if d.Outcome != tt.outcome || d.Agent.Name != tt.agent {
				t.Fatalf("Select = %s (agent %q), want %s %q", d, d.Agent.Name, tt.outcome, tt.agent)
			}
			if d.Reason == "" {
				t.Errorf("decision has no reason")
			}
			if d.Outcome == Park && len(d.Waiting) == 0 {
				t.Errorf("park without waiting agents")
			}
		})
	}
}

func TestRegistryOrder(t *testing.T) {
	var got []string
	for _, a := range New(seed004()).Agents() {
		got = append(got, a.Name)
	}
	want := []string{"pm", "general", "planner", "py-code-reviewer", "senior-sw-engineer"}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("order (-got +want):\n%s", diff)
	}
	if a, ok := New(seed004()).ByName(" PM "); !ok || a.ID != "1" {
		t.Errorf("ByName(PM) = %v, %v", a, ok)
	}
	if got := len(New(seed004()).Capable("todoread", "todowrite")); got != 3 {
		t.Errorf("Capable(todoread, todowrite) = %d agents, want 3", got)
	}
}

// TestSelectProperty checks on random offices and requests that Select
// never assigns an agent lacking a required tool, down, at capacity or
// excluded, and that it assigns whenever such an agent exists with
// no target given.
func TestSelectProperty(t *testing.T) {
	tools := []string{"todowrite", "todoread", "bash", "webfetch", "docker"}
	roles := []string{"pm", "developer", "reviewer", "planner"}
	rng := rand.New(rand.NewSource(5))
	for iter := 0; iter < 20000; iter++ {
		n := rng.Intn(7)
		agents := make([]Agent, n)
		for i := range agents {
			a := Agent{ID: fmt.Sprint(i), Name: fmt.Sprintf("a%d", i), Role: roles[rng.Intn(len(roles))], Priority: rng.Intn(4), MaxLoad: rng.Intn(3), Down: rng.Intn(5) == 0}
			a.Load = rng.Intn(a.Capacity() + 1)
			for _, tl := range tools {
				if rng.Intn(2) == 0 {
					a.Capabilities = append(a.Capabilities, strings.ToUpper(tl[:1])+tl[1:])
				}
			}
			if rng.Intn(2) == 0 {
				a.Expertise = []string{"coding"}
			}
			agents[i] = a
		}
		req := Request{Strategy: []Strategy{ByPriority, ByLoad, ByExpertise, ""}[rng.Intn(4)], TaskType: "coding", NoFallback: rng.Intn(3) == 0, Prefer: rng.Intn(2) == 0}
		for _, tl := range tools {
			if rng.Intn(4) == 0 {
				req.Tools = append(req.Tools, tl)
			}
		}
		switch rng.Intn(4) {
		case 0:
			if n > 0 {
				req.Target = agents[rng.Intn(n)].Name
			}
		case 1:
			req.Target = roles[rng.Intn(len(roles))]
		case 2:
			req.Target = tools[rng.Intn(len(tools))]
		}
		if n > 0 && rng.Intn(3) == 0 {
			req.Exclude = []string{agents[rng.Intn(n)].ID}
		}
		d := New(agents).Select(req)
		switch d.Outcome {
		case Assign:
			a := d.Agent
			if !a.Has(req.Tools...) || !a.Available() || a.Down || a.Load >= a.Capacity() {
				t.Fatalf("iteration %d: assigned unfit %+v for %+v", iter, a, req)
			}
			for _, x := range req.Exclude {
				if x == a.ID {
					t.Fatalf("iteration %d: assigned excluded %+v", iter, a)
				}
			}
		case Park:
			for _, w := range d.Waiting {
				if w.Down {
					t.Fatalf("iteration %d: parked waiting on down agent %+v", iter, w)
				}
			}
		case AskUser:
		default:
			t.Fatalf("iteration %d: unknown outcome %q", iter, d.Outcome)
		}
		if req.Target == "" && d.Outcome != Assign {
			for _, a := range agents {
				if a.Has(req.Tools...) && a.Available() && (len(req.Exclude) == 0 || req.Exclude[0] != a.ID) {
					t.Fatalf("iteration %d: %s although %+v fits %+v", iter, d, a, req)
				}
			}
		}
	}
}

func TestAuthorize(t *testing.T) {
	dev := Agent{Name: "dev", AllowedActions: []string{"deliver_result", "ASK_USER"}}
	if err := Authorize(dev, ActionAskUser); err != nil {
		t.Errorf("ask_user: %v", err)
	}
	err := Authorize(dev, ActionInvoke)
	if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "dev may not invoke") {
		t.Errorf("invoke: %v, want forbidden", err)
	}
	if err := Authorize(Agent{Name: "any"}, ActionInvoke); err != nil {
		t.Errorf("default actions: %v", err)
	}
	if err := Authorize(Agent{Name: "root", AllowedActions: []string{"*"}}, "anything"); err != nil {
		t.Errorf("wildcard: %v", err)
	}
}

func TestValidateContent(t *testing.T) {
	tests := []struct {
		in  string
		max int
		ok  bool
	}{
		{"plain text\n\twith tab", 0, true},
		{"한국어 내용", 0, true},
		{"esc \x1b[31m red", 0, false},
		{"paste end \x1b[201~", 0, false},
		{"bell \a", 0, false},
		{"nul \x00", 0, false},
		{"del \x7f", 0, false},
		{"c1 \u009b31m", 0, false},
		{"bad utf8 \xff", 0, false},
		{strings.Repeat("a", 11), 10, false},
		{strings.Repeat("a", 10), 10, true},
		{strings.Repeat("a", MaxContent+1), 0, false},
	}
	for _, tt := range tests {
		err := ValidateContent(tt.in, tt.max)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateContent(%q) = %v, want ok=%v", tt.in[:min(len(tt.in), 20)], err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrContent) {
			t.Errorf("error %v does not wrap ErrContent", err)
		}
	}
}

func TestParseAction(t *testing.T) {
	tests := []struct {
		body    string
		wantErr string
	}{
		{`{"action":"create_plan","requester":"senior-sw-engineer","tasks":[{"content":"API 엔드포인트 구현","priority":"high","estimated_time":"2h","dependencies":[]}],"preferences":{"preferred_proxy":"pm","fallback_allowed":true}}`, ""},
		{`{"action":"update_status","requester":"py-code-reviewer","task_id":"pyr-abc123","status":"completed","metadata":{"completion_time":"45m","issues_found":3}}`, ""},
		{`{"action":"create_plan","requester":"x","tasks":[]}`, "tasks is empty"},
		{`{"action":"create_plan","requester":"x","tasks":[{"content":" "}]}`, "no content"},
		{`{"action":"create_plan","requester":"x","tasks":[{"content":"a","priority":"urgent"}]}`, "priority"},
		{`{"action":"create_plan","requester":"x","tasks":[{"content":"a\u001b[2J"}]}`, "control character"},
		{`{"action":"update_status","requester":"x","task_id":"t","status":"done"}`, "status"},
		{`{"action":"update_status","requester":"x","status":"completed"}`, "task_id"},
		{`{"action":"delete_all","requester":"x"}`, "unknown action"},
		{`{"requester":"x"}`, "action is missing"},
		{`{"action":"create_plan","tasks":[{"content":"a"}]}`, "requester"},
		{`{"action":"create_plan","requester":"x","tasks":[{"content":"a"}],"extra":1}`, "unknown field"},
		{`not json`, "not valid JSON"},
		{`{"action":"update_status","requester":"x","task_id":"t","status":"completed"} {}`, "after the JSON"},
	}
	for _, tt := range tests {
		_, err := ParseAction([]byte(tt.body))
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("ParseAction(%.40s) = %v, want error containing %q", tt.body, err, tt.wantErr)
		}
	}
	r, _ := ParseAction([]byte(`{"action":"create_plan","requester":"dev","tasks":[{"content":"a"}],"preferences":{"preferred_proxy":"pm","fallback_allowed":false}}`))
	req := r.Request("4")
	if !req.NoFallback || req.Target != "pm" || !req.Prefer || req.Exclude[0] != "4" || len(req.Tools) != 1 {
		t.Errorf("Request = %+v", req)
	}
}

// FuzzParseAction: any body either fails with a reason or yields a request
// whose task contents pass ValidateContent.
func FuzzParseAction(f *testing.F) {
	f.Add([]byte(`{"action":"create_plan","requester":"a","tasks":[{"content":"x","priority":"high"}]}`))
	f.Add([]byte(`{"action":"update_status","requester":"a","task_id":"t","status":"completed","metadata":{"k":1}}`))
	f.Add([]byte(`{"action":"create_plan","requester":"a","tasks":[{"content":"\u001b[2J"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseAction(body)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("error without a reason")
			}
			return
		}
		for _, task := range r.Tasks {
			if err := ValidateContent(task.Content, 0); err != nil {
				t.Fatalf("accepted task with bad content: %v", err)
			}
		}
		if r.Requester == "" || (r.Action != ActionCreatePlan && r.Action != ActionUpdateStatus) {
			t.Fatalf("accepted %+v", r)
		}
	})
}
