package protocol

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// This file turns a finished block's body lines into a typed, validated
// message. Reasons for invalid blocks are written for the agent that sent
// the block: what is wrong, then how to write it.

// invalid builds a KindInvalid message.
func invalid(kind Kind, target, raw string, line int, format string, args ...any) Message {
	return Message{
		Kind: KindInvalid, Target: target, Raw: raw, Line: line,
		Invalid: &Invalid{Kind: kind, Reason: fmt.Sprintf(format, args...)},
	}
}

// decodeBlock decodes the body of a finished block of the given kind.
// restFirst reports that body[0] is the text after the tag on the tag's own
// line; it takes no part in finding the common indentation. scratch is
// reused for the decoded lines and returned for the next call; the message
// keeps no reference to it.
func decodeBlock(kind Kind, target string, body []string, restFirst bool, raw string, line int, scratch []string) (Message, []string) {
	lines := scratch[:0]
	if restFirst && len(body) > 0 {
		lines = append(lines, trimSpace(body[0]))
		lines = appendDedent(lines, body[1:])
	} else {
		lines = appendDedent(lines, body)
	}
	m := decodeLines(kind, target, lines, raw, line)
	clear(lines) // the scratch keeps no strings of a finished block
	return m, lines[:0]
}

// decodeLines decodes a block's dedented body lines.
func decodeLines(kind Kind, target string, lines []string, raw string, line int) Message {
	m := Message{Kind: kind, Target: target, Raw: raw, Line: line}
	var reason string
	switch kind {
	case KindAskUser, KindUserQuestion:
		m.Question, reason = decodeQuestion(kind, dropFences(lines))
	case KindInvoke:
		m.Invoke, reason = decodeInvoke(lines)
	case KindDeliverResult:
		m.Result, reason = decodeResult(lines)
	case KindDependencyRequest:
		m.Dependency, reason = decodeDependency(dropFences(lines))
	case KindError:
		m.Error, reason = decodeError(dropFences(lines))
	case KindStepComplete:
		m.StepComplete = decodeStepComplete(dropFences(lines))
	case KindProxyRequest:
		m.Proxy, reason = decodeProxy(dropFences(lines))
	default:
		reason = fmt.Sprintf("%s: unknown kind", kind)
	}
	if reason != "" {
		return invalid(kind, target, raw, line, "%s", reason)
	}
	return m
}

// dedent removes the indentation common to the non-blank lines (Claude
// Code indents a reply's lines after the first by two columns), trailing
// blanks of every line, and blank lines at both ends.
func dedent(lines []string) []string {
	return appendDedent(make([]string, 0, len(lines)), lines)
}

// appendDedent appends the lines of dedent(lines) to dst.
func appendDedent(dst, lines []string) []string {
	lines, cut := dedentRange(lines)
	for _, l := range lines {
		dst = append(dst, dedentLine(l, cut))
	}
	return dst
}

// dedentRange returns lines without the blank lines at both ends, and the
// indentation common to the non-blank ones.
func dedentRange(lines []string) ([]string, int) {
	for len(lines) > 0 && isBlank(lines[0]) {
		lines = lines[1:]
	}
	for len(lines) > 0 && isBlank(lines[len(lines)-1]) {
		lines = lines[:len(lines)-1]
	}
	minIndent := -1
	for _, l := range lines {
		if isBlank(l) {
			continue
		}
		if n := indentOf(l); minIndent < 0 || n < minIndent {
			minIndent = n
		}
	}
	return lines, minIndent
}

// dedentLine removes trailing blanks and up to cut columns of indentation
// from l.
func dedentLine(l string, cut int) string {
	l = trimBlanksRight(l)
	if n := indentOf(l); n < cut {
		cut = n
	}
	if cut > 0 {
		l = l[cut:]
	}
	return l
}

