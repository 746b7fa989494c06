package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/office-server/office-server/session/screen"
)

// The screen line source of `office-server parse`: --screen, --cols N or
// --rows M render the input (raw PTY output, as recorded from an agent's
// terminal) through the same screen model the sessions use for every agent
// but Claude Code, and parse what a person would see: each row that
// scrolled off the top, in order, then the final screen's rows.

// Default screen size: the sessions' default.
const (
	defaultScreenCols = 200
	defaultScreenRows = 50
)

// screenFlags are the flags of the screen source.
type screenFlags struct {
	on         bool
	cols, rows int
}

// addScreenFlags registers --screen, --cols and --rows on fs.
func addScreenFlags(fs *flag.FlagSet, sf *screenFlags) {
	fs.BoolVar(&sf.on, "screen", false, fmt.Sprintf("input is raw terminal output: render it through the screen model (%dx%d unless --cols/--rows)", defaultScreenCols, defaultScreenRows))
	fs.IntVar(&sf.cols, "cols", 0, fmt.Sprintf("screen columns (implies --screen; default %d)", defaultScreenCols))
	fs.IntVar(&sf.rows, "rows", 0, fmt.Sprintf("screen rows (implies --screen; default %d)", defaultScreenRows))
}

// source returns the screen source when the flags ask for it.
func (sf screenFlags) source() (lineSource, bool, error) {
	if !sf.on && sf.cols == 0 && sf.rows == 0 {
		return nil, false, nil
	}
	if sf.cols < 0 || sf.rows < 0 || sf.cols > screen.MaxCols || sf.rows > screen.MaxRows {
		return nil, false, fmt.Errorf("screen size %dx%d out of range (at most %dx%d)", sf.cols, sf.rows, screen.MaxCols, screen.MaxRows)
	}
	src := screenSource{cols: defaultScreenCols, rows: defaultScreenRows}
	if sf.cols > 0 {
		src.cols = sf.cols
	}
	if sf.rows > 0 {
		src.rows = sf.rows
	}
	return src, true, nil
}

// screenSource renders terminal output through session/screen.
type screenSource struct{ cols, rows int }

func (s screenSource) read(ctx context.Context, r io.Reader, line func(string), turnEnd func()) error {
	scr := screen.New(s.cols, s.rows)
	buf := make([]byte, 32<<10)
	final := func() {
		for _, l := range scr.TakeScrolled() {
			line(l)
		}
		rows := scr.Lines()
		for len(rows) > 0 && rows[len(rows)-1] == "" {
			rows = rows[:len(rows)-1]
		}
		for _, l := range rows {
			line(l)
		}
		turnEnd()
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := r.Read(buf)
		if n > 0 {
			scr.Write(buf[:n])
			// Scrolled-off rows are final: pass them on as they come.
			for _, l := range scr.TakeScrolled() {
				line(l)
			}
		}
		if err == io.EOF {
			final()
			return nil
		}
		if err != nil {
			final()
			return fmt.Errorf("read: %w", err)
		}
	}
}
