//go:build !linux

package session

import "os"

// openTTY: the input queue is read on Linux only (inputq_linux.go);
// elsewhere the session has no signal and falls back to its bounds.
func openTTY(*os.File) int { return -1 }

func closeTTY(int) {}

func inputQueue(int) (queued int, canonical, ok bool) { return 0, false, false }
