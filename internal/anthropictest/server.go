// Package anthropictest is a scripted Anthropic Messages API server for
// driving the real Claude Code binary in tests.
//
// Point Claude Code at it with ANTHROPIC_BASE_URL=srv.URL and
// ANTHROPIC_API_KEY=srv.Key (see [Server.Env] and [PrepareHome]). It answers
// POST /v1/messages with a streaming SSE reply event by event as the real API
// does (message_start, content_block_start, ping, content_block_delta…,
// content_block_stop, message_delta with stop_reason and usage, message_stop),
// or with a JSON message when the request did not ask for a stream. Every
// other request (count_tokens, models, event logging, OAuth/quota probes…) is
// answered harmlessly and recorded in [Server.Unknown], so nothing hangs.
//
// Claude Code sends two kinds of Messages requests: the main conversation
// (it carries the tool list and the full message history) and side requests
// (a title or topic for the session, a one-token quota probe), which carry no
// tools. [Request.Main] tells them apart; scripts answer main requests (from
// [Server.Enqueue] or [Server.Reply]) and side requests get a short reply of
// their own ([Server.ReplySide]).
//
// Facts measured with Claude Code 2.1.330 (docs/notes/screen.md has details):
//   - with CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 and a prepared
//     $HOME/.claude.json, start-up makes no request to this server; the first
//     request is the main one, made when the prompt is submitted (without
//     that variable it also sends HEAD /api/hello at start-up and, before
//     each main request, a session-title side request on the haiku model);
//   - it turns on bracketed paste in its first write (~0.5 s after exec) and
//     draws its prompt box (❯) ~0.1 s later; an Enter typed before the box
//     is drawn is lost, so wait for it;
//   - a bracketed paste then "\r" submits multi-line text as one message; a
//     bare "\r" inside typed text submits early, a bare "\n" inserts a newline;
//   - the transcript is $HOME/.claude/projects/<workdir with every
//     non-alphanumeric character replaced by '-'>/<session id>.jsonl, created
//     when the first prompt is submitted, not at start-up;
//   - it runs full-screen on the alternate screen: nothing scrolls off.
package anthropictest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/office-server/office-server/internal/requestlog"
)

// DefaultKey is the API key [New] gives the server unless told otherwise.
// Claude Code shows an approval dialog for keys it does not know; [PrepareHome]
// approves this one (by its last 20 characters).
const DefaultKey = "sk-ant-api03-anthropictest-0123456789abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJ"

// Block is one content block of a message, as sent by the client.
type Block struct {
	Type  string          `json:"type"`           // text, tool_use, tool_result, image, thinking…
	Text  string          `json:"text,omitempty"` // text blocks
	ID    string          `json:"id,omitempty"`   // tool_use
	Name  string          `json:"name,omitempty"` // tool_use
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID and Content belong to tool_result blocks; Content is kept raw
	// because it is either a string or a list of blocks.
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"` // tool_result: the tool failed or was refused
}

// ToolResult returns the text of the first tool_result block of the
// request's last message, and whether it is an error; ok is false when it
// has none.
func (r Request) ToolResult() (text string, isError, ok bool) {
	if len(r.Messages) == 0 {
		return "", false, false
	}
	for _, b := range r.Messages[len(r.Messages)-1].Content {
		if b.Type != "tool_result" {
			continue
		}
		var s string
		if json.Unmarshal(b.Content, &s) == nil {
			return s, b.IsError, true
		}
		var parts []struct{ Text string }
		_ = json.Unmarshal(b.Content, &parts)
		var out []string
		for _, p := range parts {
			out = append(out, p.Text)
		}
		return strings.Join(out, "\n"), b.IsError, true
	}
	return "", false, false
}

// Message is one decoded entry of a request's messages list. A string content
// is decoded as a single text block.
type Message struct {
	Role    string
	Content []Block
}

