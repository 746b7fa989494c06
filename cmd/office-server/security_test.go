package main

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/office-server/office-server/server"
)

// TestConsoleSecurityRealPTY checks the console's guards against a real
// agent in a real PTY (the echo script): no token → 401, a foreign Origin →
// no upgrade, a read-only viewer's keystrokes never reach the PTY (neither
// the agent nor the terminal's own echo shows them), the controller's do,
// and an oversized frame closes the connection.
func TestConsoleSecurityRealPTY(t *testing.T) {
	r := startMain(t)
	oid := r.officeID(t)
	echoID := r.waitAgent(t, oid, "echo")
	wsURL := "ws" + strings.TrimPrefix(r.base, "http") + "/ws/offices/" + oid + "/agents/" + echoID

	dial := func(token, origin string) (*websocket.Conn, *http.Response, error) {
		return dialWS(wsURL, token, origin)
	}
	if _, res, err := dial("", r.base); err == nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: err %v res %v, want 401", err, res)
	}
	if _, res, err := dial(r.token, "http://attacker.example"); err == nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign origin: err %v res %v, want 403", err, res)
	}
	open := func() *viewer { return openViewer(t, wsURL, r.token, r.base) }
	waitOut := func(v *viewer, want string) { t.Helper(); v.waitOut(t, want) }
	send := func(v *viewer, typ byte, p string) { t.Helper(); v.send(t, typ, p) }

	ro, ctl := open(), open()
	waitOut(ro, "echo: ready")
	waitOut(ctl, "echo: ready")
	send(ro, server.FrameInput, "READONLY-MARKER\r")
	send(ctl, server.FrameTake, "")
	time.Sleep(200 * time.Millisecond)
	send(ctl, server.FrameInput, "controller-line\r")
	waitOut(ctl, "echo: controller-line")
	waitOut(ro, "echo: controller-line")
	// The controller's line came after the read-only one: had the latter
	// reached the PTY, the tty echo or the agent would have shown it first.
	for _, v := range []*viewer{ro, ctl} {
		if strings.Contains(v.out.String(), "READONLY-MARKER") {
			t.Fatalf("read-only input reached the PTY:\n%s", v.out.String())
		}
	}
	// A read-only viewer cannot take control while it is held.
	send(ro, server.FrameTake, "")
	send(ro, server.FrameInput, "STOLEN-MARKER\r")
	send(ctl, server.FrameInput, "second-line\r")
	waitOut(ro, "echo: second-line")
	if strings.Contains(ro.out.String(), "STOLEN-MARKER") {
		t.Fatal("a second viewer took control while it was held")
	}

	// An oversized frame (over 64 KiB) closes the connection.
	_ = ctl.ws.WriteMessage(websocket.BinaryMessage, append([]byte{server.FrameInput}, bytes.Repeat([]byte("z"), 70<<10)...))
	select {
	case err := <-ctl.closed:
		if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
			t.Fatalf("closed with %v, want 1009", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("oversized frame did not close the connection")
	}
	time.Sleep(200 * time.Millisecond)
	if strings.Contains(ro.out.String(), "zzzz") {
		t.Fatal("the oversized frame's bytes reached the PTY")
	}
	if strings.Contains(r.logs.String(), r.token) {
		t.Fatal("token in the logs")
	}
}

// dialWS opens wsURL with token and origin, each left out when empty.
func dialWS(wsURL, token, origin string) (*websocket.Conn, *http.Response, error) {
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	if origin != "" {
		h.Set("Origin", origin)
	}
	return websocket.DefaultDialer.Dial(wsURL, h)
}

// viewer is a terminal's viewer: its output, and the error that ended it.
type viewer struct {
	ws     *websocket.Conn
	out    *lockedBuf
	closed chan error
}

// openViewer opens a viewer of wsURL that collects its output.
func openViewer(t *testing.T, wsURL, token, origin string) *viewer {
	ws, _, err := dialWS(wsURL, token, origin)
	if err != nil {
		t.Fatal(err)
	}
	v := &viewer{ws: ws, out: &lockedBuf{}, closed: make(chan error, 1)}
	go func() {
		for {
			_, p, err := ws.ReadMessage()
			if err != nil {
				v.closed <- err
				return
			}
			if len(p) > 0 && p[0] == server.FrameOutput {
				v.out.Write(p[1:])
			}
		}
	}()
	t.Cleanup(func() { ws.Close() })
	return v
}

// waitOut waits up to 15 s for the viewer's output to hold want.
func (v *viewer) waitOut(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(v.out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("output never showed %q:\n%s", want, v.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// send sends a frame of typ with payload p.
func (v *viewer) send(t *testing.T, typ byte, p string) {
	t.Helper()
	if err := v.ws.WriteMessage(websocket.BinaryMessage, append([]byte{typ}, p...)); err != nil {
		t.Fatal(err)
	}
}
