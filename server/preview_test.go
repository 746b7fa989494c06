package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"

	"github.com/office-server/office-server/office"
)

// previewClient is a page's preview socket, read in the background.
type previewClient struct {
	ws     *websocket.Conn
	msgs   chan []previewUpdate
	closed chan error
}

func dialPreviews(t *testing.T, f *fixture) *previewClient {
	t.Helper()
	ws, res, err := dialWS(f, "/ws/offices/o1/previews", f.ts.URL)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, res)
	}
	c := &previewClient{ws: ws, msgs: make(chan []previewUpdate, 100), closed: make(chan error, 1)}
	go func() {
		for {
			mt, p, err := ws.ReadMessage()
			if err != nil {
				c.closed <- err
				return
			}
			var m struct{ Screens []previewUpdate }
			if mt != websocket.TextMessage || json.Unmarshal(p, &m) != nil {
				c.closed <- errors.New("not a JSON text message: " + string(p))
				return
			}
			c.msgs <- m.Screens
		}
	}()
	t.Cleanup(func() { ws.Close() })
	return c
}

func (c *previewClient) watch(t *testing.T, ids ...string) {
	t.Helper()
	b, _ := json.Marshal(map[string][]string{"watch": append([]string{}, ids...)})
	if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		t.Fatal(err)
	}
}

// next returns the next message, failing after 2 s.
func (c *previewClient) next(t *testing.T) []previewUpdate {
	t.Helper()
	select {
	case m := <-c.msgs:
		return m
	case err := <-c.closed:
		t.Fatalf("closed: %v", err)
	case <-time.After(2 * time.Second):
		t.Fatal("no preview message within 2s")
	}
	return nil
}

// TestPreviews: a watched screen is sent whole, then only its changed
// rows, at most a few times a second; an agent without a terminal is sent
// as not live; an unwatched screen is not looked at; and the socket takes
// nothing but watch messages: input closes it and reaches no terminal.
func TestPreviews(t *testing.T) {
	f := newFixture(t, nil)
	f.term.cols, f.term.rows = 80, 24
	f.term.write([]byte("po>\nline two"))
	c := dialPreviews(t, f)
	c.watch(t, "a1", "a2")
	got := c.next(t)
	want := []previewUpdate{
		{Agent: "a1", Live: true, Cols: 80, Rows: 2, Full: true, Lines: []string{"po>", "line two"}},
		{Agent: "a2"}, // dev has no running terminal
	}
	if d := cmp.Diff(got, want); d != "" {
		t.Fatalf("first message (-got +want):\n%s", d)
	}
	if n := previewScreens(t, f); n != 2 {
		t.Errorf("office_console_preview_screens = %v, want 2", n)
	}

	// Changed rows only, and in one message however many writes.
	start := time.Now()
	f.term.write([]byte(" changed"))
	f.term.write([]byte("\nthree"))
	got = c.next(t)
	if d := cmp.Diff(got, []previewUpdate{{Agent: "a1", Live: true, Cols: 80, Rows: 3, Full: true, Lines: []string{"po>", "line two changed", "three"}}}); d != "" {
		t.Fatalf("after a new row (-got +want):\n%s", d)
	}
	f.term.mu.Lock()
	f.term.scroll = []byte("po>\nline 2\nthree")
	f.term.writes++
	f.term.mu.Unlock()
	got = c.next(t)
	if d := cmp.Diff(got, []previewUpdate{{Agent: "a1", Live: true, At: []int{1}, Lines: []string{"line 2"}}}); d != "" {
		t.Fatalf("after one row changed (-got +want):\n%s", d)
	}
	if took := time.Since(start); took < previewInterval {
		t.Errorf("two updates within %v, want at most one per %v", took, previewInterval)
	}

	// Unwatched: nothing is sent, whatever the screen does.
	c.watch(t, "a2")
	f.term.write([]byte("\nunwatched"))
	select {
	case m := <-c.msgs:
		t.Fatalf("a message for a screen no tile shows: %+v", m)
	case <-time.After(3 * previewInterval):
	}
	if n := previewScreens(t, f); n != 1 {
		t.Errorf("office_console_preview_screens = %v, want 1", n)
	}

	// Input: refused, the connection closed, nothing typed.
	if err := c.ws.WriteMessage(websocket.BinaryMessage, append([]byte{FrameInput}, "rm -rf /\r"...)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-c.closed:
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseUnsupportedData || !strings.Contains(ce.Text, "read-only") {
			t.Errorf("closed with %v, want 1003 saying previews are read-only", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("an input frame did not close the preview socket")
	}
	if typed := f.term.typed(); typed != "" {
		t.Errorf("the terminal was typed %q through a preview", typed)
	}
	for deadline := time.Now().Add(2 * time.Second); previewScreens(t, f) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("office_console_preview_screens = %v after the page left, want 0", previewScreens(t, f))
		}
	}
}