// dedentJoin is prefix, "\n" and strings.Join(dedent(lines), "\n") (only
// prefix if dedent(lines) is empty, only the join if prefix is ""),
// without the intermediate slice.
func dedentJoin(prefix string, lines []string) string {
	lines, cut := dedentRange(lines)
	if len(lines) == 0 {
		return prefix
	}
	if prefix == "" && len(lines) == 1 {
		return dedentLine(lines[0], cut)
	}
	n := len(prefix) + len(lines)
	for _, l := range lines {
		n += len(l)
	}
	var b strings.Builder
	b.Grow(n)
	if prefix != "" {
		b.WriteString(prefix)
		b.WriteByte('\n')
	}
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(dedentLine(l, cut))
	}
	return b.String()
}

// trimBlankLines drops blank lines at both ends.
func trimBlankLines(lines []string) []string {
	for len(lines) > 0 && isBlank(lines[0]) {
		lines = lines[1:]
	}
	for len(lines) > 0 && isBlank(lines[len(lines)-1]) {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// isFence reports whether l is a markdown code fence line (``` or ```json).
func isFence(l string) bool {
	// Nearly every line is rejected by its first non-blank byte.
	for i := 0; i < len(l); i++ {
		if c := l[i]; !isASCIISpace(c) {
			if c < utf8.RuneSelf && c != '`' && c != '~' || c >= utf8.RuneSelf && !maySpaceLead(c) {
				return false
			}
			break
		}
	}
	t := trimSpace(l)
	return (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")) && !strings.ContainsAny(t[3:], " `~")
}

// dropFences removes code fence lines: an agent may wrap a block's body in
// one, and a fence is never a field.
// It filters in place: lines is overwritten.
func dropFences(lines []string) []string {
	out := lines[:0]
	for _, l := range lines {
		if !isFence(l) {
			out = append(out, l)
		}
	}
	return out
}

// field is one `key: value` field with its continuation lines.
type field struct {
	value string
	cont  []string
}

// text returns the field's whole value: the first line's value and the
// continuation lines, dedented, joined by newlines.
func (f field) text() string { return dedentJoin(f.value, f.cont) }

// maxFields bounds the distinct canonical keys (see keyAliases;
// TestKeyAliasesFit checks they fit).
const maxFields = 18

// fields holds a key-value block's fields by canonical key; the first
// occurrence of a key counts. It lives on the decoder's stack: a block has
// a handful of fields, and a linear search of them is cheaper than a map.
type fields struct {
	keys [maxFields]string
	vals [maxFields]field
	n    int
	pre  []string // text before the first field
}

// field returns the field of canonical key key, or nil.
func (fs *fields) field(key string) *field {
	for i := 0; i < fs.n; i++ {
		if fs.keys[i] == key {
			return &fs.vals[i]
		}
	}
	return nil
}

func (fs *fields) get(key string) string {
	if f := fs.field(key); f != nil {
		if len(f.cont) == 0 {
			return f.value // parseField trimmed it already
		}
		return trimSpace(f.text())
	}
	return ""
}

func (fs *fields) has(key string) bool { return fs.field(key) != nil }

// read splits dedented lines into fields. A known key at the left
// margin starts a field; any other line continues the current field
// (docs/protocol.md, Blocks: values continue on indented lines; an
// unindented line that is not a field is taken as a continuation too
// rather than lost). A field's
// continuation lines are the lines up to the next field, so they are kept
// as a subslice of lines.
func (fs *fields) read(lines []string) {
	var sink field // a repeated key: keep the first, swallow this one
	var cur *field
	start := 0 // the current field's line
	for i, l := range lines {
		// A known key at the margin starts a field; so does an indented one
		// before any field (its indentation is then decoration: stripped
		// terminal output can lose the cursor moves that indented the
		// other lines).
		if indentOf(l) == 0 || cur == nil {
			if k, v, ok := parseField(l); ok {
				if cur == nil {
					fs.pre = lines[:i:i]
				} else {
					cur.cont = lines[start+1 : i : i]
				}
				start = i
				if fs.field(k) != nil || fs.n == maxFields {
					cur = &sink
					continue
				}
				fs.keys[fs.n], fs.vals[fs.n] = k, field{value: v}
				cur = &fs.vals[fs.n]
				fs.n++
			}
		}
	}
	if cur == nil {
		fs.pre = lines
	} else {
		cur.cont = lines[start+1:]
	}
}

// parseBool reads a yes/no value as the permission validator does
// (docs/protocol.md, Dependency requests),
// plus the Korean 예/아니오.
func parseBool(s string) (v, ok bool) {
	switch strings.ToLower(trimASCII(s, " `\"'")) {
	case "true", "yes", "y", "1", "예", "네":
		return true, true
	case "false", "no", "n", "0", "아니오", "아니요":
		return false, true
	}
	return false, false
}

// oneOf reports whether s is among allowed.
func oneOf(s string, allowed ...string) bool {
	for _, a := range allowed {
		if s == a {
			return true
		}
	}
	return false
}

// normEnum lower-cases an enum value and strips quotes and emphasis.
func normEnum(s string) string {
	return strings.ToLower(trimASCII(s, " `\"'*_"))
}

var questionTypeAliases = map[string]string{
	"text": QuestionText, "텍스트": QuestionText, "free_text": QuestionText, "input": QuestionText,
	"selection": QuestionSelection, "select": QuestionSelection, "choice": QuestionSelection, "선택": QuestionSelection,
	"confirmation": QuestionConfirmation, "confirm": QuestionConfirmation, "yes_no": QuestionConfirmation, "확인": QuestionConfirmation,
}

// decodeQuestion decodes [ASK_USER] and [USER_QUESTION] (docs/protocol.md,
// Questions).
func decodeQuestion(kind Kind, lines []string) (*Question, string) {
	var fs fields
	fs.read(lines)
	q := &Question{
		Question: fs.get("question"),
		Category: normEnum(fs.get("category")),
		Default:  fs.get("default"),
		Context:  fs.get("context"),
		Required: true,
	}
	if q.Question == "" && !fs.has("question") && len(fs.pre) > 0 {
		// "[ASK_USER]\nWhich login method?\noptions: …": the free text is the question.
		q.Question = trimSpace(dedentJoin("", fs.pre))
	}
	if q.Question == "" {
		return nil, fmt.Sprintf("%s: missing 'question:' line; write `question: <text>` (or `질문: <text>`)", kind)
	}
	if kind == KindUserQuestion && q.Category == "" {
		return nil, "USER_QUESTION: missing 'category:' line; write `category: business|clarification|choice|confirmation`"
	}
	if q.Category != "" && !oneOf(q.Category, CategoryBusiness, CategoryClarification, CategoryChoice, CategoryConfirmation) {
		return nil, fmt.Sprintf("%s: unknown category %q; use business, clarification, choice or confirmation", kind, q.Category)
	}
	if f := fs.field("options"); f != nil {
		opts, err := parseOptions(*f)
		if err != "" {
			return nil, fmt.Sprintf("%s: cannot read options: %s; write `options: [\"A\", \"B\"]` or one `- option` line each", kind, err)
		}
		q.Options = opts
	}
	if r := fs.get("required"); r != "" {
		v, ok := parseBool(r)
		if !ok {
			return nil, fmt.Sprintf("%s: required must be true or false, not %q", kind, r)
		}
		q.Required = v
	}
	if t := normEnum(fs.get("type")); t != "" {
		canon, ok := questionTypeAliases[t]
		if !ok {
			return nil, fmt.Sprintf("%s: unknown type %q; use text, selection or confirmation", kind, t)
		}
		q.Type = canon
	} else {
		switch {
		case len(q.Options) > 0:
			q.Type = QuestionSelection
		case q.Category == CategoryConfirmation:
			q.Type = QuestionConfirmation
		default:
			q.Type = QuestionText
		}
	}
	if q.Type == QuestionSelection && len(q.Options) < 2 {
		return nil, fmt.Sprintf("%s: a selection needs at least two options, got %d; write `options: [\"A\", \"B\"]`", kind, len(q.Options))
	}
	if q.Category == CategoryChoice && len(q.Options) < 2 {
		return nil, fmt.Sprintf("%s: category choice needs at least two options, got %d; write `options: [\"A\", \"B\"]`", kind, len(q.Options))
	}
	return q, ""
}

// parseOptions reads an options field in any of the accepted forms: a JSON
// array with double or single quotes (`['이메일', '소셜', 'SSO']`), a bare
// list `[a, b, c]`, a dash list on the following lines, or a comma-separated
// line. It returns a reason on failure.
func parseOptions(f field) ([]string, string) {
	v := trimSpace(f.value)
	if strings.HasPrefix(v, "[") {
		// A bracket list, perhaps spread over several lines.
		text := v
		for _, c := range f.cont {
			text += " " + trimSpace(c)
		}
		return parseBracketList(text)
	}
	var opts []string
	if v != "" {
		sep := ","
		if !strings.Contains(v, ",") && strings.Contains(v, "|") {
			sep = "|"
		}
		for _, o := range strings.Split(v, sep) {
			if o = unquote(trimSpace(o)); o != "" {
				opts = append(opts, o)
			}
		}
	}
	for k, c := range f.cont {
		if isBlank(c) {
			continue
		}
		item, ok := listItem(c)
		if !ok {
			return nil, fmt.Sprintf("line %q is not a list item", trimSpace(c))
		}
		if item = unquote(item); item != "" {
			if opts == nil {
				opts = make([]string, 0, len(f.cont)-k)
			}
			opts = append(opts, item)
		}
	}
	return opts, ""
}

// unquote removes one pair of matching quotes around s.
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'' || s[0] == '`') && s[len(s)-1] == s[0] {
		return trimSpace(s[1 : len(s)-1])
	}
	return s
}

