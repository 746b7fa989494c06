package protocol

// DefaultMaxBlockBytes is the default limit on one open block's size.
const DefaultMaxBlockBytes = 64 << 10

// Options configure a Parser. The zero value is ready to use.
type Options struct {
	// MaxBlockBytes bounds the bytes one open block (or one phase message)
	// may hold. A block that grows past it comes out as KindInvalid at once
	// and the rest of it is skipped. Zero means DefaultMaxBlockBytes.
	MaxBlockBytes int
}

// Parser reads protocol messages out of a stream of text lines. Feed it the
// lines in order and call Flush when the agent's turn ends. It is not safe
// for concurrent use; use one per session.
type Parser struct {
	opts Options
	line int
}

// NewParser returns a Parser with the given options.
func NewParser(opts Options) *Parser {
	if opts.MaxBlockBytes <= 0 {
		opts.MaxBlockBytes = DefaultMaxBlockBytes
	}
	return &Parser{opts: opts}
}

// Feed consumes one line (without its newline; a trailing "\r" is ignored)
// and returns the messages it completed, in order, usually none.
func (p *Parser) Feed(line string) []Message {
	p.line++
	return nil
}

// Flush ends the current turn: an open block or phase message is completed
// and returned. The parser is then ready for the next turn.
func (p *Parser) Flush() []Message {
	return nil
}
