package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/office-server/office-server/office"
)

// do sends an authenticated API request with a JSON body and returns the
// status and body.
func (r *liveServer) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, r.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestAgentNamesRealServer: on the real wiring (embedded store), POSTing an
// agent under an existing name in another case is a 409 and leaves that
// agent as it was; a name that is a path is a 400.
func TestAgentNamesRealServer(t *testing.T) {
	r := startMain(t, "--no-autostart")
	oid := r.officeID(t)
	if st, b := r.do(t, "POST", "/api/offices/"+oid+"/agents", `{"name":"PO","role":"impostor","launch":{"kind":"command","command":"/bin/sh"}}`); st != 409 {
		t.Errorf("POST PO over po = %d %s, want 409", st, b)
	}
	var po office.Agent
	r.get(t, "/api/offices/"+oid+"/agents/po", &po)
	if po.Name != "po" || po.Role != "Product owner" || po.Launch.Kind != "builtin" {
		t.Errorf("po after the refused POST: %+v", po)
	}
	for _, name := range []string{`../../../../tmp/x`, `..`, `a\u0000b`, `a\nb`} {
		if st, b := r.do(t, "POST", "/api/offices/"+oid+"/agents", `{"name":"`+name+`"}`); st != 400 {
			t.Errorf("POST name %s = %d %s, want 400", name, st, b)
		}
	}
	if st, b := r.do(t, "PUT", "/api/offices/"+oid+"/agents/"+po.ID, `{"name":"po","role":"Owner"}`); st != 200 || !strings.Contains(b, `"role":"Owner"`) {
		t.Errorf("PUT po = %d %s, want it replaced", st, b)
	}
}
