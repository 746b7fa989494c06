package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestAPIEdges runs the real server: durations are strings in and out
// (question_ttl, a permission timeout), a number is refused with what to
// write; PATCH changes only the fields given while PUT replaces the agent;
// a wrong method is 405 with Allow; a start that cannot launch says why.
func TestAPIEdges(t *testing.T) {
	r := startMain(t, "--no-autostart")
	oid := r.officeID(t)
	call := func(method, path, body string) (int, string, http.Header) {
		t.Helper()
		res, b, err := r.client(t).send(method, path, body, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, string(b), res.Header
	}

	// Durations.
	if st, body, _ := call("POST", "/api/offices", `{"id":"`+oid+`","name":"Test office","question_ttl":"10m"}`); st != 200 || !strings.Contains(body, `"question_ttl":"10m0s"`) {
		t.Fatalf("save office with question_ttl \"10m\": %d %s", st, body)
	}
	if st, body, _ := call("GET", "/api/offices/"+oid, ""); st != 200 || !strings.Contains(body, `"question_ttl":"10m0s"`) {
		t.Fatalf("get office: %d %s", st, body)
	}
	if st, body, _ := call("POST", "/api/offices", `{"name":"N","question_ttl":600000000000}`); st != 400 || !strings.Contains(body, `write a duration as a string`) {
		t.Fatalf("question_ttl as a number: %d %s, want 400 saying how to write it", st, body)
	}

	// PATCH keeps what it does not name; PUT replaces.
	var before, after map[string]any
	_, b, _ := call("GET", "/api/offices/"+oid+"/agents/po", "")
	_ = json.Unmarshal([]byte(b), &before)
	st, b, _ := call("PATCH", "/api/offices/"+oid+"/agents/po", `{"role":"Owner of the product","launch":{"permissions":{"timeout":"90s"}}}`)
	_ = json.Unmarshal([]byte(b), &after)
	launch, _ := after["launch"].(map[string]any)
	perms, _ := launch["permissions"].(map[string]any)
	if st != 200 || after["role"] != "Owner of the product" || launch["script"] != "po" || perms["timeout"] != "1m30s" {
		t.Fatalf("PATCH role and timeout: %d %s (before %v)", st, b, before)
	}
	if st, b, _ := call("PATCH", "/api/offices/"+oid+"/agents/po", `{"id":"x"}`); st != 400 || !strings.Contains(b, "id cannot be changed") {
		t.Fatalf("PATCH id: %d %s", st, b)
	}
	if st, b, _ := call("PATCH", "/api/offices/"+oid+"/agents/po", `{"colour":"red"}`); st != 400 || !strings.Contains(b, "colour") {
		t.Fatalf("PATCH an unknown field: %d %s", st, b)
	}
	if st, b, _ := call("PUT", "/api/offices/"+oid+"/agents/po", `{"role":"Replaced","launch":{"kind":"builtin","script":"echo"}}`); st != 200 || !strings.Contains(b, `"role":"Replaced"`) || strings.Contains(b, "--step") {
		t.Fatalf("PUT replaces: %d %s", st, b)
	}

	// 405 with Allow.
	st, b, h := call("PUT", "/api/offices", "{}")
	if st != http.StatusMethodNotAllowed || h.Get("Allow") != "GET, POST" || !strings.Contains(b, "allowed: GET, POST") {
		t.Fatalf("PUT /api/offices: %d Allow=%q %s", st, h.Get("Allow"), b)
	}
	if st, _, _ := call("GET", "/api/nothing-here", ""); st != http.StatusNotFound {
		t.Fatalf("unknown endpoint: %d, want 404", st)
	}

	// A start that cannot launch says why.
	if st, b, _ := call("POST", "/api/offices/"+oid+"/agents", `{"name":"aider","launch":{"kind":"command","command":"no-such-program-xyz"}}`); st != 200 {
		t.Fatalf("create aider: %d %s", st, b)
	}
	if st, b, _ := call("POST", "/api/offices/"+oid+"/agents/aider/start", ""); st < 400 || strings.Contains(b, "internal error") || !strings.Contains(b, "no-such-program-xyz") {
		t.Fatalf("start of a missing program: %d %s, want the reason", st, b)
	}
}
