package protocol

import (
	"strings"
	"unsafe"
)

// DefaultMaxBlockBytes is the default limit on one open block's size.
const DefaultMaxBlockBytes = 64 << 10

// rawHeadBytes is how much of an oversized block's text an invalid message
// keeps in Raw: enough to show the agent what it wrote.
const rawHeadBytes = 1 << 10

// Options configure a Parser. The zero value is ready to use.
type Options struct {
	// MaxBlockBytes bounds the bytes one open block (or one phase message)
	// may hold. A block that grows past it comes out as KindInvalid at once
	// and the rest of it is skipped, so memory stays bounded whatever the
	// agent prints. Zero means DefaultMaxBlockBytes.
	MaxBlockBytes int
}

// Parser reads protocol messages out of a stream of text lines. Feed it the
// lines in order and call Flush when the agent's turn ends. Every line is
// looked at once: a block's lines are held until the block ends (closing
// tag, next opening tag, or Flush) and then decoded, so the parser's memory
// is bounded by the largest open block. A Parser is not safe for concurrent
// use; use one per session.
type Parser struct {
	max  int
	line int // lines fed so far

	blk   *block // the open block, nil outside one (then &p.blkStore)
	phase *phaseState

	// The open block's text, in buffers reused from block to block so that
	// a block costs a few allocations rather than a few per line (at a
	// block every few lines, per-line copies and joins were most of the
	// parser's time): rawBuf is its raw lines joined by "\n", bodyBuf its
	// body lines (see block). Neither outgrows MaxBlockBytes.
	blkStore block
	rawBuf   []byte
	bodyBuf  []byte
	// Scratch line slices for decoding; decoded messages never keep them.
	body, lines []string
}

// span is one body line's place: in Parser.rawBuf (a body line is part of
// its raw line: the line less decoration and closing tag), or, if inBody,
// in Parser.bodyBuf.
type span struct {
	off, end int
	inBody   bool
}

// block is an open [NAME] block.
type block struct {
	kind   Kind
	target string
	start  int // line number of the tag line
	// The tag line and every body line, as fed, are in Parser.rawBuf, raw
	// holding where each ends; the body lines (the tag line's rest, if any,
	// then the lines) are at body's spans, in rawBuf or bodyBuf. Both slices
	// are kept from block to block.
	raw   []int
	body  []span
	size  int  // bytes in raw
	boxed bool // the tag was drawn inside a box: strip │ from body lines
	// restFirst: body[0] is the text after the tag on the tag's line.
	restFirst bool
	// over is set once the block outgrew the limit: it has been reported
	// invalid, and its remaining lines are skipped until it ends.
	over bool
	// For key-value kinds, an unclosed block also ends at a prose line
	// after a blank line (see feedBlock).
	sawBlank bool
	base     int // least indentation of the non-blank body lines so far
	// content is set once the body has a non-blank line other than a code
	// fence.
	content bool
}

// NewParser returns a Parser with the given options.
func NewParser(opts Options) *Parser {
	max := opts.MaxBlockBytes
	if max <= 0 {
		max = DefaultMaxBlockBytes
	}
	return &Parser{max: max}
}

// ParseString parses a whole text at once: it splits s into lines, feeds
// them to a new Parser with the given options and flushes it. It is for
// tests and one-shot callers; streams use a Parser.
func ParseString(s string, opts Options) []Message {
	p := NewParser(opts)
	var out []Message
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, p.Feed(s)...)
			break
		}
		out = append(out, p.Feed(s[:i])...)
		s = s[i+1:]
	}
	return append(out, p.Flush()...)
}

// Feed consumes one line (without its newline; a trailing "\r" is dropped)
// and returns the messages it completed, in order; usually none. A line that
// still holds newlines is fed as the lines it holds.
func (p *Parser) Feed(line string) []Message {
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		out := p.Feed(line[:i])
		return append(out, p.Feed(line[i+1:])...)
	}
	p.line++
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	// Fast path: most lines are prose that cannot start anything.
	if p.blk == nil && p.phase == nil && !maybeSpecial(line) {
		return nil
	}
	var out []Message
	if p.blk != nil {
		var done bool
		out, done = p.feedBlock(line, out)
		if done {
			return out
		}
	}
	if p.phase != nil {
		if p.feedPhase(line) {
			return out
		}
		out = appendMsg(out, p.endPhase())
	}
	return p.feedOutside(line, out)
}

// InBlock reports whether a block is open: its tag line was fed and
// neither its closing tag nor anything that ends it yet.
func (p *Parser) InBlock() bool { return p.blk != nil }

// Flush ends the current turn: an open block or phase message is completed
// and returned. The parser is then ready for the next turn; line numbers
// keep counting.
func (p *Parser) Flush() []Message {
	var out []Message
	if p.blk != nil {
		if m, ok := p.endBlock(""); ok {
			out = appendMsg(out, m)
		}
	}
	if p.phase != nil {
		out = appendMsg(out, p.endPhase())
	}
	return out
}

