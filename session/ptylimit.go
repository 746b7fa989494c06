package session

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ErrNoPTY: the kernel has no pseudo-terminal left for the agent (opening
// /dev/ptmx failed with ENOSPC). Every agent runs in a terminal of its
// own, so the kernel's PTY count bounds how many run at once; the other
// agents are not concerned.
var ErrNoPTY = errors.New("no pseudo-terminal left")

// limitError is ErrNoPTY or ErrNoProcess (kind) with the figures that
// explain it.
type limitError struct {
	msg  string
	kind error
	err  error // the open's or the fork's own error
}

func (e *limitError) Error() string   { return e.msg }
func (e *limitError) Unwrap() []error { return []error{e.kind, e.err} }

// The kernel's PTY figures (Documentation/filesystems/devpts.rst): max
// is the limit for the whole system, nr how many are in use; a /dev/pts
// other than the host's own (a container's) may use max minus reserve.
const (
	ptyMaxFile     = "/proc/sys/kernel/pty/max"
	ptyNrFile      = "/proc/sys/kernel/pty/nr"
	ptyReserveFile = "/proc/sys/kernel/pty/reserve"
)

// ErrNoProcess: the system could not make the agent's process (fork
// failed with EAGAIN): a limit on processes or threads was reached.
var ErrNoProcess = errors.New("no process left")

// ptyError returns err, from opening a PTY and starting the agent in it,
// as ErrNoPTY saying which limit was reached when it is the kernel's "no
// space" (ENOSPC), as ErrNoProcess when fork found no process left
// (EAGAIN); other errors as they are.
func ptyError(err error) error {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return &limitError{msg: ptyLimitText(readProcInt(ptyMaxFile), readProcInt(ptyNrFile), readProcInt(ptyReserveFile), devptsMax()), kind: ErrNoPTY, err: err}
	case errors.Is(err, syscall.EAGAIN):
		var lim syscall.Rlimit
		nproc := -1
		if syscall.Getrlimit(rlimitNproc, &lim) == nil && lim.Cur < 1<<31 {
			nproc = int(lim.Cur)
		}
		return &limitError{msg: procLimitText(readProcInt(pidMaxFile), readProcInt(threadsMaxFile), nproc), kind: ErrNoProcess, err: err}
	}
	return err
}

// The kernel's process figures: every thread takes a pid below pid_max.
const (
	pidMaxFile     = "/proc/sys/kernel/pid_max"
	threadsMaxFile = "/proc/sys/kernel/threads-max"
	rlimitNproc    = 6 // RLIMIT_NPROC (asm-generic/resource.h)
)

// procLimitText says which limits may have left no process for the agent
// (a figure below 0 is unknown).
func procLimitText(pidMax, threadsMax, nproc int) string {
	var b strings.Builder
	b.WriteString(ErrNoProcess.Error())
	b.WriteString(" (fork: resource temporarily unavailable): the system's processes and threads have reached a limit")
	if pidMax >= 0 {
		fmt.Fprintf(&b, "; every thread takes a pid below %d (%s)", pidMax, pidMaxFile)
	}
	if threadsMax >= 0 {
		fmt.Fprintf(&b, "; at most %d threads (%s)", threadsMax, threadsMaxFile)
	}
	if nproc >= 0 {
		fmt.Fprintf(&b, "; this user may run %d (ulimit -u)", nproc)
	}
	b.WriteString(". Each agent takes as many as its own program (the server adds none per agent). Stop agents or raise the limit (sysctl kernel.pid_max, ulimit -u)")
	return b.String()
}

// ptyLimitText says which limit left no PTY: the kernel's (max, with nr in
// use; reserve of them kept for the host's /dev/pts) or the /dev/pts
// mount's own max= option (mountMax). A figure below 0 is unknown.
func ptyLimitText(max, nr, reserve, mountMax int) string {
	var b strings.Builder
	b.WriteString(ErrNoPTY.Error())
	if max < 0 {
		b.WriteString(" (opening /dev/ptmx: no space left on device)")
		return b.String()
	}
	fmt.Fprintf(&b, ": the kernel's limit is %d (%s)", max, ptyMaxFile)
	if nr >= 0 {
		fmt.Fprintf(&b, ", %d in use (%s)", nr, ptyNrFile)
	}
	if reserve > 0 {
		fmt.Fprintf(&b, ", and a /dev/pts other than the host's own (a container's) gets %d fewer: %d (%s)", reserve, max-reserve, ptyReserveFile)
	}
	if mountMax >= 0 {
		fmt.Fprintf(&b, "; this /dev/pts allows %d (its mount option max=)", mountMax)
	}
	b.WriteString(". Stop agents or raise the limit (sysctl kernel.pty.max)")
	return b.String()
}

// readProcInt reads a number from a /proc file, or -1.
func readProcInt(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
}

// devptsMax returns the max= option of the devpts mounted on /dev/pts
// last, or -1.
func devptsMax() int {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return -1
	}
	n := -1
	for _, line := range strings.Split(string(b), "\n") {
		// id parent dev root mountpoint options… - fstype source superoptions
		f := strings.Fields(line)
		_, super, ok := strings.Cut(line, " - devpts ")
		if len(f) < 5 || f[4] != "/dev/pts" || !ok {
			continue
		}
		n = -1
		if sf := strings.Fields(super); len(sf) == 2 {
			for _, o := range strings.Split(sf[1], ",") {
				if v, ok := strings.CutPrefix(o, "max="); ok {
					n, _ = strconv.Atoi(v)
				}
			}
		}
	}
	return n
}
