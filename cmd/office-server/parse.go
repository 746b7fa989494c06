package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/office-server/office-server/protocol"
	"github.com/office-server/office-server/protocol/ansistrip"
)

// office-server parse [flags] [FILE]
//
// Shows what the server reads out of an agent's output: the transcript in
// FILE (stdin by default, or "-") goes through a line source and the
// protocol parser, and every message comes out as one JSON object a line.
//
// Line sources:
//   - plain (default): terminal output; escape sequences are stripped and
//     forward cursor moves become spaces (ansistrip), then it is cut into
//     lines. The whole input is one turn.
//   - --transcript: a Claude Code transcript (JSONL, docs/protocol.md, Claude Code's terminal): the text of
//     the main conversation's assistant entries, a turn ending at
//     stop_reason end_turn or at the next user entry.
//   - --screen, --cols N, --rows M: raw PTY output rendered through the
//     session screen model (parse_screen.go): rows that scrolled off the
//     top, then the final screen.

func init() { commands["parse"] = runParse }

// lineSource reads an agent's output from r and reports the agent's words:
// line for each line of text in order, turnEnd where the agent's turn ends
// (the parser is flushed there). It returns the first read error; input it
// cannot understand is reported as an error after everything readable has
// been passed on.
type lineSource interface {
	read(ctx context.Context, r io.Reader, line func(string), turnEnd func()) error
}

// parseFlags are the parse command's options.
type parseFlags struct {
	transcript bool
	noRaw      bool
	maxBlock   int
	screen     screenFlags // parse_screen.go
}

func runParse(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("parse", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var pf parseFlags
	fs.BoolVar(&pf.transcript, "transcript", false, "input is a Claude Code transcript (JSONL), not terminal output")
	fs.BoolVar(&pf.noRaw, "no-raw", false, "leave the raw block text out of the output")
	fs.IntVar(&pf.maxBlock, "max-block", protocol.DefaultMaxBlockBytes, "largest block in bytes; a larger one is reported INVALID")
	addScreenFlags(fs, &pf.screen)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: office-server parse [--transcript | --screen [--cols N] [--rows M]] [--no-raw] [--max-block N] [FILE]")
		fmt.Fprintln(stderr, "Prints one JSON object per protocol message found in FILE (default stdin).")
		fs.PrintDefaults()
	}
	// Flags may come before or after FILE.
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return usageError{err}
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) > 1 {
		fs.Usage()
		return usagef("want at most one FILE, got %d", len(files))
	}
	in := stdin
	if len(files) == 1 && files[0] != "-" {
		name := files[0]
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	src := parseSource(pf)
	if ss, ok, err := pf.screen.source(); err != nil {
		return err
	} else if ok {
		if pf.transcript {
			return errors.New("--transcript and --screen/--cols/--rows exclude each other")
		}
		src = ss
	}
	return parseStream(ctx, src, in, stdout, pf)
}

// parseSource picks the line source the flags ask for.
func parseSource(pf parseFlags) lineSource {
	if pf.transcript {
		return transcriptSource{}
	}
	return plainSource{}
}

// parseStream feeds src's lines to a parser and writes each message to w as
// a JSON line as soon as it is complete.
func parseStream(ctx context.Context, src lineSource, r io.Reader, w io.Writer, pf parseFlags) error {
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	p := protocol.NewParser(protocol.Options{MaxBlockBytes: pf.maxBlock})
	var werr error
	emit := func(msgs []protocol.Message) {
		for _, m := range msgs {
			if pf.noRaw {
				m.Raw = ""
			}
			if err := enc.Encode(m); err != nil && werr == nil {
				werr = err
			}
		}
	}
	err := src.read(ctx, r,
		func(line string) { emit(p.Feed(line)) },
		func() { emit(p.Flush()) })
	emit(p.Flush()) // the input ended: so did the turn
	if ferr := out.Flush(); werr == nil {
		werr = ferr
	}
	if werr != nil {
		return fmt.Errorf("write: %w", werr)
	}
	return err
}

// plainSource reads terminal output: escape sequences stripped (forward
// cursor moves become spaces), cut into lines.
type plainSource struct{}

func (plainSource) read(ctx context.Context, r io.Reader, line func(string), _ func()) error {
	st := ansistrip.Stripper{CursorSpaces: true}
	var sp protocol.Splitter
	buf := make([]byte, 32<<10)
	var text []byte
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := r.Read(buf)
		if n > 0 {
			text = st.Append(text[:0], buf[:n])
			sp.Split(text, line)
		}
		if err == io.EOF {
			sp.Flush(line)
			return nil
		}
		if err != nil {
			sp.Flush(line)
			return fmt.Errorf("read: %w", err)
		}
	}
}

// transcriptSource reads a Claude Code transcript: one JSON object a line.
// Only the main conversation's assistant text counts (docs/protocol.md, Claude Code's terminal): what was
// typed in is a user entry, and sub-agents' entries are sidechains.
type transcriptSource struct{}

// transcriptEntry is the part of a transcript line this command reads.
type transcriptEntry struct {
	Type        string `json:"type"`
	IsSidechain bool   `json:"isSidechain"`
	Message     struct {
		Content    json.RawMessage `json:"content"`
		StopReason *string         `json:"stop_reason"`
	} `json:"message"`
}

func (transcriptSource) read(ctx context.Context, r io.Reader, line func(string), turnEnd func()) error {
	br := bufio.NewReader(r)
	var bad []string
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		raw, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(raw)) > 0 {
			var e transcriptEntry
			if jerr := json.Unmarshal(raw, &e); jerr != nil {
				bad = append(bad, fmt.Sprintf("line %d: %v", n, jerr))
			} else {
				transcriptLines(e, line, turnEnd)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("transcript: %d unreadable line(s): %s", len(bad), strings.Join(bad, "; "))
	}
	return nil
}

// transcriptLines passes one entry's text on.
func transcriptLines(e transcriptEntry, line func(string), turnEnd func()) {
	if e.IsSidechain {
		return
	}
	switch e.Type {
	case "user":
		turnEnd() // a prompt: whatever the agent said before is complete
	case "assistant":
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(e.Message.Content, &blocks) != nil {
			return // content is not a list of blocks: no text to read
		}
		for _, b := range blocks {
			if b.Type != "text" {
				continue
			}
			for _, l := range strings.Split(strings.TrimSuffix(b.Text, "\n"), "\n") {
				line(l)
			}
		}
		if e.Message.StopReason != nil && *e.Message.StopReason == "end_turn" {
			turnEnd()
		}
	}
}
