// Package openaitest is a scripted OpenAI-compatible model server for
// driving real CLI agents in tests: Codex (the Responses API, POST
// /v1/responses) and Qwen Code (Chat Completions, POST
// /v1/chat/completions). Streaming replies are sent event by event in the
// order the clients expect (docs/notes/clis.md lists the events each client
// reads and the facts measured with the pinned versions); a request that
// did not ask for a stream gets one JSON object. GET /v1/models lists one
// model; every other request is answered 200 {} and recorded in
// [Server.Unknown], so nothing hangs.
//
// Clients send two kinds of model requests: the main conversation, which
// offers tools, and side requests (Qwen Code's next-speaker check, a
// session title), which offer none. [Request.Main] tells them apart;
// scripts answer main requests ([Server.Enqueue], [Server.Reply]) and side
// requests get [Server.ReplySide]'s answer.
package openaitest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/requestlog"
)

// DefaultKey is the API key clients are given; a request with another
// bearer token gets a 401.
const DefaultKey = "sk-openaitest-0123456789"

// Model is the model name the server lists and clients are told to use.
const Model = "office-test-model"

// Response is a scripted reply: text, then function calls (streamed
// replies).
type Response struct {
	Text   string
	Calls  []Call
	Chunks []string      // the text deltas (default: pieces of about 40 bytes)
	Delay  time.Duration // between events
	Hold   <-chan struct{}
}

// Call is a function call the model makes: the tool's name and its
// arguments (JSON).
type Call struct {
	Name      string
	Arguments string
}

// Request is one model request the server received.
type Request struct {
	Seq    int // 1-based among model requests
	Time   time.Time
	Path   string
	Header http.Header
	Body   []byte
	Model  string
	Stream bool
	Tools  int
	// System is the client's standing prompt: the first system message
	// (Chat Completions) or the instructions (Responses API).
	System string
	// Main reports a main conversation request: it offers tools and is not
	// a side request by [Server.Side]'s rule.
	Main bool
}

// IsMain reports whether r is a main request (requestlog.Request).
func (r Request) IsMain() bool { return r.Main }

// Has reports whether the request's body contains s, its JSON escapes
// decoded (the instructions a client sent, say).
func (r Request) Has(s string) bool {
	var v any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		return strings.Contains(string(r.Body), s)
	}
	return contains(v, s)
}

// FunctionOutputs returns the outputs of function calls the request
// carries (Responses API function_call_output items, Chat Completions
// "tool" messages), as text.
func (r Request) FunctionOutputs() []string {
	var body struct {
		Input []struct {
			Type   string          `json:"type"`
			Output json.RawMessage `json:"output"`
		} `json:"input"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(r.Body, &body)
	var out []string
	for _, in := range body.Input {
		if in.Type == "function_call_output" {
			out = append(out, contentText(in.Output))
		}
	}
	for _, m := range body.Messages {
		if m.Role == "tool" {
			out = append(out, contentText(m.Content))
		}
	}
	return out
}

// LastUserText returns the text of the last user message: the last
// "user" entry of messages (Chat Completions) or of input (Responses API).
func (r Request) LastUserText() string {
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Input []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"input"`
	}
	_ = json.Unmarshal(r.Body, &body)
	last := ""
	for _, m := range append(body.Messages, body.Input...) {
		if m.Role == "user" {
			last = contentText(m.Content)
		}
	}
	return last
}

func contains(v any, s string) bool {
	switch v := v.(type) {
	case string:
		return strings.Contains(v, s)
	case []any:
		for _, e := range v {
			if contains(e, s) {
				return true
			}
		}
	case map[string]any:
		for _, e := range v {
			if contains(e, s) {
				return true
			}
		}
	}
	return false
}

// Server is the scripted server.
type Server struct {
	URL string // base URL, ending in /v1
	Key string

	t      testing.TB
	srv    *httptest.Server
	mu     sync.Mutex
	queue  []Response
	reply  func(Request) Response
	side   func(Request) Response
	isSide func(Request) bool
	requestlog.Log[Request]
}

