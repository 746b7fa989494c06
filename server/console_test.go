package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// dialWS opens the console WebSocket with the token header and origin.
func dialWS(f *fixture, path, origin string) (*websocket.Conn, *http.Response, error) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+testToken)
	if origin != "" {
		h.Set("Origin", origin)
	}
	return websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(f.ts.URL, "http")+path, h)
}

// wsClient reads frames in the background and collects output and status.
type wsClient struct {
	ws     *websocket.Conn
	frames chan []byte
	closed chan error
}

func newClient(t *testing.T, f *fixture) *wsClient {
	t.Helper()
	ws, res, err := dialWS(f, "/ws/offices/o1/agents/po", f.ts.URL)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, res)
	}
	c := &wsClient{ws: ws, frames: make(chan []byte, 1024), closed: make(chan error, 1)}
	go func() {
		for {
			_, p, err := ws.ReadMessage()
			if err != nil {
				c.closed <- err
				close(c.frames)
				return
			}
			c.frames <- p
		}
	}()
	t.Cleanup(func() { ws.Close() })
	return c
}

func (c *wsClient) send(t *testing.T, typ byte, p []byte) {
	t.Helper()
	if err := c.ws.WriteMessage(websocket.BinaryMessage, append([]byte{typ}, p...)); err != nil {
		t.Fatal(err)
	}
}

// waitOutput reads frames until the output so far contains want.
func (c *wsClient) waitOutput(t *testing.T, want string) string {
	t.Helper()
	var out bytes.Buffer
	timeout := time.After(5 * time.Second)
	for {
		select {
		case p, ok := <-c.frames:
			if !ok {
				t.Fatalf("closed before output %q; got %q", want, out.String())
			}
			if p[0] == FrameOutput {
				if len(p) > maxOutputFrame {
					t.Fatalf("output frame of %d bytes, over %d", len(p), maxOutputFrame)
				}
				out.Write(p[1:])
				if strings.Contains(out.String(), want) {
					return out.String()
				}
			}
		case <-timeout:
			t.Fatalf("no output %q; got %q", want, out.String())
		}
	}
}

// waitStatus reads frames until a STATUS frame matches ok.
func (c *wsClient) waitStatus(t *testing.T, ok func(ConsoleStatus) bool) ConsoleStatus {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case p, open := <-c.frames:
			if !open {
				t.Fatal("closed while waiting for a status")
			}
			if p[0] == FrameStatus {
				var st ConsoleStatus
				if err := json.Unmarshal(p[1:], &st); err != nil {
					t.Fatal(err)
				}
				if ok(st) {
					return st
				}
			}
		case <-timeout:
			t.Fatal("no matching status frame")
		}
	}
}

