//go:build !linux

package session

import "errors"

// fileWatcher is Linux only; elsewhere idle Claude Code sessions poll.
type fileWatcher struct{}

func newFileWatcher() (*fileWatcher, error) { return nil, errors.New("not supported") }

func (w *fileWatcher) watch(*Session, string) (func(), error) {
	return nil, errors.New("not supported")
}

func (w *fileWatcher) Close() error { return nil }
