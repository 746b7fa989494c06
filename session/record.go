package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
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

// claudeRecorded scans a Claude Code transcript for a main-chain user
// entry whose prompt is text, stamped at or after since (Claude Code
// stamps each entry when it writes it, on this machine's clock, in
// milliseconds). Lines too long or not JSON are skipped; a missing file
// holds nothing.
func claudeRecorded(path, text string, since time.Time) (bool, error) {
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
		if len(line) > 0 && bytes.Contains(line, []byte(`"user"`)) {
			var e struct {
				transcriptEntry
				Timestamp string `json:"timestamp"`
			}
			if json.Unmarshal(line, &e) == nil && e.Type == "user" && !e.IsSidechain && !e.IsMeta {
				at, terr := time.Parse(time.RFC3339Nano, e.Timestamp)
				if p, ok := promptText(e.Message.Content); ok && terr == nil && !at.Before(since) && samePrompt(p, text) {
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
	return claudeRecorded(d.c.tr.path, text, since)
}
