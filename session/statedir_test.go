package session

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestSweepStateRoots: the state root of a server whose process is gone
// (one killed with SIGKILL leaves it) is removed with what it holds; the
// roots of running processes, and names that are not a root's
// (office-sessions-<pid>-<random>), stay.
func TestSweepStateRoots(t *testing.T) {
	tmp := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(tmp, stateRootPrefix+strconv.Itoa(gone.Process.Pid)+"-123")
	mine := filepath.Join(tmp, stateRootPrefix+strconv.Itoa(os.Getpid())+"-456")
	parent := filepath.Join(tmp, stateRootPrefix+strconv.Itoa(os.Getppid())+"-789")
	other := filepath.Join(tmp, stateRootPrefix+"x1-1")
	noRandom := filepath.Join(tmp, stateRootPrefix+strconv.Itoa(gone.Process.Pid))
	for _, d := range []string{filepath.Join(dead, "s123"), mine, parent, other, noRandom} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dead, "s123", "signals"), []byte("stop\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sweepStateRoots(tmp)
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the root of a process gone is still there (%v)", err)
	}
	for _, d := range []string{mine, parent, other, noRandom} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: %v, want it kept", filepath.Base(d), err)
		}
	}
}