// New starts a server closed at t's end.
func New(t testing.TB) *Server {
	s := &Server{t: t, Key: DefaultKey}
	s.reply = func(Request) Response { return Response{Text: "OK"} }
	s.side = func(Request) Response { return Response{Text: "OK"} }
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/v1"
	t.Cleanup(s.srv.Close)
	return s
}

// Enqueue adds replies for the next main requests, in order.
func (s *Server) Enqueue(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, rs...)
}

// Reply sets the answer to main requests when the queue is empty.
func (s *Server) Reply(f func(Request) Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reply = f
}

// ReplySide sets the answer to side requests.
func (s *Server) ReplySide(f func(Request) Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.side = f
}

// Side adds a rule for side requests that offer tools (Qwen Code's
// memory extraction subagent): they are answered by ReplySide and never
// take a main reply.
func (s *Server) Side(f func(Request) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.isSide = f
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	path := strings.TrimSuffix(r.URL.Path, "/")
	model := path == "/v1/responses" || path == "/v1/chat/completions"
	if r.Method == http.MethodGet && path == "/v1/models" {
		writeJSON(w, map[string]any{"object": "list", "data": []any{map[string]any{"id": Model, "object": "model", "owned_by": "openaitest"}}})
		return
	}
	if r.Method != http.MethodPost || !model {
		s.AddUnknown(r.Method, r.URL.Path)
		writeJSON(w, map[string]any{})
		return
	}
	var head struct {
		Model        string            `json:"model"`
		Stream       bool              `json:"stream"`
		Tools        []json.RawMessage `json:"tools"`
		Instructions string            `json:"instructions"`
		Messages     []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &head)
	req := Request{Time: time.Now(), Path: path, Header: r.Header.Clone(), Body: body, Model: head.Model, Stream: head.Stream, Tools: len(head.Tools), System: head.Instructions}
	if len(head.Messages) > 0 && head.Messages[0].Role == "system" {
		req.System = contentText(head.Messages[0].Content)
	}
	s.mu.Lock()
	req.Main = req.Tools > 0 && (s.isSide == nil || !s.isSide(req))
	req = s.Add(func(n int) Request { req.Seq = n; return req })
	if r.Header.Get("Authorization") != "Bearer "+s.Key {
		// Recorded, answered as the real API does, no reply taken.
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)
		return
	}
	var resp Response
	switch {
	case !req.Main:
		resp = s.side(req)
	case len(s.queue) > 0:
		resp = s.queue[0]
		s.queue = s.queue[1:]
	default:
		resp = s.reply(req)
	}
	s.mu.Unlock()
	if resp.Hold != nil {
		select {
		case <-resp.Hold:
		case <-r.Context().Done():
			return
		}
	}
	if path == "/v1/responses" {
		s.responses(w, r, req, resp)
		return
	}
	s.chat(w, r, req, resp)
}

