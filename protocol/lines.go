package protocol

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file recognises single lines: tag lines, phase headers, step updates,
// field lines and list items, with terminal decoration taken off.

// tagKinds maps a tag name to its kind.
var tagKinds = map[string]Kind{
	"ASK_USER":           KindAskUser,
	"INVOKE":             KindInvoke,
	"DELIVER_RESULT":     KindDeliverResult,
	"USER_QUESTION":      KindUserQuestion,
	"DEPENDENCY_REQUEST": KindDependencyRequest,
	"ERROR":              KindError,
	"STEP_COMPLETE":      KindStepComplete,
	"PROXY_REQUEST":      KindProxyRequest,
}

// lookupTag finds the kind of tag name, in any case, without allocating
// (prose lines often start with "[link]" or "[note]"). It is tagKinds as
// a switch, cheaper than hashing (TestLookupTag checks they agree).
func lookupTag(name string) (Kind, bool) {
	var buf [24]byte
	if len(name) > len(buf) {
		return "", false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		buf[i] = c
	}
	switch string(buf[:len(name)]) {
	case "ASK_USER":
		return KindAskUser, true
	case "INVOKE":
		return KindInvoke, true
	case "DELIVER_RESULT":
		return KindDeliverResult, true
	case "USER_QUESTION":
		return KindUserQuestion, true
	case "DEPENDENCY_REQUEST":
		return KindDependencyRequest, true
	case "ERROR":
		return KindError, true
	case "STEP_COMPLETE":
		return KindStepComplete, true
	case "PROXY_REQUEST":
		return KindProxyRequest, true
	}
	return "", false
}

// kvKind reports whether blocks of kind k are made of `key: value` fields
// (as opposed to free text or JSON).
func kvKind(k Kind) bool {
	switch k {
	case KindAskUser, KindUserQuestion, KindDependencyRequest, KindError, KindStepComplete:
		return true
	}
	return false
}

// tag is a recognised tag line.
type tag struct {
	closing bool
	kind    Kind
	target  string
	rest    string // text after the tag on the same line, decoration removed
	boxed   bool   // a box edge was drawn before the tag
}

// isDecoration reports whether r is something a terminal UI draws before a
// line's content: bullets (Claude Code's ● and ⏺, Codex's •, Gemini CLI's
// ✦, Qwen Code's ◆ with a text-presentation selector after it), box
// drawing, quote and list markers.
func isDecoration(r rune) bool {
	switch r {
	case '●', '⏺', '•', '◦', '○', '◉', '◆', '◇', '✦', '✧', '▶', '►', '⎿', '∙', '·', '>', '*', '-', '+', '|':
		return true
	}
	return r >= 0x2500 && r <= 0x257F // box drawing
}

// isVertical reports whether r is a box's left or right edge.
func isVertical(r rune) bool {
	switch r {
	case '│', '┃', '║', '|', '╎', '┆', '┊', '╏', '┇', '┋':
		return true
	}
	return false
}

// undecorate removes leading blanks and decoration from s. boxed reports a
// box edge among them.
func undecorate(s string) (rest string, boxed bool) {
	i := 0
	for i < len(s) {
		c := s[i]
		if c == ' ' || c == '\t' {
			i++
			continue
		}
		r, n := rune(c), 1
		if c >= utf8.RuneSelf {
			r, n = utf8.DecodeRuneInString(s[i:])
		}
		if !isDecoration(r) {
			break
		}
		boxed = boxed || isVertical(r)
		i += n
		// A variation selector asking for the glyph's text or emoji look
		// (Qwen Code draws "◆\uFE0E") belongs to it.
		if strings.HasPrefix(s[i:], "\uFE0E") || strings.HasPrefix(s[i:], "\uFE0F") {
			i += len("\uFE0E")
		}
	}
	return s[i:], boxed
}

// trimTrailingDecoration removes trailing blanks, box edges, a scroll bar's
// thumb (Qwen Code draws █ in the last column while its history
// overflows) and emphasis stars ("**[ASK_USER]**", "│ [ASK_USER]   │").
func trimTrailingDecoration(s string) string {
	for len(s) > 0 {
		r, n := utf8.DecodeLastRuneInString(s)
		if r == ' ' || r == '\t' || r == '*' || isVertical(r) || (r >= 0x2580 && r <= 0x259F) {
			s = s[:len(s)-n]
			continue
		}
		break
	}
	return s
}

