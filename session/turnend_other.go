//go:build !linux

package session

import "os"

// readingTerminal: Linux only (it reads /proc); elsewhere the quiescence
// rule alone ends a turn.
func readingTerminal(*os.File) bool { return false }

// inTerminalRead: Linux only, as readingTerminal.
func inTerminalRead(*os.File) bool { return false }