// parseBracketList reads [a, "b", 'c'] into its items. Double-quoted items
// follow JSON string rules; single-quoted ones end at the next unescaped
// single quote; bare items end at a comma.
func parseBracketList(s string) ([]string, string) {
	s = trimSpace(s)
	if !strings.HasPrefix(s, "[") {
		return nil, "expected '['"
	}
	i := 1
	var out []string
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i >= len(s) {
			return nil, "missing ']'"
		}
		var item string
		switch s[i] {
		case ']':
			return out, ""
		case ',':
			i++ // an empty item, e.g. a trailing comma
			continue
		case '"':
			var msg string
			if item, i, msg = parseDoubleQuoted(s, i); msg != "" {
				return nil, msg
			}
		case '\'':
			var msg string
			if item, i, msg = parseSingleQuoted(s, i); msg != "" {
				return nil, msg
			}
		default:
			j := i
			for j < len(s) && s[j] != ',' && s[j] != ']' {
				j++
			}
			item = trimSpace(s[i:j])
			i = j
		}
		if item = trimSpace(item); item != "" {
			if out == nil {
				// One allocation for the list (it stays nil when empty).
				out = make([]string, 0, strings.Count(s[i:], ",")+1)
			}
			out = append(out, item)
		}
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i >= len(s) {
			return nil, "missing ']'"
		}
		switch s[i] {
		case ',':
			i++
		case ']':
			return out, ""
		default:
			return nil, fmt.Sprintf("expected ',' or ']' after %q", item)
		}
	}
}

