package session

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Each session keeps its hook settings, signals file and permission socket
// in a state directory of its own, removed when the session ends. They
// live in one directory per server process, os.TempDir()/office-sessions-
// <pid>-<random> (short enough for a socket's path; made by MkdirTemp,
// 0700, so nobody else can have made it first), so that what a server
// killed with SIGKILL left behind is found: the first session of the next
// server on the machine removes the roots of this user's servers whose
// process is gone.
var stateRoot struct {
	once sync.Once
	dir  string
	err  error
}

const stateRootPrefix = "office-sessions-"

// newStateDir makes a session's state directory (0700).
func newStateDir() (string, error) {
	stateRoot.once.Do(func() {
		sweepStateRoots(os.TempDir())
		stateRoot.dir, stateRoot.err = os.MkdirTemp("", stateRootPrefix+strconv.Itoa(os.Getpid())+"-")
	})
	if stateRoot.err != nil {
		return "", fmt.Errorf("state directory: %w", stateRoot.err)
	}
	d, err := os.MkdirTemp(stateRoot.dir, "s")
	if err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	return d, nil
}

// sweepStateRoots removes, under tmp, the state roots of this user's
// servers that are no longer running. A root whose owner cannot be told
// is left alone.
func sweepStateRoots(tmp string) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, ok := rootPID(e.Name())
		if !ok || pid == os.Getpid() || !e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		if st, isUnix := info.Sys().(*syscall.Stat_t); !isUnix || int(st.Uid) != os.Getuid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.RemoveAll(filepath.Join(tmp, e.Name()))
		}
	}
}

// rootPID returns the process id in a state root's name,
// office-sessions-<pid>-<random>.
func rootPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, stateRootPrefix)
	digits, _, cut := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(digits)
	return pid, ok && cut && err == nil && pid > 0
}
