package server

import (
	"encoding/json"
	"testing"
)

// TestAgentNamesOverAPI: POST and PUT refuse names that are paths, "..",
// NUL or newlines (400); POST of a name the office has in another case is a
// 409 and saves nothing; PUT on an agent's own ID replaces it.
func TestAgentNamesOverAPI(t *testing.T) {
	f := newFixture(t, nil)
	body := func(name string) string {
		b, _ := json.Marshal(map[string]string{"name": name, "role": "impostor"})
		return string(b)
	}
	for _, name := range []string{"../../../../tmp/x", "..", "a\x00b", "dev\nnew line", "a b"} {
		for _, req := range [][2]string{{"POST", "/api/offices/o1/agents"}, {"PUT", "/api/offices/o1/agents/a2"}} {
			if st, b := f.do(t, req[0], req[1], testToken, body(name)); st != 400 || errCode(t, b) != "invalid" {
				t.Errorf("%s %s name %q = %d %s, want 400 invalid", req[0], req[1], name, st, b)
			}
		}
	}
	for _, name := range []string{"PO", "po", "Dev"} {
		if st, b := f.do(t, "POST", "/api/offices/o1/agents", testToken, body(name)); st != 409 || errCode(t, b) != "conflict" {
			t.Errorf("POST existing name %q = %d %s, want 409 conflict", name, st, b)
		}
	}
	if st, b := f.do(t, "POST", "/api/offices/o1/agents", testToken, `{"id":"a1","name":"other"}`); st != 409 {
		t.Errorf("POST with an existing agent's id = %d %s, want 409", st, b)
	}
	f.off.mu.Lock()
	saved := len(f.off.saved)
	f.off.mu.Unlock()
	if saved != 0 {
		t.Fatalf("refused requests saved %d agents: %+v", saved, f.off.saved)
	}

	if st, b := f.do(t, "POST", "/api/offices/o1/agents", testToken, body("reviewer")); st != 200 {
		t.Fatalf("POST new agent = %d %s", st, b)
	}
	if st, b := f.do(t, "PUT", "/api/offices/o1/agents/a2", testToken, body("dev")); st != 200 {
		t.Fatalf("PUT own id = %d %s", st, b)
	}
	f.off.mu.Lock()
	defer f.off.mu.Unlock()
	if len(f.off.saved) != 2 {
		t.Fatalf("saved %+v, want the POST and the PUT", f.off.saved)
	}
	if created := f.off.saved[0]; created.ID == "" || created.ID == "a1" || created.ID == "a2" || created.OfficeID != "o1" {
		t.Errorf("POST saved %+v: want a new ID in office o1 (so the store refuses a racing duplicate)", created)
	}
	if replaced := f.off.saved[1]; replaced.ID != "a2" || replaced.Role != "impostor" {
		t.Errorf("PUT saved %+v: want agent a2 replaced", replaced)
	}
}