// parseDoubleQuoted reads the "…" string (JSON) that starts at s[i]: its
// value and the index just past it, or a message saying why it is not one.
func parseDoubleQuoted(s string, i int) (item string, next int, msg string) {
	j := i + 1
	for j < len(s) && s[j] != '"' {
		if s[j] == '\\' {
			j++
		}
		j++
	}
	if j >= len(s) {
		return "", 0, "unterminated \" string"
	}
	if q := s[i+1 : j]; plainJSONString(q) {
		// What json.Unmarshal would give, without it.
		return q, j + 1, ""
	}
	var u string
	if err := json.Unmarshal([]byte(s[i:j+1]), &u); err != nil {
		return "", 0, fmt.Sprintf("bad string %s", s[i:j+1])
	}
	return u, j + 1, ""
}

// parseSingleQuoted reads the '…' string that starts at s[i], a backslash
// taking the next byte as it is: its value and the index just past it, or a
// message when it is unterminated.
func parseSingleQuoted(s string, i int) (item string, next int, msg string) {
	j := i + 1
	for j < len(s) && s[j] != '\'' && s[j] != '\\' {
		j++
	}
	if j < len(s) && s[j] == '\'' {
		// No escapes: the item is the text between the quotes.
		return s[i+1 : j], j + 1, ""
	}
	var b strings.Builder
	j = i + 1
	for j < len(s) && s[j] != '\'' {
		if s[j] == '\\' && j+1 < len(s) {
			j++
		}
		b.WriteByte(s[j])
		j++
	}
	if j >= len(s) {
		return "", 0, "unterminated ' string"
	}
	return b.String(), j + 1, ""
}

