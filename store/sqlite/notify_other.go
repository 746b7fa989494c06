//go:build !linux

package sqlite

// fileChanges has no file notifications here: the store polls.
func fileChanges(string, <-chan struct{}) <-chan struct{} { return nil }
