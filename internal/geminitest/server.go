// Package geminitest is a scripted Gemini API server for driving the real
// Gemini CLI in tests. The CLI, given GOOGLE_GEMINI_BASE_URL, sends its
// model requests to POST {base}/v1beta/models/{model}:streamGenerateContent
// (?alt=sse: server-sent events, each a GenerateContentResponse) and
// :generateContent (one JSON object); :countTokens is answered with a
// count. Every other request is answered 200 {} and recorded in
// [Server.Unknown], so nothing hangs (docs/notes/clis.md).
//
// The CLI sends two kinds of model requests: the main conversation, which
// streams and offers tools (function declarations), and side requests (its
// next-speaker check, a session summary, a model-routing choice), which
// ask for JSON or offer no tools. [Request.Main] tells them apart; scripts
// answer main requests ([Server.Enqueue], [Server.Reply]); side requests
// get one JSON object that satisfies every schema the CLI asks with (the
// user speaks next, the flash model is chosen).
package geminitest

import (
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

// Model is the model name clients are told to use.
const Model = "gemini-2.5-flash"

// DefaultKey is the API key clients are given (sent as x-goog-api-key).
const DefaultKey = "geminitest-key-0123456789"

// Response is a scripted reply: text, then function calls (each a tool the
// model asks to run: name and arguments).
type Response struct {
	Text   string
	Calls  []Call
	Chunks []string      // the text deltas (default: pieces of about 40 bytes)
	Delay  time.Duration // between events
}

// Call is a function call the model makes.
type Call struct {
	Name string
	Args map[string]any
}

// Request is one model request the server received.
type Request struct {
	Seq    int
	Time   time.Time
	Path   string
	Body   []byte
	Model  string
	Stream bool
	Tools  int // function declarations offered
	// System is the system instruction's text.
	System string
	// Main reports a main conversation request: it streams, offers tools
	// and asks for no JSON.
	Main bool
}

// IsMain reports whether r is a main request (requestlog.Request).
func (r Request) IsMain() bool { return r.Main }

// Has reports whether the request's body contains s, its JSON escapes
// decoded.
func (r Request) Has(s string) bool {
	var v any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		return strings.Contains(string(r.Body), s)
	}
	return contains(v, s)
}

// LastUserText returns the last text part of the user's turns (the CLI
// sends its session context as an earlier part of the first turn).
func (r Request) LastUserText() string {
	var body struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"contents"`
	}
	_ = json.Unmarshal(r.Body, &body)
	last := ""
	for _, c := range body.Contents {
		if c.Role != "user" {
			continue
		}
		for _, p := range c.Parts {
			if p.Text != "" {
				last = p.Text
			}
		}
	}
	return last
}

// FunctionResponses returns the function responses the request carries
// (the results of tools the CLI ran or refused), compacted JSON each.
func (r Request) FunctionResponses() []string {
	var body struct {
		Contents []struct {
			Parts []struct {
				FunctionResponse json.RawMessage `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
	}
	_ = json.Unmarshal(r.Body, &body)
	var out []string
	for _, c := range body.Contents {
		for _, p := range c.Parts {
			if len(p.FunctionResponse) > 0 {
				out = append(out, string(p.FunctionResponse))
			}
		}
	}
	return out
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
	URL string // base URL, to pass as GOOGLE_GEMINI_BASE_URL
	Key string

	srv   *httptest.Server
	mu    sync.Mutex
	queue []Response
	reply func(Request) Response
	requestlog.Log[Request]
}

