package session

import (
	"strings"
	"unicode/utf8"
)

// Sanitize makes untrusted text safe to type into a terminal: it removes ESC
// and every other C0 and C1 control character except newline and tab, and
// DEL. Carriage returns become newlines ("\r\n" and a lone "\r" both end a
// line) so that lines are not glued together. Invalid UTF-8 is replaced by
// U+FFFD, because a stray byte such as 0x9b is an 8-bit CSI to some
// terminals. After Sanitize no escape sequence, bracketed-paste end
// ("\x1b[201~") or keystroke such as Ctrl-C (\x03) can survive.
func Sanitize(s string) string {
	clean := true
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || (isControl(r) && r != '\n' && r != '\t') {
			clean = false
			break
		}
		i += n
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteRune(utf8.RuneError)
		case r == '\r':
			if i < len(s) && s[i] == '\n' {
				continue // the '\n' follows
			}
			b.WriteByte('\n')
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case isControl(r):
			// dropped
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isControl reports whether r is a C0 control, DEL or a C1 control.
func isControl(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f)
}
