package session

import (
	"os"
	"path/filepath"
	"slices"
	"time"
)

// dirWatch has a session woken when the directories holding the files its
// driver reads change (a transcript, a hooks' signals file), so that an
// idle session needs no timer to notice them (issue 17). A directory not
// made yet is stood in for by its nearest existing ancestor: its creation
// wakes the session, whose next follow watches deeper. Worker-owned.
type dirWatch struct {
	want  []string // the directories asked for
	at    []string // what is watched for each: the directory or an ancestor
	stops []func()
	ok    bool // every directory asked for is watched
}

// follow has s woken by changes in dirs (replacing what was followed
// before) and reports whether they are all watched; false where files
// cannot be watched, or when a watch failed (the session then polls).
// Call it before reading the files: whatever changed before the watches
// were in place is read then.
func (w *dirWatch) follow(s *Session, dirs ...string) bool {
	fw := s.m.fileWatcher()
	if fw == nil {
		return false
	}
	for range 8 { // a directory made meanwhile is watched on the next round
		at := make([]string, len(dirs))
		for i, d := range dirs {
			at[i] = existingDir(d)
		}
		if w.ok && slices.Equal(w.want, dirs) && slices.Equal(w.at, at) {
			return true
		}
		w.stop()
		w.want, w.at = slices.Clone(dirs), at
		for _, d := range slices.Compact(slices.Sorted(slices.Values(at))) {
			stop, err := fw.watch(s, d)
			if err != nil {
				s.log.Warn("files are polled: cannot watch", "dir", d, "err", err)
				w.stop()
				return false
			}
			w.stops = append(w.stops, stop)
		}
		w.ok = true
	}
	return w.ok
}

// stop ends the watches.
func (w *dirWatch) stop() {
	for _, f := range w.stops {
		f()
	}
	w.stops, w.want, w.at, w.ok = nil, nil, nil, false
}

// existingDir returns dir, or its nearest ancestor that exists.
func existingDir(dir string) string {
	for {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return dir
		}
		dir = up
	}
}

// untilDue returns how long until at, at least a millisecond: the worker's
// timer for something due at a known time (0 means no timer).
func untilDue(now, at time.Time) time.Duration {
	return max(at.Sub(now), time.Millisecond)
}
