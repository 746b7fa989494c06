package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/office-server/office-server/session"
	"github.com/office-server/office-server/session/screen"
)

// The screen line source of `office-server parse`: --screen, --cols N or
// --rows M read the input (raw PTY output, as recorded from an agent's
// terminal) through the same screen path the sessions use for every agent
// but Claude Code (session.ScreenReader), and parse what a person would
// see: each line that scrolled off the top, in order, then the final
// screen's lines; a line a program painted again after clearing its screen
// is read once. --turn-ends marks where the agent's turns ended (byte
// offsets): the visible rows are read there too, as a session reads them.

// Default screen size: the sessions' default.
const (
	defaultScreenCols = 200
	defaultScreenRows = 50
)

// screenFlags are the flags of the screen source.
type screenFlags struct {
	on         bool
	cols, rows int
	turnEnds   string
	resizes    string
}

// addScreenFlags registers --screen, --cols and --rows on fs.
func addScreenFlags(fs *flag.FlagSet, sf *screenFlags) {
	fs.BoolVar(&sf.on, "screen", false, fmt.Sprintf("input is raw terminal output: render it through the screen model (%dx%d unless --cols/--rows)", defaultScreenCols, defaultScreenRows))
	fs.IntVar(&sf.cols, "cols", 0, fmt.Sprintf("screen columns (implies --screen; default %d)", defaultScreenCols))
	fs.IntVar(&sf.rows, "rows", 0, fmt.Sprintf("screen rows (implies --screen; default %d)", defaultScreenRows))
	fs.StringVar(&sf.resizes, "resizes", "", "comma-separated OFFSET:COLSxROWS where the terminal was resized (implies --screen)")
	fs.StringVar(&sf.turnEnds, "turn-ends", "", "comma-separated byte offsets where the agent's turns ended (implies --screen): the screen is read there as a session reads it")
}

// source returns the screen source when the flags ask for it.
func (sf screenFlags) source() (lineSource, bool, error) {
	if !sf.on && sf.cols == 0 && sf.rows == 0 && sf.turnEnds == "" && sf.resizes == "" {
		return nil, false, nil
	}
	if sf.cols < 0 || sf.rows < 0 || sf.cols > screen.MaxCols || sf.rows > screen.MaxRows {
		return nil, false, fmt.Errorf("screen size %dx%d out of range (at most %dx%d)", sf.cols, sf.rows, screen.MaxCols, screen.MaxRows)
	}
	src := screenSource{cols: defaultScreenCols, rows: defaultScreenRows}
	last := int64(-1)
	for _, f := range strings.Split(sf.turnEnds, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n <= last {
			return nil, false, fmt.Errorf("--turn-ends: %q is not a byte offset after %d", f, max(last, 0))
		}
		src.events = append(src.events, screenEvent{off: n})
		last = n
	}
	last = -1
	for _, f := range strings.Split(sf.resizes, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		var e screenEvent
		if _, err := fmt.Sscanf(f, "%d:%dx%d", &e.off, &e.cols, &e.rows); err != nil || e.off < last || e.cols < 1 || e.rows < 1 || e.cols > screen.MaxCols || e.rows > screen.MaxRows {
			return nil, false, fmt.Errorf("--resizes: %q is not OFFSET:COLSxROWS (offsets in order, at most %dx%d)", f, screen.MaxCols, screen.MaxRows)
		}
		src.events = append(src.events, e)
		last = e.off
	}
	// In offset order; at the same offset a turn end comes before a resize.
	slices.SortStableFunc(src.events, func(a, b screenEvent) int {
		if a.off != b.off {
			return cmp.Compare(a.off, b.off)
		}
		return cmp.Compare(a.cols, b.cols)
	})
	if sf.cols > 0 {
		src.cols = sf.cols
	}
	if sf.rows > 0 {
		src.rows = sf.rows
	}
	return src, true, nil
}

// screenSource reads terminal output through session.ScreenReader.
type screenSource struct {
	cols, rows int
	events     []screenEvent
}

// screenEvent is a turn end (cols 0) or a resize at a byte offset.
type screenEvent struct {
	off        int64
	cols, rows int
}

func (s screenSource) read(ctx context.Context, r io.Reader, line func(string), turnEnd func()) error {
	sr := session.NewScreenReader(s.cols, s.rows)
	buf := make([]byte, 32<<10)
	var off int64
	evs := s.events
	lines := func(ls []string) {
		for _, l := range ls {
			line(l)
		}
	}
	final := func() {
		lines(sr.TurnEnd())
		turnEnd()
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		for len(evs) > 0 && evs[0].off <= off {
			if e := evs[0]; e.cols == 0 {
				lines(sr.TurnEnd())
				turnEnd()
			} else {
				sr.Resize(e.cols, e.rows)
			}
			evs = evs[1:]
		}
		want := len(buf)
		if len(evs) > 0 {
			want = int(min(int64(want), evs[0].off-off))
		}
		n, err := r.Read(buf[:want])
		if n > 0 {
			sr.Write(buf[:n])
			off += int64(n)
			// Scrolled-off lines are final: pass them on as they come.
			lines(sr.Lines())
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