// Text returns the text of the message's text blocks, joined by newlines.
func (m Message) Text() string {
	var parts []string
	for _, b := range m.Content {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Request is one request the server received. Messages requests are decoded;
// for others only Method, Path, Header and Body are set.
type Request struct {
	Seq    int // 1-based order among all Messages requests (0 for others)
	Time   time.Time
	Method string
	Path   string
	Header http.Header
	Body   []byte

	Model     string
	System    string // text of the system prompt, blocks joined by newlines
	Messages  []Message
	Tools     []string // names of the tools offered
	Stream    bool
	MaxTokens int
	// Main reports whether this is the main conversation request (it offers
	// tools) rather than a side request (title, topic, quota probe).
	Main bool
}

// IsMain reports whether r is a main request (requestlog.Request).
func (r Request) IsMain() bool { return r.Main }

// LastUserText returns the text of the last user message, without the
// <system-reminder> blocks Claude Code adds to it.
func (r Request) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role != "user" {
			continue
		}
		var parts []string
		for _, b := range m.Content {
			if b.Type == "text" && !strings.HasPrefix(strings.TrimSpace(b.Text), "<system-reminder>") {
				parts = append(parts, b.Text)
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// ToolUse is a tool_use block of a scripted reply.
type ToolUse struct {
	ID    string // default: generated
	Name  string
	Input any // marshalled to JSON
}

// Response is a scripted reply to a Messages request.
type Response struct {
	// Text is the reply's text block (omitted when empty and ToolUses is set).
	Text string
	// Chunks, when set, is Text cut into the text_delta events to send
	// (their concatenation replaces Text). Otherwise Text is sent in pieces of
	// about 40 bytes, on rune boundaries.
	Chunks []string
	// ToolUses follow the text block.
	ToolUses []ToolUse
	// StopReason defaults to end_turn, or tool_use when ToolUses is set.
	StopReason string
	// Delay is slept between streamed events, to imitate a model typing.
	Delay time.Duration
	// Hold, when set, keeps the reply back until it is closed (or the
	// client goes away): a model that is still thinking. A streaming reply
	// sends its headers and message_start first, as the real API does.
	Hold <-chan struct{}
	// Status, when not 0 or 200, makes the reply an API error of that status
	// with ErrorType (default api_error) and ErrorMessage.
	Status       int
	ErrorType    string
	ErrorMessage string
}

// Server is a scripted Messages API server. Create it with [New].
type Server struct {
	URL string // base URL, for ANTHROPIC_BASE_URL
	Key string // API key, for ANTHROPIC_API_KEY

	t   TB
	srv *httptest.Server

	mu    sync.Mutex
	queue []Response
	reply func(Request) Response
	side  func(Request) Response
	msgID int
	requestlog.Log[Request]
}

// TB is what the server needs of a test (testing.TB has it): the load
// driver, which is not a test, gives its own.
type TB interface {
	Helper()
	Cleanup(func())
	Logf(format string, args ...any)
}

// New starts a server that is closed when t ends. Until scripted, main
// requests get the reply "OK" and side requests the reply "Test".
func New(t TB) *Server {
	t.Helper()
	s := &Server{Key: DefaultKey, t: t}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close stops the server. In-flight streams are cut off.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Enqueue appends replies for the next main requests, in order. A queued
// reply takes precedence over the Reply function.
func (s *Server) Enqueue(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, rs...)
}

// Reply sets the function answering main requests when the queue is empty.
// It is called from the server's goroutines, one request at a time.
func (s *Server) Reply(f func(Request) Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reply = f
}

// ReplySide sets the function answering side requests (no tools offered).
func (s *Server) ReplySide(f func(Request) Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.side = f
}

// Env returns the environment Claude Code needs to talk only to this server,
// with HOME set to home.
func (s *Server) Env(home string) []string {
	return []string{
		"HOME=" + home,
		"ANTHROPIC_BASE_URL=" + s.URL,
		"ANTHROPIC_API_KEY=" + s.Key,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
	}
}

func (s *Server) record(r Request) Request {
	if r.Path == "/v1/messages" {
		return s.Add(func(n int) Request { r.Seq = n; return r })
	}
	s.AddUnknown(r.Method, r.Path)
	// Worth seeing in a failing test's log: a new Claude Code version may
	// call endpoints this server only answers generically.
	s.t.Logf("anthropictest: %s %s (answered generically)", r.Method, r.Path)
	return r
}

func (s *Server) script(r Request) Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !r.Main {
		if s.side != nil {
			f := s.side
			s.mu.Unlock()
			defer s.mu.Lock()
			return f(r)
		}
		return Response{Text: "Test"}
	}
	if len(s.queue) > 0 {
		resp := s.queue[0]
		s.queue = s.queue[1:]
		return resp
	}
	if s.reply != nil {
		f := s.reply
		s.mu.Unlock()
		defer s.mu.Lock()
		return f(r)
	}
	return Response{Text: "OK"}
}

func (s *Server) serveHTTP(w http.ResponseWriter, hr *http.Request) {
	body, err := io.ReadAll(hr.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r := Request{Time: time.Now(), Method: hr.Method, Path: hr.URL.Path, Header: hr.Header.Clone(), Body: body}
	switch {
	case hr.Method == http.MethodPost && hr.URL.Path == "/v1/messages":
		if err := decodeMessages(&r); err != nil {
			s.record(Request{Time: r.Time, Method: r.Method, Path: r.Path + " (undecodable)", Header: r.Header, Body: body})
			writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
			return
		}
		if hr.Header.Get("x-api-key") != s.Key && hr.Header.Get("Authorization") != "Bearer "+s.Key {
			s.record(r)
			writeError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
			return
		}
		r = s.record(r)
		resp := s.script(r)
		s.writeReply(w, hr, r, resp)
	case hr.Method == http.MethodPost && hr.URL.Path == "/v1/messages/count_tokens":
		s.record(r)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"input_tokens":%d}`, len(body)/4+1)
	case hr.URL.Path == "/v1/models":
		s.record(r)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":[{"type":"model","id":"claude-sonnet-4-5","display_name":"Claude Sonnet 4.5","created_at":"2025-09-29T00:00:00Z"}],"has_more":false,"first_id":"claude-sonnet-4-5","last_id":"claude-sonnet-4-5"}`)
	default:
		// Event logging, metrics, OAuth profile, feature flags: a harmless
		// empty success keeps Claude Code from retrying or waiting.
		s.record(r)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{}`)
	}
}

// wireRequest is the part of a Messages request body the server decodes.
type wireRequest struct {
	Model     string                  `json:"model"`
	System    json.RawMessage         `json:"system"`
	Messages  []wireMessage           `json:"messages"`
	Tools     []struct{ Name string } `json:"tools"`
	Stream    bool                    `json:"stream"`
	MaxTokens int                     `json:"max_tokens"`
}

type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

func decodeMessages(r *Request) error {
	var w wireRequest
	if err := json.Unmarshal(r.Body, &w); err != nil {
		return fmt.Errorf("decode messages request: %w", err)
	}
	r.Model, r.Stream, r.MaxTokens = w.Model, w.Stream, w.MaxTokens
	sys, err := decodeContent(w.System)
	if err != nil {
		return fmt.Errorf("decode system: %w", err)
	}
	var parts []string
	for _, b := range sys {
		parts = append(parts, b.Text)
	}
	r.System = strings.Join(parts, "\n")
	for i, m := range w.Messages {
		c, err := decodeContent(m.Content)
		if err != nil {
			return fmt.Errorf("decode message %d: %w", i, err)
		}
		r.Messages = append(r.Messages, Message{Role: m.Role, Content: c})
	}
	for _, t := range w.Tools {
		r.Tools = append(r.Tools, t.Name)
	}
	r.Main = len(r.Tools) > 0
	return nil
}

// decodeContent decodes a content (or system) field: a string, or a list of
// blocks.
func decodeContent(raw json.RawMessage) ([]Block, error) {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []Block{{Type: "text", Text: s}}, nil
	}
	var bs []Block
	if err := json.Unmarshal(raw, &bs); err != nil {
		return nil, err
	}
	return bs, nil
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	w.Write(b)
}