// decodeInvoke decodes [INVOKE:Agent]: free text is the task; a context
// line at the left margin starts the context, which runs to the end. A
// leading `task:` line is accepted too.
func decodeInvoke(lines []string) (*Invoke, string) {
	inv := &Invoke{}
	ctx := -1
	var ctxValue string
	// The first line's field, if it was read in the search for the
	// context: the task: line is looked for there again.
	var k0, v0 string
	var ok0, read0 bool
	for i, l := range lines {
		if indentOf(l) > 0 {
			continue
		}
		k, v, ok := parseField(l)
		if i == 0 {
			k0, v0, ok0, read0 = k, v, ok, true
		}
		if ok && k == "context" {
			ctx, ctxValue = i, v
			break
		}
	}
	task := lines
	if ctx >= 0 {
		task = lines[:ctx]
		inv.Context = trimSpace(field{value: ctxValue, cont: lines[ctx+1:]}.text())
	}
	task = trimBlankLines(task)
	if len(task) > 0 {
		k, v, ok := k0, v0, ok0
		if !read0 || &task[0] != &lines[0] {
			k, v, ok = parseField(task[0])
		}
		if ok && k == "task" {
			inv.Task = trimSpace(field{value: v, cont: task[1:]}.text())
		} else {
			inv.Task = trimSpace(strings.Join(task, "\n"))
		}
	}
	if inv.Task == "" {
		return nil, "INVOKE: no task; write the task on the lines after [INVOKE:<Agent>], then optionally `context: <text>`"
	}
	return inv, ""
}

// decodeResult decodes [DELIVER_RESULT:Agent]: leading type and
// content_type lines, then `content:`/`내용:` and the rest, or else the
// rest of the body is the content. Only leading lines are read as fields so
// that a result's own "type: …" lines stay in it.
func decodeResult(lines []string) (*DeliverResult, string) {
	r := &DeliverResult{}
	i := 0
	for ; i < len(lines); i++ {
		l := lines[i]
		if isBlank(l) {
			continue
		}
		k, v, ok := parseField(l)
		if !ok || indentOf(l) > 0 {
			break
		}
		switch k {
		case "type":
			if r.Type == "" {
				r.Type = normEnum(v)
			}
			continue
		case "content_type":
			if r.ContentType == "" {
				r.ContentType = strings.Trim(v, " `\"'")
			}
			continue
		case "content":
			r.Content = trimSpace(field{value: v, cont: lines[i+1:]}.text())
			i = len(lines)
		}
		break
	}
	if i < len(lines) {
		r.Content = trimSpace(strings.Join(lines[i:], "\n"))
	}
	if r.Type == "" {
		r.Type = ResultMessage
	}
	if !oneOf(r.Type, ResultGitHubIssue, ResultMarkdown, ResultJSON, ResultFilePath, ResultMessage) {
		return nil, fmt.Sprintf("DELIVER_RESULT: unknown type %q; use github_issue, markdown, json, file_path or message", r.Type)
	}
	if r.Content == "" {
		return nil, "DELIVER_RESULT: empty content; write `content: <result>`, or the result itself on the lines after `type:`"
	}
	switch r.Type {
	case ResultJSON:
		body := trimSpace(strings.Join(dropFences(strings.Split(r.Content, "\n")), "\n"))
		var v any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			return nil, fmt.Sprintf("DELIVER_RESULT: type json but the content is not valid JSON (%v); fix the JSON or use `type: markdown`", err)
		}
		r.Content = body
	case ResultFilePath:
		for _, p := range strings.Split(r.Content, "\n") {
			if p = strings.Trim(trimSpace(p), "`"); p == "" {
				continue
			}
			if err := ValidateFilePath(p); err != nil {
				return nil, fmt.Sprintf("DELIVER_RESULT: file_path %q: %v; give a path inside the workspace", p, err)
			}
		}
	}
	if r.ContentType == "" {
		switch r.Type {
		case ResultMarkdown:
			r.ContentType = "text/markdown"
		case ResultJSON:
			r.ContentType = "application/json"
		default:
			r.ContentType = "text/plain"
		}
	}
	return r, ""
}

