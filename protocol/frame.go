package protocol

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mattn/go-runewidth"
)

// This file frames text the office types into an agent so that no receiver
// can read any part of it as a protocol block of its own, whatever bytes and
// line lengths the sender chose. The argument is in docs/notes/protocol.md
// ("Forwarded text: framing that the grammar cannot read") and
// docs/notes/threat-model.md (break 1). In short: the grammar in lines.go
// needs, on one line, "[" + a known tag name, or "==" + "phase" + a number,
// or "step" + a number + "/" or "of" + a number; a receiver may break our
// lines anywhere, decorate them, change blanks, drop invisible characters
// and Markdown markup, and truncate them, but it does not invent
// characters. So the escape works on characters, not lines: the "[" before
// a tag name, the first letter of a "phase" after "=", the separator in a
// step's numbers are replaced by their fullwidth forms, which the grammar
// never reads as its own. No line split can then make a block.

// Escaped forms: the fullwidth characters the grammar does not read.
const (
	escBracket = '［' // U+FF3B for '['
)

// officeTags are the office's own framing tags (typed by the office before
// text it forwards). Not blocks to the parser, but a person or a model
// reading forged ones would take them for the office's: Escape and Quote
// escape them in text from someone else.
var officeTags = []string{"OFFICE", "DEPENDENCY_PROVIDED", "PROXY_RESPONSE"}

// Normalize returns s as a receiver will be typed it: "\r\n" and a lone
// "\r" become "\n" (a terminal, a tty and a program reading lines all end a
// line there); a tab becomes spaces to the next multiple of eight columns
// (what a tty's echo and a terminal show, so what was typed and what is
// seen agree); every other C0 and C1 control, DEL and the bidirectional
// controls (which make a screen show characters in another order than they
// are) are removed; invalid UTF-8 becomes U+FFFD.
func Normalize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	col := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteRune(utf8.RuneError)
			col++
		case r == '\r':
			if i < len(s) && s[i] == '\n' {
				continue // the '\n' follows
			}
			b.WriteByte('\n')
			col = 0
		case r == '\n':
			b.WriteByte('\n')
			col = 0
		case r == '\t':
			for {
				b.WriteByte(' ')
				col++
				if col%8 == 0 {
					break
				}
			}
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || isBidiControl(r):
			// dropped
		default:
			b.WriteRune(r)
			col += runewidth.RuneWidth(r)
		}
	}
	return b.String()
}

// isBidiControl reports the explicit bidirectional formatting characters.
func isBidiControl(r rune) bool {
	return r == 0x061C || r == 0x200E || r == 0x200F || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

// Defuse returns Normalize(s) with every place escaped where the parser
// could read a block tag ("[NAME", "[/NAME" for a known NAME, any case and
// spacing), a phase header ("== PHASE 1 COMPLETE") or a step update
// ("Step 3/9:", "현재 단계: 3/9:") in any part of it. The office applies it
// to everything it types into an agent.
func Defuse(s string) string { return defuse(s, tagNames) }

// Escape is Defuse that also escapes the office's own framing tags
// ([OFFICE], [DEPENDENCY_PROVIDED], [PROXY_RESPONSE]): for text from someone
// else, which must not pass for the office's words either.
func Escape(s string) string { return defuse(s, allNames) }

// Quote returns Escape(s), trailing newlines removed, with "> " before
// every line: text from someone else, framed as a quotation.
func Quote(s string) string {
	lines := strings.Split(strings.TrimRight(Escape(s), "\n"), "\n")
	for i, l := range lines {
		lines[i] = "> " + l
	}
	return strings.Join(lines, "\n")
}

// tagNames and allNames are the tag names the escape looks for, upper-case
// letters only (a receiver that renders Markdown may drop the '_').
var (
	tagNames = letterNames(tagKindNames())
	allNames = letterNames(append(tagKindNames(), officeTags...))
)

func tagKindNames() []string {
	var names []string
	for n := range tagKinds {
		names = append(names, n)
	}
	return names
}

func letterNames(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[strings.ReplaceAll(strings.ToUpper(n), "_", "")] = true
	}
	return m
}

// maxName bounds the letters read after a '[': longer than every name.
const maxName = 32

// defuse escapes, in Normalize(s), every tag whose letters are in names,
// every phase header and every step update (see Defuse).
func defuse(s string, names map[string]bool) string {
	rs := []rune(Normalize(s))
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == '[':
			if isTagAt(rs, i+1, names) {
				rs[i] = escBracket
			}
		case foldLetter(r) == 'P':
			if matchWord(rs, i, "PHASE") > 0 && afterEquals(rs, i) {
				rs[i] = fullwidth(r)
			}
		case foldLetter(r) == 'S' || r == '단':
			word := "STEP"
			if r == '단' {
				word = "단계"
			}
			if j := matchWord(rs, i, word); j > 0 {
				if k := stepSeparator(rs, j); k >= 0 {
					rs[k] = fullwidth(rs[k])
				}
			}
		}
	}
	return string(rs)
}

