package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/agentstest"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/migrations"
	"github.com/office-server/office-server/migrations/supabasetest"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
	"github.com/office-server/office-server/store/postgres"
)

// pgDB is a fresh database with the Supabase stand-ins and the office
// schema, as a Supabase project has it.
func pgDB(t testing.TB) string {
	t.Helper()
	url := testenv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := supabasetest.Apply(ctx, url); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.ApplyURL(ctx, url); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return url
}

// lines records what each agent printed (its words, as the session layer
// reads them).
type lines struct {
	mu sync.Mutex
	by map[string][]string
}

func (l *lines) add(t session.Text) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by == nil {
		l.by = map[string][]string{}
	}
	l.by[t.Key.AgentID] = append(l.by[t.Key.AgentID], t.Lines...)
}

func (l *lines) count(agentID, sub string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.by[agentID] {
		if strings.Contains(s, sub) {
			n++
		}
	}
	return n
}

func (l *lines) wait(t testing.TB, agentID, sub string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for l.count(agentID, sub) == 0 {
		if time.Now().After(deadline) {
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Fatalf("agent never printed %q; printed: %q", sub, l.by[agentID])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// node is one server process: a Router and its session manager on a store.
type node struct {
	r      *engine.Router
	mgr    *session.Manager
	store  *postgres.Store
	cancel context.CancelFunc
	done   chan struct{}
}

func startNode(t testing.TB, url string, rec *lines, mutate func(*engine.Config, *session.Options)) *node {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.Config{Store: st, Feed: st, Tick: 50 * time.Millisecond, DataDir: t.TempDir(), SecretsKey: testSecretsKey,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	opts := session.Options{EnterDelay: 5 * time.Millisecond, StopGrace: 500 * time.Millisecond, RestartBackoff: 50 * time.Millisecond, OnText: rec.add}
	if mutate != nil {
		mutate(&cfg, &opts)
	}
	r, mgr, err := agentstest.NewManaged(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	n := &node{r: r, mgr: mgr, store: st, cancel: cancel, done: make(chan struct{})}
	go func() { _ = r.Run(runCtx); close(n.done) }()
	t.Cleanup(n.stop)
	return n
}

// stop ends the node as a server shutdown would: router first, then every
// session.
func (n *node) stop() {
	if n.cancel == nil {
		return
	}
	n.cancel()
	<-n.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = n.mgr.Close(ctx)
	n.store.Close()
	n.cancel = nil
}

// script writes an sh agent. Its prompt is "<name>>" alone on a line.
func script(t testing.TB, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name+".sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func launch(cmd, name string) office.LaunchSpec {
	return office.LaunchSpec{Kind: "command", Command: cmd, PromptPattern: "^" + name + ">$"}
}

// The PO asks once (a marker file remembers it across restarts), invokes
// DEV with the answer, and reports the result.
const poScript = `
mark="$PWD/asked"
if [ ! -e "$mark" ]; then
  touch "$mark"
  echo "[ASK_USER]"
  echo "question: Which login method?"
  echo "type: selection"
  echo 'options: ["email", "social", "SSO"]'
  echo "[/ASK_USER]"
fi
echo "po>"
while IFS= read -r line; do
  case "$line" in
    "> email"|"> social"|"> SSO")
      echo "po got answer: ${line#> }"
      echo "[INVOKE:dev]"
      echo "Implement ${line#> } login."
      echo "context: from the PO"
      echo "[/INVOKE:dev]";;
    "[OFFICE] Result from DEV"*) echo "po got result header";;
    "> Login done"*) echo "po got result: ${line#> }";;
    "[OFFICE]"*) echo "po notice: $line";;
  esac
  echo "po>"
done
`

const devScript = `
if [ -n "$DEV_CRASH" ] && [ -e "$PWD/crashed" ]; then exit 4; fi
echo "dev>"
while IFS= read -r line; do
  case "$line" in
    "[OFFICE] Task "*) echo "dev got task";;
    "> Implement"*)
      task="${line#> }"
      if [ -n "$DEV_CRASH" ]; then echo "dev crashing"; touch "$PWD/crashed"; exit 3; fi
      if [ -n "$DEV_LOOP" ]; then
        echo "[INVOKE:PO]"
        echo "Please decide for me."
        echo "[/INVOKE:PO]"
      else
        echo "[DELIVER_RESULT:PO]"
        echo "type: markdown"
        echo "content: Login done: $task"
        echo "[/DELIVER_RESULT:PO]"
      fi;;
    "[OFFICE]"*) echo "dev notice: $line";;
  esac
  echo "dev>"
done
`

type chain struct {
	url      string
	officeID string
	po, dev  office.Agent
	userID   string
	rec      *lines
}

// nopSessions lets a Router sync an office without running anything.
type nopSessions struct{}

func (nopSessions) Start(context.Context, engine.SessionSpec) error   { return nil }
func (nopSessions) Restart(context.Context, engine.SessionSpec) error { return nil }
func (nopSessions) Stop(context.Context, string, string) error        { return nil }
func (nopSessions) Send(context.Context, string, string, string) error {
	return fmt.Errorf("no sessions")
}
func (nopSessions) Running(string, string) bool { return false }

// setupChain creates the database, an office with PO and DEV (scripted sh
// agents with workspaces of their own), and a member who answers from the
// frontend.
func setupChain(t *testing.T, devEnv map[string]string) *chain {
	t.Helper()
	c := &chain{url: pgDB(t), rec: &lines{}, userID: uuid.NewString()}
	ctx := context.Background()
	st, err := postgres.Open(ctx, c.url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := engine.New(engine.Config{Store: st, Sessions: nopSessions{}, SecretsKey: testSecretsKey})
	if err != nil {
		t.Fatal(err)
	}
	po := launch(script(t, "po", poScript), "po")
	po.Dir = t.TempDir()
	dev := launch(script(t, "dev", devScript), "dev")
	dev.Dir, dev.Env = t.TempDir(), devEnv
	off, agents, err := r.SyncOffice(ctx, engine.OfficeConfig{
		Office: office.Office{Name: "it-" + uuid.NewString()[:6]},
		Agents: []office.Agent{
			{Name: "PO", Role: "product owner", Launch: po},
			{Name: "DEV", Role: "developer", Capabilities: []string{"bash"}, Launch: dev},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c.officeID, c.po, c.dev = off.ID, agents[0], agents[1]
	c.exec(t, `insert into auth.users (id, email) values ($1, 'member@example.com')`, c.userID)
	c.exec(t, `insert into office_members (office_id, user_id) values ($1, $2)`, c.officeID, c.userID)
	return c
}

func (c *chain) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// answerAsMember answers a question as the frontend does: an UPDATE by an
// authenticated member under row-level security, with the JWT claims
// PostgREST sets.
func (c *chain) answerAsMember(t testing.TB, questionID, response string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	claims := fmt.Sprintf(`{"sub":%q,"role":"authenticated","aud":"authenticated"}`, c.userID)
	if _, err := tx.Exec(ctx, `select set_config('request.jwt.claims', $1, true)`, claims); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "set local role authenticated"); err != nil {
		t.Fatal(err)
	}
	tag, err := tx.Exec(ctx, `select public.answer_question($2, $1)`, response, questionID)
	if err != nil {
		t.Fatalf("answer as member: %v", err)
	}
	if tag.RowsAffected() != 1 {
		t.Fatalf("answer as member updated %d rows", tag.RowsAffected())
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t testing.TB, what string, d time.Duration, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitOneQuestion waits until the office has exactly one question, for
// at most d, and returns it.
func (c *chain) waitOneQuestion(t testing.TB, st office.Store, what string, d time.Duration) office.Question {
	t.Helper()
	var q office.Question
	waitFor(t, what, d, func() bool {
		qs := c.questions(t, st)
		if len(qs) == 1 {
			q = qs[0]
		}
		return len(qs) == 1
	})
	return q
}

func (c *chain) questions(t testing.TB, st office.Store, status ...string) []office.Question {
	t.Helper()
	qs, err := st.ListQuestions(context.Background(), office.QuestionFilter{OfficeID: c.officeID, Status: status})
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

func (c *chain) invocations(t testing.TB, st office.Store, status ...string) []office.Invocation {
	t.Helper()
	is, err := st.ListInvocations(context.Background(), office.InvocationFilter{OfficeID: c.officeID, Status: status})
	if err != nil {
		t.Fatal(err)
	}
	return is
}

// TestChainPostgres runs the whole chain on the real Postgres store with
// real PTY sessions: PO asks → a member answers by SQL UPDATE → PO receives
// it → PO invokes DEV → DEV receives the task → DEV delivers to PO → PO
// receives it and the invocation is completed.
func TestChainPostgres(t *testing.T) {
	c := setupChain(t, nil)
	n := startNode(t, c.url, c.rec, nil)
	ctx := context.Background()
	if err := n.r.StartAgent(ctx, c.po.ID); err != nil {
		t.Fatal(err)
	}
	q := c.waitOneQuestion(t, n.store, "the question", 10*time.Second)
	if q.QuestionType != office.QuestionSelection || q.Status != office.QuestionPending {
		t.Fatalf("question %+v", q)
	}
	c.answerAsMember(t, q.ID, "SSO")
	c.rec.wait(t, c.po.ID, "po got answer: SSO", 10*time.Second)
	waitFor(t, "delivered", 5*time.Second, func() bool {
		got, _ := n.store.GetQuestion(ctx, q.ID)
		return got.Status == office.QuestionDelivered && got.AnsweredBy == c.userID
	})
	c.rec.wait(t, c.dev.ID, "dev got task", 10*time.Second)
	c.rec.wait(t, c.po.ID, "po got result: Login done: Implement SSO login.", 15*time.Second)
	waitFor(t, "completed", 5*time.Second, func() bool {
		is := c.invocations(t, n.store, office.InvocationCompleted)
		return len(is) == 1 && is[0].ResultID != "" && is[0].CallerAgentID == c.po.ID && is[0].CalleeAgentID == c.dev.ID
	})
	rs, _ := n.store.ListResults(ctx, office.ResultFilter{OfficeID: c.officeID})
	if len(rs) != 1 || rs[0].Status != office.ResultDelivered || rs[0].ResultType != "markdown" {
		t.Errorf("results %+v", rs)
	}
	// Exactly once: one question, one invocation, one answer typed.
	if n := len(c.questions(t, n.store)); n != 1 {
		t.Errorf("%d questions", n)
	}
	if got := c.rec.count(c.po.ID, "po got answer"); got != 1 {
		t.Errorf("answer received %d times", got)
	}
}

// A loop is rejected and the caller is told why.
func TestChainLoopRejected(t *testing.T) {
	c := setupChain(t, map[string]string{"DEV_LOOP": "1"})
	n := startNode(t, c.url, c.rec, nil)
	ctx := context.Background()
	if err := n.r.StartAgent(ctx, c.po.ID); err != nil {
		t.Fatal(err)
	}
	q := c.waitOneQuestion(t, n.store, "the question", 10*time.Second)
	c.answerAsMember(t, q.ID, "email")
	c.rec.wait(t, c.dev.ID, "dev notice: [OFFICE] Your INVOKE:PO was rejected", 15*time.Second)
	if c.rec.count(c.dev.ID, "cycle") == 0 {
		t.Errorf("rejection does not say why: %q", c.rec.by[c.dev.ID])
	}
	if is := c.invocations(t, n.store, office.InvocationRejected); len(is) != 1 || is[0].CallerAgentID != c.dev.ID {
		t.Errorf("rejected invocations %+v", is)
	}
}

// A question nobody answers expires and the agent is told.
func TestChainQuestionExpires(t *testing.T) {
	c := setupChain(t, nil)
	c.exec(t, `update offices set question_ttl = $2 where id = $1`, c.officeID, "1 second")
	n := startNode(t, c.url, c.rec, nil)
	if err := n.r.StartAgent(context.Background(), c.po.ID); err != nil {
		t.Fatal(err)
	}
	c.rec.wait(t, c.po.ID, "expired without an answer", 15*time.Second)
	if qs := c.questions(t, n.store, office.QuestionExpired); len(qs) != 1 {
		t.Errorf("expired questions: %+v", qs)
	}
}

// DEV crashes for good mid-invocation: the invocation fails and PO is told.
func TestChainCalleeCrashes(t *testing.T) {
	c := setupChain(t, map[string]string{"DEV_CRASH": "1"})
	n := startNode(t, c.url, c.rec, func(_ *engine.Config, o *session.Options) { o.MaxRestarts = 1 })
	ctx := context.Background()
	if err := n.r.StartAgent(ctx, c.po.ID); err != nil {
		t.Fatal(err)
	}
	q := c.waitOneQuestion(t, n.store, "the question", 10*time.Second)
	c.answerAsMember(t, q.ID, "social")
	waitFor(t, "DEV to crash", 10*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(c.dev.Launch.Dir, "crashed"))
		return err == nil
	})
	c.rec.wait(t, c.po.ID, "that you gave DEV failed", 30*time.Second)
	if is := c.invocations(t, n.store, office.InvocationFailed); len(is) != 1 {
		t.Errorf("failed invocations %+v", is)
	}
}

// The server stops mid-flow; a question answered while it is down is
// delivered exactly once after it starts again, and the chain completes.
func TestChainServerRestart(t *testing.T) {
	c := setupChain(t, nil)
	n := startNode(t, c.url, c.rec, nil)
	ctx := context.Background()
	if err := n.r.StartAgent(ctx, c.po.ID); err != nil {
		t.Fatal(err)
	}
	q := c.waitOneQuestion(t, n.store, "the question", 10*time.Second)
	n.stop()
	c.answerAsMember(t, q.ID, "SSO") // while the server is down
	n2 := startNode(t, c.url, c.rec, nil)
	if err := n2.r.StartAgent(ctx, c.po.ID); err != nil {
		t.Fatal(err)
	}
	c.rec.wait(t, c.po.ID, "po got answer: SSO", 15*time.Second)
	c.rec.wait(t, c.po.ID, "po got result: Login done", 20*time.Second)
	time.Sleep(300 * time.Millisecond)
	if got := c.rec.count(c.po.ID, "po got answer"); got != 1 {
		t.Errorf("answer delivered %d times, want 1", got)
	}
	if n := len(c.questions(t, n2.store)); n != 1 {
		t.Errorf("%d questions, want 1", n)
	}
	if is := c.invocations(t, n2.store, office.InvocationCompleted); len(is) != 1 {
		t.Errorf("completed invocations %+v", is)
	}
}
