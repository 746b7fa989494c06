package anthropictest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/office-server/office-server/internal/anthropictest"
)

func post(t *testing.T, srv *anthropictest.Server, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", srv.Key)
	req.Header.Set("content-type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const mainBody = `{"model":"m","max_tokens":10,"stream":true,"tools":[{"name":"Bash"}],
"system":[{"type":"text","text":"sys"}],
"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"안녕"}]}]}`

type sseEvent struct {
	Event string
	Data  map[string]any
}

func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	sc := bufio.NewScanner(r)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.Data); err != nil {
				t.Fatalf("data of %s: %v", ev.Event, err)
			}
		case line == "":
			if ev.Event != "" {
				if ev.Data["type"] != ev.Event {
					t.Errorf("event %s carries type %v", ev.Event, ev.Data["type"])
				}
				out = append(out, ev)
			}
			ev = sseEvent{}
		}
	}
	return out
}

func TestStreamingReply(t *testing.T) {
	srv := anthropictest.New(t)
	srv.Enqueue(anthropictest.Response{Text: "한국어 답입니다", Chunks: []string{"한국어 ", "답입니다"}})
	resp := post(t, srv, "/v1/messages", mainBody)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	evs := readSSE(t, resp.Body)
	var names []string
	var text string
	for _, e := range evs {
		names = append(names, e.Event)
		if e.Event == "content_block_delta" {
			d := e.Data["delta"].(map[string]any)
			if d["type"] != "text_delta" {
				t.Errorf("delta type %v", d["type"])
			}
			text += d["text"].(string)
		}
	}
	want := []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if diff := cmp.Diff(names, want); diff != "" {
		t.Errorf("events (-got +want):\n%s", diff)
	}
	if text != "한국어 답입니다" {
		t.Errorf("text %q", text)
	}
	md := evs[len(evs)-2].Data
	if sr := md["delta"].(map[string]any)["stop_reason"]; sr != "end_turn" {
		t.Errorf("stop_reason %v", sr)
	}
	if _, ok := md["usage"].(map[string]any)["output_tokens"]; !ok {
		t.Errorf("message_delta lacks usage.output_tokens: %v", md)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || !reqs[0].Main || reqs[0].LastUserText() != "안녕" || reqs[0].System != "sys" {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestNonStreamingSideAndToolUse(t *testing.T) {
	srv := anthropictest.New(t)
	srv.ReplySide(func(r anthropictest.Request) anthropictest.Response {
		return anthropictest.Response{Text: "title: " + r.LastUserText()}
	})
	srv.Enqueue(anthropictest.Response{Text: "run it", ToolUses: []anthropictest.ToolUse{{Name: "Bash", Input: map[string]string{"command": "ls"}}}})
	// A side request (no tools) must not consume the queued main reply.
	resp := post(t, srv, "/v1/messages", `{"model":"haiku","max_tokens":5,"messages":[{"role":"user","content":"hello"}]}`)
	var msg struct {
		Content []struct {
			Type, Text, Name string
			Input            map[string]string
		}
		StopReason string `json:"stop_reason"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != "title: hello" || msg.StopReason != "end_turn" {
		t.Errorf("side reply %+v", msg)
	}
	resp = post(t, srv, "/v1/messages", strings.Replace(mainBody, `"stream":true`, `"stream":false`, 1))
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 2 || msg.Content[1].Type != "tool_use" || msg.Content[1].Input["command"] != "ls" || msg.StopReason != "tool_use" {
		t.Errorf("main reply %+v", msg)
	}
	if got := len(srv.MainRequests()); got != 1 {
		t.Errorf("main requests %d, want 1", got)
	}
}

func TestUnknownAuthAndWait(t *testing.T) {
	srv := anthropictest.New(t)
	resp := post(t, srv, "/api/event_logging/batch", `{}`)
	if resp.StatusCode != 200 {
		t.Errorf("event logging status %d", resp.StatusCode)
	}
	resp = post(t, srv, "/v1/messages/count_tokens", mainBody)
	var ct struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ct); err != nil || ct.InputTokens == 0 {
		t.Errorf("count_tokens %v %+v", err, ct)
	}
	if diff := cmp.Diff(srv.Unknown(), []string{"POST /api/event_logging/batch", "POST /v1/messages/count_tokens"}); diff != "" {
		t.Errorf("unknown (-got +want):\n%s", diff)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(mainBody))
	req.Header.Set("x-api-key", "wrong")
	bad, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	bad.Body.Close()
	if bad.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong key: status %d", bad.StatusCode)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	// The unauthorised request was recorded but is the only one: there is
	// no second main request.
	if _, err := srv.WaitMain(ctx, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitMain(2) = %v, want deadline", err)
	}
	done := make(chan anthropictest.Request)
	go func() {
		r, _ := srv.WaitMain(context.Background(), 2)
		done <- r
	}()
	srv.Enqueue(anthropictest.Response{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "busy"})
	resp = post(t, srv, "/v1/messages", mainBody)
	if resp.StatusCode != 529 {
		t.Errorf("scripted error status %d", resp.StatusCode)
	}
	if r := <-done; r.Seq != 2 {
		t.Errorf("waited request seq %d", r.Seq)
	}
}

func TestHold(t *testing.T) {
	srv := anthropictest.New(t)
	hold := make(chan struct{})
	srv.Enqueue(anthropictest.Response{Text: "늦은 답", Hold: hold})
	done := make(chan string)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(mainBody))
		req.Header.Set("x-api-key", srv.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- string(b)
	}()
	select {
	case <-done:
		t.Fatal("held reply finished before it was released")
	case <-time.After(200 * time.Millisecond):
	}
	close(hold)
	evs := readSSE(t, strings.NewReader(<-done))
	if len(evs) != 7 || evs[0].Event != "message_start" || evs[len(evs)-1].Event != "message_stop" {
		t.Errorf("events after release: %v", evs)
	}
}

func TestProjectDir(t *testing.T) {
	got := anthropictest.ProjectDir("/h", "/tmp/작업 폴더/a_b.c/😀x")
	if want := "/h/.claude/projects/-tmp-------a-b-c---x"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