func TestConsoleReplayLiveAndControl(t *testing.T) {
	f := newFixture(t, nil)
	f.term.write([]byte("before attach\r\n"))
	a := newClient(t, f)
	a.waitOutput(t, "before attach")
	b := newClient(t, f)
	b.waitOutput(t, "before attach")
	f.term.write([]byte("live line\r\n"))
	a.waitOutput(t, "live line")
	b.waitOutput(t, "live line")

	// Read-only: b's input never reaches the terminal.
	b.send(t, FrameInput, []byte("rm -rf /\r"))
	b.waitStatus(t, func(s ConsoleStatus) bool { return strings.Contains(s.Note, "read-only") })

	a.send(t, FrameTake, nil)
	a.waitStatus(t, func(s ConsoleStatus) bool { return s.Control == "you" && s.Viewers == 2 })
	b.waitStatus(t, func(s ConsoleStatus) bool { return s.Control == "other" })
	b.send(t, FrameTake, nil) // refused: a holds control
	b.waitStatus(t, func(s ConsoleStatus) bool { return strings.Contains(s.Note, "another viewer") })
	b.send(t, FrameInput, []byte("evil\r"))
	a.send(t, FrameInput, []byte("hello\r"))
	a.send(t, FrameResize, []byte(`{"cols":120,"rows":40}`))
	select {
	case p := <-f.term.inputs:
		if string(p) != "hello\r" {
			t.Fatalf("terminal got %q, want the controller's hello", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("controller input never reached the terminal")
	}
	time.Sleep(100 * time.Millisecond)
	if got := f.term.typed(); got != "hello\r" {
		t.Fatalf("terminal input = %q, want only the controller's %q", got, "hello\r")
	}

	// Control passes on when the controller leaves.
	a.ws.Close()
	b.waitStatus(t, func(s ConsoleStatus) bool { return s.Control == "none" && s.Viewers == 1 })
	b.send(t, FrameTake, nil)
	b.waitStatus(t, func(s ConsoleStatus) bool { return s.Control == "you" })
}

func TestConsoleWrongOriginRefused(t *testing.T) {
	f := newFixture(t, nil)
	for _, origin := range []string{"http://evil.example", f.ts.URL + ".evil.example", strings.Replace(f.ts.URL, "http:", "https:", 1) + "0"} {
		ws, res, err := dialWS(f, "/ws/offices/o1/agents/po", origin)
		if err == nil {
			ws.Close()
			t.Fatalf("origin %q: upgrade accepted", origin)
		}
		if res == nil || res.StatusCode != http.StatusForbidden {
			t.Fatalf("origin %q: response %v, want 403", origin, res)
		}
	}
}

func TestConsoleCookieNeedsOrigin(t *testing.T) {
	f := newFixture(t, nil)
	h := http.Header{}
	h.Set("Cookie", tokenCookie+"="+testToken)
	_, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(f.ts.URL, "http")+"/ws/offices/o1/agents/po", h)
	if err == nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("cookie without Origin: err %v res %v, want 403", err, res)
	}
	h.Set("Origin", f.ts.URL)
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(f.ts.URL, "http")+"/ws/offices/o1/agents/po", h)
	if err != nil {
		t.Fatalf("cookie with own Origin: %v", err)
	}
	ws.Close()
}

func TestConsoleOversizedFrameCloses(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxFrame = 1024 })
	c := newClient(t, f)
	c.send(t, FrameTake, nil)
	c.waitStatus(t, func(s ConsoleStatus) bool { return s.Control == "you" })
	// The write itself may fail midway: the server closes on the header.
	_ = c.ws.WriteMessage(websocket.BinaryMessage, append([]byte{FrameInput}, bytes.Repeat([]byte("x"), 4096)...))
	select {
	case err := <-c.closed:
		if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
			t.Fatalf("closed with %v, want 1009 message too big", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("oversized frame did not close the connection")
	}
	if got := f.term.typed(); got != "" {
		t.Fatalf("oversized input reached the terminal: %d bytes", len(got))
	}
}

func TestConsoleTextFrameCloses(t *testing.T) {
	f := newFixture(t, nil)
	c := newClient(t, f)
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-c.closed:
		if !websocket.IsCloseError(err, websocket.CloseUnsupportedData) {
			t.Fatalf("closed with %v, want 1003", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("text frame did not close the connection")
	}
}

// TestConsoleSlowViewerSkipsAhead: a paused viewer's held output passes
// 1 MiB; it skips ahead (RESET and a fresh replay on resume) while the
// terminal (the agent) is never blocked and another viewer gets everything.
func TestConsoleSlowViewerSkipsAhead(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ViewerQueue = 8; c.ViewerRate = -1 })
	slow := newClient(t, f)
	fast := newClient(t, f)
	slow.waitStatus(t, func(s ConsoleStatus) bool { return s.Viewers == 2 })
	slow.send(t, FramePause, nil)
	time.Sleep(50 * time.Millisecond)
	done := make(chan struct{})
	go func() {
		for i := 0; i < 200; i++ {
			f.term.write(bytes.Repeat([]byte("c"), 8<<10))
			time.Sleep(time.Millisecond) // the fast viewer keeps up
		}
		f.term.write([]byte("the end\r\n"))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("writes to the terminal blocked on a slow viewer")
	}
	out := fast.waitOutput(t, "the end")
	if len(out) < 200*8<<10 {
		t.Fatalf("fast viewer got %d bytes, want all %d", len(out), 200*8<<10)
	}
	slow.send(t, FrameResume, nil)
	waitReset(t, slow)
	slow.waitOutput(t, "the end")
}

// waitReset reads frames until a RESET.
func waitReset(t *testing.T, c *wsClient) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case p, ok := <-c.frames:
			if !ok {
				t.Fatalf("closed before RESET: %v", <-c.closed)
			}
			if p[0] == FrameReset {
				return
			}
		case <-timeout:
			t.Fatal("no RESET frame")
		}
	}
}

