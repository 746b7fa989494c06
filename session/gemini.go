package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// KindGemini runs Google's Gemini CLI and reads its words from the chat
// it records, JSONL under $HOME/.gemini/tmp/<project>/chats/
// session-<time>-<first 8 of the id>.jsonl (docs/notes/clis.md): one line
// per message record ({id, type: user|gemini|info…, content}), a record
// written again when it changes (same id), "$set" lines for metadata.
// The session's id is the office's (--session-id), so the file is found
// by it and a restart resumes it (--resume <id>). Identities are the
// message ids, stable across restarts. Its state comes from the terminal
// title it keeps (◇ Ready, ✦ Working…, ✋ Action Required): a turn ends
// when it is ready again; "Action Required" is a tool-approval dialog,
// which puts the agent in needs_attention with the dialog's text (the
// console answers it with keys). The office's instructions reach it as
// its global instructions file, $HOME/.gemini/GEMINI.md, in a section of
// their own.
const KindGemini = "gemini"

func checkGemini(spec *Spec) error { return checkChat(spec, "gemini", 500*time.Millisecond) }

func newGeminiDriver(s *Session) driver { return &chatDriver{s: s, cli: geminiCLI} }

// geminiCLI is the Gemini CLI for the chat driver (chat.go).
var geminiCLI = &chatCLI{
	kind: KindGemini,
	name: "gemini",
	instructions: func(spec Spec) string {
		return filepath.Join(agentHome(spec), ".gemini", "GEMINI.md")
	},
	root:      func(spec Spec) string { return filepath.Join(agentHome(spec), ".gemini", "tmp") },
	find:      geminiFind,
	resumable: geminiHasTurn,
	decode:    geminiDecode,
	state:     geminiState,
	dialog:    dialogText,
	watchDir:  geminiWatchDir,
	prepare:   geminiTrust,
	// It drops keys for a while after its composer is first drawn,
	// longer on a loaded machine: text pasted then stays in the composer
	// and one more Enter submits it. Measured in tmux: pasted 0.6 s after
	// the composer appeared, the text and its Enter were lost in 7 of 8
	// tries, 1.5 s after in 4 of 6 (folder trust on or off alike); one
	// more Enter 4 s later submitted it in 2 of 2. At load 6 on 2 cores a
	// single Enter 3 s later was not enough. An Enter on an empty
	// composer does nothing.
	reEnters: 3,
	// An Enter within 40 ms of a bracketed paste is a line break, in a
	// terminal without the kitty keyboard protocol (a PTY): the paste
	// guard of its InputPrompt (setRecentUnsafePasteTime, cleared by a
	// 40 ms timer). Waited from the paste's echo, with a margin for the
	// timer and the redraw it needs; an Enter lost anyway is pressed
	// again (reEnters).
	pasteGuard: 60 * time.Millisecond,
	hook:       &chatHook{mode: "before-tool", apply: geminiHook},
}

// geminiTrust trusts the agent's own folder: GEMINI_CLI_TRUST_WORKSPACE=true
// makes Gemini CLI 0.61 take its workspace (the folder it runs in) as
// trusted without asking "Do you trust the files in this folder?" (its
// folder trust is on by default) and without writing the answer to
// ~/.gemini/trustedFolders.json (docs/notes/clis.md). A value the agent's
// own environment gives (say "false") is kept.
func geminiTrust(spec Spec, env []string) []string {
	if _, ok := lookup(spec.Env, "GEMINI_CLI_TRUST_WORKSPACE"); ok {
		return env
	}
	return setEnv(env, "GEMINI_CLI_TRUST_WORKSPACE", "true")
}

// geminiWatchDir: the CLI makes the recording at start, in
// tmp/<project>/chats, the project's short name being in
// ~/.gemini/projects.json; until that names the agent's folder, ~/.gemini
// is watched (where projects.json is written).
func geminiWatchDir(root, dir string) string {
	gemini := filepath.Dir(root)
	if short := geminiProject(gemini, dir); short != "" {
		return filepath.Join(root, short, "chats")
	}
	return gemini
}