// vanishes reports whether a receiver may show r as nothing: characters of
// no width (combining marks, format characters such as U+200B, unassigned
// and private-use code points a terminal may not draw) and the Markdown
// inline markup a rendering receiver removes (\ * _ ` ~).
func vanishes(r rune) bool {
	switch r {
	case '\\', '*', '_', '`', '~':
		return true
	}
	if r < utf8.RuneSelf {
		return r < 0x20 || r == 0x7f
	}
	if unicode.IsSpace(r) {
		return false
	}
	return !unicode.IsGraphic(r) || unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf) || runewidth.RuneWidth(r) == 0
}

// skippable reports a rune a receiver may drop or show as a blank.
func skippable(r rune) bool { return unicode.IsSpace(r) || vanishes(r) }

// isTagAt reports whether the runes after a '[' (from i) could read as a
// known tag name once a receiver dropped what may vanish: blanks, an
// optional '/', blanks, the name's letters, blanks, then ':' or ']'.
func isTagAt(rs []rune, i int, names map[string]bool) bool {
	for i < len(rs) && skippable(rs[i]) {
		i++
	}
	if i < len(rs) && rs[i] == '/' {
		i++
		for i < len(rs) && skippable(rs[i]) {
			i++
		}
	}
	var name [maxName]byte
	n := 0
	for ; i < len(rs); i++ {
		r := rs[i]
		if vanishes(r) {
			continue
		}
		c := foldLetter(r)
		if c == 0 {
			break
		}
		if n == len(name) {
			return false
		}
		name[n] = c
		n++
	}
	if n == 0 || !names[string(name[:n])] {
		return false
	}
	for i < len(rs) && skippable(rs[i]) {
		i++
	}
	return i < len(rs) && (rs[i] == ':' || rs[i] == '：' || rs[i] == ']')
}

// matchWord reports whether the letters of word (upper case, or Hangul)
// start at rs[i], with characters that may vanish between them; it returns
// the index after the word, or 0.
func matchWord(rs []rune, i int, word string) int {
	for _, w := range word {
		for i < len(rs) && vanishes(rs[i]) {
			i++
		}
		if i >= len(rs) {
			return 0
		}
		if c := foldLetter(rs[i]); !(rs[i] == w || (c != 0 && rune(c) == w)) {
			return 0
		}
		i++
	}
	return i
}

// afterEquals reports whether the nearest character before rs[i] that is
// not a blank and may not vanish is an '=': the "==" that opens a phase
// header may precede "phase" with any blanks and '='s between.
func afterEquals(rs []rune, i int) bool {
	for j := i - 1; j >= 0; j-- {
		switch r := rs[j]; {
		case r == '=':
			return true
		case skippable(r):
		default:
			return false
		}
	}
	return false
}

// stepSeparator reads, from rs[i] (after "step" or "단계"), what a step
// update's numbers need: blanks and ':', digits, blanks, then "/" or "of"
// and a blank, blanks, a digit. It returns the index of the separator's
// rune to escape ('/' or the 'o' of "of"), or -1.
func stepSeparator(rs []rune, i int) int {
	for i < len(rs) && (skippable(rs[i]) || rs[i] == ':' || rs[i] == '：') {
		i++
	}
	d := i
	for i < len(rs) && (isDigit(rs[i]) || vanishes(rs[i])) {
		i++
	}
	if i == d {
		return -1
	}
	for i < len(rs) && skippable(rs[i]) {
		i++
	}
	if i >= len(rs) {
		return -1
	}
	sep := i
	switch {
	case rs[i] == '/':
		i++
	case foldLetter(rs[i]) == 'O':
		i++
		for i < len(rs) && vanishes(rs[i]) {
			i++
		}
		if i >= len(rs) || foldLetter(rs[i]) != 'F' {
			return -1
		}
		i++
	default:
		return -1
	}
	for i < len(rs) && skippable(rs[i]) {
		i++
	}
	if i < len(rs) && isDigit(rs[i]) {
		return sep
	}
	return -1
}

func isDigit(r rune) bool { return r >= '0' && r <= '9' }

// foldLetter returns the upper-case ASCII letter r is, or folds to (the
// long s ſ is an s and the Kelvin sign K a k to strings.EqualFold), or 0.
func foldLetter(r rune) byte {
	switch {
	case r >= 'a' && r <= 'z':
		return byte(r - 'a' + 'A')
	case r >= 'A' && r <= 'Z':
		return byte(r)
	case r < utf8.RuneSelf:
		return 0
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f >= 'a' && f <= 'z' {
			return byte(f - 'a' + 'A')
		}
		if f >= 'A' && f <= 'Z' {
			return byte(f)
		}
	}
	return 0
}

// fullwidth returns the fullwidth form of ASCII r ('/' → '／', 'p' → 'ｐ'),
// or U+FF3B for anything else (never reached: only ASCII is escaped).
func fullwidth(r rune) rune {
	if r > 0x20 && r < 0x7f {
		return r - 0x21 + 0xFF01
	}
	if f := foldLetter(r); f != 0 {
		return rune(f) - 0x21 + 0xFF01
	}
	return escBracket
}
