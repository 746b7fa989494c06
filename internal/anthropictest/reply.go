package anthropictest

import (
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
	id := s.nextMsgID()
	model := r.Model
	if model == "" {
		model = "claude-sonnet-4-5"
	}
	inTokens := len(r.Body)/4 + 1
	outTokens := 0
	for _, c := range resp.chunks() {
		outTokens += len(c)/4 + 1
	}
	stop := resp.stopReason()
	w.Header().Set("request-id", "req_"+id)
	w.Header().Set("anthropic-organization-id", "00000000-0000-0000-0000-000000000000")
	if !r.Stream {
		if resp.Hold != nil {
			select {
			case <-resp.Hold:
			case <-hr.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": model,
			"content": blocks, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]int{"input_tokens": inTokens, "output_tokens": outTokens,
				"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
		})
		w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	ctx := hr.Context()
	send := func(event string, data any) bool {
		b, _ := json.Marshal(data)
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		if resp.Delay > 0 {
			select {
			case <-time.After(resp.Delay):
			case <-ctx.Done():
				return false
			}
		}
		return ctx.Err() == nil
	}
	ok := send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": inTokens, "output_tokens": 1,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
	if ok && resp.Hold != nil {
		select {
		case <-resp.Hold:
		case <-ctx.Done():
			return
		}
	}
	for i, b := range blocks {
		if !ok {
			return
		}
		start := b
		switch b.Type {
		case "text":
			empty := ""
			start.Text = &empty
		case "tool_use":
			start.Input = json.RawMessage("{}")
		}
		ok = send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": start})
		if i == 0 && ok {
			ok = send("ping", map[string]any{"type": "ping"})
		}
		switch b.Type {
		case "text":
			for _, c := range resp.chunks() {
				if !ok {
					return
				}
				ok = send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]string{"type": "text_delta", "text": c}})
			}
		case "tool_use":
			if ok {
				ok = send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]string{"type": "input_json_delta", "partial_json": string(b.Input)}})
			}
		}
		if ok {
			ok = send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
		}
	}
	if ok {
		ok = send("message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
			"usage": map[string]int{"output_tokens": outTokens}})
	}
	if ok {
		send("message_stop", map[string]any{"type": "message_stop"})
	}
}