// decodeDependency decodes [DEPENDENCY_REQUEST] (docs/protocol.md, Dependency
// requests).
func decodeDependency(lines []string) (*DependencyRequest, string) {
	var fs fields
	fs.read(lines)
	d := &DependencyRequest{
		Type:        normEnum(fs.get("type")),
		Name:        strings.Trim(fs.get("name"), "`"),
		Description: fs.get("description"),
		Default:     fs.get("default"),
		Required:    true,
	}
	switch {
	case d.Type == "":
		return nil, "DEPENDENCY_REQUEST: missing 'type:' line; write `type: api_key|env_variable|service|file|permission|package`"
	case !oneOf(d.Type, DependencyAPIKey, DependencyEnvVar, DependencyService, DependencyFile, DependencyPermission, DependencyPackage):
		return nil, fmt.Sprintf("DEPENDENCY_REQUEST: unknown type %q; use api_key, env_variable, service, file, permission or package", d.Type)
	case d.Name == "":
		return nil, "DEPENDENCY_REQUEST: missing 'name:' line; write `name: <identifier, e.g. OPENAI_API_KEY>`"
	case d.Description == "":
		return nil, "DEPENDENCY_REQUEST: missing 'description:' line; write `description: <what it is for>`"
	}
	if r := fs.get("required"); r != "" {
		v, ok := parseBool(r)
		if !ok {
			return nil, fmt.Sprintf("DEPENDENCY_REQUEST: required must be true or false, not %q", r)
		}
		d.Required = v
	}
	if d.Default != "" {
		if err := ValidateDependencyValue(d.Type, d.Default); err != nil {
			return nil, fmt.Sprintf("DEPENDENCY_REQUEST: default %q is not a valid %s value: %v", d.Default, d.Type, err)
		}
	}
	return d, ""
}

// errorTypes are the two types and the four finer ones of docs/protocol.md,
// Errors.
var errorTypes = []string{ErrorRecoverable, ErrorFatal, "missing_file", "execution_failed", "validation_error", "dependency_missing"}

// decodeError decodes [ERROR] (docs/protocol.md, Errors).
func decodeError(lines []string) (*AgentError, string) {
	var fs fields
	fs.read(lines)
	e := &AgentError{
		Type:     normEnum(fs.get("type")),
		Message:  fs.get("message"),
		Recovery: normEnum(fs.get("recovery")),
		Details:  fs.get("details"),
	}
	if e.Message == "" && !fs.has("message") && len(fs.pre) > 0 {
		e.Message = trimSpace(dedentJoin("", fs.pre))
	}
	switch {
	case e.Type == "":
		return nil, "ERROR: missing 'type:' line; write `type: recoverable` or `type: fatal`"
	case !oneOf(e.Type, errorTypes...):
		return nil, fmt.Sprintf("ERROR: unknown type %q; use recoverable or fatal", e.Type)
	case e.Message == "":
		return nil, "ERROR: missing 'message:' line; write `message: <what went wrong>`"
	}
	switch {
	case e.Recovery == "" && e.Type == ErrorRecoverable:
		e.Recovery = RecoveryPauseAndRetry
	case e.Recovery == "" && e.Type == ErrorFatal:
		e.Recovery = RecoveryCheckpointAndFail
	case e.Recovery == "":
		e.Recovery = RecoveryNotifyUser
	case !oneOf(e.Recovery, RecoveryPauseAndRetry, RecoveryCheckpointAndFail, RecoveryNotifyUser):
		return nil, fmt.Sprintf("ERROR: unknown recovery %q; use pause_and_retry, checkpoint_and_fail or notify_user", e.Recovery)
	}
	return e, ""
}