// maybeTag reports whether line could be a tag line, by its first
// non-blank byte: a tag line's is '[' or decoration, and every non-ASCII
// decoration (see isDecoration) starts with byte 0xE2 or 0xC2. Most lines
// are rejected here, before parseTag builds anything.
func maybeTag(line string) bool {
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case ' ', '\t':
			continue
		case '[', '>', '*', '-', '+', '|', 0xE2, 0xC2:
			return true
		}
		return false
	}
	return false
}

// parseTag recognises a tag line: optional decoration, then [NAME],
// [NAME:Target], [/NAME] or [/NAME:Target] for a known NAME (any case),
// then optional text. A tag anywhere but at the start of the line is prose.
func parseTag(line string) (t tag, ok bool) {
	if !maybeTag(line) {
		return tag{}, false
	}
	s, boxed := undecorate(line)
	if len(s) < 3 || s[0] != '[' {
		return tag{}, false
	}
	j := strings.IndexByte(s, ']')
	if j < 0 {
		return tag{}, false
	}
	inner := trimSpace(s[1:j])
	if strings.HasPrefix(inner, "/") {
		t.closing = true
		inner = trimSpace(inner[1:])
	}
	name := inner
	if k := indexColon(inner); k >= 0 {
		name = trimSpace(inner[:k])
		_, w := utf8.DecodeRuneInString(inner[k:])
		t.target = trimSpace(inner[k+w:])
	}
	kind, known := lookupTag(name)
	if !known {
		return tag{}, false
	}
	t.kind, t.boxed = kind, boxed
	rest := trimBlanksLeft(s[j+1:])
	rest = trimTrailingDecoration(rest)
	t.rest = rest
	return t, true
}

// cutClosing finds a closing tag of a known kind at the end of s
// ("content: done [/DELIVER_RESULT]"), and returns s without it.
func cutClosing(s string) (body string, closed bool) {
	i := strings.LastIndex(s, "[/")
	if i < 0 {
		return s, false
	}
	j := strings.IndexByte(s[i:], ']')
	if j < 0 {
		return s, false
	}
	if trimTrailingDecoration(s[i+j+1:]) != "" {
		return s, false
	}
	inner := s[i+2 : i+j]
	if k := indexColon(inner); k >= 0 {
		inner = inner[:k]
	}
	if _, known := lookupTag(trimSpace(inner)); !known {
		return s, false
	}
	return strings.TrimRight(s[:i], " \t"), true
}

// unbox removes a box's left and right edges from a line drawn inside one,
// keeping the indentation inside the box. A border line becomes blank.
func unbox(s string) string {
	t := trimBlanksLeft(s)
	r, n := utf8.DecodeRuneInString(t)
	if !isVertical(r) {
		if isBorder(t) {
			return ""
		}
		return s
	}
	t = t[n:]
	t = strings.TrimPrefix(t, " ")
	t = strings.TrimRight(t, " \t")
	if r, n := utf8.DecodeLastRuneInString(t); isVertical(r) {
		t = strings.TrimRight(t[:len(t)-n], " \t")
	}
	return t
}

// isBorder reports whether s is made of box drawing only (╭────╮).
func isBorder(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r != ' ' && !(r >= 0x2500 && r <= 0x257F) {
			return false
		}
	}
	return true
}

// isListItem reports whether s (after indentation) is a list item:
// "- x", "* x", "• x", "+ x", "1. x" or "1) x".
func isListItem(s string) bool {
	_, ok := listItem(s)
	return ok
}

