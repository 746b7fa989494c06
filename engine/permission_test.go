package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
)

// fakeDecider stands for the session layer's waiting hooks: a decision
// reaches a request once, as session.Manager.DecidePermission does; a
// request not waiting (decided, or its hook gone) is an error.
type fakeDecider struct {
	mu        sync.Mutex
	waiting   map[string]bool
	decisions map[string][]session.PermissionDecision
}

func newFakeDecider() *fakeDecider {
	return &fakeDecider{waiting: map[string]bool{}, decisions: map[string][]session.PermissionDecision{}}
}

func (f *fakeDecider) wait(id string) {
	f.mu.Lock()
	f.waiting[id] = true
	f.mu.Unlock()
}

func (f *fakeDecider) DecidePermission(_, _, id string, d session.PermissionDecision) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.waiting[id] {
		return fmt.Errorf("permission request %s: not waiting", id)
	}
	delete(f.waiting, id)
	f.decisions[id] = append(f.decisions[id], d)
	return nil
}

func (f *fakeDecider) got(id string) []session.PermissionDecision {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]session.PermissionDecision(nil), f.decisions[id]...)
}

func bashInput(cmd string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"command": cmd, "description": "build it"})
	return b
}

// request hands a Bash request of agent name to the router, as a hook
// would, and returns its ID.
func (h *harness) request(dec *fakeDecider, name, conversation, cmd string) string {
	id := uuid.NewString()
	dec.wait(id)
	h.r.HandlePermission(session.PermissionRequest{Key: session.Key{OfficeID: h.office.ID, AgentID: h.id(name)}, ID: id, ConversationID: conversation, Tool: "Bash", Input: bashInput(cmd),
		Suggestions: json.RawMessage(`[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"make:*"}],"behavior":"allow","destination":"localSettings"}]`)})
	return id
}

