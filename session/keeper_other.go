//go:build !linux

package session

import (
	"fmt"
	"io"
)

// RunKeeper is Linux only (it needs a child subreaper); elsewhere the
// server does not use a keeper (see KeeperSupported).
func RunKeeper(args []string, stderr io.Writer) int {
	fmt.Fprintln(stderr, "keeper: not supported on this system")
	return 127
}

// KeeperSupported reports whether RunKeeper works here.
const KeeperSupported = false