// listItem returns the text of list item s.
func listItem(s string) (string, bool) {
	s = trimBlanksLeft(s)
	for _, m := range []string{"- ", "* ", "+ ", "• "} {
		if strings.HasPrefix(s, m) {
			return trimSpace(s[len(m):]), true
		}
	}
	if s == "-" || s == "*" {
		return "", true
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i > 0 && i < 4 && i+1 < len(s) && (s[i] == '.' || s[i] == ')') && s[i+1] == ' ' {
		return trimSpace(s[i+2:]), true
	}
	return "", false
}

// keyAliases maps every accepted field name, lower-cased, to its canonical
// name. English names are matched case-insensitively; the Korean ones are
// docs/protocol.md's (질문, 타입, 옵션, 컨텍스트, 내용) and a few obvious others.
var keyAliases = map[string]string{
	"question": "question", "질문": "question",
	"type": "type", "타입": "type", "유형": "type", "question_type": "type", "result_type": "type",
	"category": "category", "카테고리": "category", "분류": "category",
	"options": "options", "option": "options", "choices": "options", "옵션": "options", "선택지": "options",
	"default": "default", "default_answer": "default", "기본값": "default",
	"context": "context", "컨텍스트": "context", "맥락": "context",
	"required": "required", "필수": "required",
	"task": "task", "작업": "task",
	"content": "content", "내용": "content", "content_type": "content_type",
	"name": "name", "이름": "name",
	"description": "description", "설명": "description",
	"message": "message", "메시지": "message",
	"details": "details", "detail": "details", "상세": "details",
	"recovery": "recovery", "복구": "recovery",
	"step": "step", "단계": "step",
	"summary": "summary", "요약": "summary",
}

// canonKey is keyAliases[k] as a switch: the compiler's binary search on
// length and bytes is cheaper than hashing for these short keys, and every
// field line asks (TestCanonKey checks the two agree).
func canonKey(k []byte) (string, bool) {
	switch string(k) { // no allocation: the compiler compares in place
	case "question", "질문":
		return "question", true
	case "type", "타입", "유형", "question_type", "result_type":
		return "type", true
	case "category", "카테고리", "분류":
		return "category", true
	case "options", "option", "choices", "옵션", "선택지":
		return "options", true
	case "default", "default_answer", "기본값":
		return "default", true
	case "context", "컨텍스트", "맥락":
		return "context", true
	case "required", "필수":
		return "required", true
	case "task", "작업":
		return "task", true
	case "content", "내용":
		return "content", true
	case "content_type":
		return "content_type", true
	case "name", "이름":
		return "name", true
	case "description", "설명":
		return "description", true
	case "message", "메시지":
		return "message", true
	case "details", "detail", "상세":
		return "details", true
	case "recovery", "복구":
		return "recovery", true
	case "step", "단계":
		return "step", true
	case "summary", "요약":
		return "summary", true
	}
	return "", false
}

// parseField splits a `key: value` line whose key is a known field name
// (see keyAliases), with markdown emphasis around the key allowed
// ("**question**: x", "**question:** x"). Leading blanks are ignored.
func parseField(s string) (key, value string, ok bool) {
	s = trimBlanksLeft(s)
	i := indexColonN(s, 41)
	if i <= 0 || i > 40 {
		return "", "", false
	}
	k := trimKey(s[:i])
	if k == "" {
		return "", "", false
	}
	canon, known := lookupKey(k)
	if !known {
		return "", "", false
	}
	_, w := utf8.DecodeRuneInString(s[i:])
	v := trimSpace(s[i+w:])
	if len(v) > 0 && (v[0] == '*' || v[0] == '_') { // the ** of "**key:** value"
		for len(v) > 0 && (v[0] == '*' || v[0] == '_') {
			v = v[1:]
		}
		v = trimSpace(v)
	}
	return canon, v, true
}

// lookupKey finds the canonical name of field key k: lower-cased, with
// spaces and dashes read as underscores. An ASCII key (nearly all of them)
// (nearly all of them, and the Korean ones) is folded in a stack buffer,
// without allocating; any other goes through strings.ToLower, whose Unicode
// folding (the Kelvin sign K is k) the fast path must not change.
func lookupKey(k string) (string, bool) {
	var buf [40]byte
	if len(k) <= len(buf) {
		fast := true
		for i := 0; i < len(k); i++ {
			c := k[i]
			switch {
			case c >= 0xEA && c <= 0xED && i+2 < len(k) && k[i+1]&0xC0 == 0x80 && k[i+2]&0xC0 == 0x80:
				// A three-byte rune from U+A000 to U+DFFF: Hangul syllables
				// (no case) are copied as they are, without a decoder call.
				r := rune(c&0x0F)<<12 | rune(k[i+1]&0x3F)<<6 | rune(k[i+2]&0x3F)
				if r < 0xAC00 || r > 0xD7A3 {
					fast = false
				}
				copy(buf[i:], k[i:i+3])
				i += 2
				continue
			case c >= utf8.RuneSelf:
				// Other letters mostly have no lower case either, and are
				// copied as they are; a rune that folds, and invalid UTF-8
				// (which ToLower rewrites), take the slow path.
				r, n := utf8.DecodeRuneInString(k[i:])
				hangul := r >= 0xAC00 && r <= 0xD7A3 // syllables have no case
				if !hangul && ((r == utf8.RuneError && n == 1) || unicode.ToLower(r) != r) {
					fast = false
				}
				copy(buf[i:], k[i:i+n])
				i += n - 1
				continue
			case c >= 'A' && c <= 'Z':
				c += 'a' - 'A'
			case c == ' ' || c == '-':
				c = '_'
			}
			buf[i] = c
		}
		if fast {
			return canonKey(buf[:len(k)])
		}
	}
	lk := strings.ToLower(k)
	if strings.ContainsAny(lk, " -") {
		lk = strings.NewReplacer(" ", "_", "-", "_").Replace(lk)
	}
	return canonKey([]byte(lk))
}

// isFieldLine reports whether s is a known field line.
func isFieldLine(s string) bool {
	_, _, ok := parseField(s)
	return ok
}

// stripLead removes decoration and markdown lead (headings, emphasis, list
// and quote markers) from a line message candidate.
func stripLead(line string) string {
	s, _ := undecorate(line)
	for {
		t := strings.TrimLeft(s, "#*_> \t")
		if t == s {
			break
		}
		s = t
	}
	return s
}

// trimLineEnd removes trailing blanks, emphasis and box edges.
func trimLineEnd(s string) string {
	for {
		t := strings.TrimRight(trimTrailingDecoration(s), "_")
		if t == s {
			return s
		}
		s = t
	}
}

// parsePhaseHeader recognises "=== PHASE N COMPLETE ===" (any case, any
// number of "=", COMPLETED or 완료 too) and returns N.
func parsePhaseHeader(line string) (int, bool) {
	s := stripLead(line)
	if len(s) < 2 || s[0] != '=' || s[1] != '=' {
		return 0, false
	}
	s = strings.TrimLeft(s, "= \t")
	s = strings.TrimRight(trimLineEnd(s), "= \t")
	f := strings.Fields(s)
	if len(f) != 3 || !strings.EqualFold(f[0], "phase") {
		return 0, false
	}
	switch strings.ToUpper(f[2]) {
	case "COMPLETE", "COMPLETED", "완료":
	default:
		return 0, false
	}
	n, err := strconv.Atoi(f[1])
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// parseStep recognises a step update at the start of a line
// (docs/protocol.md, Phases and steps):
// "Step 3/9: name", "Step 3 of 9: name", "현재 Step: 3/9: name" (also
// "현재 단계: 3/9: name"). The sources' patterns match anywhere in the text;
// here the update must lead its line, so prose that mentions a step
// ("as in Step 2/5: …") is not an update.
func parseStep(line string) (Message, bool) {
	s := stripLead(line)
	var cur, total int
	var ok bool
	switch {
	case len(s) > 5 && strings.EqualFold(s[:4], "step") && (s[4] == ' ' || s[4] == '\t'):
		cur, total, s, ok = stepNumbers(trimBlanksLeft(s[4:]))
	case strings.HasPrefix(s, "현재"):
		t := trimBlanksLeft(s[len("현재"):])
		switch {
		case len(t) >= 4 && strings.EqualFold(t[:4], "step"):
			t = t[4:]
		case strings.HasPrefix(t, "단계"):
			t = t[len("단계"):]
		default:
			return Message{}, false
		}
		t = trimBlanksLeft(t)
		if !strings.HasPrefix(t, ":") {
			return Message{}, false
		}
		cur, total, s, ok = stepNumbers(trimBlanksLeft(t[1:]))
	}
	if !ok {
		return Message{}, false
	}
	// The name follows a colon.
	s = trimBlanksLeft(s)
	if !strings.HasPrefix(s, ":") {
		return Message{}, false
	}
	name := trimLineEnd(trimSpace(s[1:]))
	name = trimSpace(strings.Trim(name, "*_"))
	if name == "" {
		return Message{}, false
	}
	if total < 1 || cur < 1 || cur > total {
		return Message{Kind: KindInvalid, Invalid: &Invalid{Kind: KindStep, Reason: "STEP: step " +
			strconv.Itoa(cur) + " of " + strconv.Itoa(total) +
			" is out of range; write `Step <n>/<total>: <name>` with 1 ≤ n ≤ total"}}, true
	}
	return Message{Kind: KindStep, Step: &Step{Current: cur, Total: total, Name: name}}, true
}

// stepNumbers reads "3/9" or "3 of 9" at the start of s.
func stepNumbers(s string) (cur, total int, rest string, ok bool) {
	cur, s, ok = leadingInt(s)
	if !ok {
		return
	}
	s = trimBlanksLeft(s)
	switch {
	case strings.HasPrefix(s, "/"):
		s = s[1:]
	case len(s) > 2 && strings.EqualFold(s[:2], "of") && (s[2] == ' ' || s[2] == '\t'):
		s = s[2:]
	default:
		return 0, 0, "", false
	}
	total, rest, ok = leadingInt(trimBlanksLeft(s))
	return
}

// leadingInt reads a decimal number of at most 6 digits at the start of s.
func leadingInt(s string) (int, string, bool) {
	i := 0
	for i < len(s) && i < 7 && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 || i > 6 {
		return 0, s, false
	}
	n, _ := strconv.Atoi(s[:i])
	return n, s[i:], true
}

// phaseState is an open phase message: the header has been read and the
// optional name line and deliverables list may follow.
type phaseState struct {
	msg    PhaseComplete
	raw    []string
	size   int
	line   int
	blanks int // blank lines since the last line taken
}

// feedPhase offers line to the open phase message. It reports false when the
// line is not part of it; the phase message has then ended.
func (p *Parser) feedPhase(line string) bool {
	ps := p.phase
	if isBlank(line) {
		ps.blanks++
		return true
	}
	if ps.size+len(line)+ps.blanks+1 > p.max {
		return false
	}
	if _, ok := parseTag(line); ok {
		return false
	}
	s := stripLead(line)
	if s == "" {
		return false
	}
	if _, ok := parsePhaseHeader(line); ok {
		return false
	}
	if _, ok := parseStep(line); ok {
		return false
	}
	switch {
	case phaseName(s) != "":
		if ps.msg.Name == "" {
			ps.msg.Name = phaseName(s)
		}
	case isListItemLine(line):
		item, _ := listItem(unboxed(line))
		item = strings.Trim(trimLineEnd(item), "`")
		if item != "" {
			ps.msg.Deliverables = append(ps.msg.Deliverables, strings.Clone(item))
		}
	case strings.HasSuffix(trimLineEnd(s), ":") && len(s) < 80:
		// "Documents created:", "Files created:", "Deliverables:", "산출물:".
	default:
		return false
	}
	for ; ps.blanks > 0; ps.blanks-- {
		ps.raw = append(ps.raw, "")
		ps.size++
	}
	ps.raw = append(ps.raw, strings.Clone(line))
	ps.size += len(line) + 1
	return true
}

// isListItemLine reports whether a (possibly decorated) line is a list item.
func isListItemLine(line string) bool { return isListItem(unboxed(line)) }

// unboxed removes a leading box edge, if any, keeping the rest.
func unboxed(line string) string {
	t := trimBlanksLeft(line)
	if r, n := utf8.DecodeRuneInString(t); isVertical(r) || r == '⎿' || r == '●' || r == '⏺' || r == '✦' || r == '◆' {
		return t[n:]
	}
	return line
}

// phaseName returns the phase name from "Phase: Planning", "Name: Planning"
// or "Completed: Phase 1 (Planning)" (docs/protocol.md, Phases and steps); "" if s is none of these.
func phaseName(s string) string {
	i := indexColon(s)
	if i <= 0 {
		return ""
	}
	k := strings.ToLower(strings.Trim(s[:i], " *_"))
	_, w := utf8.DecodeRuneInString(s[i:])
	v := trimSpace(strings.Trim(trimLineEnd(s[i+w:]), "*_ "))
	switch k {
	case "phase", "name", "단계", "이름":
		return v
	case "completed":
		if a, b := strings.IndexByte(v, '('), strings.LastIndexByte(v, ')'); a >= 0 && b > a {
			return trimSpace(v[a+1 : b])
		}
		return v
	}
	return ""
}

// endPhase completes the open phase message.
func (p *Parser) endPhase() Message {
	ps := p.phase
	p.phase = nil
	msg := ps.msg
	return Message{Kind: KindPhaseComplete, Raw: strings.Join(ps.raw, "\n"), Line: ps.line, Phase: &msg}
}

// indexColon returns the index of the first ':' or fullwidth '：' (U+FF1A,
// bytes EF BC 9A) in s, or -1. It is indexColon(s) without the
// rune-by-rune loop IndexAny falls back to for a non-ASCII set: neither
// 0x3A nor 0xEF can be a UTF-8 continuation byte, so a byte scan finds the
// same index a rune scan does.
func indexColon(s string) int { return indexColonN(s, len(s)) }

// indexColonN is indexColon(s) if that is below n, else -1. Lines are
// short and a field's key shorter: a byte loop beats IndexByte's call.
func indexColonN(s string, n int) int {
	for i := 0; i < len(s) && i < n; i++ {
		switch s[i] {
		case ':':
			return i
		case 0xEF:
			if i+2 < len(s) && s[i+1] == 0xBC && s[i+2] == 0x9A {
				return i
			}
		}
	}
	return -1
}

// trimBlanksLeft is strings.TrimLeft(s, " \t") without building a cutset.
func trimBlanksLeft(s string) string {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return s[i:]
}

// trimBlanksRight is strings.TrimRight(s, " \t").
func trimBlanksRight(s string) string {
	n := len(s)
	for n > 0 && (s[n-1] == ' ' || s[n-1] == '\t') {
		n--
	}
	return s[:n]
}

// trimKey is strings.Trim(s, " *_`"): a field key's blanks and markdown
// emphasis.
func trimKey(s string) string {
	isCut := func(c byte) bool { return c == ' ' || c == '*' || c == '_' || c == '`' }
	i, n := 0, len(s)
	for i < n && isCut(s[i]) {
		i++
	}
	for n > i && isCut(s[n-1]) {
		n--
	}
	return s[i:n]
}

// trimSpace is strings.TrimSpace, without its fall back to a rune-by-rune
// TrimFunc over the whole string as soon as a non-ASCII byte shows up (every
// Korean value took it): only the runes at either end are decoded.
func trimSpace(s string) string {
	i := 0
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			if !isASCIISpace(c) {
				break
			}
			i++
			continue
		}
		if !maySpaceLead(s[i]) {
			break
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += n
	}
	j := len(s)
	for j > i {
		if c := s[j-1]; c < utf8.RuneSelf {
			if !isASCIISpace(c) {
				break
			}
			j--
			continue
		}
		if !maySpaceLast(s[j-1]) {
			break
		}
		r, n := utf8.DecodeLastRuneInString(s[i:j])
		if !unicode.IsSpace(r) {
			break
		}
		j -= n
	}
	return s[i:j]
}

// maySpaceLead reports whether non-ASCII byte c can start a rune that
// unicode.IsSpace accepts: U+0085 and U+00A0 (C2), U+1680 (E1), U+2000–U+200A,
// U+2028, U+2029, U+202F, U+205F (E2), U+3000 (E3). Hangul never can.
func maySpaceLead(c byte) bool { return c == 0xC2 || c == 0xE1 || c == 0xE2 || c == 0xE3 }

// maySpaceLast reports whether byte c can end a non-ASCII rune that
// unicode.IsSpace accepts (see maySpaceLead; TestSpaceBytes checks both).
func maySpaceLast(c byte) bool {
	return c >= 0x80 && c <= 0x8A || c == 0x9F || c == 0xA0 || c == 0xA8 || c == 0xA9 || c == 0xAF
}

// isASCIISpace reports the ASCII bytes unicode.IsSpace accepts.
func isASCIISpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}