// contentText is a message content's text: a string, or the text of a
// list of parts.
func contentText(raw json.RawMessage) string {
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// chunks splits the reply into its text deltas.
func (r Response) chunks() []string {
	if len(r.Chunks) > 0 {
		return r.Chunks
	}
	var out []string
	s := r.Text
	for len(s) > 40 {
		n := 40
		for n < len(s) && s[n]&0xc0 == 0x80 {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// sse writes server-sent events, flushing each.
type sse struct {
	w     http.ResponseWriter
	ctx   context.Context
	delay time.Duration
}

func newSSE(w http.ResponseWriter, r *http.Request, delay time.Duration) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, ctx: r.Context(), delay: delay}
}

// send writes one event (name may be empty) and reports whether the client
// is still there.
func (e *sse) send(name string, data any) bool {
	b, ok := data.([]byte)
	if !ok {
		b, _ = json.Marshal(data)
	}
	var buf strings.Builder
	if name != "" {
		fmt.Fprintf(&buf, "event: %s\n", name)
	}
	fmt.Fprintf(&buf, "data: %s\n\n", b)
	if _, err := io.WriteString(e.w, buf.String()); err != nil {
		return false
	}
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
	if e.delay > 0 {
		select {
		case <-time.After(e.delay):
		case <-e.ctx.Done():
			return false
		}
	}
	return e.ctx.Err() == nil
}

var usage = map[string]any{
	"input_tokens": 10, "output_tokens": 10, "total_tokens": 20,
	"input_tokens_details":  map[string]any{"cached_tokens": 0},
	"output_tokens_details": map[string]any{"reasoning_tokens": 0},
}

// responses answers the Responses API: response.created,
// response.output_item.added, response.output_text.delta per chunk,
// response.output_item.done with the whole message, response.completed.
func (s *Server) responses(w http.ResponseWriter, r *http.Request, req Request, resp Response) {
	id := fmt.Sprintf("resp_%d", req.Seq)
	mid := fmt.Sprintf("msg_%d", req.Seq)
	done := map[string]any{"type": "message", "id": mid, "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": resp.Text, "annotations": []any{}}}}
	var items []any
	if resp.Text != "" || len(resp.Calls) == 0 {
		items = append(items, done)
	}
	for i, c := range resp.Calls {
		items = append(items, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d_%d", req.Seq, i),
			"call_id": fmt.Sprintf("call_%d_%d", req.Seq, i), "name": c.Name, "arguments": c.Arguments, "status": "completed"})
	}
	if !req.Stream {
		writeJSON(w, map[string]any{"id": id, "object": "response", "status": "completed", "model": req.Model, "output": items, "usage": usage})
		return
	}
	e := newSSE(w, r, resp.Delay)
	if !e.send("response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": id, "object": "response", "status": "in_progress", "output": []any{}}}) {
		return
	}
	for i, it := range items {
		item := it.(map[string]any)
		if item["type"] == "message" {
			if !e.send("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": i,
				"item": map[string]any{"type": "message", "id": mid, "role": "assistant", "status": "in_progress", "content": []any{}}}) {
				return
			}
			for _, c := range resp.chunks() {
				if !e.send("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": mid, "output_index": i, "content_index": 0, "delta": c}) {
					return
				}
			}
		} else if !e.send("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": i, "item": item}) {
			return
		}
		if !e.send("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": i, "item": item}) {
			return
		}
	}
	e.send("response.completed", map[string]any{"type": "response.completed",
		"response": map[string]any{"id": id, "object": "response", "status": "completed", "output": items, "usage": usage}})
}

// chat answers Chat Completions: chat.completion.chunk events with the
// text deltas, one with finish_reason "stop" and the usage, then [DONE].
func (s *Server) chat(w http.ResponseWriter, r *http.Request, req Request, resp Response) {
	id := fmt.Sprintf("chatcmpl-%d", req.Seq)
	u := map[string]any{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
	if !req.Stream {
		writeJSON(w, map[string]any{"id": id, "object": "chat.completion", "created": req.Time.Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": resp.Text}, "finish_reason": "stop"}}, "usage": u})
		return
	}
	e := newSSE(w, r, resp.Delay)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": req.Time.Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	for i, c := range resp.chunks() {
		d := map[string]any{"content": c}
		if i == 0 {
			d["role"] = "assistant"
		}
		if !e.send("", chunk(d, nil)) {
			return
		}
	}
	finish := "stop"
	for i, c := range resp.Calls {
		finish = "tool_calls"
		d := map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": fmt.Sprintf("call_%d_%d", req.Seq, i), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": c.Arguments}}}}
		if !e.send("", chunk(d, nil)) {
			return
		}
	}
	last := chunk(map[string]any{}, finish)
	last["usage"] = u
	if !e.send("", last) {
		return
	}
	e.send("", []byte("[DONE]"))
}

// LastIsToolOutput reports whether the request ends with a tool's output:
// a Chat Completions "tool" message or a Responses API
// function_call_output item.
func (r Request) LastIsToolOutput() bool {
	var body struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
		Input []struct {
			Type string `json:"type"`
		} `json:"input"`
	}
	_ = json.Unmarshal(r.Body, &body)
	if n := len(body.Messages); n > 0 && body.Messages[n-1].Role == "tool" {
		return true
	}
	n := len(body.Input)
	return n > 0 && body.Input[n-1].Type == "function_call_output"
}
