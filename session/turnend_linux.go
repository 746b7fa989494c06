package session

import (
	"bytes"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// readSyscalls are the numbers of read and readv on this machine's
// architecture (nil: not known here, no signal).
var readSyscalls = map[string][]int{
	"amd64": {0, 19},
	"arm64": {63, 65},
}[runtime.GOARCH]

// maxProbeThreads bounds the threads readingTerminal looks at: a program
// with more is not checked (the quiescence rule decides).
const maxProbeThreads = 64

// readingTerminal reports whether the agent is asleep waiting for a line
// from its terminal: the leader of the terminal's foreground process group
// (under the keeper too: it execs the agent in its own place) has every
// thread asleep (state S) and one of them in a read of this terminal
// (/proc/PID/task/TID/syscall: read or readv on a descriptor that is the
// terminal). Any doubt (an error, an unknown architecture, another user's
// process) is false.
func readingTerminal(ptmx *os.File) bool { return terminalRead(ptmx, true) }

// inTerminalRead reports whether a thread of the agent (the leader of the
// terminal's foreground process group) is asleep in a read of this
// terminal, whatever its other threads do: the program came back for more
// input. Any doubt is false.
func inTerminalRead(ptmx *os.File) bool { return terminalRead(ptmx, false) }

// terminalRead is readingTerminal (allAsleep) or inTerminalRead.
func terminalRead(ptmx *os.File, allAsleep bool) bool {
	if len(readSyscalls) == 0 {
		return false
	}
	raw, err := ptmx.SyscallConn()
	if err != nil {
		return false
	}
	pgrp, ptn := -1, -1
	_ = raw.Control(func(fd uintptr) {
		if g, err := unix.IoctlGetInt(int(fd), unix.TIOCGPGRP); err == nil {
			pgrp = g
		}
		if n, err := unix.IoctlGetUint32(int(fd), unix.TIOCGPTN); err == nil {
			ptn = int(n)
		}
	})
	if pgrp <= 0 || ptn < 0 {
		return false
	}
	return threadsReading(pgrp, "/dev/pts/"+strconv.Itoa(ptn), allAsleep)
}

// threadsReading reports whether one thread of pid sleeps in a read of the
// terminal pts, and (allAsleep) every other thread sleeps too.
func threadsReading(pid int, pts string, allAsleep bool) bool {
	proc := "/proc/" + strconv.Itoa(pid)
	tids, err := os.ReadDir(proc + "/task")
	if err != nil || len(tids) == 0 || len(tids) > maxProbeThreads {
		return false
	}
	reading := false
	for _, t := range tids {
		task := proc + "/task/" + t.Name()
		st, err := os.ReadFile(task + "/stat")
		if err != nil {
			return false
		}
		i := bytes.LastIndexByte(st, ')') // the name may hold spaces and ')'
		asleep := i >= 0 && i+2 < len(st) && st[i+2] == 'S'
		if !asleep && allAsleep {
			return false
		}
		if asleep && !reading {
			reading = readsTerminal(proc, task, pts)
		}
		if reading && !allAsleep {
			return true
		}
	}
	return reading
}

// readsTerminal reports whether the thread task (of the process proc) is
// in a read or readv of a descriptor that is the terminal pts.
func readsTerminal(proc, task, pts string) bool {
	b, err := os.ReadFile(task + "/syscall")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return false // "running"
	}
	nr, err := strconv.Atoi(f[0])
	if err != nil || !slices.Contains(readSyscalls, nr) {
		return false
	}
	fd, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 31)
	if err != nil {
		return false
	}
	link, err := os.Readlink(proc + "/fd/" + strconv.FormatUint(fd, 10))
	return err == nil && link == pts
}