// TestConsoleRateSkipsAhead: a viewer is never sent more than its rate; a
// flood makes it skip ahead to a fresh replay that ends with the latest
// output.
func TestConsoleRateSkipsAhead(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ViewerQueue = 4096; c.ViewerRate = 512 << 10 })
	c := newClient(t, f)
	c.waitStatus(t, func(s ConsoleStatus) bool { return s.Viewers == 1 })
	for i := 0; i < 512; i++ { // 4 MiB at once
		f.term.write(bytes.Repeat([]byte("f"), 8<<10))
	}
	f.term.write([]byte("the end\r\n"))
	waitReset(t, c)
	out := c.waitOutput(t, "the end")
	if len(out) > 1<<20+64<<10 {
		t.Fatalf("after the reset the viewer got %d bytes, want at most the 1 MiB replay", len(out))
	}
	if _, body := f.do(t, "GET", "/metrics", "", ""); !strings.Contains(body, "office_console_viewer_skips_total 1") {
		t.Fatalf("skip not counted:\n%s", body)
	}
}

func TestConsoleBatchesFrames(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ViewerQueue = 4096 })
	f.term.write(bytes.Repeat([]byte("y"), 300<<10)) // replay of 300 KiB, within the burst
	c := newClient(t, f)
	out := c.waitOutput(t, strings.Repeat("y", 300<<10))
	if len(out) != 300<<10 {
		t.Fatalf("replay %d bytes, want %d", len(out), 300<<10)
	}
}

// TestConsolePingTimeout: a client that stops answering pings (it reads
// nothing, so it sends no pongs) is disconnected after two intervals.
func TestConsolePingTimeout(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.PingInterval = 300 * time.Millisecond; c.WriteTimeout = 300 * time.Millisecond })
	ws, _, err := dialWS(f, "/ws/offices/o1/agents/po", f.ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	viewers := func() string {
		_, body := f.do(t, "GET", "/metrics", "", "")
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "office_console_viewers ") {
				return l
			}
		}
		return ""
	}
	if v := viewers(); v != "office_console_viewers 1" {
		t.Fatalf("viewers = %q, want 1", v)
	}
	deadline := time.Now().Add(5 * time.Second)
	for viewers() != "office_console_viewers 0" {
		if time.Now().After(deadline) {
			t.Fatal("a client that answers no pings was not disconnected")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConsoleSizeFirstAndFollowed: the first frame is a STATUS with the
// session's size, before any output; a read-only viewer's RESIZE never
// reaches the terminal; the controller's does, and every viewer gets the
// new size.
func TestConsoleSizeFirstAndFollowed(t *testing.T) {
	f := newFixture(t, nil)
	_ = f.term.Resize(200, 50)
	f.term.write([]byte("drawn at 200x50\r\n"))
	a := newClient(t, f)
	select {
	case p := <-a.frames:
		var st ConsoleStatus
		if p[0] != FrameStatus || json.Unmarshal(p[1:], &st) != nil || st.Cols != 200 || st.Rows != 50 {
			t.Fatalf("first frame %q, want a STATUS with 200x50", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no first frame")
	}
	a.waitOutput(t, "drawn at 200x50")
	b := newClient(t, f)
	b.waitOutput(t, "drawn at 200x50")

	b.send(t, FrameResize, []byte(`{"cols":80,"rows":24}`)) // read-only: ignored
	time.Sleep(100 * time.Millisecond)
	if c, r := f.term.Size(); c != 200 || r != 50 {
		t.Fatalf("a read-only viewer resized the terminal to %dx%d", c, r)
	}
	a.send(t, FrameTake, nil)
	a.waitStatus(t, func(s ConsoleStatus) bool { return s.Control == "you" })
	a.send(t, FrameResize, []byte(`{"cols":100,"rows":30}`))
	b.waitStatus(t, func(s ConsoleStatus) bool { return s.Cols == 100 && s.Rows == 30 })
	if c, r := f.term.Size(); c != 100 || r != 30 {
		t.Fatalf("the controller's resize left the terminal at %dx%d", c, r)
	}
}
