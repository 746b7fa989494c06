package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf16"
)

// ProjectDirName returns the directory name Claude Code gives a working
// directory under ~/.claude/projects: every UTF-16 code unit that is not an
// ASCII letter or digit becomes '-' (the binary applies
// replace(/[^a-zA-Z0-9]/g, "-") to a JavaScript string, so a character
// outside the BMP becomes two dashes). Names longer than 200 characters are
// cut to 200 and suffixed with a hash this package does not reproduce;
// TranscriptPath finds those by searching.
func ProjectDirName(dir string) string {
	var b strings.Builder
	for _, r := range dir {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
			if utf16.RuneLen(r) == 2 {
				b.WriteByte('-')
			}
		}
	}
	return b.String()
}

// TranscriptPath returns where Claude Code keeps the transcript of
// conversation id started in dir with the given config directory (normally
// $HOME/.claude). If the expected file does not exist but a file of that
// conversation exists in another project directory (a long or symlinked
// working directory), that one is returned.
func TranscriptPath(configDir, dir, id string) string {
	want := filepath.Join(configDir, "projects", ProjectDirName(dir), id+".jsonl")
	if _, err := os.Stat(want); err == nil {
		return want
	}
	if m, _ := filepath.Glob(filepath.Join(configDir, "projects", "*", id+".jsonl")); len(m) > 0 {
		return m[0]
	}
	return want
}

// transcriptEntry is the part of a Claude Code transcript line we read.
type transcriptEntry struct {
	Type        string `json:"type"`
	UUID        string `json:"uuid"`
	IsSidechain bool   `json:"isSidechain"`
	IsMeta      bool   `json:"isMeta"`
	Message     struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		StopReason *string         `json:"stop_reason"`
	} `json:"message"`
}

type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// jsonlTail follows a JSONL file as it grows: it reads complete lines only
// (a partial last line waits for its newline), at most maxTranscriptRead a
// poll, tolerates the file not existing yet, and skips a line longer than
// maxTranscriptLine (counted), so memory stays bounded whatever the file
// holds. Claude Code's transcript and the chat recordings of Gemini CLI
// and Qwen Code (chat.go) are read with it.
type jsonlTail struct {
	path    string
	off     int64
	partial []byte // the start of a line whose newline has not come yet
	// discarding: the current line grew past maxTranscriptLine; its
	// bytes are skipped up to its newline.
	discarding bool
	long       int // lines over maxTranscriptLine (counted, skipped)
	// more: the last read stopped before the end of the file.
	more bool
}

// transcript follows a Claude Code JSONL transcript: the assistant entries
// of its main chain, from after a cursor uuid.
type transcript struct {
	jsonlTail
	after  string // skip entries until this uuid has been seen
	skip   bool
	lastID string
	bad    int // lines that were not JSON (counted, skipped)
	// cursorMissing: the cursor was not found when catching up.
	cursorMissing bool
	// open: text was emitted since the last turn end.
	open bool
	// prompts: text of the user entries (prompts typed in) since the last
	// takePrompts, the acknowledgement that typed text was received.
	prompts []string
}

// maxPrompts bounds the prompts kept between two takes.
const maxPrompts = 64

// takePrompts returns the prompts seen since the last call.
func (t *transcript) takePrompts() []string {
	p := t.prompts
	t.prompts = nil
	return p
}

// maxTranscriptRead bounds what one poll reads from the transcript.
const maxTranscriptRead = 256 << 10

// maxTranscriptLine bounds one transcript line (one entry). A longer line,
// or one that never ends, is skipped up to its newline and counted, so a
// session's memory stays bounded whatever the file holds (docs/protocol.md, Guarantees).
const maxTranscriptLine = 16 << 20

// readBufs holds the buffers polls read into (maxTranscriptRead each).
var readBufs = sync.Pool{New: func() any { b := make([]byte, maxTranscriptRead); return &b }}

// stopSuffix marks the ID of a turn end that came from the Stop hook
// rather than an end_turn entry (the turn stopped for another reason, e.g.
// max_tokens): "<uuid of the last entry>/stop".
const stopSuffix = "/stop"

func newTranscript(path, after string) *transcript {
	after = strings.TrimSuffix(after, stopSuffix)
	return &transcript{jsonlTail: jsonlTail{path: path}, after: after, skip: after != ""}
}

// poll reads what was appended since the last call and returns the texts of
// new main-chain assistant entries, in order.
func (t *transcript) poll(key Key) ([]Text, error) {
	var out []Text
	restart := func() {
		// Truncated or replaced: the cursor (lastID) keeps us from
		// emitting entries twice.
		if t.lastID != "" {
			t.after, t.skip = t.lastID, true
		}
	}
	read, err := t.read(restart, func(line []byte) {
		if txt, ok := t.entry(key, line); ok {
			out = append(out, txt)
			t.open = !txt.TurnEnd
		}
	})
	if err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	if read && t.skip && !t.more {
		// The cursor is not in the file as it was when we caught up: it
		// belongs to another conversation, or the file was replaced. What
		// was there counts as consumed (never act twice); what is
		// appended from now on is new.
		t.skip = false
		t.cursorMissing = true
	}
	return out, nil
}