// decodeStepComplete decodes [STEP_COMPLETE]: an optional `step:`/`name:`
// line, the rest is a summary. It cannot be invalid.
func decodeStepComplete(lines []string) *StepComplete {
	s := &StepComplete{}
	if len(lines) > 0 {
		if k, v, ok := parseField(lines[0]); ok && (k == "step" || k == "name") {
			s.Name = v
			lines = lines[1:]
		}
	}
	lines = trimBlankLines(lines)
	if len(lines) > 0 {
		if k, v, ok := parseField(lines[0]); ok && k == "summary" {
			lines[0] = v
		}
	}
	s.Summary = trimSpace(strings.Join(lines, "\n"))
	return s
}

// decodeProxy decodes [PROXY_REQUEST]: a JSON object (docs/protocol.md, Proxy
// requests).
func decodeProxy(lines []string) (*ProxyRequest, string) {
	body := trimSpace(strings.Join(lines, "\n"))
	if body == "" {
		return nil, `PROXY_REQUEST: empty body; write a JSON object, e.g. {"action": "create_plan", "requester": "<you>", "tasks": [{"content": "…"}]}`
	}
	pr := &ProxyRequest{}
	if err := json.Unmarshal([]byte(body), pr); err != nil {
		return nil, fmt.Sprintf("PROXY_REQUEST: the body is not a valid JSON request (%v); write one JSON object with an \"action\" field", err)
	}
	pr.Payload = json.RawMessage(body)
	switch pr.Action {
	case "":
		return nil, `PROXY_REQUEST: missing "action"; use "create_plan" or "update_status"`
	case ProxyCreatePlan:
		if len(pr.Tasks) == 0 {
			return nil, `PROXY_REQUEST: create_plan needs "tasks": [{"content": "…"}, …]`
		}
		for i, t := range pr.Tasks {
			if trimSpace(t.Content) == "" {
				return nil, fmt.Sprintf(`PROXY_REQUEST: task %d has no "content"`, i+1)
			}
		}
	case ProxyUpdateStatus:
		if pr.TaskID == "" || pr.Status == "" {
			return nil, `PROXY_REQUEST: update_status needs "task_id" and "status"`
		}
	default:
		return nil, fmt.Sprintf(`PROXY_REQUEST: unknown action %q; use "create_plan" or "update_status"`, pr.Action)
	}
	return pr, ""
}

// plainJSONString reports whether q, the text between a JSON string's
// quotes, decodes to itself: no escapes, no control bytes, valid UTF-8.
func plainJSONString(q string) bool {
	for i := 0; i < len(q); i++ {
		if c := q[i]; c < 0x20 || c == '\\' || c == '"' {
			return false
		}
	}
	return utf8.ValidString(q)
}

// trimASCII is strings.Trim(s, cutset) for an ASCII cutset, without
// building the cutset's set on every call.
func trimASCII(s, cutset string) string {
	i, n := 0, len(s)
	for i < n && s[i] < utf8.RuneSelf && strings.IndexByte(cutset, s[i]) >= 0 {
		i++
	}
	for n > i && s[n-1] < utf8.RuneSelf && strings.IndexByte(cutset, s[n-1]) >= 0 {
		n--
	}
	return s[i:n]
}
