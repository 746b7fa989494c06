package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

// TestDemoLoopStaysClean runs the demo office for three rounds while a
// person also writes to dev between them: every result answers a task
// (none is sent unasked), no more than one question is ever pending, and
// every round's question is the one answered.
func TestDemoLoopStaysClean(t *testing.T) {
	r := startMain(t)
	oid := r.officeID(t)
	post := func(path, body string) { t.Helper(); mustPost(t, r, path, body) }
	for round := 1; round <= 3; round++ {
		q := r.waitQuestion(t, oid, office.QuestionPending, 20*time.Second)
		post("/api/offices/"+oid+"/messages", `{"agent":"dev","content":"hello dev, anything new?"}`)
		time.Sleep(300 * time.Millisecond) // dev reads it (and must not answer with a result)
		var pending []office.Question
		r.get(t, "/api/offices/"+oid+"/questions?status=pending", &pending)
		if len(pending) != 1 || pending[0].ID != q.ID {
			t.Fatalf("round %d: %d pending questions, want the one of this round", round, len(pending))
		}
		post("/api/questions/"+q.ID+"/answer", `{"response":"`+q.Options[0]+`"}`)
		deadline := time.Now().Add(20 * time.Second)
		for {
			var results []office.Result
			r.get(t, "/api/offices/"+oid+"/results", &results)
			if len(results) == round {
				for _, res := range results {
					if res.InvocationID == "" {
						t.Fatalf("round %d: a result answers no task: %+v", round, res)
					}
				}
				break
			}
			if len(results) > round || time.Now().After(deadline) {
				t.Fatalf("round %d: %d results, want %d (one per task):\n%s", round, len(results), round, r.replay(t, oid, "dev"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if dev := r.replay(t, oid, "dev"); !strings.Contains(dev, "dev: I work on tasks other agents give me") {
		t.Errorf("dev never answered the person's words:\n%s", dev)
	}

	// The operator restarts po while its fourth question waits: the new
	// process starts over and asks again; the old question is cancelled,
	// with the reason in the history, and one question is pending.
	pending := restartPoCancels(t, r, oid)
	// The loop goes on from the new question.
	post("/api/questions/"+pending[0].ID+"/answer", `{"response":"`+pending[0].Options[0]+`"}`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var results []office.Result
		r.get(t, "/api/offices/"+oid+"/results", &results)
		if len(results) == 4 {
			break
		}
		if len(results) > 4 || time.Now().After(deadline) {
			t.Fatalf("after the restart: %d results, want 4:\n%s", len(results), r.replay(t, oid, "po"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	var last []office.Question
	r.get(t, "/api/offices/"+oid+"/questions?status=pending", &last)
	if len(last) > 1 {
		t.Errorf("%d pending questions after the round, want at most one", len(last))
	}
}

// mustPost POSTs body to path with the admin token and fails the test
// unless it was taken.
func mustPost(t *testing.T, r *liveServer, path, body string) {
	t.Helper()
	if st, b := r.client(t).text("POST", path, body); st >= 300 {
		t.Fatalf("POST %s = %d %s", path, st, b)
	}
}

// restartPoCancels: the operator restarts po while its question waits:
// the new process starts over and asks again; the old question is
// cancelled, with the reason in the history, and one question is
// pending. It returns the pending questions.
func restartPoCancels(t *testing.T, r *liveServer, oid string) []office.Question {
	old := r.waitQuestion(t, oid, office.QuestionPending, 20*time.Second)
	mustPost(t, r, "/api/offices/"+oid+"/agents/"+r.agentID(t, oid, "po")+"/restart", "")
	deadline := time.Now().Add(20 * time.Second)
	var pending []office.Question
	for {
		r.get(t, "/api/offices/"+oid+"/questions?status=pending", &pending)
		var was office.Question
		r.get(t, "/api/questions/"+old.ID, &was)
		if len(pending) == 1 && pending[0].ID != old.ID && was.Status == office.QuestionCancelled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after po's restart: old question %s, %d pending %+v; want it cancelled and one new question:\n%s", was.Status, len(pending), pending, r.replay(t, oid, "po"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	var evs []office.Event
	r.get(t, "/api/offices/"+oid+"/events?limit=1000", &evs)
	var reason string
	for _, ev := range evs {
		if ev.Kind == "question.cancelled" && strings.Contains(string(ev.Payload), old.ID) {
			var p struct{ Reason string }
			_ = json.Unmarshal(ev.Payload, &p)
			reason = p.Reason
		}
	}
	if !strings.Contains(reason, "po asked the same question again") {
		t.Errorf("the cancelled question's event gives the reason %q", reason)
	}
	return pending
}
