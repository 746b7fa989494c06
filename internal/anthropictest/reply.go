package anthropictest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"
)

// chunks returns the text deltas of resp.
func (resp Response) chunks() []string {
	if len(resp.Chunks) > 0 {
		return resp.Chunks
	}
	var out []string
	s := resp.Text
	for len(s) > 0 {
		n := 40
		if n >= len(s) {
			n = len(s)
		} else {
			for n > 0 && !utf8.RuneStart(s[n]) {
				n--
			}
			if n == 0 {
				n = len(s)
			}
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func (resp Response) text() string {
	if len(resp.Chunks) == 0 {
		return resp.Text
	}
	t := ""
	for _, c := range resp.Chunks {
		t += c
	}
	return t
}

func (resp Response) stopReason() string {
	switch {
	case resp.StopReason != "":
		return resp.StopReason
	case len(resp.ToolUses) > 0:
		return "tool_use"
	default:
		return "end_turn"
	}
}

// outBlock is a content block of a reply, as sent on the wire.
type outBlock struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

func (s *Server) blocks(resp Response) ([]outBlock, error) {
	var out []outBlock
	if t := resp.text(); t != "" || len(resp.ToolUses) == 0 {
		out = append(out, outBlock{Type: "text", Text: &t})
	}
	for i, tu := range resp.ToolUses {
		in, err := json.Marshal(tu.Input)
		if err != nil {
			return nil, fmt.Errorf("tool use %s input: %w", tu.Name, err)
		}
		if tu.Input == nil {
			in = []byte("{}")
		}
		id := tu.ID
		if id == "" {
			s.mu.Lock()
			s.msgID++
			id = fmt.Sprintf("toolu_test%06d%02d", s.msgID, i)
			s.mu.Unlock()
		}
		out = append(out, outBlock{Type: "tool_use", ID: id, Name: tu.Name, Input: in})
	}
	return out, nil
}

func (s *Server) nextMsgID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgID++
	return fmt.Sprintf("msg_test%08d", s.msgID)
}

// reply is what both forms of a reply (one JSON message, or a stream of
// events) say: the message's id and model, its content blocks, its stop
// reason and the token counts it claims.
type reply struct {
	id, model, stop     string
	blocks              []outBlock
	inTokens, outTokens int
}

// writeReply answers request r (hr on the wire) with resp: an API error when
// resp has an error status, else the message as JSON or, when r asked for a
// stream, as server-sent events.
func (s *Server) writeReply(w http.ResponseWriter, hr *http.Request, r Request, resp Response) {
	if resp.Status != 0 && resp.Status != http.StatusOK {
		typ := resp.ErrorType
		if typ == "" {
			typ = "api_error"
		}
		writeError(w, resp.Status, typ, resp.ErrorMessage)
		return
	}
	blocks, err := s.blocks(resp)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "api_error", err.Error())
		return
	}
	rp := reply{id: s.nextMsgID(), model: r.Model, stop: resp.stopReason(), blocks: blocks, inTokens: len(r.Body)/4 + 1}
	if rp.model == "" {
		rp.model = "claude-sonnet-4-5"
	}
	for _, c := range resp.chunks() {
		rp.outTokens += len(c)/4 + 1
	}
	w.Header().Set("request-id", "req_"+rp.id)
	w.Header().Set("anthropic-organization-id", "00000000-0000-0000-0000-000000000000")
	if !r.Stream {
		writeMessage(w, hr, resp, rp)
		return
	}
	writeStream(w, hr, resp, rp)
}

// writeMessage writes rp as one JSON message, once resp.Hold (if any) is
// closed; it writes nothing if the request ends first.
func writeMessage(w http.ResponseWriter, hr *http.Request, resp Response, rp reply) {
	if resp.Hold != nil {
		select {
		case <-resp.Hold:
		case <-hr.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(map[string]any{
		"id": rp.id, "type": "message", "role": "assistant", "model": rp.model,
		"content": rp.blocks, "stop_reason": rp.stop, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": rp.inTokens, "output_tokens": rp.outTokens,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	})
	w.Write(b)
}

// eventWriter sends server-sent events, flushing each and pausing delay
// after it.
type eventWriter struct {
	w     http.ResponseWriter
	fl    http.Flusher // nil when w cannot flush
	ctx   context.Context
	delay time.Duration
}

// send writes one event with data as JSON; it reports false once the write
// fails or the request has ended, when nothing more should be sent.
func (ew eventWriter) send(event string, data any) bool {
	b, _ := json.Marshal(data)
	if _, err := fmt.Fprintf(ew.w, "event: %s\ndata: %s\n\n", event, b); err != nil {
		return false
	}
	if ew.fl != nil {
		ew.fl.Flush()
	}
	if ew.delay > 0 {
		select {
		case <-time.After(ew.delay):
		case <-ew.ctx.Done():
			return false
		}
	}
	return ew.ctx.Err() == nil
}

// writeStream writes rp as the API's event stream: message_start, (after
// resp.Hold, if any, is closed) each content block, message_delta and
// message_stop. It stops at the first event that cannot be sent.
func writeStream(w http.ResponseWriter, hr *http.Request, resp Response, rp reply) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	ew := eventWriter{w: w, fl: fl, ctx: hr.Context(), delay: resp.Delay}
	ok := ew.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": rp.id, "type": "message", "role": "assistant", "model": rp.model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": rp.inTokens, "output_tokens": 1,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
	if ok && resp.Hold != nil {
		select {
		case <-resp.Hold:
		case <-ew.ctx.Done():
			return
		}
	}
	for i, b := range rp.blocks {
		if !ok {
			return
		}
		ok = streamBlock(ew, i, b, resp)
	}
	if ok {
		ok = ew.send("message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": rp.stop, "stop_sequence": nil},
			"usage": map[string]int{"output_tokens": rp.outTokens}})
	}
	if ok {
		ew.send("message_stop", map[string]any{"type": "message_stop"})
	}
}

// streamBlock sends content block b at index i: its start (empty), a ping
// after the first block's start, its deltas (resp's text chunks, or the
// tool input whole) and its stop. It reports false once an event could not
// be sent.
func streamBlock(ew eventWriter, i int, b outBlock, resp Response) bool {
	start := b
	switch b.Type {
	case "text":
		empty := ""
		start.Text = &empty
	case "tool_use":
		start.Input = json.RawMessage("{}")
	}
	ok := ew.send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": start})
	if i == 0 && ok {
		ok = ew.send("ping", map[string]any{"type": "ping"})
	}
	switch b.Type {
	case "text":
		for _, c := range resp.chunks() {
			if !ok {
				return false
			}
			ok = ew.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]string{"type": "text_delta", "text": c}})
		}
	case "tool_use":
		if ok {
			ok = ew.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]string{"type": "input_json_delta", "partial_json": string(b.Input)}})
		}
	}
	if ok {
		ok = ew.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	return ok
}
