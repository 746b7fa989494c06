package main

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

// do sends an authenticated API request with a JSON body and returns the
// status and body.
func (r *liveServer) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	return r.client(t).text(method, path, body)
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

// TestListenBeyondLoopback: --addr 0.0.0.0 prints a loud warning and a
// console URL a browser can open (not http://0.0.0.0 or [::]); the real
// server then refuses a Host that is not its own on /metrics and /readyz
// (DNS rebinding) while /healthz stays open. On loopback, no warning.
func TestListenBeyondLoopback(t *testing.T) {
	r := startMain(t, "--no-autostart", "--addr", "0.0.0.0:0")
	_, port, _ := net.SplitHostPort(r.m.Addr().String())
	out := r.waitOut(t, "office console:")
	if !strings.Contains(out, "WARNING: listening on all interfaces") || !strings.Contains(r.logs.String(), "listening on all interfaces") {
		t.Errorf("no warning for 0.0.0.0:\n%s", out)
	}
	if !strings.Contains(out, "office console: http://127.0.0.1:"+port+"/?token=") || strings.Contains(out, "http://0.0.0.0") || strings.Contains(out, "http://[::]") {
		t.Errorf("console URL not usable (port %s):\n%s", port, out)
	}
	base := "http://127.0.0.1:" + port
	for path, want := range map[string]int{"/metrics": 403, "/readyz": 403, "/healthz": 200} {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Host = "rebind.attacker.example:" + port
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("GET %s with a foreign Host = %d, want %d", path, res.StatusCode, want)
		}
	}

	local := startMain(t, "--no-autostart")
	if out := local.waitOut(t, "office console:"); strings.Contains(out, "WARNING") {
		t.Errorf("warning on loopback:\n%s", out)
	}
}

func TestConsoleURL(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:8080":   "http://127.0.0.1:8080/",
		"[::]:8080":      "http://127.0.0.1:8080/",
		"127.0.0.1:8080": "http://127.0.0.1:8080/",
		"10.1.2.3:8080":  "http://10.1.2.3:8080/",
	} {
		a, _ := net.ResolveTCPAddr("tcp", addr)
		if got := consoleURL(a); got != want {
			t.Errorf("consoleURL(%s) = %s, want %s", addr, got, want)
		}
		if warn := exposure(a); (warn == "") != strings.HasPrefix(addr, "127.") {
			t.Errorf("exposure(%s) = %q", addr, warn)
		}
	}
}

// waitOut waits until the server's stdout holds want and returns it.
func (r *liveServer) waitOut(t *testing.T, want string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(r.out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("stdout never showed %q:\n%s", want, r.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return r.out.String()
}