// TestPreviewsRefused: the preview socket checks what the console's does.
func TestPreviewsRefused(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		name, path, origin string
		token              bool
		want               int
	}{
		{"no token", "/ws/offices/o1/previews", "", false, http.StatusUnauthorized},
		{"other origin", "/ws/offices/o1/previews", "http://evil.example", true, http.StatusForbidden},
		{"no office", "/ws/offices/nope/previews", "", true, http.StatusNotFound},
	} {
		h := http.Header{}
		if tc.token {
			h.Set("Authorization", "Bearer "+testToken)
		}
		if tc.origin != "" {
			h.Set("Origin", tc.origin)
		}
		_, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(f.ts.URL, "http")+tc.path, h)
		if err == nil || res == nil || res.StatusCode != tc.want {
			status := 0
			if res != nil {
				status = res.StatusCode
			}
			t.Errorf("%s: status %d (%v), want %d", tc.name, status, err, tc.want)
		}
	}
	// Too many previews, or a message that is not a watch.
	for _, msg := range []string{`{"watch":` + strings.Repeat(`"x",`, maxPreviewWatch) + `"y"]}`, `{"input":"ls\r"}`, `not json`} {
		ids := strings.Count(msg, `"`) / 2
		c := dialPreviews(t, f)
		if err := c.ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-c.closed:
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.CloseUnsupportedData {
				t.Errorf("%.40s (%d strings): closed with %v, want 1003", msg, ids, err)
			}
		case m := <-c.msgs:
			t.Errorf("%.40s: answered %+v, want the socket closed", msg, m)
		case <-time.After(2 * time.Second):
			t.Errorf("%.40s: the socket stayed open", msg)
		}
	}
	if !slices.Equal(parseWatchIDs(t, `{"watch":["b","a","b"]}`), []string{"a", "b"}) {
		t.Error("a watch set is not read as a sorted set")
	}
}

func parseWatchIDs(t *testing.T, msg string) []string {
	t.Helper()
	ids, why := parseWatch(websocket.TextMessage, []byte(msg))
	if why != "" {
		t.Fatalf("%s: %s", msg, why)
	}
	return ids
}

// previewScreens reads office_console_preview_screens from /metrics.
func previewScreens(t *testing.T, f *fixture) float64 {
	t.Helper()
	_, body := f.do(t, "GET", "/metrics", "", "")
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, "office_console_preview_screens "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no office_console_preview_screens in /metrics")
	return 0
}

// TestRowByID: a call or a result is read by its id (the console's row
// updates), 404 for one that does not exist.
func TestRowByID(t *testing.T) {
	f := newFixture(t, nil)
	f.store.invs = append(f.store.invs, office.Invocation{ID: "i1", OfficeID: "o1", CallerAgentID: "a1", CalleeAgentID: "a2", Reason: "build it", Status: "pending"})
	st, body := f.do(t, "GET", "/api/invocations/i1", testToken, "")
	if st != http.StatusOK || !strings.Contains(body, `"reason":"build it"`) {
		t.Errorf("GET /api/invocations/i1: %d %s", st, body)
	}
	for _, path := range []string{"/api/invocations/nope", "/api/results/nope"} {
		if st, body := f.do(t, "GET", path, testToken, ""); st != http.StatusNotFound || errCode(t, body) != "not_found" {
			t.Errorf("GET %s: %d %s, want 404 not_found", path, st, body)
		}
	}
}
