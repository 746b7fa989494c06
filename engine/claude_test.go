package engine_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/internal/anthropictest"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
	"github.com/office-server/office-server/store/postgres"
)

// TestChainClaude runs the chain with two real Claude Code agents whose
// model is the scripted Messages API server: a person's message starts PO,
// PO asks, a member answers by SQL UPDATE, PO invokes DEV, DEV delivers to
// PO, the invocation completes. The protocol is read from Claude Code's
// transcripts; what the office types goes in through the PTY.
func TestChainClaude(t *testing.T) { runClaudeChain(t, false) }

// TestChainClaudeServerRestart: the server (router and sessions) stops
// after PO asked; the member answers while it is down; a new server resumes
// PO's conversation (--resume), re-reads its transcript without acting on the
// question again, and delivers the answer once; the chain completes.
func TestChainClaudeServerRestart(t *testing.T) { runClaudeChain(t, true) }

func runClaudeChain(t *testing.T, restart bool) {
	c := &chain{url: pgDB(t), rec: &lines{}}
	srv := anthropictest.New(t)
	srv.Reply(claudeChainModel)
	c.syncClaudeOffice(t, testenv.ClaudeBin(t), srv)

	// Both server lives share the data directory, and with it each agent's
	// Claude Code configuration directory (the wiring prepares one per
	// agent), where PO's transcript is kept for --resume.
	ctx := context.Background()
	data := t.TempDir()
	mutate := func(cfg *engine.Config, o *session.Options) {
		cfg.DataDir = data
		o.EnterDelay = 200 * time.Millisecond
	}
	n := startNode(t, c.url, c.rec, mutate)
	if err := n.r.StartAgent(ctx, c.po.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := n.r.SendUserMessage(ctx, c.officeID, c.po.ID, c.userID, "Please start the login feature."); err != nil {
		t.Fatal(err)
	}
	q := c.waitOneQuestion(t, n.store, "PO's question", 90*time.Second)
	if restart {
		// Let Claude Code finish writing the turn before the server stops.
		time.Sleep(2 * time.Second)
		n.stop()
		c.answerAsMember(t, q.ID, "SSO")
		n = startNode(t, c.url, c.rec, mutate)
		if err := n.r.StartAgent(ctx, c.po.ID); err != nil {
			t.Fatal(err)
		}
	} else {
		c.answerAsMember(t, q.ID, "SSO")
	}
	c.checkClaudeChainDone(t, n, srv, q.ID)
}

// claudeChainModel is PO's and DEV's model: PO asks which login method,
// hands the answer to DEV as a task, and acknowledges DEV's result; DEV
// delivers the task it was given.
func claudeChainModel(r anthropictest.Request) anthropictest.Response {
	u := r.LastUserText()
	switch {
	case strings.Contains(r.System, "You are PO"):
		switch {
		case strings.Contains(u, "Message from a person"):
			return anthropictest.Response{Text: "I need to know one thing first.\n\n[ASK_USER]\nquestion: Which login method?\ntype: selection\noptions: [\"email\", \"social\", \"SSO\"]\n[/ASK_USER]"}
		case strings.Contains(u, "Answer to question"):
			method := "email"
			for _, m := range []string{"SSO", "social"} {
				if strings.Contains(u, "> "+m) {
					method = m
				}
			}
			return anthropictest.Response{Text: "Thanks. Handing it to DEV.\n\n[INVOKE:DEV]\nImplement " + method + " login.\ncontext: The PO decided after asking.\n[/INVOKE:DEV]"}
		case strings.Contains(u, "Result from DEV"):
			return anthropictest.Response{Text: "PO: received the result, all done."}
		}
	case strings.Contains(r.System, "You are DEV"):
		if strings.Contains(u, "[OFFICE] Task ") {
			task := "the task"
			for _, l := range strings.Split(u, "\n") {
				if strings.HasPrefix(l, "> Implement") {
					task = strings.TrimPrefix(l, "> ")
				}
			}
			return anthropictest.Response{Text: "[DELIVER_RESULT:PO]\ntype: markdown\ncontent: Done: " + task + "\n[/DELIVER_RESULT:PO]"}
		}
	}
	return anthropictest.Response{Text: "OK"}
}

// syncClaudeOffice creates the office with PO and DEV as Claude Code agents
// talking to srv, and a member who may answer PO's questions.
func (c *chain) syncClaudeOffice(t *testing.T, bin string, srv *anthropictest.Server) {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, c.url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r0, err := engine.New(engine.Config{Store: st, Sessions: nopSessions{}, SecretsKey: testSecretsKey})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range srv.Env("") {
		k, v, _ := strings.Cut(kv, "=")
		if k != "HOME" {
			env[k] = v
		}
	}
	mk := func(name, role string) office.Agent {
		dir, _ := filepath.Abs(t.TempDir())
		return office.Agent{Name: name, Role: role, Launch: office.LaunchSpec{Kind: "claude", Command: bin, Dir: dir, Env: env}}
	}
	off, agents, err := r0.SyncOffice(ctx, engine.OfficeConfig{Office: office.Office{Name: "claude-chain"}, Agents: []office.Agent{mk("PO", "product owner"), mk("DEV", "developer")}})
	if err != nil {
		t.Fatal(err)
	}
	c.officeID, c.po, c.dev = off.ID, agents[0], agents[1]
	c.userID = "00000000-0000-0000-0000-00000000c1a0"
	c.exec(t, `insert into auth.users (id, email) values ($1, 'member@example.com')`, c.userID)
	c.exec(t, `insert into office_members (office_id, user_id) values ($1, $2)`, c.officeID, c.userID)
}

// checkClaudeChainDone waits for DEV's invocation to complete and PO to be
// given the result, then checks the chain left one question (delivered),
// one invocation, one result, and gave PO the answer once.
func (c *chain) checkClaudeChainDone(t *testing.T, n *node, srv *anthropictest.Server, questionID string) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, "the invocation to complete", 120*time.Second, func() bool {
		is := c.invocations(t, n.store, office.InvocationCompleted)
		return len(is) == 1 && is[0].CalleeAgentID == c.dev.ID
	})
	rs, _ := n.store.ListResults(ctx, office.ResultFilter{OfficeID: c.officeID})
	if len(rs) != 1 || rs[0].Content != "Done: Implement SSO login." {
		t.Fatalf("results %+v", rs)
	}
	// PO's model saw the result typed in.
	waitFor(t, "PO to get the result", 60*time.Second, func() bool {
		for _, req := range srv.MainRequests() {
			if strings.Contains(req.System, "You are PO") && strings.Contains(req.LastUserText(), "Result from DEV") {
				return true
			}
		}
		return false
	})
	if got, _ := n.store.GetQuestion(ctx, questionID); got.Status != office.QuestionDelivered {
		t.Errorf("question %s", got.Status)
	}
	if n := len(c.questions(t, n.store)); n != 1 {
		t.Errorf("%d questions, want 1", n)
	}
	if is := c.invocations(t, n.store); len(is) != 1 {
		t.Errorf("%d invocations, want 1", len(is))
	}
	answers := 0
	for _, req := range srv.MainRequests() {
		if strings.Contains(req.System, "You are PO") && strings.Contains(req.LastUserText(), "Answer to question") {
			answers++
		}
	}
	if answers != 1 {
		t.Errorf("PO was given the answer %d times, want 1", answers)
	}
}
