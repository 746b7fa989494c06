package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/office-server/office-server/store/sqlite"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type harness struct {
	t      *testing.T
	r      *Router
	st     *sqlite.Store
	ss     *fakeSessions
	clk    *clock
	office office.Office
	agents map[string]office.Agent
	seq    atomic.Int64
	logs   *bytes.Buffer
	logMu  *sync.Mutex
	used   map[string]bool
}

func newHarness(t *testing.T, mutate func(*Config), agents ...office.Agent) *harness {
	t.Helper()
	clk := &clock{t: time.Now()}
	h := &harness{t: t, clk: clk, st: newTestStore(t), ss: newFakeSessions(), agents: map[string]office.Agent{}, logs: &bytes.Buffer{}, used: map[string]bool{}}
	h.logMu = &sync.Mutex{}
	lw := writerFunc(func(p []byte) (int, error) { h.logMu.Lock(); defer h.logMu.Unlock(); return h.logs.Write(p) })
	cfg := Config{Store: h.st, Sessions: h.ss, Now: clk.Now, Tick: 10 * time.Millisecond, DataDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(lw, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if mutate != nil {
		mutate(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.r = r
	if len(agents) == 0 {
		agents = []office.Agent{{Name: "PO", Role: "product owner"}, {Name: "DEV", Role: "developer", Capabilities: []string{"bash"}}}
	}
	ctx := context.Background()
	off, as, err := r.SyncOffice(ctx, OfficeConfig{Office: office.Office{Name: "acme"}, Agents: agents})
	if err != nil {
		t.Fatal(err)
	}
	h.office = off
	for _, a := range as {
		h.agents[a.Name] = a
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = r.Run(runCtx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Run did not end")
		}
	})
	return h
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func (h *harness) id(name string) string { return h.agents[name].ID }

func (h *harness) agentName(id string) string {
	for n, a := range h.agents {
		if a.ID == id {
			return n
		}
	}
	return id
}

// run marks an agent's session running.
func (h *harness) run(name string) { h.ss.setRunning(h.id(name), true) }

// say feeds what an agent printed, as one chunk ending its turn.
func (h *harness) say(name, text string) string {
	id := fmt.Sprintf("chunk-%d", h.seq.Add(1))
	h.sayID(name, id, text)
	return id
}

func (h *harness) sayID(name, id, text string) {
	h.r.HandleText(session.Text{Key: session.Key{OfficeID: h.office.ID, AgentID: h.id(name)}, ID: id, Lines: strings.Split(text, "\n"), TurnEnd: true})
}

// typed waits for a text containing want typed into name's terminal that
// no earlier call returned, and returns it.
func (h *harness) typed(name, want string) string {
	h.t.Helper()
	id := h.id(name)
	deadline := time.Now().Add(3 * time.Second)
	for {
		h.ss.mu.Lock()
		for i, s := range h.ss.typed[id] {
			if !h.used[id+fmt.Sprint(i)] && strings.Contains(s, want) {
				h.used[id+fmt.Sprint(i)] = true
				h.ss.mu.Unlock()
				return s
			}
		}
		h.ss.mu.Unlock()
		if time.Now().After(deadline) {
			h.ss.mu.Lock()
			defer h.ss.mu.Unlock()
			h.t.Fatalf("%s was not sent %q; typed: %q", name, want, h.ss.typed[id])
			return ""
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// quiet checks nothing new is typed into name for d.
func (h *harness) quiet(name string, d time.Duration) {
	h.t.Helper()
	id := h.id(name)
	h.ss.mu.Lock()
	n := len(h.ss.typed[id])
	h.ss.mu.Unlock()
	time.Sleep(d)
	h.ss.mu.Lock()
	defer h.ss.mu.Unlock()
	if got := h.ss.typed[id]; len(got) > n {
		h.t.Fatalf("unexpected text typed into %s: %q", name, got[n:])
	}
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) questions(status ...string) []office.Question {
	qs, _ := h.st.ListQuestions(context.Background(), office.QuestionFilter{OfficeID: h.office.ID, Status: status})
	return qs
}

func (h *harness) invocations(status ...string) []office.Invocation {
	is, _ := h.st.ListInvocations(context.Background(), office.InvocationFilter{OfficeID: h.office.ID, Status: status})
	return is
}

const askBlock = `[ASK_USER]
question: Which login method?
type: selection
options: ["email", "social", "SSO"]
[/ASK_USER]`

func TestAskAnswerDelivered(t *testing.T) {
	h := newHarness(t, nil)
	h.run("PO")
	ctx := context.Background()
	chunk := h.say("PO", "Let me ask.\n"+askBlock)
	eventually(t, "question", func() bool { return len(h.questions()) == 1 })
	q := h.questions()[0]
	if q.QuestionType != office.QuestionSelection || q.Status != office.QuestionPending || len(q.Options) != 3 || q.AgentID != h.id("PO") {
		t.Fatalf("question = %+v", q)
	}
	// The store keeps microseconds.
	if got := q.ExpiresAt.Sub(h.clk.Now()); got > DefaultQuestionTTL || got < DefaultQuestionTTL-time.Millisecond {
		t.Errorf("expires in %v, want %v", got, DefaultQuestionTTL)
	}
	// The session is marked waiting right after the question is stored.
	eventually(t, "session waiting", func() bool {
		s, _ := h.st.GetSessionByAgent(ctx, h.id("PO"))
		return s.Status == office.SessionWaiting
	})
	// The same chunk again (a re-render, a restart) is not acted on again.
	h.sayID("PO", chunk, "Let me ask.\n"+askBlock)
	time.Sleep(50 * time.Millisecond)
	if n := len(h.questions()); n != 1 {
		t.Fatalf("%d questions after a repeated chunk, want 1", n)
	}
	if _, err := h.r.AnswerQuestion(ctx, q.ID, "passkeys", "u1"); office.ErrorCode(err) != office.EINVALID {
		t.Fatalf("invalid answer: err = %v, want EINVALID", err)
	}
	if _, err := h.r.AnswerQuestion(ctx, q.ID, " sso ", "u1"); err != nil {
		t.Fatal(err)
	}
	got := h.typed("PO", "Answer to question "+q.ID)
	if !strings.Contains(got, "> SSO") || !strings.Contains(got, "Which login method?") {
		t.Errorf("answer typed as %q", got)
	}
	eventually(t, "delivered", func() bool { q2, _ := h.st.GetQuestion(ctx, q.ID); return q2.Status == office.QuestionDelivered })
	h.quiet("PO", 100*time.Millisecond)
	if _, err := h.r.AnswerQuestion(ctx, q.ID, "email", "u1"); office.ErrorCode(err) != office.ECONFLICT {
		t.Errorf("second answer: %v, want ECONFLICT", err)
	}
	// Answered, the agent works on the answer: the session's next status
	// ends `waiting`.
	h.r.HandleStatus(session.Key{OfficeID: h.office.ID, AgentID: h.id("PO")}, office.SessionBusy, session.Info{PID: 42})
	eventually(t, "session busy after the answer", func() bool {
		s, _ := h.st.GetSessionByAgent(ctx, h.id("PO"))
		return s.Status == office.SessionBusy
	})
}

// TestWaitingWhileAQuestionIsPending: the session's ready and busy do not
// end `waiting` while a question is pending.
func TestWaitingWhileAQuestionIsPending(t *testing.T) {
	h := newHarness(t, nil)
	h.run("PO")
	ctx := context.Background()
	h.say("PO", askBlock)
	eventually(t, "session waiting", func() bool {
		s, _ := h.st.GetSessionByAgent(ctx, h.id("PO"))
		return s.Status == office.SessionWaiting
	})
	for _, st := range []session.Status{office.SessionBusy, office.SessionReady} {
		h.r.HandleStatus(session.Key{OfficeID: h.office.ID, AgentID: h.id("PO")}, st, session.Info{PID: 42})
	}
	time.Sleep(100 * time.Millisecond)
	if s, _ := h.st.GetSessionByAgent(ctx, h.id("PO")); s.Status != office.SessionWaiting {
		t.Errorf("session %q with a question pending, want waiting", s.Status)
	}
	// A question that ends without an answer to deliver (cancelled here,
	// as a person may from the console) leaves nothing to wait for: the
	// session's next status is recorded (it stayed waiting for ever).
	q := h.questions()[0]
	if _, err := h.st.CancelQuestion(ctx, q.ID); err != nil {
		t.Fatal(err)
	}
	h.r.HandleStatus(session.Key{OfficeID: h.office.ID, AgentID: h.id("PO")}, office.SessionReady, session.Info{PID: 42})
	eventually(t, "session ready", func() bool {
		s, _ := h.st.GetSessionByAgent(ctx, h.id("PO"))
		return s.Status == office.SessionReady
	})
}

func TestConfirmationAnswer(t *testing.T) {
	for _, tt := range []struct{ in, want, err string }{{"Y", "yes", ""}, {"아니오", "no", ""}, {"maybe", "", "not yes or no"}} {
		got, err := validAnswer(office.Question{QuestionType: office.QuestionConfirmation, Response: tt.in})
		if got != tt.want || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("validAnswer(%q) = %q, %v", tt.in, got, err)
		}
	}
}

// An invalid answer written straight into the table (as the frontend may)
// is not typed: the question is asked again, saying why.
func TestInvalidAnswerReasked(t *testing.T) {
	h := newHarness(t, nil)
	h.run("PO")
	ctx := context.Background()
	h.say("PO", askBlock)
	eventually(t, "question", func() bool { return len(h.questions()) == 1 })
	q := h.questions()[0]
	if _, _, err := h.st.AnswerQuestion(ctx, q.ID, "carrier pigeon", "u1"); err != nil {
		t.Fatal(err)
	}
	h.r.onChange(office.Change{Table: office.TableQuestions, Op: office.OpUpdate, ID: q.ID, OfficeID: q.OfficeID, AgentID: q.AgentID, Status: office.QuestionAnswered})
	eventually(t, "re-asked", func() bool { return len(h.questions(office.QuestionPending)) == 1 })
	nq := h.questions(office.QuestionPending)[0]
	if !strings.Contains(nq.Context, "not one of the options") || nq.Question != q.Question {
		t.Errorf("re-asked question = %+v", nq)
	}
	if old, _ := h.st.GetQuestion(ctx, q.ID); old.Status != office.QuestionCancelled {
		t.Errorf("old question %s, want cancelled", old.Status)
	}
	h.quiet("PO", 100*time.Millisecond)
}

func TestAnswerDeliveredWhenSessionBack(t *testing.T) {
	h := newHarness(t, nil)
	h.run("PO")
	ctx := context.Background()
	h.say("PO", askBlock)
	eventually(t, "question", func() bool { return len(h.questions()) == 1 })
	q := h.questions()[0]
	h.ss.setRunning(h.id("PO"), false)
	if _, err := h.r.AnswerQuestion(ctx, q.ID, "email", ""); err != nil {
		t.Fatal(err)
	}
	h.quiet("PO", 100*time.Millisecond)
	if q2, _ := h.st.GetQuestion(ctx, q.ID); q2.Status != office.QuestionAnswered {
		t.Fatalf("status %s while the session is down, want answered", q2.Status)
	}
	h.run("PO")
	h.r.HandleStatus(session.Key{OfficeID: h.office.ID, AgentID: h.id("PO")}, office.SessionReady, session.Info{PID: 42})
	h.typed("PO", "> email")
	h.quiet("PO", 100*time.Millisecond)
}

// An agent that asks the same question again (a restarted agent that
// starts over) waits for the new one only: its earlier copy, still
// pending, is cancelled with the reason in the history. Other questions,
// another agent's, and an answered copy (its answer is delivered) stay.
func TestSameQuestionAgainSupersedes(t *testing.T) {
	h := newHarness(t, nil)
	h.run("PO")
	ctx := context.Background()
	other := "[ASK_USER]\nquestion: Which database?\n[/ASK_USER]"
	h.say("PO", askBlock)
	h.say("PO", other)
	h.say("DEV", askBlock)
	eventually(t, "three questions", func() bool { return len(h.questions(office.QuestionPending)) == 3 })
	var first office.Question
	for _, q := range h.questions() {
		if q.AgentID == h.id("PO") && q.Question == "Which login method?" {
			first = q
		}
	}
	// A person answers "Which database?" while PO's process is down.
	h.ss.setRunning(h.id("PO"), false)
	for _, q := range h.questions() {
		if q.Question == "Which database?" {
			if _, err := h.r.AnswerQuestion(ctx, q.ID, "SQLite", "u1"); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A new process starts over and asks both again.
	h.run("PO")
	h.r.HandleStatus(session.Key{OfficeID: h.office.ID, AgentID: h.id("PO")}, office.SessionStarting, session.Info{PID: 43})
	again := h.say("PO", "[ASK_USER]\nquestion: Which login method?  \ncontext: asked again\n[/ASK_USER]\n"+other)
	eventually(t, "the first copy cancelled", func() bool {
		q, _ := h.st.GetQuestion(ctx, first.ID)
		return q.Status == office.QuestionCancelled
	})
	h.typed("PO", "> SQLite") // the answered copy keeps its answer
	want := map[string]int{"PO: Which login method?": 1, "PO: Which database?": 1, "DEV: Which login method?": 1}
	var pending map[string]int
	// The chunk's second block may still be handled: wait for it, then
	// compare (a copy too many stays a failure).
	deadline := time.Now().Add(5 * time.Second)
	for {
		pending = map[string]int{}
		for _, q := range h.questions(office.QuestionPending) {
			pending[h.agentName(q.AgentID)+": "+q.Question]++
		}
		if cmp.Equal(pending, want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := cmp.Diff(pending, want); d != "" {
		t.Errorf("pending questions (-got +want):\n%s", d)
	}
	if _, err := h.r.AnswerQuestion(ctx, first.ID, "email", "u1"); office.ErrorCode(err) != office.ECONFLICT {
		t.Errorf("answer to the cancelled copy: %v, want ECONFLICT", err)
	}
	// The same words read again (a re-render, a restart): nothing new.
	h.sayID("PO", again, "[ASK_USER]\nquestion: Which login method?\n[/ASK_USER]\n"+other)
	time.Sleep(100 * time.Millisecond)
	evs, err := h.st.ListEvents(ctx, office.EventFilter{OfficeID: h.office.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var cancelled []string
	for _, ev := range evs {
		if ev.Kind == "question.cancelled" {
			cancelled = append(cancelled, string(ev.Payload))
		}
	}
	if len(cancelled) != 1 || !strings.Contains(cancelled[0], first.ID) || !strings.Contains(cancelled[0], "PO asked the same question again") {
		t.Errorf("question.cancelled events %q, want one for %s with the reason", cancelled, first.ID)
	}
}

// A question asked again whose row was written by a process that died
// before it cancelled the earlier copy: the replayed message cancels it.
func TestSameQuestionAgainAfterCrashWindow(t *testing.T) {
	h := newHarness(t, nil)
	h.run("PO")
	ctx := context.Background()
	h.say("PO", askBlock)
	eventually(t, "question", func() bool { return len(h.questions(office.QuestionPending)) == 1 })
	first := h.questions()[0]
	// The "previous process" recorded the message and its row, and died.
	if _, _, err := h.st.AppendEvent(ctx, office.Event{OfficeID: h.office.ID, AgentID: h.id("PO"), Kind: "message.ask_user", DedupeKey: "entry-9#0"}); err != nil {
		t.Fatal(err)
	}
	src := source{officeID: h.office.ID, agentID: h.id("PO"), key: "entry-9#0"}
	if _, err := h.st.CreateQuestion(ctx, office.Question{ID: src.rowID("question/"), OfficeID: h.office.ID, AgentID: h.id("PO"),
		QuestionType: office.QuestionSelection, Question: first.Question, Options: first.Options, Status: office.QuestionPending,
		ExpiresAt: h.clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	h.sayID("PO", "entry-9", askBlock)
	eventually(t, "the first copy cancelled", func() bool {
		q, _ := h.st.GetQuestion(ctx, first.ID)
		return q.Status == office.QuestionCancelled
	})
	if qs := h.questions(office.QuestionPending); len(qs) != 1 || qs[0].ID != src.rowID("question/") {
		t.Errorf("pending %+v, want the replayed message's question only", qs)
	}
}

func TestQuestionExpires(t *testing.T) {
	h := newHarness(t, nil)
	h.run("PO")
	h.say("PO", "[ASK_USER]\nquestion: Proceed?\ntype: confirmation\n[/ASK_USER]\n[USER_QUESTION]\ncategory: choice\nquestion: Which DB?\noptions:\n  - PostgreSQL\n  - SQLite\ndefault: PostgreSQL\nrequired: true\n[/USER_QUESTION]")
	eventually(t, "questions", func() bool { return len(h.questions()) == 2 })
	h.clk.Add(DefaultQuestionTTL + time.Second)
	got := h.typed("PO", "expired")
	got2 := h.typed("PO", "expired")
	all := got + got2
	if !strings.Contains(all, "default answer: PostgreSQL") || !strings.Contains(all, "Decide yourself") {
		t.Errorf("expiry notices: %q", all)
	}
	if n := len(h.questions(office.QuestionExpired)); n != 2 {
		t.Errorf("%d expired, want 2", n)
	}
}

func TestInvokeDeliverResult(t *testing.T) {
	h := newHarness(t, nil)
	h.run("PO")
	ctx := context.Background()
	h.say("PO", "[INVOKE:dev]\nImplement login.\ncontext: email only\n[/INVOKE:dev]")
	task := h.typed("DEV", "[OFFICE] Task ")
	if !strings.Contains(task, "from PO") || !strings.Contains(task, "> Implement login.") || !strings.Contains(task, "> email only") {
		t.Errorf("task typed as %q", task)
	}
	if starts := h.ss.starts[h.id("DEV")]; len(starts) != 1 || starts[0].SystemPrompt == "" || starts[0].ConversationID == "" {
		t.Fatalf("DEV starts = %+v", starts)
	}
	invs := h.invocations()
	if len(invs) != 1 || invs[0].Depth != 1 || !strings.Contains(task, invs[0].ID) {
		t.Fatalf("invocations = %+v", invs)
	}
	eventually(t, "in progress", func() bool { return h.invocations(office.InvocationInProgress) != nil })
	h.say("DEV", "[DELIVER_RESULT:po]\ntype: markdown\ncontent: Login is done.\n[/DELIVER_RESULT:po]")
	res := h.typed("PO", "Result from DEV for task "+invs[0].ID)
	if !strings.Contains(res, "> Login is done.") {
		t.Errorf("result typed as %q", res)
	}
	eventually(t, "completed", func() bool {
		i, _ := h.st.GetInvocation(ctx, invs[0].ID)
		return i.Status == office.InvocationCompleted && i.ResultID != ""
	})
}

func TestInvokeOneTaskAtATime(t *testing.T) {
	h := newHarness(t, nil, office.Agent{Name: "PO"}, office.Agent{Name: "QA"}, office.Agent{Name: "DEV", MaxLoad: 5})
	h.run("PO")
	h.run("QA")
	h.say("PO", "[INVOKE:DEV]\nfirst\n[/INVOKE:DEV]")
	h.typed("DEV", "> first")
	h.say("QA", "[INVOKE:DEV]\nsecond\n[/INVOKE:DEV]")
	h.quiet("DEV", 150*time.Millisecond)
	h.say("DEV", "[DELIVER_RESULT:PO]\ncontent: one\n[/DELIVER_RESULT:PO]")
	h.typed("DEV", "> second")
}

func TestInvokeRejections(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DepthLimit = 2 }, office.Agent{Name: "A"}, office.Agent{Name: "B"}, office.Agent{Name: "C"}, office.Agent{Name: "D", AllowedActions: []string{"deliver_result"}})
	for _, n := range []string{"A", "B", "C", "D"} {
		h.run(n)
	}
	h.say("A", "[INVOKE:A]\nmyself\n[/INVOKE:A]")
	if got := h.typed("A", "rejected"); !strings.Contains(got, "cannot invoke itself") {
		t.Errorf("self: %q", got)
	}
	h.say("A", "[INVOKE:nobody]\nx\n[/INVOKE:nobody]")
	if got := h.typed("A", "rejected"); !strings.Contains(got, `"nobody"`) {
		t.Errorf("unknown: %q", got)
	}
	h.say("A", "[INVOKE:B]\ntask for B\n[/INVOKE:B]")
	h.typed("B", "task for B")
	eventually(t, "in progress", func() bool { return len(h.invocations(office.InvocationInProgress)) == 1 })
	// B waits on A already: A's turn to invoke B is fine (B is busy, it
	// queues), but B invoking A is a cycle.
	h.say("B", "[INVOKE:a]\nback to A\n[/INVOKE:a]")
	if got := h.typed("B", "rejected"); !strings.Contains(got, "cycle") {
		t.Errorf("cycle: %q", got)
	}
	h.say("B", "[INVOKE:C]\ntask for C\n[/INVOKE:C]")
	h.typed("C", "task for C")
	eventually(t, "C in progress", func() bool { return len(h.invocations(office.InvocationInProgress)) == 2 })
	// C is at depth 2; a third level is over the limit.
	h.say("C", "[INVOKE:D]\ntoo deep\n[/INVOKE:D]")
	if got := h.typed("C", "rejected"); !strings.Contains(got, "over the limit of 2") {
		t.Errorf("depth: %q", got)
	}
	// Indirect cycle: C waits on nobody, but A → B → C; C invoking A loops.
	h.say("D", "[INVOKE:A]\nnot allowed\n[/INVOKE:A]")
	if got := h.typed("D", "refused"); !strings.Contains(got, "may not invoke") {
		t.Errorf("forbidden: %q", got)
	}
	if n := len(h.invocations(office.InvocationRejected)); n != 4 {
		t.Errorf("%d rejected invocations recorded, want 4", n)
	}
}

func TestIndirectCycle(t *testing.T) {
	h := newHarness(t, nil, office.Agent{Name: "A"}, office.Agent{Name: "B"}, office.Agent{Name: "C"})
	for _, n := range []string{"A", "B", "C"} {
		h.run(n)
	}
	h.say("A", "[INVOKE:B]\nb\n[/INVOKE:B]")
	h.typed("B", "> b")
	h.say("B", "[INVOKE:C]\nc\n[/INVOKE:C]")
	h.typed("C", "> c")
	h.say("C", "[INVOKE:A]\na\n[/INVOKE:A]")
	if got := h.typed("C", "rejected"); !strings.Contains(got, "A → B → C") {
		t.Errorf("indirect cycle: %q", got)
	}
}

func TestCalleeFailsForGood(t *testing.T) {
	h := newHarness(t, nil)
	h.run("PO")
	ctx := context.Background()
	h.say("PO", "[INVOKE:DEV]\nwork\n[/INVOKE:DEV]")
	h.typed("DEV", "> work")
	h.ss.setRunning(h.id("DEV"), false)
	h.r.HandleStatus(session.Key{OfficeID: h.office.ID, AgentID: h.id("DEV")}, office.SessionFailed, session.Info{})
	got := h.typed("PO", "failed")
	if !strings.Contains(got, "DEV failed:\n"+quote("its session failed for good")) {
		t.Errorf("told %q", got)
	}
	if a, _ := h.st.GetAgent(ctx, h.id("DEV")); a.Status != office.AgentFailed {
		t.Errorf("agent status %s", a.Status)
	}
	if n := len(h.invocations(office.InvocationFailed)); n != 1 {
		t.Errorf("%d failed invocations", n)
	}
}

func TestInvocationTimeout(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InvocationTimeout = time.Minute })
	h.run("PO")
	h.say("PO", "[INVOKE:DEV]\nwork\n[/INVOKE:DEV]")
	h.typed("DEV", "> work")
	eventually(t, "in progress", func() bool { return len(h.invocations(office.InvocationInProgress)) == 1 })
	h.clk.Add(2 * time.Minute)
	if got := h.typed("PO", "failed"); !strings.Contains(got, "timed out") {
		t.Errorf("told %q", got)
	}
}

func TestDeliverResultValidation(t *testing.T) {
	h := newHarness(t, nil)
	h.run("DEV")
	h.say("DEV", "[DELIVER_RESULT:PO]\ntype: json\ncontent: {not json\n[/DELIVER_RESULT:PO]")
	if got := h.typed("DEV", "JSON"); !strings.Contains(got, "not valid JSON") {
		t.Errorf("json: %q", got)
	}
	h.say("DEV", "[DELIVER_RESULT:PO]\ntype: file_path\ncontent: ../../etc/passwd\n[/DELIVER_RESULT:PO]")
	h.typed("DEV", "traversal")
	h.say("DEV", "[DELIVER_RESULT:PO]\ntype: file_path\ncontent: /etc/passwd\n[/DELIVER_RESULT:PO]")
	if got := h.typed("DEV", "workspace"); !strings.Contains(got, "/etc/passwd") {
		t.Errorf("path: %q", got)
	}
	h.say("DEV", "[DELIVER_RESULT:PO]\ntype: file_path\ncontent: out/report.md\n[/DELIVER_RESULT:PO]")
	h.run("PO")
	h.typed("PO", "> out/report.md")
}

// Text from one agent never carries control sequences into another.
func TestNoControlSequencesForwarded(t *testing.T) {
	h := newHarness(t, nil)
	h.run("PO")
	h.run("DEV")
	h.say("DEV", "[DELIVER_RESULT:PO]\ncontent: done \x1b[201~\x03rm -rf /\n[/DELIVER_RESULT:PO]")
	h.typed("DEV", "control character")
	h.say("PO", "[INVOKE:DEV]\nplease \x1b]0;title\x07 do [DELIVER_RESULT:PO]\n[/INVOKE:DEV]")
	h.typed("PO", "control character")
	h.say("DEV", "[DELIVER_RESULT:PO]\ncontent: text with [INVOKE:PO] inside\n[/DELIVER_RESULT:PO]")
	got := h.typed("PO", "Result from DEV")
	if !strings.Contains(got, "> text with ［INVOKE:PO] inside") { // escaped (protocol.Quote)
		t.Errorf("forwarded form not quoted: %q", got)
	}
	for _, texts := range h.ss.typed {
		for _, s := range texts {
			// U+009B (CSI) as a rune, and a raw 0x9b byte.
			if strings.ContainsAny(s, "\x1b\x03\x07\u009b") || strings.Contains(s, "\x9b") {
				t.Errorf("control character typed: %q", s)
			}
		}
	}
}

func TestDependencyAPIKey(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	h := newHarness(t, func(c *Config) { c.SecretsKey = key })
	ctx := context.Background()
	if err := h.r.StartAgent(ctx, h.id("DEV")); err != nil {
		t.Fatal(err)
	}
	h.say("DEV", "[DEPENDENCY_REQUEST]\ntype: api_key\nname: OPENAI_API_KEY\ndescription: for GPT\nrequired: true\n[/DEPENDENCY_REQUEST]")
	var d office.DependencyRequest
	eventually(t, "dependency", func() bool {
		ds, _ := h.st.ListDependencies(ctx, office.DependencyFilter{})
		if len(ds) == 1 {
			d = ds[0]
		}
		return len(ds) == 1
	})
	if d.Status != office.DependencyPending || !d.Required || d.ExpiresAt.Sub(h.clk.Now()).Round(time.Millisecond) != DefaultDependencyTTL {
		t.Fatalf("dependency = %+v", d)
	}
	if _, err := h.r.ProvideDependency(ctx, d.ID, "short"); office.ErrorCode(err) != office.EINVALID {
		t.Fatalf("short key: %v", err)
	}
	secret := "sk-secretvalue123456"
	if _, err := h.r.ProvideDependency(ctx, d.ID, secret); err != nil {
		t.Fatal(err)
	}
	got := h.typed("DEV", "[DEPENDENCY_PROVIDED]")
	if strings.Contains(got, secret) {
		t.Errorf("secret typed into the terminal: %q", got)
	}
	stored, _ := h.st.GetDependency(ctx, d.ID)
	if bytes.Contains(stored.Value, []byte(secret)) || len(stored.Value) == 0 {
		t.Errorf("secret stored in clear")
	}
	starts := h.ss.starts[h.id("DEV")]
	last := starts[len(starts)-1]
	if !containsStr(last.Env, "OPENAI_API_KEY="+secret) || !last.Resume {
		t.Errorf("restart spec env=%q resume=%v", last.Env, last.Resume)
	}
	evs, _ := h.st.ListEvents(ctx, office.EventFilter{Limit: 1000})
	for _, e := range evs {
		if strings.Contains(string(e.Payload)+e.Raw, secret) {
			t.Errorf("secret in event %s", e.Kind)
		}
	}
	if strings.Contains(h.logs.String(), secret) {
		t.Errorf("secret logged")
	}
}

func TestDependencySecretNeedsKey(t *testing.T) {
	h := newHarness(t, nil)
	h.run("DEV")
	ctx := context.Background()
	h.say("DEV", "[DEPENDENCY_REQUEST]\ntype: api_key\nname: K\ndescription: k\nrequired: true\n[/DEPENDENCY_REQUEST]")
	var ds []office.DependencyRequest
	eventually(t, "dependency", func() bool { ds, _ = h.st.ListDependencies(ctx, office.DependencyFilter{}); return len(ds) == 1 })
	if _, err := h.r.ProvideDependency(ctx, ds[0].ID, "sk-1234567890"); office.ErrorCode(err) != office.EUNAVAILABLE {
		t.Errorf("no key: %v, want EUNAVAILABLE", err)
	}
}

func TestDependencyRejectAndExpire(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InvocationTimeout = 10 * time.Hour })
	h.run("PO")
	ctx := context.Background()
	h.say("PO", "[INVOKE:DEV]\nwork\n[/INVOKE:DEV]")
	h.typed("DEV", "> work")
	h.say("DEV", "[DEPENDENCY_REQUEST]\ntype: service\nname: stripe\ndescription: payments\nrequired: true\n[/DEPENDENCY_REQUEST]\n[DEPENDENCY_REQUEST]\ntype: file\nname: logo.png\ndescription: logo\nrequired: false\ndefault: placeholder.png\n[/DEPENDENCY_REQUEST]")
	var ds []office.DependencyRequest
	eventually(t, "dependencies", func() bool { ds, _ = h.st.ListDependencies(ctx, office.DependencyFilter{}); return len(ds) == 2 })
	h.clk.Add(DefaultDependencyTTL + time.Second) // the optional one expires…
	var opt, req office.DependencyRequest
	for _, d := range ds {
		if d.Required {
			req = d
		} else {
			opt = d
		}
	}
	_ = opt
	got := h.typed("DEV", "logo.png")
	if !strings.Contains(got, "placeholder.png") {
		t.Errorf("optional expired: %q", got)
	}
	// …and so does the required one, failing the task.
	if got := h.typed("DEV", "stripe"); !strings.Contains(got, "cannot go on") {
		t.Errorf("required expired: %q", got)
	}
	if got := h.typed("PO", "failed"); !strings.Contains(got, "required dependency stripe") {
		t.Errorf("caller told %q", got)
	}
	if _, err := h.r.RejectDependency(ctx, req.ID, "no"); office.ErrorCode(err) != office.ECONFLICT {
		t.Errorf("reject expired: %v", err)
	}
}

func TestDependencyProvidedService(t *testing.T) {
	h := newHarness(t, nil)
	h.run("DEV")
	ctx := context.Background()
	h.say("DEV", "[DEPENDENCY_REQUEST]\ntype: service\nname: api\ndescription: url\nrequired: true\n[/DEPENDENCY_REQUEST]")
	var ds []office.DependencyRequest
	eventually(t, "dependency", func() bool { ds, _ = h.st.ListDependencies(ctx, office.DependencyFilter{}); return len(ds) == 1 })
	if _, err := h.r.ProvideDependency(ctx, ds[0].ID, "ftp://x"); office.ErrorCode(err) != office.EINVALID {
		t.Errorf("ftp: %v", err)
	}
	if _, err := h.r.ProvideDependency(ctx, ds[0].ID, "https://api.example.com"); err != nil {
		t.Fatal(err)
	}
	if got := h.typed("DEV", "[DEPENDENCY_PROVIDED]"); !strings.Contains(got, "value: https://api.example.com") {
		t.Errorf("provided: %q", got)
	}
}

func TestErrorRecoveries(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RetryBackoff = time.Minute })
	h.run("PO")
	h.run("DEV")
	h.say("DEV", "[ERROR]\ntype: recoverable\nmessage: Rate limit exceeded\nrecovery: pause_and_retry\n[/ERROR]")
	// The clock moves only once the retry is queued: moved before, the
	// retry would be due two minutes after the new now and never fire.
	eventually(t, "retry queued", func() bool {
		q := &h.r.sweep.timers.retries
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.waiting) == 1
	})
	h.quiet("DEV", 100*time.Millisecond)
	h.clk.Add(2 * time.Minute)
	h.typed("DEV", "retry now")
	h.say("DEV", "[ERROR]\ntype: recoverable\nmessage: Need a human\nrecovery: notify_user\n[/ERROR]")
	eventually(t, "question", func() bool { return len(h.questions()) == 1 })
	if q := h.questions()[0]; !strings.Contains(q.Question, "Need a human") {
		t.Errorf("question %q", q.Question)
	}
	h.say("PO", "[INVOKE:DEV]\nwork\n[/INVOKE:DEV]")
	h.typed("DEV", "> work")
	h.say("DEV", "[ERROR]\ntype: fatal\nmessage: broken guide\nrecovery: checkpoint_and_fail\n[/ERROR]")
	if got := h.typed("PO", "failed"); !strings.Contains(got, "fatal error: broken guide") {
		t.Errorf("caller told %q", got)
	}
	eventually(t, "stopped", func() bool { return !h.ss.Running(h.office.ID, h.id("DEV")) })
}

func TestPriorityWithinTurn(t *testing.T) {
	h := newHarness(t, nil)
	h.run("DEV")
	h.say("DEV", askBlock+"\n[ERROR]\ntype: recoverable\nmessage: m\nrecovery: pause_and_retry\n[/ERROR]\n=== PHASE 1 COMPLETE ===")
	eventually(t, "events", func() bool { return len(eventKinds(t, h.st)) >= 3 })
	var msgs []string
	for _, k := range eventKinds(t, h.st) {
		if strings.HasPrefix(k, "message.") {
			msgs = append(msgs, k)
		}
	}
	want := []string{"message.error", "message.phase_complete", "message.ask_user"}
	if strings.Join(msgs, ",") != strings.Join(want, ",") {
		t.Errorf("order %v, want %v", msgs, want)
	}
	if p := h.r.Progress(h.office.ID, h.id("DEV")); p.Phase != 1 {
		t.Errorf("progress %+v", p)
	}
}

func TestProgress(t *testing.T) {
	h := newHarness(t, nil)
	h.say("DEV", "Step 3/9: Design the schema")
	eventually(t, "progress", func() bool { return h.r.Progress(h.office.ID, h.id("DEV")).Step == 3 })
	if p := h.r.Progress(h.office.ID, h.id("DEV")); p.Steps != 9 || p.StepName != "Design the schema" {
		t.Errorf("progress %+v", p)
	}
}

func TestInvalidBlockTold(t *testing.T) {
	h := newHarness(t, nil)
	h.run("DEV")
	h.say("DEV", "[DEPENDENCY_REQUEST]\ntype: spaceship\nname: x\n[/DEPENDENCY_REQUEST]")
	got := h.typed("DEV", "was not accepted")
	if !strings.Contains(got, "DEPENDENCY_REQUEST") || !strings.Contains(got, "print it again") {
		t.Errorf("told %q", got)
	}
}

func TestProxyRequest(t *testing.T) {
	h := newHarness(t, nil,
		office.Agent{Name: "pm", Role: "pm", Capabilities: []string{"todowrite", "todoread", "bash"}, Priority: 1},
		office.Agent{Name: "general", Capabilities: []string{"todowrite", "todoread", "webfetch"}, Priority: 2},
		office.Agent{Name: "senior-sw-engineer", Capabilities: []string{"bash"}},
		office.Agent{Name: "py-code-reviewer", AllowedActions: []string{"deliver_result"}})
	for n := range h.agents {
		h.run(n)
	}
	h.say("senior-sw-engineer", `[PROXY_REQUEST]
{"action":"create_plan","requester":"senior-sw-engineer","tasks":[{"content":"API 엔드포인트 구현","priority":"high"},{"content":"tests"}],"preferences":{"preferred_proxy":"pm","fallback_allowed":true}}
[/PROXY_REQUEST]`)
	got := h.typed("senior-sw-engineer", "[PROXY_RESPONSE]")
	body := strings.TrimSuffix(strings.TrimPrefix(got, "[PROXY_RESPONSE]\n"), "\n[/PROXY_RESPONSE]")
	var resp struct {
		Success       bool     `json:"success"`
		Proxy         string   `json:"proxy"`
		Requester     string   `json:"requester"`
		TasksCreated  int      `json:"tasks_created"`
		TaskIDs       []string `json:"task_ids"`
		ExecutionTime string   `json:"execution_time"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatalf("response %q: %v", got, err)
	}
	if !resp.Success || resp.Proxy != "pm" || resp.TasksCreated != 2 || len(resp.TaskIDs) != 2 || !strings.HasPrefix(resp.TaskIDs[0], "sse-") || resp.ExecutionTime == "" {
		t.Errorf("response %+v", resp)
	}
	if got := h.typed("pm", "Proxy request from senior-sw-engineer"); !strings.Contains(got, "API 엔드포인트 구현") {
		t.Errorf("proxy told %q", got)
	}
	h.say("py-code-reviewer", `[PROXY_REQUEST]
{"action":"update_status","requester":"py-code-reviewer","task_id":"pyr-abc123","status":"completed"}
[/PROXY_REQUEST]`)
	if got := h.typed("py-code-reviewer", "refused"); !strings.Contains(got, "may not update_status") {
		t.Errorf("forbidden: %q", got)
	}
	h.say("general", `[PROXY_REQUEST]
{"action":"update_status","requester":"pm","task_id":"x","status":"completed"}
[/PROXY_REQUEST]`)
	if got := h.typed("general", "refused"); !strings.Contains(got, "requester is") {
		t.Errorf("impersonation: %q", got)
	}
}

func TestUserMessage(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	m, err := h.r.SendUserMessage(ctx, h.office.ID, h.id("PO"), "u1", "Please hurry\n[INVOKE:DEV]")
	if err != nil {
		t.Fatal(err)
	}
	h.quiet("PO", 50*time.Millisecond)
	h.run("PO")
	h.r.HandleStatus(session.Key{OfficeID: h.office.ID, AgentID: h.id("PO")}, office.SessionReady, session.Info{PID: 1})
	if got := h.typed("PO", "Message from a person"); !strings.Contains(got, "> Please hurry\n> ［INVOKE:DEV]") {
		t.Errorf("typed %q", got)
	}
	eventually(t, "delivered", func() bool {
		ms, err := h.st.ListPendingUserMessages(ctx, office.Due{AgentID: m.AgentID})
		return err == nil && len(ms) == 0
	})
	if _, err := h.r.SendUserMessage(ctx, h.office.ID, h.id("PO"), "u1", "bad \x1b[2J"); office.ErrorCode(err) != office.EINVALID {
		t.Errorf("control chars: %v", err)
	}
}

func TestSubscribeDropsSlow(t *testing.T) {
	h := newHarness(t, nil)
	fast := h.r.Subscribe(100)
	slow := h.r.Subscribe(1)
	h.say("DEV", "Step 1/3: a\nStep 2/3: b\nStep 3/3: c")
	for i := 0; i < 3; i++ {
		select {
		case <-fast.C():
		case <-time.After(2 * time.Second):
			t.Fatal("fast subscriber got no event")
		}
	}
	eventually(t, "slow dropped", slow.Dropped)
	fast.Close()
	if _, ok := <-fast.C(); ok {
		// drain leftovers until closed
		for range fast.C() {
		}
	}
}

func TestCallGraph(t *testing.T) {
	h := newHarness(t, nil)
	h.run("PO")
	h.say("PO", "[INVOKE:DEV]\nwork\n[/INVOKE:DEV]")
	h.typed("DEV", "> work")
	g, err := h.r.CallGraph(context.Background(), h.office.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Edges) != 1 || g.Edges[0].Caller != "PO" || g.Edges[0].Callee != "DEV" {
		t.Errorf("graph %+v", g)
	}
}

func TestSealer(t *testing.T) {
	s, err := office.NewSealer(bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Seal("sk-abcdefgh", true)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("sk-abcdefgh")) {
		t.Fatal("sealed value holds the plaintext")
	}
	if v, err := s.Open(b); err != nil || v != "sk-abcdefgh" {
		t.Fatalf("Open = %q, %v", v, err)
	}
	b[len(b)-1] ^= 1
	if _, err := s.Open(b); err == nil {
		t.Error("tampered value opened")
	}
	other, _ := office.NewSealer(bytes.Repeat([]byte{2}, 32))
	b[len(b)-1] ^= 1
	if _, err := other.Open(b); err == nil {
		t.Error("opened with the wrong key")
	}
	if _, err := office.NewSealer([]byte("short")); err == nil {
		t.Error("short key accepted")
	}
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A chunk read again by a new Router on the same store (a server restart
// re-reading Claude Code's transcript) is not acted on again.
func TestExactlyOnceAcrossRouters(t *testing.T) {
	h := newHarness(t, nil)
	h.run("PO")
	h.sayID("PO", "transcript-uuid-1", askBlock+"\n[INVOKE:DEV]\ntask\n[/INVOKE:DEV]")
	eventually(t, "question and invocation", func() bool { return len(h.questions()) == 1 && len(h.invocations()) == 1 })
	r2, err := New(Config{Store: h.st, Sessions: h.ss, Now: h.clk.Now, Tick: 10 * time.Millisecond, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r2.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	r2.HandleText(session.Text{Key: session.Key{OfficeID: h.office.ID, AgentID: h.id("PO")}, ID: "transcript-uuid-1", Lines: strings.Split(askBlock+"\n[INVOKE:DEV]\ntask\n[/INVOKE:DEV]", "\n"), TurnEnd: true})
	time.Sleep(100 * time.Millisecond)
	if q, i := len(h.questions()), len(h.invocations()); q != 1 || i != 1 {
		t.Fatalf("after re-reading: %d questions, %d invocations; want 1 and 1", q, i)
	}
	// Screen chunk IDs restart with the process: after a new start the same
	// "screen:1" is a new message.
	h.r.HandleStatus(session.Key{OfficeID: h.office.ID, AgentID: h.id("DEV")}, office.SessionStarting, session.Info{PID: 1})
	h.r.HandleText(session.Text{Key: session.Key{OfficeID: h.office.ID, AgentID: h.id("DEV")}, ID: "screen:1", Source: session.FromScreen, Lines: []string{"Step 1/2: a"}, TurnEnd: true})
	h.r.HandleStatus(session.Key{OfficeID: h.office.ID, AgentID: h.id("DEV")}, office.SessionStarting, session.Info{PID: 2})
	time.Sleep(20 * time.Millisecond)
	h.r.HandleText(session.Text{Key: session.Key{OfficeID: h.office.ID, AgentID: h.id("DEV")}, ID: "screen:1", Source: session.FromScreen, Lines: []string{"Step 2/2: b"}, TurnEnd: true})
	eventually(t, "second screen chunk acted on", func() bool { return h.r.Progress(h.office.ID, h.id("DEV")).Step == 2 })
}

// A person's answer is untrusted too: whatever the frontend wrote, no
// control sequence reaches the terminal.
func TestAnswerSanitised(t *testing.T) {
	h := newHarness(t, nil)
	h.run("PO")
	ctx := context.Background()
	h.say("PO", "[ASK_USER]\nquestion: Name?\n[/ASK_USER]")
	eventually(t, "question", func() bool { return len(h.questions()) == 1 })
	q := h.questions()[0]
	if _, _, err := h.st.AnswerQuestion(ctx, q.ID, "Bob\x1b[201~\x03\rrm -rf /\x1b]0;x\x07", "u1"); err != nil {
		t.Fatal(err)
	}
	h.r.onChange(office.Change{Table: office.TableQuestions, Op: office.OpUpdate, ID: q.ID, OfficeID: q.OfficeID, AgentID: q.AgentID, Status: office.QuestionAnswered})
	got := h.typed("PO", "Answer to question")
	if strings.ContainsAny(got, "\x1b\x03\x07\r") {
		t.Errorf("control characters typed: %q", got)
	}
	if !strings.Contains(got, "Bob") {
		t.Errorf("answer lost: %q", got)
	}
	for _, l := range strings.Split(got, "\n")[1:] {
		if !strings.HasPrefix(l, "> ") {
			t.Errorf("content line not quoted: %q in %q", l, got)
		}
	}
}

// When every agent for the target is down, the caller is told, the
// refusal is stored, and a person is asked (the end of the fallback chain).
func TestInvokeAllDownAsksUser(t *testing.T) {
	h := newHarness(t, nil, office.Agent{Name: "PO"}, office.Agent{Name: "DEV", Role: "developer", Status: office.AgentDisabled})
	h.run("PO")
	h.say("PO", "[INVOKE:developer]\nbuild it\n[/INVOKE:developer]")
	if got := h.typed("PO", "rejected"); !strings.Contains(got, "no agent can take it") {
		t.Errorf("told %q", got)
	}
	// The refusal is stored with why, for members to read.
	if is := h.invocations(office.InvocationRejected); len(is) != 1 || is[0].Reason != "build it" || !strings.Contains(is[0].Error, "no agent can take it") {
		t.Errorf("rejected invocations %+v; want one with the task and why", is)
	}
	eventually(t, "a question for a person", func() bool { return len(h.questions()) == 1 })
	if q := h.questions()[0]; q.Category != "routing" || !strings.Contains(q.Question, "developer") {
		t.Errorf("question %+v", q)
	}
}

// A busy named agent: the task is parked in its FIFO queue (pending) and
// typed when it is free; with a free peer of the same role, the peer takes it.
func TestInvokeBusyFallsBackOrParks(t *testing.T) {
	h := newHarness(t, nil, office.Agent{Name: "PO"}, office.Agent{Name: "QA"}, office.Agent{Name: "DEV1", Role: "developer"}, office.Agent{Name: "DEV2", Role: "developer"})
	for _, n := range []string{"PO", "QA", "DEV1", "DEV2"} {
		h.run(n)
	}
	h.say("PO", "[INVOKE:DEV1]\none\n[/INVOKE:DEV1]")
	h.typed("DEV1", "> one")
	h.say("QA", "[INVOKE:DEV1]\ntwo\n[/INVOKE:DEV1]")
	h.typed("DEV2", "> two") // DEV1 is at capacity: its peer takes it
	h.say("PO", "[INVOKE:developer]\nthree\n[/INVOKE:developer]")
	eventually(t, "parked", func() bool { return len(h.invocations(office.InvocationPending)) == 1 })
	h.say("DEV1", "[DELIVER_RESULT:PO]\ncontent: done one\n[/DELIVER_RESULT:PO]")
	h.typed("DEV1", "> three")
}

func TestAgentLifecycleAndSync(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	dev := h.id("DEV")
	if err := h.r.StartAgent(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if !h.ss.Running(h.office.ID, dev) {
		t.Fatal("not started")
	}
	first := h.ss.starts[dev][0]
	if first.Resume || first.ConversationID == "" || !strings.Contains(first.SystemPrompt, "You are DEV") || !strings.HasSuffix(first.Dir, "DEV") {
		t.Errorf("first start %+v", first)
	}
	if err := h.r.RestartAgent(ctx, dev); err != nil {
		t.Fatal(err)
	}
	second := h.ss.starts[dev][1]
	if !second.Resume || second.ConversationID != first.ConversationID {
		t.Errorf("restart does not resume the conversation: %+v", second)
	}
	if err := h.r.StopAgent(ctx, dev); err != nil || h.ss.Running(h.office.ID, dev) {
		t.Fatalf("stop: %v", err)
	}
	// DEV is no longer declared: disabled (history kept), and cannot start.
	if _, _, err := h.r.SyncOffice(ctx, OfficeConfig{Office: office.Office{Name: "acme"}, Agents: []office.Agent{{Name: "PO"}}}); err != nil {
		t.Fatal(err)
	}
	if a, _ := h.st.GetAgent(ctx, dev); a.Status != office.AgentDisabled {
		t.Errorf("undeclared agent status %s", a.Status)
	}
	if err := h.r.StartAgent(ctx, dev); office.ErrorCode(err) != office.EFORBIDDEN {
		t.Errorf("start disabled: %v", err)
	}
	if _, _, err := h.r.SyncOffice(ctx, OfficeConfig{Office: office.Office{Name: "acme"}, Agents: []office.Agent{{Name: "PO"}, {Name: "po"}}}); office.ErrorCode(err) != office.EINVALID {
		t.Errorf("duplicate names: %v", err)
	}
}

// Run owns every goroutine it starts: when ctx ends they are all gone.
func TestRunEndsItsGoroutines(t *testing.T) {
	clk := &clock{t: time.Now()}
	st, ss := newTestStore(t), newFakeSessions()
	if _, err := st.ListOffices(context.Background()); err != nil { // the store's own goroutines run from here on
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	r, err := New(Config{Store: st, Sessions: ss, Now: clk.Now, Tick: 5 * time.Millisecond, DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	off, as, err := r.SyncOffice(ctx, OfficeConfig{Office: office.Office{Name: "g"}, Agents: []office.Agent{{Name: "PO"}, {Name: "DEV"}}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = r.Run(runCtx); close(done) }()
	ss.setRunning(as[1].ID, true)
	for i := 0; i < 5; i++ {
		r.HandleText(session.Text{Key: session.Key{OfficeID: off.ID, AgentID: as[1].ID}, ID: fmt.Sprint("c", i), Lines: []string{"[INVOKE:PO]", "x", "[/INVOKE:PO]", askBlock}, TurnEnd: true})
	}
	r.HandleStatus(session.Key{OfficeID: off.ID, AgentID: as[0].ID}, office.SessionReady, session.Info{PID: 1})
	eventually(t, "work", func() bool { return len(eventKinds(t, st)) > 10 })
	sub := r.Subscribe(1)
	cancel()
	<-done
	sub.Close()
	eventually(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

// A server that crashed right after recording a message (its event) but
// before acting on it acts on it when the message is read again; one that
// got further does not act twice. Rows a message creates have IDs derived
// from the message's key.
func TestReplayAfterCrashWindow(t *testing.T) {
	h := newHarness(t, nil)
	h.run("PO")
	ctx := context.Background()
	text := askBlock + "\n[INVOKE:DEV]\ntask\n[/INVOKE:DEV]"
	// The "previous process" recorded both messages' events and died.
	for i, kind := range []string{"message.ask_user", "message.invoke"} {
		if _, _, err := h.st.AppendEvent(ctx, office.Event{OfficeID: h.office.ID, AgentID: h.id("PO"), Kind: kind, DedupeKey: fmt.Sprintf("entry-1#%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	h.sayID("PO", "entry-1", text)
	eventually(t, "question and invocation", func() bool { return len(h.questions()) == 1 && len(h.invocations()) == 1 })
	h.typed("DEV", "> task")
	// Read again (a restart, a re-render): nothing new.
	h.sayID("PO", "entry-1", text)
	time.Sleep(100 * time.Millisecond)
	if q, i := len(h.questions()), len(h.invocations()); q != 1 || i != 1 {
		t.Fatalf("%d questions, %d invocations after a replay; want 1 and 1", q, i)
	}
	// A result whose row was written but whose invocation was not completed
	// is completed on replay.
	inv := h.invocations()[0]
	h.sayID("DEV", "entry-2", "[DELIVER_RESULT:PO]\ncontent: done\n[/DELIVER_RESULT:PO]")
	eventually(t, "completed", func() bool { i, _ := h.st.GetInvocation(ctx, inv.ID); return i.Status == office.InvocationCompleted })
	h.sayID("DEV", "entry-2", "[DELIVER_RESULT:PO]\ncontent: done\n[/DELIVER_RESULT:PO]")
	time.Sleep(100 * time.Millisecond)
	if rs, _ := h.st.ListResults(ctx, office.ResultFilter{OfficeID: h.office.ID}); len(rs) != 1 {
		t.Errorf("%d results after a replay, want 1", len(rs))
	}
	h.quiet("DEV", 50*time.Millisecond)
}

func TestDeliverResultWithoutTarget(t *testing.T) {
	h := newHarness(t, nil)
	h.run("PO")
	h.run("DEV")
	h.say("DEV", "[DELIVER_RESULT]\ncontent: stray\n[/DELIVER_RESULT]")
	if got := h.typed("DEV", "refused"); !strings.Contains(got, "no task in progress") {
		t.Errorf("told %q", got)
	}
	h.say("PO", "[INVOKE:DEV]\nwork\n[/INVOKE:DEV]")
	h.typed("DEV", "> work")
	eventually(t, "in progress", func() bool { return len(h.invocations(office.InvocationInProgress)) == 1 })
	h.say("DEV", "[DELIVER_RESULT]\ncontent: done it\n[/DELIVER_RESULT]")
	h.typed("PO", "> done it")
	eventually(t, "completed", func() bool { return len(h.invocations(office.InvocationCompleted)) == 1 })
}

// slowStore blocks every event append until released: a database that
// hangs.
type slowStore struct {
	office.Store
	release chan struct{}
}

func (s slowStore) AppendEvent(ctx context.Context, e office.Event) (office.Event, bool, error) {
	select {
	case <-s.release:
	case <-ctx.Done():
		return office.Event{}, false, ctx.Err()
	}
	return s.Store.AppendEvent(ctx, e)
}

// SetSessionStatus refuses a status written with an event of the kind
// (its event is in the same write).
func (s refusingStore) SetSessionStatus(ctx context.Context, c office.SessionStatus) (office.SessionRecord, office.Event, bool, error) {
	if c.EventKind == s.kind {
		return office.SessionRecord{}, office.Event{}, false, fmt.Errorf("event log refused the write")
	}
	return s.Store.SetSessionStatus(ctx, c)
}

// MarkDelivered refuses a delivery marked with an event of the kind (its
// event is in the same write).
func (s refusingStore) MarkDelivered(ctx context.Context, d office.Delivered) (time.Time, office.Event, bool, error) {
	if d.EventKind == s.kind {
		return time.Time{}, office.Event{}, false, fmt.Errorf("event log refused the write")
	}
	return s.Store.MarkDelivered(ctx, d)
}

// The session layer's callbacks never wait for the database (docs/notes/engine.md: the
// PTY reader never waits for a slow database): text and statuses are queued.
func TestCallbacksNeverBlockOnTheStore(t *testing.T) {
	clk := &clock{t: time.Now()}
	st := slowStore{Store: newTestStore(t), release: make(chan struct{})}
	r, err := New(Config{Store: st, Sessions: newFakeSessions(), Now: clk.Now, DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	off, as, err := r.SyncOffice(ctx, OfficeConfig{Office: office.Office{Name: "slow"}, Agents: []office.Agent{{Name: "PO"}}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	defer func() { close(st.release); cancel(); <-done }()
	start := time.Now()
	for i := 0; i < 1000; i++ {
		r.HandleText(session.Text{Key: session.Key{OfficeID: off.ID, AgentID: as[0].ID}, ID: fmt.Sprint(i), Lines: []string{"Step 1/2: x"}, TurnEnd: true})
		r.HandleStatus(session.Key{OfficeID: off.ID, AgentID: as[0].ID}, office.SessionBusy, session.Info{PID: 1})
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("1000 callbacks took %v with the store hanging", d)
	}
}

// A CLI that starts blank after a restart gets its in-progress task typed
// again; Claude Code, which resumes its conversation, does not. A kind
// that keeps conversations but started a new one (CX: its conversation is
// on the node that ran it before) gets its task typed again too.
func TestTaskRetypedAfterRestart(t *testing.T) {
	h := newHarness(t, nil, office.Agent{Name: "PO"}, office.Agent{Name: "DEV", Launch: office.LaunchSpec{Kind: "command", Command: "dev.sh"}}, office.Agent{Name: "CC"},
		office.Agent{Name: "CX", Launch: office.LaunchSpec{Kind: "command", Command: "cx.sh"}})
	h.run("PO")
	h.say("PO", "[INVOKE:DEV]\nwork\n[/INVOKE:DEV]")
	h.typed("DEV", "> work")
	h.say("PO", "[INVOKE:CC]\nthink\n[/INVOKE:CC]")
	h.typed("CC", "> think")
	h.say("PO", "[INVOKE:CX]\nreview\n[/INVOKE:CX]")
	h.typed("CX", "> review")
	eventually(t, "in progress", func() bool { return len(h.invocations(office.InvocationInProgress)) == 3 })
	for _, n := range []string{"DEV", "CC", "CX"} {
		resumes := n != "DEV"
		h.r.HandleStatus(session.Key{OfficeID: h.office.ID, AgentID: h.id(n)}, office.SessionCrashed, session.Info{PID: 1})
		h.r.HandleStatus(session.Key{OfficeID: h.office.ID, AgentID: h.id(n)}, office.SessionStarting, session.Info{PID: 2, Resumes: resumes, Resumed: n == "CC"})
		h.r.HandleStatus(session.Key{OfficeID: h.office.ID, AgentID: h.id(n)}, office.SessionReady, session.Info{PID: 2, Resumes: resumes, Resumed: n == "CC"})
	}
	h.typed("DEV", "> work")
	h.typed("CX", "> review")
	// Claude Code is reminded of its task instead, and only once.
	h.typed("CC", "your conversation was resumed")
	h.quiet("CC", 150*time.Millisecond)
	h.ss.mu.Lock()
	tasks := 0
	for _, x := range h.ss.typed[h.id("CC")] {
		if strings.Contains(x, "> think") {
			tasks++
		}
	}
	h.ss.mu.Unlock()
	if tasks != 1 {
		t.Errorf("task typed into CC %d times, want once (before the crash)", tasks)
	}
	if n := len(h.invocations(office.InvocationInProgress)); n != 3 {
		t.Errorf("%d in progress, want 3", n)
	}
}

// refusingStore refuses every event of one kind: the audit log is down for
// it while the rows it records are written.
type refusingStore struct {
	office.Store
	kind string
}

func (s refusingStore) AppendEvent(ctx context.Context, e office.Event) (office.Event, bool, error) {
	if e.Kind == s.kind {
		return office.Event{}, false, fmt.Errorf("event log refused the write")
	}
	return s.Store.AppendEvent(ctx, e)
}

// An event the store refuses is neither dropped silently nor fatal to what
// it records: it is logged and counted (AuditFailures, in /metrics), and
// the answer it audits is still delivered.
func TestAuditFailureLoggedAndCounted(t *testing.T) {
	for _, kind := range []string{"question.answered", "question.delivered"} {
		t.Run(kind, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.Store = refusingStore{Store: c.Store, kind: kind} })
			h.run("PO")
			h.say("PO", askBlock)
			eventually(t, "question", func() bool { return len(h.questions()) == 1 })
			if n := h.r.AuditFailures(); n != 0 {
				t.Fatalf("AuditFailures = %d before any failure", n)
			}
			q := h.questions()[0]
			if _, err := h.r.AnswerQuestion(context.Background(), q.ID, "SSO", "u1"); err != nil {
				t.Fatalf("AnswerQuestion with the audit log down: %v (the answer is stored; only its event failed)", err)
			}
			h.typed("PO", "Answer to question "+q.ID)
			eventually(t, "the failure counted", func() bool { return h.r.AuditFailures() == 1 })
			eventually(t, "the failure logged", func() bool {
				return strings.Contains(h.logText(), "audit event not recorded") && strings.Contains(h.logText(), "kind="+kind)
			})
		})
	}
}

func (h *harness) logText() string {
	h.logMu.Lock()
	defer h.logMu.Unlock()
	return h.logs.String()
}

// eventKinds counts the office's events by kind.
func (h *harness) eventKinds() map[string]int {
	h.t.Helper()
	evs, err := h.st.ListEvents(context.Background(), office.EventFilter{OfficeID: h.office.ID, Limit: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	n := map[string]int{}
	for _, ev := range evs {
		n[ev.Kind]++
	}
	return n
}

// A question, a task and a result have their block's event written with
// their rows, a refused one before its refusal, and progress blocks
// printed together in one write: each event once, read again or not, and
// a refusal read again tells the agent nothing more.
func TestCarriedMessageEventsOnce(t *testing.T) {
	h := newHarness(t, nil)
	h.run("PO")
	h.run("DEV")
	text := askBlock + "\n[INVOKE:DEV]\ntask\n[/INVOKE:DEV]\n[INVOKE:NOBODY]\nlost\n[/INVOKE:NOBODY]"
	h.sayID("PO", "entry-1", text)
	h.typed("DEV", "> task")
	if got := h.typed("PO", "rejected"); !strings.Contains(got, "NOBODY") {
		t.Errorf("told %q", got)
	}
	h.sayID("DEV", "entry-2", "Step 1/2: read\nStep 2/2: build\n[DELIVER_RESULT:PO]\ncontent: done\n[/DELIVER_RESULT:PO]")
	h.typed("PO", "> done")
	eventually(t, "progress", func() bool { return h.r.Progress(h.office.ID, h.id("DEV")).Step == 2 })
	// Read again (a restart, a re-render): nothing new, nothing told.
	h.sayID("PO", "entry-1", text)
	h.sayID("DEV", "entry-2", "Step 1/2: read\nStep 2/2: build\n[DELIVER_RESULT:PO]\ncontent: done\n[/DELIVER_RESULT:PO]")
	h.quiet("PO", 100*time.Millisecond)
	want := map[string]int{"message.ask_user": 1, "question.created": 1, "message.invoke": 2, "invocation.created": 1,
		"invocation.rejected": 1, "message.step": 2, "message.deliver_result": 1, "result.created": 1, "invocation.completed": 1}
	got := h.eventKinds()
	for kind, n := range want {
		if got[kind] != n {
			t.Errorf("%d %s events; want %d (all: %v)", got[kind], kind, n, got)
		}
	}
	if q, i := len(h.questions()), len(h.invocations()); q != 1 || i != 2 {
		t.Errorf("%d questions, %d invocations; want 1 and 2 (one rejected)", q, i)
	}
}