// geminiProject returns the short name projects.json in gemini gives the
// folder dir, or "".
func geminiProject(gemini, dir string) string {
	b, err := os.ReadFile(filepath.Join(gemini, "projects.json"))
	if err != nil {
		return ""
	}
	var p struct {
		Projects map[string]string `json:"projects"`
	}
	if json.Unmarshal(b, &p) != nil {
		return ""
	}
	if short, ok := p.Projects[dir]; ok {
		return short
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		return p.Projects[real]
	}
	return ""
}

// Gemini CLI's title marks (its dynamic window title).
const (
	geminiReady  = "◇"
	geminiAction = "✋"
)

// geminiState reads Gemini CLI's title: "◇  Ready", "✦  Working…",
// "✋  Action Required".
func geminiState(title string) chatState {
	t := strings.TrimSpace(title)
	switch {
	case t == "":
		return chatUnknown
	case strings.HasPrefix(t, geminiReady):
		return chatIdle
	case strings.HasPrefix(t, geminiAction):
		return chatAction
	}
	return chatWorking
}

// dialogText returns the text of the last box drawn on screen (╭ … ╰)
// that offers a choice: an approval dialog's question and options, box
// edges trimmed.
func dialogText(rows []string) string {
	end := -1
	for i := len(rows) - 1; i >= 0; i-- {
		if strings.HasPrefix(strings.TrimSpace(rows[i]), "╰") {
			end = i
			break
		}
	}
	if end < 0 {
		return ""
	}
	var lines []string
	for i := end - 1; i >= 0; i-- {
		r := strings.TrimSpace(rows[i])
		if strings.HasPrefix(r, "╭") {
			break
		}
		r = strings.TrimSpace(strings.Trim(r, "│"))
		if r != "" {
			lines = append([]string{r}, lines...)
		}
	}
	return strings.Join(lines, "\n")
}

// geminiFind returns the chat recording of session id under root
// ($HOME/.gemini/tmp).
func geminiFind(root, id string) string {
	if len(id) < 8 {
		return ""
	}
	m, _ := filepath.Glob(filepath.Join(root, "*", "chats", "session-*-"+id[:8]+".jsonl"))
	for _, f := range m {
		if geminiSessionID(f) == id {
			return f
		}
	}
	return ""
}

// geminiSessionID reads a recording's first line, its metadata.
func geminiSessionID(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 64<<10).ReadSlice('\n')
	if err != nil {
		return ""
	}
	var meta struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(line, &meta)
	return meta.SessionID
}

// geminiHasTurn reports whether a recording holds a user message record
// of its own (not only the session context it starts with): something
// --resume loads.
func geminiHasTurn(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		var r geminiRecord
		if json.Unmarshal(line, &r) == nil && r.ID != "" && r.Type == "user" {
			return true
		}
	}
	return false
}

// geminiRecord is one line of a chat recording (the fields read).
type geminiRecord struct {
	ID        string          `json:"id"`
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Content   json.RawMessage `json:"content"`
	Set       *struct {
		Messages []geminiRecord `json:"messages"`
	} `json:"$set"`
}

// text returns a record's content as text: a string, or its text parts.
func (r geminiRecord) text() string {
	var str string
	if json.Unmarshal(r.Content, &str) == nil {
		return str
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(r.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// geminiDecode decodes one line of the recording: a message record, or a
// "$set" of the whole history (written at the start, and after a turn when
// the CLI manages its context), whose messages not read before are new. A
// user record is a prompt the CLI got, a gemini record the model's words.
func geminiDecode(line []byte) []chatRecord {
	var r geminiRecord
	if json.Unmarshal(line, &r) != nil {
		return nil
	}
	ms := []geminiRecord{r}
	if r.Set != nil {
		ms = r.Set.Messages
	}
	var out []chatRecord
	for _, m := range ms {
		if m.ID == "" || m.Type == "" {
			continue
		}
		c := chatRecord{id: m.ID, at: stamp(m.Timestamp)}
		switch m.Type {
		case "user":
			c.kind, c.text = chatPrompt, m.text()
		case "gemini":
			c.kind, c.text = chatReply, m.text()
		}
		out = append(out, c)
	}
	return out
}