// feedOutside handles a line outside any block and phase message.
func (p *Parser) feedOutside(line string, out []Message) []Message {
	if !maybeTag(line) {
		// Not a tag line: the common case, decided without a call.
	} else if t, ok := parseTag(line); ok {
		if t.closing {
			// A stray closing tag: nothing is open, so it changes nothing.
			// Text after it is still looked at.
			if t.rest != "" {
				return p.feedOutside(t.rest, out)
			}
			return out
		}
		return p.openBlock(t, line, out)
	}
	if n, ok := parsePhaseHeader(line); ok {
		// The header is short but for its "=" decoration, which may be cut.
		head := strings.Clone(truncateUTF8(line, p.max/2))
		p.phase = &phaseState{
			msg:  PhaseComplete{Number: n},
			raw:  []string{head},
			size: len(head),
			line: p.line,
		}
		return out
	}
	if m, ok := parseStep(line); ok {
		m.Line = p.line
		m.Raw = strings.Clone(line)
		out = appendMsg(out, m)
	}
	return out
}

// openBlock starts a block at tag line t; the tag's rest of line is its
// first body line, and may close it at once ("[STEP_COMPLETE][/STEP_COMPLETE]").
func (p *Parser) openBlock(t tag, line string, out []Message) []Message {
	p.blkStore = block{
		raw:    p.blkStore.raw[:0],
		body:   p.blkStore.body[:0],
		kind:   t.kind,
		target: t.target,
		start:  p.line,
		size:   len(line),
		boxed:  t.boxed,
		base:   1 << 30,
	}
	b := &p.blkStore
	p.blk = b
	p.rawBuf, p.bodyBuf = p.rawBuf[:0], p.bodyBuf[:0]
	if b.size > p.max {
		// Only the head of an oversized tag line is reported; the rest
		// is not held.
		p.addRaw(b, line[:min(len(line), rawHeadBytes+1)])
		out = appendMsg(out, p.oversized())
		if _, closed := cutClosing(t.rest); closed {
			p.blk = nil
		}
		return out
	}
	p.addRaw(b, line)
	rawStart := 0
	if t.rest == "" {
		return out
	}
	body, closed := cutClosing(t.rest)
	if body != "" {
		// The rest of the tag line counts at the tag's own indentation.
		p.addBody(b, line, body, rawStart)
		b.restFirst = true
		b.content = true
	}
	if closed {
		if m, ok := p.endBlock(""); ok {
			out = appendMsg(out, m)
		}
	}
	return out
}

// feedBlock handles a line inside the open block. done reports that the line
// was consumed; otherwise the block has ended and the line is to be handled
// outside it.
func (p *Parser) feedBlock(line string, out []Message) (_ []Message, done bool) {
	b := p.blk
	if !maybeTag(line) {
		// Not a tag line: the common case, decided without a call.
	} else if t, ok := parseTag(line); ok {
		if !t.closing {
			// An opening tag ends an unclosed block (one source has no
			// closing tags) and starts the next.
			if m, ok := p.endBlock(""); ok {
				out = appendMsg(out, m)
			}
			return p.openBlock(t, line, out), true
		}
		// The block's closing tag, or a mismatched one ([/ASK] for
		// [ASK_USER] is a slip): either way the agent meant to end it
		// here, and reading on would swallow what follows.
		if m, ok := p.endBlock(line); ok {
			out = appendMsg(out, m)
		}
		if t.rest != "" {
			out = p.feedOutside(t.rest, out)
		}
		return out, true
	}
	if kvKind(b.kind) && b.sawBlank && !isBlank(line) {
		// An unclosed key-value block ends at prose: a blank line, then a
		// line no deeper than the body that is neither a field, a list
		// item, nor a continuation. Without this, "[ASK_USER] … (blank)
		// Let me know!" would hold every later step line until Flush.
		l := line
		if b.boxed {
			l = unbox(l)
		}
		if ind := indentOf(l); ind <= b.base && !isFieldLine(l) && !isListItem(l) {
			if m, ok := p.endBlock(""); ok {
				out = appendMsg(out, m)
			}
			return out, false
		}
	}
	if (kvKind(b.kind) || b.kind == KindProxyRequest) && b.content && isFence(line) {
		// A code fence after the block's content closes the fence the
		// agent wrapped the block (or its body) in: the block is over,
		// closing tag or not. Fields and JSON hold no code blocks.
		if m, ok := p.endBlock(""); ok {
			out = appendMsg(out, m)
		}
		return out, true
	}
	if b.over {
		return out, true
	}
	b.size += len(line) + 1
	if b.size > p.max {
		out = appendMsg(out, p.oversized())
		return out, true
	}
	return p.addBlockLine(b, line, out), true
}

// addBlockLine adds line to the open block b: to its raw text, and, less
// decoration and a closing tag, to its body (a blank line before a closing
// tag is left out). A closing tag on the line ends the block, its message
// appended to out.
func (p *Parser) addBlockLine(b *block, line string, out []Message) []Message {
	rawStart := p.addRaw(b, line)
	body, closed := line, false
	if strings.IndexByte(line, '[') >= 0 && strings.Contains(line, "[/") {
		body, closed = cutClosing(line)
	}
	if b.boxed {
		body = unbox(body)
	}
	if isBlank(body) {
		b.sawBlank = true
	} else {
		if ind := indentOf(body); ind < b.base {
			b.base = ind
		}
		b.content = b.content || !isFence(body)
	}
	if !closed || !isBlank(body) {
		p.addBody(b, line, body, rawStart)
	}
	if closed {
		if m, ok := p.endBlock(""); ok {
			out = appendMsg(out, m)
		}
	}
	return out
}

