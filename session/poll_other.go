//go:build !linux

package session

import (
	"errors"
	"os"

	"github.com/creack/pty"
)

func pollablePTY(f *os.File) *os.File { return f }

func setWinsize(f *os.File, cols, rows int) error {
	return pty.Setsize(f, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
}

func awaitExit(int) error { return errors.New("not supported") }