// TestPermissionDecidedOnce: a permission request becomes a permission
// question; its answer reaches the hook once (never typed); "allow for
// this session" allows the rule's later calls without a question, in that
// conversation only; the timeout denies once with a message and expires
// the question (no expiry notice typed); a hook that went away cancels its
// question.
func TestPermissionDecidedOnce(t *testing.T) {
	dec := newFakeDecider()
	h := newHarness(t, func(c *Config) { c.Decider = dec; c.PermissionTimeout = time.Minute })
	h.run("PO")
	ctx := context.Background()
	eventually(t, "Run", func() bool { return h.r.running() != nil })
	id := h.request(dec, "PO", "conv-1", "make build")
	q, err := h.st.GetQuestion(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if q.Category != office.QuestionPermission || q.QuestionType != office.QuestionSelection || q.Status != office.QuestionPending ||
		q.Question != "PO wants to run a command: make build" || !strings.Contains(q.Context, "Bash(make:*)") {
		t.Fatalf("question %+v", q)
	}
	if _, err := h.r.AnswerQuestion(ctx, id, "  ", ""); err == nil {
		t.Error("an empty answer to a permission question was accepted")
	}
	if _, err := h.r.AnswerQuestion(ctx, id, "Deny: not now, the build server is down", "user-1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deny", func() bool { return len(dec.got(id)) == 1 })
	if d := dec.got(id)[0]; d.Allow || !strings.Contains(d.Message, "denied this: not now, the build server is down") {
		t.Errorf("decision %+v: want a deny with the reason", d)
	}
	eventually(t, "delivered", func() bool { q, _ := h.st.GetQuestion(ctx, id); return q.Status == office.QuestionDelivered })

	// Allow for this session: the rule Claude Code suggested.
	id2 := h.request(dec, "PO", "conv-1", "make test")
	if _, err := h.r.AnswerQuestion(ctx, id2, "allow for this session", "user-1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the allow", func() bool { return len(dec.got(id2)) == 1 })
	id3 := h.request(dec, "PO", "conv-1", "make lint")
	if d := dec.got(id3); len(d) != 1 || !d[0].Allow {
		t.Errorf("a call the session rule covers: decisions %+v, want one allow at once", d)
	}
	if _, err := h.st.GetQuestion(ctx, id3); !office.IsNotFound(err) {
		t.Errorf("a call the session rule covers made a question (%v)", err)
	}
	if gs, err := h.st.ListPermissionGrants(ctx, h.id("PO"), "conv-1"); err != nil || len(gs) != 1 || gs[0].Rule != "Bash(make:*)" || gs[0].QuestionID != id2 {
		t.Errorf("stored grants of conv-1: %+v, %v; want Bash(make:*) from %s", gs, err, id2)
	}
	// The process restarts and resumes the conversation: the grant holds.
	h.r.HandleStatus(session.Key{OfficeID: h.office.ID, AgentID: h.id("PO")}, office.SessionStarting, session.Info{Resumes: true, Resumed: true})
	idR := h.request(dec, "PO", "conv-1", "make docs")
	if d := dec.got(idR); len(d) != 1 || !d[0].Allow {
		t.Errorf("after a resumed start, a call the session rule covers: decisions %+v, want one allow", d)
	}
	id4 := h.request(dec, "PO", "conv-2", "make lint") // another conversation
	if _, err := h.st.GetQuestion(ctx, id4); err != nil {
		t.Errorf("another conversation's call was not asked: %v", err)
	}
	h.r.PermissionEnded(h.office.ID, h.id("PO"), id4, true) // answered in the terminal
	if q, _ := h.st.GetQuestion(ctx, id4); q.Status != office.QuestionCancelled {
		t.Errorf("question of an ended request is %s, want cancelled", q.Status)
	}

	// A fresh conversation ends the grants.
	h.r.HandleStatus(session.Key{OfficeID: h.office.ID, AgentID: h.id("PO")}, office.SessionStarting, session.Info{Resumes: true})
	eventually(t, "the grants ended", func() bool { gs, _ := h.st.ListPermissionGrants(ctx, h.id("PO"), "conv-1"); return len(gs) == 0 })
	idF := h.request(dec, "PO", "conv-1", "make lint")
	if _, err := h.st.GetQuestion(ctx, idF); err != nil || len(dec.got(idF)) != 0 {
		t.Errorf("after a fresh conversation a formerly granted call was not asked: %v, decisions %+v", err, dec.got(idF))
	}
	h.r.PermissionEnded(h.office.ID, h.id("PO"), idF, true)

	id5 := permissionTimesOut(t, h, dec)
	h.quiet("PO", 100*time.Millisecond)
	h.ss.mu.Lock()
	for _, s := range h.ss.typed[h.id("PO")] {
		t.Errorf("typed into the agent for a permission question: %q", s)
	}
	h.ss.mu.Unlock()
	for _, id := range []string{id, id2, id3, idR, id4, idF, id5} {
		if n := len(dec.got(id)); n > 1 {
			t.Errorf("request %s decided %d times", id, n)
		}
	}
}

// permissionTimesOut: a request nobody answers is denied when the
// permission timeout passes, saying so, and its question expires. It
// returns the question's id.
func permissionTimesOut(t *testing.T, h *harness, dec *fakeDecider) string {
	ctx := context.Background()
	id5 := h.request(dec, "PO", "conv-1", "rm -rf build")
	h.clk.Add(2 * time.Minute)
	eventually(t, "the timeout's deny", func() bool { return len(dec.got(id5)) == 1 })
	if d := dec.got(id5)[0]; d.Allow || !strings.Contains(d.Message, "within 1m0s") {
		t.Errorf("timeout decision %+v", d)
	}
	if q, _ := h.st.GetQuestion(ctx, id5); q.Status != office.QuestionExpired {
		t.Errorf("timed-out question is %s, want expired", q.Status)
	}
	return id5
}

// TestPermissionSweep: the permission questions left open by a server
// that stopped are made final when the office is taken, and the agent is
// told: a pending one is cancelled, an answered one delivered with the
// person's answer.
func TestPermissionSweep(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Decider = newFakeDecider() })
	h.run("PO")
	ctx := context.Background()
	eventually(t, "Run", func() bool { return h.r.running() != nil })
	mkAt := func(cmd string, exp time.Time) string {
		q, err := h.st.CreateQuestion(ctx, office.Question{OfficeID: h.office.ID, AgentID: h.id("PO"), Category: office.QuestionPermission,
			QuestionType: office.QuestionSelection, Question: "PO wants to run a command: " + cmd, Options: office.PermissionOptions(),
			Status: office.QuestionPending, ExpiresAt: exp})
		if err != nil {
			t.Fatal(err)
		}
		return q.ID
	}
	mk := func(cmd string) string { return mkAt(cmd, h.clk.Now().Add(time.Hour)) }
	pending, answered := mk("make a"), mk("make b")
	overdue := mkAt("make f", h.clk.Now().Add(-time.Second)) // its timeout passed while no server ran
	if _, _, err := h.st.AnswerQuestion(ctx, answered, "deny: use make c", "user-1"); err != nil {
		t.Fatal(err)
	}
	h.r.TakeOffice(ctx, h.office.ID, nil, false)
	if q, _ := h.st.GetQuestion(ctx, pending); q.Status != office.QuestionCancelled {
		t.Errorf("pending question left by a stopped server is %s, want cancelled", q.Status)
	}
	h.typed("PO", "(to run a command: make a) was interrupted")
	h.typed("PO", "(to run a command: make f) was interrupted")
	if q, _ := h.st.GetQuestion(ctx, overdue); q.Status != office.QuestionExpired {
		t.Errorf("a request whose timeout passed while no server ran is %s, want expired", q.Status)
	}
	h.typed("PO", "a person denied it: use make c")
	eventually(t, "the answered question delivered", func() bool {
		q, _ := h.st.GetQuestion(ctx, answered)
		return q.Status == office.QuestionDelivered
	})
	h.quiet("PO", 100*time.Millisecond)

	// Within one server life: the agent's process ends while its request
	// waits (its hook goes with it); the question stays open until the
	// agent's session starts again, then it is made final and the agent
	// told, once.
	dec := h.r.cfg.Decider.(*fakeDecider)
	id := h.request(dec, "PO", "conv-1", "make d")
	h.r.PermissionEnded(h.office.ID, h.id("PO"), id, false)
	if q, _ := h.st.GetQuestion(ctx, id); q.Status != office.QuestionPending {
		t.Errorf("question of a request whose agent ended is %s before the restart, want pending", q.Status)
	}
	h.r.HandleStatus(session.Key{OfficeID: h.office.ID, AgentID: h.id("PO")}, office.SessionStarting, session.Info{})
	eventually(t, "the sweep at the start", func() bool { q, _ := h.st.GetQuestion(ctx, id); return q.Status == office.QuestionCancelled })
	h.typed("PO", "(to run a command: make d) was interrupted")
	h.r.HandleStatus(session.Key{OfficeID: h.office.ID, AgentID: h.id("PO")}, office.SessionStarting, session.Info{})
	h.quiet("PO", 200*time.Millisecond)
}

