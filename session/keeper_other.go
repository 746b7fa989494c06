//go:build !linux

package session

import (
	"fmt"
	"io"
	"log/slog"
	"os"
)

// RunKeeper is Linux only (it needs a child subreaper); elsewhere the
// server does not use a keeper (see KeeperSupported).
func RunKeeper(args []string, stderr io.Writer) int {
	fmt.Fprintln(stderr, "keeper: not supported on this system")
	return 127
}

// KeeperSupported reports whether RunKeeper works here.
const KeeperSupported = false

// reaper: without a keeper, only the bookkeeping of agents' processes.
var reaper reaperState

type reaperState struct{}

func (reaperState) enable([]string, *slog.Logger) error {
	return fmt.Errorf("not supported on this system")
}

func (reaperState) start(fork func() (int, *os.File, error)) error {
	_, _, err := fork()
	return err
}

func (reaperState) ended(int) {}

func (reaperState) sweep() {}
