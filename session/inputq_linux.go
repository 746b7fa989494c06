package session

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// The terminal's input queue (DESIGN.md §3c): bytes written to the PTY
// master that the program has not read yet wait in the line discipline of
// the terminal's slave side, and TIOCINQ (FIONREAD) on a descriptor of the
// slave returns their count. In canonical mode it counts only complete
// lines (a line without its Enter reads 0): the line discipline holds it.
//
// A write to the master reaches the line discipline through the tty's
// flip buffer, moved by a kernel work item: right after the write TIOCINQ
// reads 0 (measured: 4,980 times in 5,000 for two bytes written to a
// program that reads nothing). poll(2) on the slave runs that work first
// when no input is available (n_tty_poll calls tty_buffer_flush_work,
// drivers/tty/n_tty.c), so a zero-timeout poll before the ioctl makes the
// count exact (0 times in 5,000).

// openTTY opens the slave side of the PTY master ptmx, for the input
// queue's ioctls only (never read or written; O_NOCTTY). -1 when it cannot:
// the session then has no signal and falls back to its bounds.
func openTTY(ptmx *os.File) int {
	raw, err := ptmx.SyscallConn()
	if err != nil {
		return -1
	}
	ptn := -1
	_ = raw.Control(func(fd uintptr) {
		if n, err := unix.IoctlGetUint32(int(fd), unix.TIOCGPTN); err == nil {
			ptn = int(n)
		}
	})
	if ptn < 0 {
		return -1
	}
	fd, err := unix.Open("/dev/pts/"+strconv.Itoa(ptn), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1
	}
	return fd
}

// closeTTY closes a descriptor openTTY returned (-1: nothing).
func closeTTY(fd int) {
	if fd >= 0 {
		_ = unix.Close(fd)
	}
}

// inputQueue returns how many bytes written to the terminal tty (an
// openTTY descriptor) the program has not read yet, and whether the
// terminal is in canonical mode. ok is false when there is no answer.
func inputQueue(tty int) (queued int, canonical, ok bool) {
	if tty < 0 {
		return 0, false, false
	}
	t, err := unix.IoctlGetTermios(tty, unix.TCGETS)
	if err != nil {
		return 0, false, false
	}
	// Move what the master wrote into the line discipline first (see
	// above); POLLIN set means input is waiting anyway.
	fds := []unix.PollFd{{Fd: int32(tty), Events: unix.POLLIN}}
	if _, err := unix.Poll(fds, 0); err != nil {
		return 0, false, false
	}
	n, err := unix.IoctlGetInt(tty, unix.TIOCINQ)
	if err != nil {
		return 0, false, false
	}
	return n, t.Lflag&unix.ICANON != 0, true
}
