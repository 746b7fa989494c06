package session

import (
	"fmt"
	"path/filepath"
	"strings"
)

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func trimRight(s string) string { return strings.TrimRight(s, " ") }

func trimNewlines(s string) string { return strings.Trim(s, "\n") }

func containsNewline(s string) bool { return strings.IndexByte(s, '\n') >= 0 }

func replaceNewlines(s, with string) string { return strings.ReplaceAll(s, "\n", with) }

func absDir(d string) (string, error) {
	a, err := filepath.Abs(d)
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	return a, nil
}
