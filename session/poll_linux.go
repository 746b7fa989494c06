package session

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// No thread per agent (issue 17): a blocking read of the PTY and a
// blocking wait for the process would each hold an OS thread for the life
// of the session, and Go stops the server at 10,000 threads (about 5,000
// sessions). Here both go through the runtime's poller: the PTY master is
// made non-blocking (creack/pty hands it back blocking: its ioctls use
// Fd), and the process's exit is awaited on a pidfd, which becomes readable
// when the process ends. The goroutines park; no thread waits.

// pollablePTY returns f as a non-blocking file registered with the
// runtime's poller (a duplicate: f is closed). On failure f is returned as
// it was.
func pollablePTY(f *os.File) *os.File {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return f
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return f
	}
	// NewFile registers a non-blocking descriptor with the poller.
	nf := os.NewFile(uintptr(fd), f.Name())
	f.Close()
	return nf
}

// setWinsize sets the terminal size of the PTY master f without taking
// it out of non-blocking mode (pty.Setsize would, through Fd).
func setWinsize(f *os.File, cols, rows int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)})
	}); err != nil {
		return err
	}
	return ierr
}

// awaitExit returns once process pid has exited (it is not reaped: the
// caller's Wait does that, at once), parked on the poller through a pidfd.
// It returns an error when pidfds are not available; the caller's Wait
// then blocks a thread as before.
func awaitExit(pid int) error {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		// Readable once the process has exited. The poller is
		// edge-triggered: look first, then wait for the edge.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		if err != nil && !errors.Is(err, unix.EINTR) {
			perr = err
			return true
		}
		return n > 0
	})
	if err != nil {
		return err
	}
	return perr
}
