package session

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"
)

// KindQwen runs Qwen Code and reads its words from the chat it records,
// JSONL at <runtime dir>/projects/<working folder, every character but
// ASCII letters and digits turned to '-'>/chats/<session id>.jsonl
// (docs/notes/clis.md): one record a line, never written again, each with
// its own uuid and its parent's (parentUuid), of type user, assistant,
// tool_result or system (a subtype says which). The model's words are the
// assistant records' text parts (thoughts left out). The session's id is
// the office's (--session-id); a restart resumes it (--resume <id>).
// Identities are the record uuids, stable across restarts. Its state comes
// from its terminal title ("Qwen - <folder>" when idle, "◐ " before it
// while it works, "✳ " while a tool approval waits): a turn ends when it
// is idle again; the approval dialog puts the agent in needs_attention
// with the dialog's text. The office's instructions reach it as its global
// instructions file, ~/.qwen/QWEN.md, in a section of their own.
const KindQwen = "qwen"

// qwenQuiet is how long Qwen Code's screen must be still, its title idle,
// before a prompt is typed: a prompt typed within about half a second of
// the idle title (after a turn, or at start) was at times recorded and
// then dropped, no reply read or recorded (measured with 0.24.4: 9 of 10
// runs of TestQwenEndToEnd lost a turn at 500 ms, none of 8 at
// 1.5 s).
const qwenQuiet = 1500 * time.Millisecond

func checkQwen(spec *Spec) error { return checkChat(spec, "qwen", qwenQuiet) }

func newQwenDriver(s *Session) driver { return &chatDriver{s: s, cli: qwenCLI} }

// qwenCLI is Qwen Code for the chat driver (chat.go).
var qwenCLI = &chatCLI{
	kind:         KindQwen,
	name:         "qwen",
	instructions: func(spec Spec) string { return filepath.Join(qwenDir(spec), "QWEN.md") },
	root:         qwenRuntime,
	find:         qwenFind,
	resumable:    qwenHasRecord,
	decode:       qwenDecode,
	state:        qwenState,
	dialog:       func(rows []string) string { return approvalDialog(rows, nil) },
	watchDir:     qwenWatchDir,
	hook:         &chatHook{mode: "permission", apply: qwenHook},
}

// qwenWatchDir is where the recording of the agent's folder dir is made
// (at the first prompt): projects/<dir, every UTF-16 unit but ASCII
// letters and digits turned to '-'>/chats under root; the nearest
// existing ancestor is watched until it is made.
func qwenWatchDir(root, dir string) string {
	var b strings.Builder
	for _, r := range dir {
		switch {
		case r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			b.WriteRune(r)
		case r > 0xFFFF:
			b.WriteString("--")
		default:
			b.WriteByte('-')
		}
	}
	return filepath.Join(root, "projects", b.String(), "chats")
}

// qwenDir is Qwen Code's own directory: $QWEN_HOME, or ~/.qwen.
func qwenDir(spec Spec) string {
	if h, ok := lookup(spec.Env, "QWEN_HOME"); ok && h != "" {
		return h
	}
	return filepath.Join(agentHome(spec), ".qwen")
}

// qwenRuntime is where Qwen Code keeps its sessions: $QWEN_RUNTIME_DIR, or
// its own directory (a runtime directory set in its settings is not
// followed).
func qwenRuntime(spec Spec) string {
	if h, ok := lookup(spec.Env, "QWEN_RUNTIME_DIR"); ok && h != "" {
		return h
	}
	return qwenDir(spec)
}

// qwenFind returns the chat recording of session id under root: it is
// named by the id, in the folder of the working folder's project.
func qwenFind(root, id string) string {
	if id == "" || strings.ContainsAny(id, `/\*?[`) {
		return ""
	}
	m, _ := filepath.Glob(filepath.Join(root, "projects", "*", "chats", id+".jsonl"))
	if len(m) == 0 {
		return ""
	}
	return m[0]
}

// qwenHasRecord reports whether a recording holds a record: --resume
// loads it, and --session-id refuses an id whose recording has one.
func qwenHasRecord(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 64<<10).ReadSlice('\n')
	if err != nil && len(line) == 0 {
		return false
	}
	var r qwenRecord
	return json.Unmarshal(line, &r) == nil && r.UUID != ""
}

// qwenRecord is one line of a Qwen Code chat recording (the fields read).
type qwenRecord struct {
	UUID      string `json:"uuid"`
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	Message   struct {
		Parts []struct {
			Text         string          `json:"text"`
			Thought      bool            `json:"thought"`
			FunctionCall json.RawMessage `json:"functionCall"`
		} `json:"parts"`
	} `json:"message"`
}

// qwenEmpty is the text Qwen Code records for a reply that had none.
const qwenEmpty = "(empty content)"

// qwenDecode decodes one line of the recording. A user record without a
// subtype (or typed during a turn) is a prompt the CLI got; an assistant
// record without a subtype the model's words: its text parts, not its
// thoughts (one with a functionCall part calls a tool, its turn goes on);
// a tool_result record a tool's result sent back to the model.
func qwenDecode(line []byte) []chatRecord {
	var r qwenRecord
	if json.Unmarshal(line, &r) != nil || r.UUID == "" {
		return nil
	}
	c := chatRecord{id: r.UUID, at: stamp(r.Timestamp)}
	var b strings.Builder
	for _, p := range r.Message.Parts {
		if !p.Thought {
			b.WriteString(p.Text)
		}
		c.calls = c.calls || len(p.FunctionCall) > 0 && string(p.FunctionCall) != "null"
	}
	switch {
	case r.Type == "user" && (r.Subtype == "" || r.Subtype == "mid_turn_user_message"):
		c.kind, c.text = chatPrompt, b.String()
	case r.Type == "assistant" && r.Subtype == "":
		c.kind, c.text = chatReply, b.String()
		if c.text == qwenEmpty {
			c.text = ""
		}
	case r.Type == "tool_result":
		c.kind = chatResult
	}
	return []chatRecord{c}
}

// Qwen Code's title marks: its terminal title is "Qwen - <folder>" (or the
// session's name) when idle, with "◐︎ " before it while it works and "✳︎ "
// while a tool approval waits (U+25D0 and U+2733, each with U+FE0E).
const (
	qwenWorking = "◐"
	qwenAction  = "✳"
)

// qwenState reads Qwen Code's title.
func qwenState(title string) chatState {
	t := strings.TrimSpace(title)
	switch {
	case t == "":
		return chatUnknown
	case strings.HasPrefix(t, qwenWorking):
		return chatWorking
	case strings.HasPrefix(t, qwenAction):
		return chatAction
	}
	return chatIdle
}