func TestParsePermissionAnswer(t *testing.T) {
	for _, c := range []struct{ in, choice, reason string }{
		{"allow once", office.PermissionAllowOnce, ""},
		{" Allow Once ", office.PermissionAllowOnce, ""},
		{"yes", office.PermissionAllowOnce, ""},
		{"allow for this session", office.PermissionAllowSession, ""},
		{"deny", office.PermissionDeny, ""},
		{"Deny: not on Fridays", office.PermissionDeny, "not on Fridays"},
		{"deny - too risky", office.PermissionDeny, "too risky"},
		{"no, use npm ci", office.PermissionDeny, "use npm ci"},
		{"denying is wrong", office.PermissionDeny, "denying is wrong"}, // not "deny" + reason: the whole text
		{"maybe later", office.PermissionDeny, "maybe later"},
		{"거부: 안 됩니다", office.PermissionDeny, "안 됩니다"},
	} {
		choice, reason := parsePermissionAnswer(c.in)
		if choice != c.choice || reason != c.reason {
			t.Errorf("parsePermissionAnswer(%q) = %q, %q; want %q, %q", c.in, choice, reason, c.choice, c.reason)
		}
	}
}

func TestRuleCovers(t *testing.T) {
	for _, c := range []struct {
		rule, tool, subject string
		want                bool
	}{
		{"Bash", "Bash", "anything", true},
		{"Bash", "Edit", "x", false},
		{"Bash(npm test:*)", "Bash", "npm test", true},
		{"Bash(npm test:*)", "Bash", "npm test -- --watch", true},
		{"Bash(npm test:*)", "Bash", "npm testing", false},
		{"Bash(ls -la)", "Bash", "ls -la", true},
		{"Bash(ls -la)", "Bash", "ls -la /", false},
		{"Edit(/w/a.go)", "Edit", "/w/a.go", true},
	} {
		if got := ruleCovers(c.rule, c.tool, c.subject); got != c.want {
			t.Errorf("ruleCovers(%q, %q, %q) = %v", c.rule, c.tool, c.subject, got)
		}
	}
	if r := sessionRule("Bash", "rm -rf /", json.RawMessage(`[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"make:*"}],"behavior":"allow"}]`)); r != "Bash(rm -rf /)" {
		t.Errorf("a suggestion that does not cover the call was used: %q", r)
	}
	if r := sessionRule("Edit", "/w/a.go", nil); r != "Edit(/w/a.go)" {
		t.Errorf("sessionRule without suggestions = %q", r)
	}
}

