package openaitest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/office-server/office-server/internal/openaitest"
)

func post(t *testing.T, srv *openaitest.Server, path, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// events reads a server-sent event stream into (event, data) pairs.
func events(t *testing.T, r io.Reader) [][2]string {
	t.Helper()
	var out [][2]string
	var name string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "event: "):
			name = strings.TrimPrefix(l, "event: ")
		case strings.HasPrefix(l, "data: "):
			out = append(out, [2]string{name, strings.TrimPrefix(l, "data: ")})
			name = ""
		}
	}
	return out
}

// TestResponsesStream: the Responses API stream has the events Codex reads,
// in order, the deltas adding up to the reply, the completed message whole.
func TestResponsesStream(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Response{Text: "안녕 [ASK_USER]", Chunks: []string{"안녕 ", "[ASK_USER]"}})
	resp := post(t, srv, "/responses", srv.Key, `{"model":"m","stream":true,"instructions":"SYS","tools":[{"type":"function"}],"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"first"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"질문"}]}]}`)
	evs := events(t, resp.Body)
	var names []string
	var text strings.Builder
	for _, e := range evs {
		names = append(names, e[0])
		var d struct{ Delta string }
		json.Unmarshal([]byte(e[1]), &d)
		if e[0] == "response.output_text.delta" {
			text.WriteString(d.Delta)
		}
	}
	want := []string{"response.created", "response.output_item.added", "response.output_text.delta", "response.output_text.delta", "response.output_item.done", "response.completed"}
	if d := cmp.Diff(names, want); d != "" {
		t.Errorf("events (-got +want):\n%s", d)
	}
	if text.String() != "안녕 [ASK_USER]" || !strings.Contains(evs[4][1], `"text":"안녕 [ASK_USER]"`) {
		t.Errorf("text %q, done item %s", text.String(), evs[4][1])
	}
	r, err := srv.WaitMain(context.Background(), 1)
	if err != nil || r.System != "SYS" || !r.Main || !r.Has("SYS") || r.LastUserText() != "질문" {
		t.Errorf("request %+v, %v", r, err)
	}
}

// TestChatStream: Chat Completions chunks, a finish_reason, [DONE]; side
// requests (no tools, or by the Side rule) get ReplySide's answer and leave
// the main queue alone; a wrong key is a 401; other paths are recorded.
func TestChatStream(t *testing.T) {
	srv := openaitest.New(t)
	srv.Reply(func(openaitest.Request) openaitest.Response {
		return openaitest.Response{Text: "main", Delay: time.Millisecond}
	})
	srv.ReplySide(func(openaitest.Request) openaitest.Response { return openaitest.Response{Text: "side"} })
	srv.Side(openaitest.QwenSide)
	resp := post(t, srv, "/chat/completions", srv.Key, `{"model":"m","stream":false,"messages":[{"role":"user","content":"title?"}]}`)
	var c struct {
		Choices []struct{ Message struct{ Content string } }
	}
	json.NewDecoder(resp.Body).Decode(&c)
	if len(c.Choices) != 1 || c.Choices[0].Message.Content != "side" {
		t.Errorf("side reply %+v", c)
	}
	resp = post(t, srv, "/chat/completions", srv.Key, `{"model":"m","stream":true,"tools":[{}],"messages":[{"role":"system","content":[{"type":"text","text":"You are now acting as a subagent"}]}]}`)
	if evs := events(t, resp.Body); len(evs) != 3 || !strings.Contains(evs[0][1], `"content":"side"`) {
		t.Errorf("side request by rule: %q", evs)
	}
	resp = post(t, srv, "/chat/completions", srv.Key, `{"model":"m","stream":true,"tools":[{}],"messages":[{"role":"system","content":"You are Qwen Code"}]}`)
	evs := events(t, resp.Body)
	if len(evs) != 3 || !strings.Contains(evs[0][1], `"content":"main"`) || !strings.Contains(evs[1][1], `"finish_reason":"stop"`) || evs[2][1] != "[DONE]" {
		t.Errorf("main stream: %q", evs)
	}
	if m := srv.MainRequests(); len(m) == 1 && m[0].LastUserText() != "" {
		t.Errorf("last user text of a request with none: %q", m[0].LastUserText())
	}
	if got := len(srv.MainRequests()); got != 1 {
		t.Errorf("%d main requests, want 1", got)
	}
	if resp := post(t, srv, "/chat/completions", "wrong", `{}`); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong key: %d", resp.StatusCode)
	}
	post(t, srv, "/telemetry", srv.Key, `{}`)
	if d := cmp.Diff(srv.Unknown(), []string{"POST /v1/telemetry"}); d != "" {
		t.Errorf("unknown (-got +want):\n%s", d)
	}
}
