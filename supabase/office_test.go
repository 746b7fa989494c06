package supabase

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/office-server/office-server/internal/agentstest"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
	"github.com/office-server/office-server/supabase/supabasetest"
)

// The office over Supabase: a Router whose Store is supabase.Store and
// whose Feed is Realtime, on the stand-in project, with real PTY sessions of
// scripted sh agents. PO asks; the Realtime socket is dropped; a member
// answers through the REST API as the frontend does; PO gets the answer
// exactly once (by the catch-up), invokes DEV, DEV delivers, PO gets the
// result, and the invocation completes.

const poAgent = `#!/bin/sh
if [ ! -e "$PWD/asked" ]; then
  touch "$PWD/asked"
  echo "[ASK_USER]"
  echo "question: Which database?"
  echo "type: selection"
  echo 'options: ["postgres", "sqlite"]'
  echo "[/ASK_USER]"
fi
echo "po>"
while IFS= read -r line; do
  case "$line" in
    "> postgres"|"> sqlite")
      echo "po got answer: ${line#> }"
      echo "[INVOKE:dev]"
      echo "Set up ${line#> }."
      echo "[/INVOKE:dev]";;
    "> Done: "*) echo "po got result: ${line#> }";;
  esac
  echo "po>"
done
`

const devAgent = `#!/bin/sh
echo "dev>"
while IFS= read -r line; do
  case "$line" in
    "> Set up"*)
      echo "[DELIVER_RESULT:PO]"
      echo "type: markdown"
      echo "content: Done: ${line#> }"
      echo "[/DELIVER_RESULT:PO]";;
  esac
  echo "dev>"
done
`

type said struct {
	mu sync.Mutex
	by map[string][]string
}

func (s *said) add(t session.Text) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string][]string{}
	}
	s.by[t.Key.AgentID] = append(s.by[t.Key.AgentID], t.Lines...)
}

func (s *said) count(agent, sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.by[agent] {
		if strings.Contains(l, sub) {
			n++
		}
	}
	return n
}

func agentScript(t *testing.T, name, body string) office.LaunchSpec {
	p := filepath.Join(t.TempDir(), name+".sh")
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return office.LaunchSpec{Kind: "command", Command: p, PromptPattern: "^" + name + ">$", Dir: t.TempDir()}
}

// answerAsFrontend answers as the web frontend does with supabase-js
// (rpc('answer_question', {question_id, response}), docs/frontend.md),
// signed in as a member of the question's office: the function stamps who
// and when.
func answerAsFrontend(t *testing.T, p *supabasetest.Project, member supabasetest.Member, id, response string) {
	body, _ := json.Marshal(map[string]any{"question_id": id, "response": response})
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/rest/v1/rpc/answer_question", bytes.NewReader(body))
	req.Header.Set("apikey", p.PublishableKey)
	req.Header.Set("Authorization", "Bearer "+member.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var row map[string]any
	json.NewDecoder(resp.Body).Decode(&row)
	if resp.StatusCode != http.StatusOK || row["answered_by"] != member.ID || row["status"] != "answered" {
		t.Fatalf("frontend answer: %s, %v", resp.Status, row)
	}
}

// runRouter runs r until the test ends, then closes mgr's sessions.
func runRouter(t *testing.T, r *engine.Router, mgr *session.Manager) {
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(runCtx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		c, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		mgr.Close(c)
	})
}

func TestOfficeOverSupabase(t *testing.T) {
	p := supabasetest.New(t)
	ctx := context.Background()
	st, err := New(p.URL, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	opts := fastOptions()
	feed, err := NewRealtime(p.URL, p.Key, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	rec := &said{}
	cfg := engine.Config{Store: st, Feed: feed, Tick: 50 * time.Millisecond, DataDir: t.TempDir(), Logger: quietLogger()}
	r, mgr, err := agentstest.NewManaged(cfg, session.Options{EnterDelay: 5 * time.Millisecond, StopGrace: 500 * time.Millisecond, OnText: rec.add})
	if err != nil {
		t.Fatal(err)
	}
	off, agents, err := r.SyncOffice(ctx, engine.OfficeConfig{
		Office: office.Office{Name: "over-supabase"},
		Agents: []office.Agent{
			{Name: "PO", Role: "product owner", Launch: agentScript(t, "po", poAgent)},
			{Name: "DEV", Role: "developer", Capabilities: []string{"bash"}, Launch: agentScript(t, "dev", devAgent)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	po, dev := agents[0], agents[1]
	runRouter(t, r, mgr)
	if err := r.StartAgent(ctx, po.ID); err != nil {
		t.Fatal(err)
	}
	var q office.Question
	eventually(t, "PO's question in the store", 15*time.Second, func() bool {
		qs, _ := st.ListQuestions(ctx, office.QuestionFilter{OfficeID: off.ID})
		if len(qs) == 1 {
			q = qs[0]
		}
		return len(qs) == 1
	})
	eventually(t, "the feed connected", 20*time.Second, feed.Connected)
	// The answer is written while the socket is down: Realtime never
	// reports it; the catch-up after the reconnect does.
	joins := drop(t, p.Realtime)
	answerAsFrontend(t, p, p.MemberOf(t, off.ID, "member@example.com"), q.ID, "postgres")
	eventually(t, "PO got the answer", 30*time.Second, func() bool { return rec.count(po.ID, "po got answer: postgres") > 0 })
	rejoined(t, p.Realtime, feed, joins)
	eventually(t, "PO got DEV's result", 20*time.Second, func() bool { return rec.count(po.ID, "po got result: Done: Set up postgres.") > 0 })
	eventually(t, "the invocation completed", 10*time.Second, func() bool {
		is, _ := st.ListInvocations(ctx, office.InvocationFilter{OfficeID: off.ID, Status: []string{office.InvocationCompleted}})
		return len(is) == 1 && is[0].CallerAgentID == po.ID && is[0].CalleeAgentID == dev.ID && is[0].ResultID != ""
	})
	got, _ := st.GetQuestion(ctx, q.ID)
	if got.Status != office.QuestionDelivered {
		t.Errorf("question status %q; want delivered", got.Status)
	}
	// One more drop and rejoin: nothing is typed twice. (The wait after
	// the rejoin gives a wrong second delivery time to show; a right run
	// cannot fail on it.)
	rejoined(t, p.Realtime, feed, drop(t, p.Realtime))
	time.Sleep(300 * time.Millisecond)
	if n := rec.count(po.ID, "po got answer"); n != 1 {
		t.Errorf("PO received the answer %d times; want once", n)
	}
	if n := rec.count(po.ID, "po got result"); n != 1 {
		t.Errorf("PO received the result %d times; want once", n)
	}
	evs, _ := st.ListEvents(ctx, office.EventFilter{OfficeID: off.ID, Limit: 1000})
	if len(evs) == 0 {
		t.Errorf("no events recorded through the REST store")
	}
	t.Logf("%d events, %d joins", len(evs), p.Realtime.Joins())
}