func TestDescribePermission(t *testing.T) {
	for _, c := range []struct {
		tool, input, question string
		details               []string
	}{
		{"Bash", `{"command":"go test ./...","description":"Run the tests"}`, "dev wants to run a command: go test ./...", []string{"Why: Run the tests", "Tool: Bash"}},
		{"Edit", `{"file_path":"/w/main.go","old_string":"a := 1\nb := 2","new_string":"a := 3"}`, "dev wants to edit /w/main.go", []string{"--- /w/main.go", "- a := 1\n- b := 2\n+ a := 3"}},
		{"Write", `{"file_path":"/w/new.txt","content":"one\ntwo\n"}`, "dev wants to write /w/new.txt (2 lines)", []string{"+ one\n+ two"}},
		{"WebFetch", `{"url":"https://example.org/x","prompt":"read"}`, "dev wants to fetch https://example.org/x", nil},
		{"mcp__db__query", `{"sql":"select 1"}`, `dev wants to use mcp__db__query: {"sql":"select 1"}`, nil},
	} {
		q, d := describePermission("dev", c.tool, json.RawMessage(c.input))
		if q != c.question {
			t.Errorf("%s: question %q, want %q", c.tool, q, c.question)
		}
		for _, w := range c.details {
			if !strings.Contains(d, w) {
				t.Errorf("%s: details %q lack %q", c.tool, d, w)
			}
		}
	}
}

// FuzzParsePermissionAnswer: any answer is one of the three choices; a
// deny's reason comes from the answer; only an allow answer allows.
func FuzzParsePermissionAnswer(f *testing.F) {
	for _, s := range []string{"allow once", "allow for this session", "deny", "deny: x", "no, y", "yes", "", "거부: 안 돼", "deny—why"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		choice, reason := parsePermissionAnswer(s)
		switch choice {
		case office.PermissionAllowOnce, office.PermissionAllowSession:
			if reason != "" {
				t.Fatalf("%q: an allow with a reason %q", s, reason)
			}
			if l := strings.ToLower(strings.TrimSpace(s)); strings.HasPrefix(l, "deny") || strings.HasPrefix(l, "no") {
				t.Fatalf("%q allows", s)
			}
		case office.PermissionDeny:
			if !strings.Contains(s, reason) {
				t.Fatalf("%q: reason %q is not from the answer", s, reason)
			}
		default:
			t.Fatalf("%q: choice %q", s, choice)
		}
	})
}

