package session

import (
	"encoding/binary"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// fileWatcher wakes sessions when files they follow change (Claude Code's
// transcript, the hooks' signals file), so an idle session needs no timer
// to notice them (issue 17). One inotify descriptor for the manager, read
// through the runtime's poller by one goroutine; a directory watched by
// several sessions has one watch.
type fileWatcher struct {
	f    *os.File
	fd   int
	done chan struct{}

	mu    sync.Mutex
	byWD  map[int32]map[*Session]struct{}
	byDir map[string]int32
}

const watchMask = unix.IN_MODIFY | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_CLOSE_WRITE

// newFileWatcher starts a watcher; Close ends it.
func newFileWatcher() (*fileWatcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	w := &fileWatcher{f: os.NewFile(uintptr(fd), "inotify"), fd: fd, done: make(chan struct{}),
		byWD: map[int32]map[*Session]struct{}{}, byDir: map[string]int32{}}
	go w.run()
	return w, nil
}

// watch makes changes in dir wake s, until the returned function is called.
func (w *fileWatcher) watch(s *Session, dir string) (func(), error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wd, err := unix.InotifyAddWatch(w.fd, dir, watchMask)
	if err != nil {
		return nil, err
	}
	id := int32(wd)
	w.byDir[dir] = id
	if w.byWD[id] == nil {
		w.byWD[id] = map[*Session]struct{}{}
	}
	w.byWD[id][s] = struct{}{}
	return func() { w.unwatch(s, dir, id) }, nil
}

func (w *fileWatcher) unwatch(s *Session, dir string, id int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.byWD[id]
	delete(set, s)
	if len(set) == 0 {
		delete(w.byWD, id)
		if w.byDir[dir] == id {
			delete(w.byDir, dir)
		}
		_, _ = unix.InotifyRmWatch(w.fd, uint32(id))
	}
}

// run reads events until Close and wakes the sessions watching.
func (w *fileWatcher) run() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return
		}
		var wake []*Session
		w.mu.Lock()
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			nameLen := int(binary.NativeEndian.Uint32(buf[off+12:]))
			for s := range w.byWD[wd] {
				wake = append(wake, s)
			}
			off += unix.SizeofInotifyEvent + nameLen
		}
		w.mu.Unlock()
		for _, s := range wake {
			s.poke()
		}
	}
}

// Close stops the watcher and waits for its goroutine.
func (w *fileWatcher) Close() error {
	err := w.f.Close()
	<-w.done
	return err
}
