package migrations

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Statements splits a migration file into its statements as the Supabase
// CLI does before it runs them (supabase/cli, apps/cli-go/pkg/parser:
// token.go and state.go, used by pkg/migration/file.go): a statement ends
// at a ';' that is outside a quoted string or identifier ('…', "…"), a
// dollar-quoted string ($tag$…$tag$), a line comment (-- to the end of the
// line), a block comment (/* … */, nested), parentheses, or a BEGIN ATOMIC
// … END function body; a backslash outside those takes the next character
// with it. Each statement keeps its comments; the trailing ';' and the
// surrounding white space are cut, and empty statements are dropped.
//
// The server records these statements in the CLI's history table as the
// CLI records them, and runs them one at a time, as the CLI does, so that a
// file runs the same whichever tool applies it. TestCLIRecordsTheSameHistory
// compares them with what the real CLI records.
func Statements(sql string) []string {
	var out []string
	var st splitState = &ready{}
	start := 0
	for i := 0; i < len(sql); {
		r, w := utf8.DecodeRuneInString(sql[i:])
		i += w
		tok := sql[start:i]
		if st = st.next(r, tok); st == nil {
			out = appendStatement(out, tok)
			start = i
			st = &ready{}
		}
	}
	return appendStatement(out, sql[start:])
}

func appendStatement(out []string, tok string) []string {
	if s := strings.TrimSpace(strings.TrimRight(tok, ";")); s != "" {
		out = append(out, s)
	}
	return out
}

// splitState is where the splitter is inside a statement. next takes the
// rune just read and the statement so far (ending with that rune) and
// returns the state after it, or nil when the rune ends the statement.
type splitState interface {
	next(r rune, tok string) splitState
}

// ready: outside any quote, comment or body.
type ready struct{}

func (s *ready) next(r rune, tok string) splitState {
	switch r {
	case ';':
		return nil
	case '\'', '"':
		return &quoted{delim: r}
	case '$':
		return &dollarTag{start: len(tok) - 1}
	case '-':
		return &dash{}
	case '/':
		return &slash{}
	case '\\':
		return &escaped{}
	case '(':
		return &enclosed{inner: s, end: ")"}
	case 'c', 'C':
		if beginAtomic(tok) {
			return &enclosed{inner: s, end: "END"}
		}
	}
	return s
}

// beginAtomic reports whether tok ends with the words BEGIN ATOMIC (any
// case, any white space between them).
func beginAtomic(tok string) bool {
	const atomic, begin = "ATOMIC", "BEGIN"
	i := len(tok) - len(atomic)
	if i < 0 || !strings.EqualFold(tok[i:], atomic) {
		return false
	}
	if r, _ := utf8.DecodeLastRuneInString(tok[:i]); i > 0 && identRune(r) {
		return false
	}
	before := strings.TrimRightFunc(tok[:i], unicode.IsSpace)
	j := len(before) - len(begin)
	if j < 0 || !strings.EqualFold(before[j:], begin) {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(before[:j])
	return j == 0 || !identRune(r)
}

func identRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '$'
}

// quoted: inside '…' or "…"; a doubled delimiter stays inside.
type quoted struct {
	delim  rune
	closed bool // the last rune was the delimiter
}

func (s *quoted) next(r rune, tok string) splitState {
	if s.closed {
		if r == s.delim {
			s.closed = false
			return s
		}
		return (&ready{}).next(r, tok)
	}
	if r == s.delim {
		s.closed = true
	}
	return s
}

// dollarTag: after a '$' that may open $tag$.
type dollarTag struct{ start int }

func (s *dollarTag) next(r rune, tok string) splitState {
	switch {
	case r == '$':
		return &until{end: tok[s.start:]}
	case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_':
		return s
	}
	return (&ready{}).next(r, tok)
}

// until: inside a dollar-quoted string or a line comment, up to and
// including end.
type until struct{ end string }

func (s *until) next(_ rune, tok string) splitState {
	if strings.HasSuffix(tok, s.end) {
		return &ready{}
	}
	return s
}

// dash: after a '-' that may open a line comment.
type dash struct{}

func (s *dash) next(r rune, tok string) splitState {
	if r == '-' {
		return &until{end: "\n"}
	}
	return (&ready{}).next(r, tok)
}

// slash: after a '/' that may open a block comment, and inside one (depth).
type slash struct{ depth int }

func (s *slash) next(r rune, tok string) splitState {
	if strings.HasSuffix(tok, "/*") {
		s.depth++
		return s
	}
	if s.depth == 0 {
		return (&ready{}).next(r, tok)
	}
	if strings.HasSuffix(tok, "*/") {
		if s.depth--; s.depth == 0 {
			return &ready{}
		}
	}
	return s
}

// escaped: after a backslash; the next rune is taken as it is.
type escaped struct{}

func (s *escaped) next(rune, string) splitState { return &ready{} }

// enclosed: inside parentheses or a BEGIN ATOMIC body, which end at end
// (case-insensitive) read where inner is ready.
type enclosed struct {
	inner splitState
	end   string
}

func (s *enclosed) next(r rune, tok string) splitState {
	if n := s.inner.next(r, tok); n != nil {
		s.inner = n
	}
	if _, ok := s.inner.(*ready); ok && len(tok) >= len(s.end) && strings.EqualFold(tok[len(tok)-len(s.end):], s.end) {
		return &ready{}
	}
	return s
}