// New starts a server closed at t's end.
func New(t testing.TB) *Server {
	s := &Server{Key: DefaultKey}
	s.reply = func(Request) Response { return Response{Text: "OK"} }
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
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

// requestHead is the part of a GenerateContentRequest the server reads.
type requestHead struct {
	SystemInstruction struct {
		Parts []struct {
			Text string `json:"text"`
		} `json:"parts"`
	} `json:"systemInstruction"`
	Tools []struct {
		FunctionDeclarations []json.RawMessage `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
	} `json:"generationConfig"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	path := r.URL.Path
	i := strings.LastIndex(path, "/models/")
	var model, method string
	if i >= 0 {
		model, method, _ = strings.Cut(path[i+len("/models/"):], ":")
	}
	if r.Method != http.MethodPost || (method != "streamGenerateContent" && method != "generateContent" && method != "countTokens") {
		s.AddUnknown(r.Method, path)
		writeJSON(w, map[string]any{})
		return
	}
	if method == "countTokens" {
		writeJSON(w, map[string]any{"totalTokens": 10})
		return
	}
	var head requestHead
	_ = json.Unmarshal(body, &head)
	req := Request{Time: time.Now(), Path: path, Body: body, Model: model, Stream: method == "streamGenerateContent"}
	for _, t := range head.Tools {
		req.Tools += len(t.FunctionDeclarations)
	}
	for _, p := range head.SystemInstruction.Parts {
		req.System += p.Text
	}
	jsonOut := head.GenerationConfig.ResponseMimeType == "application/json" || len(head.GenerationConfig.ResponseSchema) > 0 || len(head.GenerationConfig.ResponseJSONSchema) > 0
	s.mu.Lock()
	req.Main = req.Stream && req.Tools > 0 && !jsonOut
	req = s.Add(func(n int) Request { req.Seq = n; return req })
	var resp Response
	switch {
	case !req.Main && jsonOut:
		resp = Response{Text: `{"reasoning":"scripted","next_speaker":"user","model_choice":"flash","summary":"scripted"}`}
	case !req.Main:
		resp = Response{Text: "OK"}
	case len(s.queue) > 0:
		resp = s.queue[0]
		s.queue = s.queue[1:]
	default:
		resp = s.reply(req)
	}
	s.mu.Unlock()
	if !req.Stream {
		writeJSON(w, candidate(resp.parts(resp.Text), true))
		return
	}
	s.stream(w, r, resp)
}

// stream answers streamGenerateContent with server-sent events: a text
// part per chunk, the function calls, the finish reason and usage last.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, resp Response) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "data: %s\r\n\r\n", b); err != nil {
			return false
		}
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		if resp.Delay > 0 {
			select {
			case <-time.After(resp.Delay):
			case <-r.Context().Done():
				return false
			}
		}
		return r.Context().Err() == nil
	}
	for _, c := range resp.chunks() {
		if !send(candidate([]any{map[string]any{"text": c}}, false)) {
			return
		}
	}
	send(candidate(resp.parts(""), true))
}

// parts returns the reply's text (when not empty) and function calls as
// content parts.
func (resp Response) parts(text string) []any {
	var out []any
	if text != "" {
		out = append(out, map[string]any{"text": text})
	}
	for _, c := range resp.Calls {
		out = append(out, map[string]any{"functionCall": map[string]any{"name": c.Name, "args": c.Args}})
	}
	if len(out) == 0 {
		// The last event of a stream: an empty text part carries the
		// finish reason.
		out = append(out, map[string]any{"text": ""})
	}
	return out
}

// candidate is a GenerateContentResponse with one candidate.
func candidate(parts []any, last bool) map[string]any {
	c := map[string]any{"index": 0, "content": map[string]any{"role": "model", "parts": parts}}
	out := map[string]any{"candidates": []any{c}, "modelVersion": Model}
	if last {
		c["finishReason"] = "STOP"
		out["usageMetadata"] = map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 10, "totalTokenCount": 20}
	}
	return out
}

// chunks splits the reply's text into deltas.
func (resp Response) chunks() []string {
	if len(resp.Chunks) > 0 {
		return resp.Chunks
	}
	var out []string
	s := resp.Text
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

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// LastIsFunctionResponse reports whether the request's last turn carries a
// function response: the CLI sends a tool's result (or its refusal).
func (r Request) LastIsFunctionResponse() bool {
	var body struct {
		Contents []struct {
			Parts []struct {
				FunctionResponse json.RawMessage `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
	}
	_ = json.Unmarshal(r.Body, &body)
	if len(body.Contents) == 0 {
		return false
	}
	for _, p := range body.Contents[len(body.Contents)-1].Parts {
		if len(p.FunctionResponse) > 0 {
			return true
		}
	}
	return false
}
