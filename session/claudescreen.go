package session

import (
	"strings"
	"unicode"
)

// claudeView is what Claude Code's screen shows, as far as readiness goes.
type claudeView int

const (
	viewUnknown claudeView = iota // drawing, or nothing recognisable yet
	viewPrompt                    // its input prompt: text typed now reaches the model
	viewDialog                    // anything else that asks for a choice: nothing may be typed
)

// readClaudeScreen classifies Claude Code's visible rows (measured on 2.1.330,
// docs/notes/screen.md). The input prompt is a row starting with "❯"
// directly under a full-width rule ("────…") with another rule below it:
//
//	────────────────────────────
//	❯ ­
//	────────────────────────────
//	  ⏵⏵ auto mode on (shift+tab to cycle)
//
// Every dialog draws the same "❯" selector in front of its highlighted
// choice ("❯ No, exit" in the folder-trust dialog, "❯ No (recommended)" for
// an unknown API key, "❯ 1. Yes" for a tool permission), never directly
// under a rule, and most say "Enter to confirm" or "Esc to cancel". For a
// dialog, text is its rows from the rule that opens it to its last row, so
// a person reads what the agent is asking.
func readClaudeScreen(rows []string) (view claudeView, text string) {
	last := len(rows) - 1
	for last >= 0 && strings.TrimSpace(rows[last]) == "" {
		last--
	}
	if last < 0 {
		return viewUnknown, ""
	}
	rows = rows[:last+1]
	selector, prompt := -1, -1
	confirm := false
	for i, r := range rows {
		t := strings.TrimSpace(r)
		if strings.Contains(t, "Enter to confirm") || strings.Contains(t, "Esc to cancel") {
			confirm = true
		}
		if !strings.HasPrefix(t, "❯") {
			continue
		}
		selector = i
		if i > 0 && isRule(rows[i-1]) && !numbered(strings.TrimPrefix(t, "❯")) && ruleBelow(rows, i+1) {
			prompt = i
		}
	}
	if prompt >= 0 && !confirm && prompt == selector {
		return viewPrompt, ""
	}
	if selector < 0 && !confirm {
		return viewUnknown, ""
	}
	top := 0
	anchor := max(selector, 0)
	for i := anchor; i >= 0; i-- {
		if isRule(rows[i]) {
			top = i + 1
			break
		}
	}
	return viewDialog, plainRows(rows[top:], strings.TrimSpace)
}

// maxDialogText bounds the dialog text kept for people (Info.Detail).
const maxDialogText = 2000

// plainRows is a dialog's text for people: its rows, each made plain by
// clean, without blank rows and rules, at most maxDialogText long.
func plainRows(rows []string, clean func(string) string) string {
	var b strings.Builder
	for _, r := range rows {
		t := clean(r)
		if t == "" || isRule(r) {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(t)
		if b.Len() > maxDialogText {
			break
		}
	}
	return cutText(b.String(), maxDialogText)
}

// isRule reports whether row is a horizontal rule: at least 10 box-drawing
// horizontal lines and nothing else but spaces.
func isRule(row string) bool {
	n := 0
	for _, r := range row {
		switch r {
		case '─', '━', '═':
			n++
		case ' ':
		default:
			return false
		}
	}
	return n >= 10
}

// ruleBelow reports whether a rule follows within a few rows (the prompt box
// grows with the text typed into it).
func ruleBelow(rows []string, from int) bool {
	for i := from; i < len(rows) && i < from+12; i++ {
		if isRule(rows[i]) {
			return true
		}
	}
	return false
}

// numbered reports whether s starts like a numbered choice ("1. Yes").
func numbered(s string) bool {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i > 0 && i < len(s) && s[i] == '.'
}

// cutText cuts s to at most n bytes on a rune boundary.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s, n) {
		n--
	}
	return s[:n]
}

// lastLines returns the last n non-empty rows of a screen, trimmed: what a
// person would have seen when the agent exited.
func lastLines(rows []string, n int) []string {
	var out []string
	for i := len(rows) - 1; i >= 0 && len(out) < n; i-- {
		t := strings.TrimRightFunc(rows[i], unicode.IsSpace)
		if strings.TrimSpace(t) == "" {
			continue
		}
		out = append(out, cutText(t, 300))
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// inputRows returns the rows of Claude Code's prompt box, where text typed
// into it shows: from the "❯" row right under a rule down to the rule
// below it (the box grows with its text); none when no box is drawn. The
// prompts above it in the history start with "❯" too, never under a rule.
// Locked.
func (d *claudeDriver) inputRows(rows []string) []string {
	for i := len(rows) - 1; i > 0; i-- {
		if strings.HasPrefix(strings.TrimSpace(rows[i]), "❯") && isRule(rows[i-1]) {
			end := i + 1
			for end < len(rows) && !isRule(rows[end]) {
				end++
			}
			return rows[i:end]
		}
	}
	return nil
}
