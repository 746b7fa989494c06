package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"
)

// The check before typing a text again (issue 32). A text typed once
// whose acknowledgement was never seen — the agent's process died, or the
// server stopped, between the typing and the acknowledgement — may have
// reached the program. A driver whose program keeps a record of the
// prompts it got (Claude Code's transcript) is asked before the text is
// typed again; one whose program keeps none (a command agent) types it
// again: at least once.

// promptRecord is a driver whose CLI records every prompt it got.
type promptRecord interface {
	// recorded reports whether the record holds a prompt with text
	// (samePrompt) stamped at or after since. Locked (it reads the
	// driver's fields for the record's path).
	recorded(text string, since time.Time) (bool, error)
}

// recordedIn scans a JSONL record of prompts at path for a prompt whose
// text is text (samePrompt), stamped at or after since: prompt decodes a
// line into its prompts and their stamps (each CLI stamps its records when
// it writes them, on this machine's clock; some in milliseconds, so since
// is cut to the millisecond). Lines too long or not JSON are skipped; a
// missing file holds nothing.
func recordedIn(path, text string, since time.Time, prompt func(line []byte) []stamped) (bool, error) {
	if path == "" {
		return false, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	since = since.Truncate(time.Millisecond)
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := readLine(r)
		if len(line) > 0 {
			for _, p := range prompt(line) {
				if !p.at.IsZero() && !p.at.Before(since) && samePrompt(p.text, text) {
					return true, nil
				}
			}
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// stamped is a prompt as a record holds it.
type stamped struct {
	text string
	at   time.Time
}

// stamp parses a record's time stamp (RFC 3339; zero when it has none).
func stamp(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// claudePrompts decodes a Claude Code transcript line: a main-chain user
// entry that is a prompt.
func claudePrompts(line []byte) []stamped {
	if !bytes.Contains(line, []byte(`"user"`)) {
		return nil
	}
	var e struct {
		transcriptEntry
		Timestamp string `json:"timestamp"`
	}
	if json.Unmarshal(line, &e) != nil || e.Type != "user" || e.IsSidechain || e.IsMeta {
		return nil
	}
	p, ok := promptText(e.Message.Content)
	if !ok {
		return nil
	}
	return []stamped{{p, stamp(e.Timestamp)}}
}

// readLine reads one line of at most maxTranscriptLine bytes (a longer one
// is skipped and returned empty).
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	long := false
	for {
		chunk, err := r.ReadSlice('\n')
		if long = long || len(line)+len(chunk) > maxTranscriptLine; !long {
			line = append(line, chunk...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if long {
				return nil, err
			}
			return bytes.TrimSpace(line), err
		}
	}
}

func (d *claudeDriver) recorded(text string, since time.Time) (bool, error) {
	if d.c == nil || d.c.tr == nil {
		return false, nil
	}
	return recordedIn(d.c.tr.path, text, since, claudePrompts)
}

// recorded: Codex's rollout holds each prompt as a user message line,
// stamped.
func (d *codexDriver) recorded(text string, since time.Time) (bool, error) {
	return recordedIn(d.file, text, since, codexPrompts)
}

// codexPrompts decodes a rollout line: a user message's text.
func codexPrompts(line []byte) []stamped {
	var e struct {
		Timestamp string `json:"timestamp"`
		Type      string `json:"type"`
		Payload   struct {
			Type    string `json:"type"`
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"payload"`
	}
	if json.Unmarshal(line, &e) != nil || e.Type != "response_item" || e.Payload.Type != "message" || e.Payload.Role != "user" {
		return nil
	}
	var b strings.Builder
	for _, c := range e.Payload.Content {
		if c.Type == "input_text" {
			b.WriteString(c.Text)
		}
	}
	return []stamped{{b.String(), stamp(e.Timestamp)}}
}

// recorded: the Gemini CLI's and Qwen Code's chat recordings hold each
// prompt as a user record, stamped.
func (d *chatDriver) recorded(text string, since time.Time) (bool, error) {
	return recordedIn(d.tail.path, text, since, chatPrompts(d.cli.decode))
}

// chatPrompts decodes a chat recording's line with decode: its prompts.
func chatPrompts(decode func([]byte) []chatRecord) func([]byte) []stamped {
	return func(line []byte) []stamped {
		var out []stamped
		for _, r := range decode(line) {
			if r.kind == chatPrompt {
				out = append(out, stamped{r.text, r.at})
			}
		}
		return out
	}
}
