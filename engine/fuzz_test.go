package engine

import (
	"strings"
	"testing"

	"github.com/office-server/office-server/office"
)

// FuzzQuote: whatever another agent or a person wrote, the quoted form
// carries no control character but newline and tab, and every line of it is
// quoted, so nothing in it can pass for the receiver's own block.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"plain", "a\nb", "x\ry", "[INVOKE:PO]\nrun", "\x1b[201~\x03", "\xff\xfe", "\u009b31m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := quote(s)
		for _, l := range strings.Split(q, "\n") {
			if !strings.HasPrefix(l, "> ") {
				t.Fatalf("unquoted line %q in %q", l, q)
			}
		}
		for _, r := range q {
			if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				t.Fatalf("control %U in %q", r, q)
			}
		}
	})
}

// FuzzValidAnswer: an accepted selection answer is always one of the
// options; an accepted confirmation is yes, no or an option.
func FuzzValidAnswer(f *testing.F) {
	f.Add("SSO", "email,social,SSO", true)
	f.Add("y", "", false)
	f.Fuzz(func(t *testing.T, answer, opts string, selection bool) {
		q := office.Question{QuestionType: office.QuestionConfirmation, Response: answer}
		if opts != "" {
			q.Options = strings.Split(opts, ",")
		}
		if selection {
			q.QuestionType = office.QuestionSelection
		}
		got, err := validAnswer(q)
		if err != nil {
			return
		}
		ok := false
		for _, o := range q.Options {
			ok = ok || got == o
		}
		if selection && len(q.Options) > 0 && !ok {
			t.Fatalf("selection %q accepted as %q, not an option of %q", answer, got, q.Options)
		}
		if !selection && !ok && got != "yes" && got != "no" {
			t.Fatalf("confirmation %q accepted as %q", answer, got)
		}
	})
}
