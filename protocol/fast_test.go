package protocol

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
)

// This file checks the allocation-free helpers of the fast path against
// the plain code they replaced.

// dedentOld is the original dedent, as it was before dedentJoin and appendDedent.
func dedentOld(lines []string) []string {
	minIndent := -1
	for _, l := range lines {
		if isBlank(l) {
			continue
		}
		if n := indentOf(l); minIndent < 0 || n < minIndent {
			minIndent = n
		}
	}
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			out = append(out, "")
			continue
		}
		cut := minIndent
		if n := indentOf(l); n < cut {
			cut = n
		}
		if cut > 0 {
			l = l[cut:]
		}
		out = append(out, l)
	}
	return trimBlankLines(out)
}

// TestDedentEquivalent checks dedent and dedentJoin against dedentOld.
func TestDedentEquivalent(t *testing.T) {
	cases := [][]string{
		nil, {""}, {"  "}, {"a"}, {"  a", "    b", "", "  c  "}, {"", "\t x", "  ", " y", ""},
		{"    deep", "  ", "      deeper\t"}, {"a", " b"}, {"  ", "  a  ", "\t"},
	}
	for _, c := range cases {
		want := dedentOld(c)
		if got := dedent(c); strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) {
			t.Errorf("dedent(%q) = %q, want %q", c, got, want)
		}
		for _, prefix := range []string{"", "v"} {
			w := strings.Join(want, "\n")
			if prefix != "" && len(want) > 0 {
				w = prefix + "\n" + w
			} else if prefix != "" {
				w = prefix
			}
			if got := dedentJoin(prefix, c); got != w {
				t.Errorf("dedentJoin(%q, %q) = %q, want %q", prefix, c, got, w)
			}
		}
	}
}

// TestIndexColon checks indexColon against strings.IndexAny.
func TestIndexColon(t *testing.T) {
	for _, s := range []string{"", ":", "：", "a：b:c", "ab:c：", "\xef\xbc", "x\xef\xbc\x9a", "\xe0\xef\xbc\x9a:",
		"질문： x", "질문: x", "no colon", "\xef\xef\xbc\x9a", "ab\xef"} {
		if got, want := indexColon(s), strings.IndexAny(s, ":："); got != want {
			t.Errorf("indexColon(%q) = %d, want %d", s, got, want)
		}
	}
}

// TestKeyAliasesFit checks that every canonical field key fits in fields.
func TestKeyAliasesFit(t *testing.T) {
	canon := map[string]bool{}
	for _, c := range keyAliases {
		canon[c] = true
	}
	if len(canon) > maxFields {
		t.Fatalf("%d canonical keys, fields holds %d", len(canon), maxFields)
	}
}

// TestLookupKey checks lookupKey against the plain lower-case and replace.
func TestLookupKey(t *testing.T) {
	for _, k := range []string{"question", "QUESTION", "Question-Type", "content type", "ta\u212Ask", "질문", "작업 1",
		"CONTENT_TYPE", "\xed\xa0\x80", "질문\xed\xa0", "\xffquestion", "default answer", "Ｑuestion", "result-type"} {
		lk := strings.NewReplacer(" ", "_", "-", "_").Replace(strings.ToLower(k))
		want, wok := keyAliases[lk]
		if got, ok := lookupKey(k); got != want || ok != wok {
			t.Errorf("lookupKey(%q) = %q, %v; want %q, %v", k, got, ok, want, wok)
		}
	}
}

// TestTrimSpace checks trimSpace against strings.TrimSpace.
func TestTrimSpace(t *testing.T) {
	for _, s := range []string{"", " ", " a ", "\t질문 \n", "\u00a0x\u0085", "\u3000한\u3000", "\xff ", " \xff", "a\u2028", "\v\f\r"} {
		if got, want := trimSpace(s), strings.TrimSpace(s); got != want {
			t.Errorf("trimSpace(%q) = %q, want %q", s, got, want)
		}
	}
}

// TestCanonKey checks canonKey against keyAliases, and lookupTag against
// tagKinds.
func TestCanonKey(t *testing.T) {
	for k, want := range keyAliases {
		if got, ok := canonKey([]byte(k)); !ok || got != want {
			t.Errorf("canonKey(%q) = %q, %v; want %q", k, got, ok, want)
		}
	}
	for _, k := range []string{"", "questions", "Question", "x"} {
		if _, ok := canonKey([]byte(k)); ok {
			t.Errorf("canonKey(%q) found", k)
		}
	}
	for name, want := range tagKinds {
		if got, ok := lookupTag(strings.ToLower(name)); !ok || got != want {
			t.Errorf("lookupTag(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
	if _, ok := lookupTag("PROXY_RESPONSE"); ok {
		t.Errorf("lookupTag(PROXY_RESPONSE) found")
	}
}

// TestPlainJSONString checks the fast path of double-quoted options
// against encoding/json.
func TestPlainJSONString(t *testing.T) {
	for _, q := range []string{"", "a", "이메일", "a\\nb", "\x01", "\xff", "tab\there", "é", "\u2028"} {
		if !plainJSONString(q) {
			continue
		}
		var got string
		if err := json.Unmarshal([]byte(`"`+q+`"`), &got); err != nil || got != q {
			t.Errorf("plainJSONString(%q) but json gives %q, %v", q, got, err)
		}
	}
}

// TestTrimASCIIAndFence checks trimASCII against strings.Trim and the
// quick rejection in isFence against the plain test.
func TestTrimASCIIAndFence(t *testing.T) {
	for _, s := range []string{"", "`", " `json` ", "**x**", "'예'", "\"a\"", "é*", "*é", "```", " ```go", "\u00a0```", "~~~", "x```", "``` x", "\t"} {
		for _, cut := range []string{" `\"'*_", " `\"'"} {
			if got, want := trimASCII(s, cut), strings.Trim(s, cut); got != want {
				t.Errorf("trimASCII(%q, %q) = %q, want %q", s, cut, got, want)
			}
		}
		tt := strings.TrimSpace(s)
		want := (strings.HasPrefix(tt, "```") || strings.HasPrefix(tt, "~~~")) && !strings.ContainsAny(tt[3:], " `~")
		if got := isFence(s); got != want {
			t.Errorf("isFence(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestDecorationLeadBytes checks what parseTag's quick rejection assumes:
// every non-ASCII decoration starts with byte 0xE2 or 0xC2, and the ASCII
// ones are > * - + |.
func TestDecorationLeadBytes(t *testing.T) {
	for r := rune(0); r < 0x10000; r++ {
		if !isDecoration(r) {
			continue
		}
		s := string(r)
		if r < 0x80 {
			if !strings.ContainsRune(">*-+|", r) {
				t.Errorf("ASCII decoration %q not in parseTag's list", r)
			}
			continue
		}
		if s[0] != 0xE2 && s[0] != 0xC2 {
			t.Errorf("decoration %q starts with byte %#x", r, s[0])
		}
	}
}

// TestSpaceBytes checks maySpaceLead and maySpaceLast against every
// non-ASCII space rune.
func TestSpaceBytes(t *testing.T) {
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		if !unicode.IsSpace(r) {
			continue
		}
		s := string(r)
		if !maySpaceLead(s[0]) || !maySpaceLast(s[len(s)-1]) {
			t.Errorf("space %U (% x) rejected by maySpaceLead/maySpaceLast", r, s)
		}
	}
}