// read reads what was appended since the last call and calls line with
// each complete line, in order; it reports whether anything was read. A
// file shorter than what was read (truncated or replaced) is read again
// from its start, after restart is called.
func (t *jsonlTail) read(restart func(), line func([]byte)) (bool, error) {
	// Stat first: most polls find nothing new, and a stat is cheaper than
	// an open.
	st, err := os.Stat(t.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("stat: %w", err)
	}
	if st.Size() == t.off {
		return false, nil
	}
	f, err := os.Open(t.path)
	if err != nil {
		return false, fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return false, fmt.Errorf("stat: %w", err)
	}
	if st.Size() < t.off {
		t.off, t.partial, t.discarding = 0, nil, false
		restart()
	}
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return false, fmt.Errorf("seek: %w", err)
	}
	// At most maxTranscriptRead per poll, so memory stays bounded however
	// far behind the follower is (it was paused, or the server restarted
	// on a long file); more reports that the rest is waiting.
	n := min(st.Size()-t.off, maxTranscriptRead)
	// The read buffer is shared by all followers (an idle session keeps
	// none); nothing read is kept beyond this poll but in t.partial.
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	got, err := io.ReadFull(f, (*bp)[:n])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return false, fmt.Errorf("read: %w", err)
	}
	t.off += int64(got)
	t.more = t.off < st.Size()
	t.lines((*bp)[:got], line)
	return true, nil
}

// lines passes on the complete lines of data, after what t holds of a line
// read before, and keeps the start of the last line if it is incomplete.
func (t *jsonlTail) lines(data []byte, line func([]byte)) {
	for len(data) > 0 {
		// Only the new bytes are searched for a newline; a partial line
		// grows by appending (amortised), never by recopying.
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			t.hold(data)
			break
		}
		l := data[:i]
		data = data[i+1:]
		if t.discarding {
			t.discarding = false
			continue
		}
		if len(t.partial) > 0 {
			if len(t.partial)+len(l) > maxTranscriptLine {
				t.skipLong()
				continue
			}
			t.grow(l)
			l, t.partial = t.partial, nil
		}
		line(l)
	}
}

// hold keeps the start of a line whose newline has not been read, or
// starts discarding it once it is over maxTranscriptLine.
func (t *jsonlTail) hold(p []byte) {
	switch {
	case t.discarding:
	case len(t.partial)+len(p) > maxTranscriptLine:
		t.skipLong()
		t.discarding = true
	default:
		t.grow(p)
	}
}

// grow appends p to the partial line, doubling its buffer (never past
// maxTranscriptLine) so that a long line costs O(its length) in copies.
func (t *jsonlTail) grow(p []byte) {
	if need := len(t.partial) + len(p); need > cap(t.partial) {
		nb := make([]byte, len(t.partial), min(max(need, 2*cap(t.partial), 64<<10), maxTranscriptLine))
		copy(nb, t.partial)
		t.partial = nb
	}
	t.partial = append(t.partial, p...)
}

// skipLong drops the line being held and counts it.
func (t *jsonlTail) skipLong() {
	t.partial = nil
	t.long++
}

// stopped returns a turn end for a turn the transcript did not end (the
// Stop hook fired after entries without end_turn), if one is open.
func (t *transcript) stopped(key Key) (Text, bool) {
	if !t.open {
		return Text{}, false
	}
	t.open = false
	return Text{Key: key, ID: t.lastID + stopSuffix, Source: FromTranscript, TurnEnd: true}, true
}

// entry decodes one transcript line.
func (t *transcript) entry(key Key, line []byte) (Text, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return Text{}, false
	}
	var e transcriptEntry
	if err := json.Unmarshal(line, &e); err != nil {
		t.bad++
		return Text{}, false
	}
	if t.skip {
		if e.UUID == t.after {
			t.skip = false
		}
		return Text{}, false
	}
	if e.Type == "user" && !e.IsSidechain && !e.IsMeta {
		if p, ok := promptText(e.Message.Content); ok && len(t.prompts) < maxPrompts {
			t.prompts = append(t.prompts, p)
		}
		return Text{}, false
	}
	if e.Type != "assistant" || e.IsSidechain || e.UUID == "" {
		return Text{}, false
	}
	t.lastID = e.UUID
	txt := Text{Key: key, ID: e.UUID, Source: FromTranscript}
	if e.Message.StopReason != nil && *e.Message.StopReason == "end_turn" {
		txt.TurnEnd = true
	}
	var blocks []contentBlock
	if len(e.Message.Content) > 0 && e.Message.Content[0] == '"' {
		var s string
		if json.Unmarshal(e.Message.Content, &s) == nil {
			blocks = []contentBlock{{Type: "text", Text: s}}
		}
	} else {
		_ = json.Unmarshal(e.Message.Content, &blocks)
	}
	for _, b := range blocks {
		if b.Type == "text" {
			txt.Lines = append(txt.Lines, strings.Split(b.Text, "\n")...)
		}
	}
	if len(txt.Lines) == 0 && !txt.TurnEnd {
		return Text{}, false
	}
	return txt, true
}

// promptText returns the text of a user entry that is a prompt (a string,
// or text blocks); tool results and other blocks are not prompts.
func promptText(content json.RawMessage) (string, bool) {
	if len(content) > 0 && content[0] == '"' {
		var s string
		if json.Unmarshal(content, &s) != nil {
			return "", false
		}
		return s, true
	}
	var blocks []contentBlock
	if json.Unmarshal(content, &blocks) != nil {
		return "", false
	}
	var parts []string
	for _, b := range blocks {
		if b.Type != "text" {
			return "", false
		}
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n"), len(parts) > 0
}
