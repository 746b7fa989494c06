//go:build linux

package sqlite

import (
	"encoding/binary"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// fileChanges reports writes to the database's files (the WAL above all,
// where every commit of every process lands) through inotify, so that a
// commit by another process is noticed at once instead of at the next
// poll. It returns nil when inotify is not available (the poll remains).
// The channel gets a value, coalesced, whenever one of the files changed;
// it is closed once stop is closed and the watch is released. It sleeps in
// poll(2) until an event or stop: nothing runs while nothing happens.
func fileChanges(path string, stop <-chan struct{}) <-chan struct{} {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil
	}
	// The directory, not the files: the WAL is created and removed as the
	// database is opened and checkpointed by any process.
	if _, err := unix.InotifyAddWatch(fd, filepath.Dir(path), unix.IN_MODIFY|unix.IN_CLOSE_WRITE|unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		unix.Close(fd)
		return nil
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(fd)
		return nil
	}
	go func() {
		<-stop
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1)
		_, _ = unix.Write(efd, one[:])
	}()
	out := make(chan struct{}, 1)
	base := filepath.Base(path)
	go func() {
		defer close(out)
		defer unix.Close(efd)
		defer unix.Close(fd)
		buf := make([]byte, 16<<10)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(efd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
				return
			}
			if fds[1].Revents != 0 {
				return // stop
			}
			k, err := unix.Read(fd, buf)
			if err != nil || k <= 0 {
				continue
			}
			if mentions(buf[:k], base) {
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out
}

// mentions reports whether a batch of inotify events (struct inotify_event:
// wd, mask, cookie, len, then len bytes of NUL-padded name) names one of the
// database's files (base, base-wal, base-journal).
func mentions(b []byte, base string) bool {
	for len(b) >= unix.SizeofInotifyEvent {
		n := int(binary.NativeEndian.Uint32(b[12:16]))
		end := unix.SizeofInotifyEvent + n
		if end > len(b) {
			return false
		}
		name := b[unix.SizeofInotifyEvent:end]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		if s := string(name); s == base || s == base+"-wal" || s == base+"-journal" {
			return true
		}
		b = b[end:]
	}
	return false
}