// FuzzDescribePermission: any tool input gives a question that names the
// agent, and never panics.
func FuzzDescribePermission(f *testing.F) {
	f.Add("Bash", `{"command":"ls"}`)
	f.Add("Edit", `{"file_path":"/a","old_string":"x","new_string":"y","edits":[{"old_string":"1"}]}`)
	f.Add("Write", `{"file_path":"/a","content":7}`)
	f.Add("X", `[1,2]`)
	f.Fuzz(func(t *testing.T, tool, input string) {
		q, _ := describePermission("agent", tool, json.RawMessage(input))
		if !strings.HasPrefix(q, "agent wants to ") {
			t.Fatalf("question %q", q)
		}
		_ = sessionRule(tool, toolSubject(tool, json.RawMessage(input)), json.RawMessage(input))
	})
}

// TestPermissionOddInput: a tool input with a NUL and a huge one still make
// a question (PostgreSQL text holds no NUL) and a bounded event.
func TestPermissionOddInput(t *testing.T) {
	for _, in := range []string{`{"command":"echo a\u0000b"}`, `{"command":"` + strings.Repeat("x", 100<<10) + `"}`} {
		q, d := describePermission("dev", "Bash", json.RawMessage(in))
		if strings.ContainsRune(q+d, 0) {
			t.Errorf("NUL in %q", q)
		}
		ev, err := json.Marshal(eventInput(json.RawMessage(in)))
		if err != nil || len(ev) > maxEventInput+64 || strings.Contains(string(ev), `\u0000`) {
			t.Errorf("event input %d bytes, err %v, NUL %v", len(ev), err, strings.Contains(string(ev), `\u0000`))
		}
	}
}

// answerOnCancel is a store on which a person answers a permission
// question in the instant between the sweep's read and its cancel.
type answerOnCancel struct {
	office.Store
	once sync.Once
}

func (s *answerOnCancel) answer(ctx context.Context, id string) {
	s.once.Do(func() { _, _, _ = s.Store.AnswerQuestion(ctx, id, "deny: not this one", "user-2") })
}

func (s *answerOnCancel) CancelPendingQuestion(ctx context.Context, id string) (bool, error) {
	s.answer(ctx, id)
	return s.Store.CancelPendingQuestion(ctx, id)
}

func (s *answerOnCancel) CancelQuestion(ctx context.Context, id string) (bool, error) {
	s.answer(ctx, id)
	return s.Store.CancelQuestion(ctx, id)
}

