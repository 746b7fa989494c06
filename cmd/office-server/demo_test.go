package main

import (
	"net/http"
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
	post := func(path, body string) {
		t.Helper()
		req, _ := http.NewRequest("POST", r.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+r.token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode >= 300 {
			t.Fatalf("POST %s = %d", path, res.StatusCode)
		}
	}
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
}