// oversized reports the open block as invalid because it outgrew the limit,
// and keeps skipping it until it ends.
func (p *Parser) oversized() Message {
	b := p.blk
	var raw string
	if len(p.rawBuf) > rawHeadBytes {
		raw = truncateUTF8(string(p.rawBuf[:rawHeadBytes+1]), rawHeadBytes) + "\n…"
	} else {
		raw = string(p.rawBuf)
	}
	m := invalid(b.kind, b.target, raw, b.start,
		"%s: block is larger than %d bytes; split it into smaller blocks or shorten it", b.kind, p.max)
	b.over, b.size = true, 0
	b.raw, b.body = b.raw[:0], b.body[:0]
	p.rawBuf, p.bodyBuf = p.rawBuf[:0], p.bodyBuf[:0]
	return m
}

// endBlock closes the open block (closing is its closing tag line, or "")
// and decodes it. ok is false for a block already reported as oversized.
func (p *Parser) endBlock(closing string) (m Message, ok bool) {
	b := p.blk
	p.blk = nil
	if b.over {
		return Message{}, false
	}
	if closing != "" {
		p.addRaw(b, closing)
	} else {
		// An unclosed block's trailing blank lines separate it from what
		// follows; they are not part of it.
		for n := len(b.raw); n > 1; n-- {
			if !isBlankBytes(p.rawBuf[b.raw[n-2]+1 : b.raw[n-1]]) {
				break
			}
			p.rawBuf = p.rawBuf[:b.raw[n-2]]
			b.raw = b.raw[:n-1]
		}
	}
	raw := string(p.rawBuf)
	var bodyText string
	if len(p.bodyBuf) > 0 {
		bodyText = string(p.bodyBuf)
	}
	body := p.body[:0]
	for _, sp := range b.body {
		switch {
		case sp.inBody:
			body = append(body, bodyText[sp.off:sp.end])
		case sp.end <= len(raw):
			body = append(body, raw[sp.off:sp.end])
		default:
			// Part of a trailing blank line dropped from raw above: blank,
			// and at the end of the body, where decoding drops blank lines.
			body = append(body, "")
		}
	}
	p.body = body
	m, p.lines = decodeBlock(b.kind, b.target, body, b.restFirst, raw, b.start, p.lines[:0])
	clear(body) // let the block's text go with the message
	return m, true
}

// addRaw appends a raw line of the open block to rawBuf and returns where
// it starts there.
func (p *Parser) addRaw(b *block, line string) int {
	if len(b.raw) > 0 {
		p.rawBuf = append(p.rawBuf, '\n')
	}
	start := len(p.rawBuf)
	p.rawBuf = append(p.rawBuf, line...)
	b.raw = append(b.raw, len(p.rawBuf))
	return start
}

// addBody adds body line body of the open block, a part of raw line line,
// which starts at rawStart in rawBuf. The body line is then a substring of
// the block's Raw, at no cost; should it not be a part of line, it is
// copied to bodyBuf.
func (p *Parser) addBody(b *block, line, body string, rawStart int) {
	if body == "" {
		b.body = append(b.body, span{})
		return
	}
	off := int(uintptr(unsafe.Pointer(unsafe.StringData(body))) - uintptr(unsafe.Pointer(unsafe.StringData(line))))
	if off >= 0 && off <= len(line)-len(body) {
		b.body = append(b.body, span{off: rawStart + off, end: rawStart + off + len(body)})
		return
	}
	start := len(p.bodyBuf)
	p.bodyBuf = append(p.bodyBuf, body...)
	b.body = append(b.body, span{off: start, end: len(p.bodyBuf), inBody: true})
}

// maybeSpecial reports whether line could be a tag, phase or step line,
// cheaply: it looks at the first non-blank byte only.
func maybeSpecial(line string) bool {
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case ' ', '\t':
			continue
		case '[', '=', 'S', 's', '*', '#', '>', '|', '-', '+', '_':
			return true
		default:
			return c >= 0x80 // bullets, box edges, 현재
		}
	}
	return false
}

// isBlank reports whether s holds only spaces and tabs.
func isBlank(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != ' ' && s[i] != '\t' {
			return false
		}
	}
	return true
}

// appendMsg appends m to out. Most Feed calls that complete a message
// complete one: a one-element slice is made directly, without growslice.
func appendMsg(out []Message, m Message) []Message {
	if out == nil {
		return []Message{m}
	}
	return append(out, m)
}

// isBlankBytes is isBlank for a byte slice.
func isBlankBytes(s []byte) bool {
	for _, c := range s {
		if c != ' ' && c != '\t' {
			return false
		}
	}
	return true
}

// indentOf counts s's leading spaces and tabs.
func indentOf(s string) int {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