// TestPermissionSweepRace: a person answers an interrupted request in the
// same instant the sweep makes it final: the answer is kept and the agent
// is told it, once; nothing says the request was merely interrupted.
func TestPermissionSweepRace(t *testing.T) {
	var racy *answerOnCancel
	h := newHarness(t, func(c *Config) {
		c.Decider = newFakeDecider()
		racy = &answerOnCancel{Store: c.Store}
		c.Store = racy
	})
	h.run("PO")
	ctx := context.Background()
	eventually(t, "Run", func() bool { return h.r.running() != nil })
	q, err := h.st.CreateQuestion(ctx, office.Question{OfficeID: h.office.ID, AgentID: h.id("PO"), Category: office.QuestionPermission,
		QuestionType: office.QuestionSelection, Question: "PO wants to run a command: make e", Options: office.PermissionOptions(),
		Status: office.QuestionPending, ExpiresAt: h.clk.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	h.r.TakeOffice(ctx, h.office.ID, nil, false)
	h.typed("PO", "meanwhile a person denied it: not this one")
	eventually(t, "delivered", func() bool { g, _ := h.st.GetQuestion(ctx, q.ID); return g.Status == office.QuestionDelivered })
	if g, _ := h.st.GetQuestion(ctx, q.ID); g.Response != "deny: not this one" {
		t.Errorf("the person's answer became %q (%s)", g.Response, g.Status)
	}
	h.quiet("PO", 200*time.Millisecond)
	h.ss.mu.Lock()
	defer h.ss.mu.Unlock()
	n := 0
	for _, s := range h.ss.typed[h.id("PO")] {
		if strings.Contains(s, "was interrupted") {
			n++
		}
		if strings.Contains(s, "not approved") {
			t.Errorf("typed as not approved although a person answered: %q", s)
		}
	}
	if n != 1 {
		t.Errorf("told %d times, want once: %q", n, h.ss.typed[h.id("PO")])
	}
}

// staleAnswered is a store whose list of answered questions is read while
// the permission decider delivers them (its mark is slow): it returns the
// rows as they were, once the decider is done.
type staleAnswered struct{ office.Store }

func (s staleAnswered) MarkQuestionDelivered(ctx context.Context, id string) (bool, error) {
	time.Sleep(100 * time.Millisecond)
	return s.Store.MarkQuestionDelivered(ctx, id)
}

func (s staleAnswered) ListAnsweredUndelivered(ctx context.Context, d office.Due) ([]office.Question, error) {
	qs, err := s.Store.ListAnsweredUndelivered(ctx, d)
	for _, q := range qs {
		if q.Category != office.QuestionPermission {
			continue
		}
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if g, _ := s.Store.GetQuestion(ctx, q.ID); g.Status != office.QuestionAnswered {
				time.Sleep(50 * time.Millisecond) // the decider forgets the request
				break
			}
		}
	}
	return qs, err
}

// TestPermissionAnswerNotTypedWhenDecided: the delivery round reads an
// answered permission question while the decider sends it to its waiting
// hook; the round must not take it for one whose hook is gone and type it.
func TestPermissionAnswerNotTypedWhenDecided(t *testing.T) {
	dec := newFakeDecider()
	h := newHarness(t, func(c *Config) { c.Decider = dec; c.Store = staleAnswered{c.Store} })
	h.run("PO")
	ctx := context.Background()
	eventually(t, "Run", func() bool { return h.r.running() != nil })
	id := h.request(dec, "PO", "conv-1", "make build")
	if _, err := h.r.AnswerQuestion(ctx, id, "allow once", "user-1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the allow", func() bool { return len(dec.got(id)) == 1 })
	eventually(t, "delivered", func() bool { q, _ := h.st.GetQuestion(ctx, id); return q.Status == office.QuestionDelivered })
	h.quiet("PO", 300*time.Millisecond)
	h.ss.mu.Lock()
	defer h.ss.mu.Unlock()
	for _, s := range h.ss.typed[h.id("PO")] {
		t.Errorf("typed into the agent for a permission request its hook got: %q", s)
	}
}

// TestPermissionOtherCLIs: for a CLI that does not apply the office's
// permission rules itself (Gemini CLI, Qwen Code), the office does: deny
// rules first (by the tool's own name or its Claude Code name: an
// office-wide "Bash(git push:*)" denies run_shell_command too), ask rules
// asked, allow rules allowed, each without a question but an event that
// names the rule and the path; the rest is asked. A request read from a
// dialog on screen (session.ViaScreen) that a person denies gets its reason told
// to the agent as a notice, since the dialog's "No" carries no words; one
// through a hook never (the hook passes it).
func TestPermissionOtherCLIs(t *testing.T) {
	dec := newFakeDecider()
	gem := office.Agent{Name: "QA", Role: "tester", Launch: office.LaunchSpec{Kind: "gemini", Permissions: &office.PermissionPolicy{
		Deny: []string{"Bash(git push:*)"}, Allow: []string{"run_shell_command(ls:*)", "run_shell_command(make:*)", "Bash(echo:*)"}, Ask: []string{"run_shell_command(make:*)"},
	}}}
	h := newHarness(t, func(c *Config) { c.Decider = dec; c.PermissionTimeout = time.Minute }, gem)
	h.run("QA")
	ctx := context.Background()
	eventually(t, "Run", func() bool { return h.r.running() != nil })
	ask := func(cmd, via string, rulesApplied bool) string {
		id := uuid.NewString()
		dec.wait(id)
		kind := session.KindGemini
		if rulesApplied {
			kind = session.KindClaude
		}
		h.r.HandlePermission(session.PermissionRequest{Key: session.Key{OfficeID: h.office.ID, AgentID: h.id("QA")}, ID: id, ConversationID: "c",
			Tool: "run_shell_command", Input: bashInput(cmd), Via: via, Kind: kind})
		return id
	}
	cases := []struct {
		cmd     string
		allow   bool
		decided bool // at once, by a rule
	}{
		{"git push origin main", false, true},
		{"ls -la", true, true},
		{"make build", false, false}, // an ask rule wins over an allow rule
		{"echo hi", true, true},
	}
	for _, c := range cases {
		id := ask(c.cmd, session.ViaHook, false)
		got := dec.got(id)
		_, qerr := h.st.GetQuestion(ctx, id)
		switch {
		case c.decided && (len(got) != 1 || got[0].Allow != c.allow || !office.IsNotFound(qerr)):
			t.Errorf("%q: decisions %+v, question %v; want one allow=%v at once and no question", c.cmd, got, qerr, c.allow)
		case !c.decided && (len(got) != 0 || qerr != nil):
			t.Errorf("%q: decisions %+v, question %v; want it asked", c.cmd, got, qerr)
		}
		if c.decided && !c.allow && !strings.Contains(got[0].Message, "Bash(git push:*)") {
			t.Errorf("%q: deny %q does not name the rule", c.cmd, got[0].Message)
		}
	}
	// Claude Code applied the rules itself: asked as it came.
	if id := ask("git push origin main", session.ViaHook, true); len(dec.got(id)) != 0 {
		t.Errorf("a request whose CLI applied the rules was decided by them: %+v", dec.got(id))
	}
	h.quiet("QA", 50*time.Millisecond) // a hook's deny is never typed

	// Through the screen: a person's deny is told to the agent, once.
	id := ask("rm -rf build", session.ViaScreen, false)
	if _, err := h.r.AnswerQuestion(ctx, id, "deny: not on Fridays", "user-1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deny", func() bool { return len(dec.got(id)) == 1 })
	if s := h.typed("QA", "not on Fridays"); !strings.Contains(s, "run_shell_command (rm -rf build)") {
		t.Errorf("notice %q: want the call named", s)
	}
	h.quiet("QA", 100*time.Millisecond)
	evs, err := h.st.ListEvents(ctx, office.EventFilter{OfficeID: h.office.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var vias []string
	for _, e := range evs {
		if e.Kind != "permission.denied" {
			continue
		}
		var p struct{ Via, By string }
		_ = json.Unmarshal(e.Payload, &p)
		vias = append(vias, p.By+"/"+p.Via)
	}
	if want := "office rule/hook user-1/screen"; strings.Join(vias, " ") != want {
		t.Errorf("denied events (by/via) %q, want %q", strings.Join(vias, " "), want)
	}
}

// TestDescribeOtherCLIs: Gemini CLI's and Qwen Code's tools, and a
// dialog read from the screen, are asked about in the words Claude Code's
// are.
func TestDescribeOtherCLIs(t *testing.T) {
	for _, c := range []struct{ tool, input, want string }{
		{"run_shell_command", `{"command":"go test ./...","description":"run the tests"}`, "qa wants to run a command: go test ./..."},
		{"Shell", `{"command":"ls","dialog":"? Shell  ls"}`, "qa wants to run a command: ls"},
		{"write_file", `{"file_path":"/w/a.txt","content":"x\ny\n"}`, "qa wants to write /w/a.txt (2 lines)"},
		{"replace", `{"file_path":"/w/a.go","old_string":"a","new_string":"b"}`, "qa wants to edit /w/a.go"},
		{"edit", `{"file_path":"/w/b.go","old_string":"a","new_string":"b"}`, "qa wants to edit /w/b.go"},
	} {
		q, d := describePermission("qa", c.tool, json.RawMessage(c.input))
		if q != c.want || !strings.Contains(d, "Tool: "+c.tool) {
			t.Errorf("%s %s: question %q (details %q), want %q and the tool's own name", c.tool, c.input, q, d, c.want)
		}
	}
}
