package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/office-server/office-server/office"
)

// TestPTYLimitReported: when the kernel has no pseudo-terminal left
// (opening /dev/ptmx fails with ENOSPC; injected here, the machine's PTYs
// are not used up), the agent's start fails with ErrNoPTY saying which
// limit and how many are in use, its status is failed with that reason as
// its detail, and the agents started before and after it run on.
func TestPTYLimitReported(t *testing.T) {
	checkGoroutines(t)
	var mu sync.Mutex
	var failed []Info
	r := newRecorder()
	o := r.opts(Options{})
	onStatus := o.OnStatus
	o.OnStatus = func(k Key, st Status, info Info) {
		if st == office.SessionFailed {
			mu.Lock()
			failed = append(failed, info)
			mu.Unlock()
		}
		onStatus(k, st, info)
	}
	o.EnterDelay, o.StopGrace = 20*time.Millisecond, 500*time.Millisecond
	m := NewManager(o)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close manager: %v", err)
		}
	})
	m.startPTY = func(cmd *exec.Cmd, ws *pty.Winsize) (*os.File, error) {
		if slices.Contains(cmd.Env, "NO_PTY_LEFT=1") {
			return nil, &os.PathError{Op: "open", Path: "/dev/ptmx", Err: syscall.ENOSPC}
		}
		return pty.StartWithSize(cmd, ws)
	}
	ctx := context.Background()
	spec := Spec{Kind: KindCommand, Command: script(t, replAgent), PromptPattern: `^>$`, Quiescence: 100 * time.Millisecond, Cols: 80, Rows: 10}
	a, err := m.Start(ctx, Key{"o", "a"}, spec)
	if err != nil {
		t.Fatal(err)
	}
	full := spec
	full.Env = []string{"NO_PTY_LEFT=1"}
	_, err = m.Start(ctx, Key{"o", "b"}, full)
	max := readProcInt(ptyMaxFile)
	if !errors.Is(err, ErrNoPTY) || !strings.Contains(err.Error(), fmt.Sprintf("the kernel's limit is %d (/proc/sys/kernel/pty/max)", max)) || !strings.Contains(err.Error(), "in use (/proc/sys/kernel/pty/nr)") {
		t.Errorf("start with no PTY left: %v; want ErrNoPTY with the kernel's limit (%d) and the count in use", err, max)
	}
	t.Logf("%v", err)
	mu.Lock()
	if len(failed) != 1 || !strings.HasPrefix(failed[0].Detail, "no pseudo-terminal left: the kernel's limit is") || failed[0].Err != failed[0].Detail {
		t.Errorf("failed statuses %+v, want one, with the reason as Detail and Err", failed)
	}
	mu.Unlock()
	if _, ok := m.Get(Key{"o", "b"}); ok {
		t.Error("the session that could not start is listed")
	}
	c, err := m.Start(ctx, Key{"o", "c"}, spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Session{a, c} {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := s.Send(sctx, "still here")
		cancel()
		if err != nil {
			t.Errorf("%s: %v", s.Key().AgentID, err)
		}
	}
	r.waitFor(t, "both answer", 10*time.Second, func(_ []Status, ts []Text) bool {
		n := 0
		for _, tx := range ts {
			for _, l := range tx.Lines {
				if l == "got: still here" {
					n++
				}
			}
		}
		return n == 2
	})
}

// TestPTYLimitText: the reason names the limit that was reached.
func TestPTYLimitText(t *testing.T) {
	for _, tc := range []struct {
		max, nr, reserve, mountMax int
		want                       string
	}{
		{4096, 4096, 0, -1, "no pseudo-terminal left: the kernel's limit is 4096 (/proc/sys/kernel/pty/max), 4096 in use (/proc/sys/kernel/pty/nr). Stop agents or raise the limit (sysctl kernel.pty.max)"},
		{4096, 3072, 1024, -1, "no pseudo-terminal left: the kernel's limit is 4096 (/proc/sys/kernel/pty/max), 3072 in use (/proc/sys/kernel/pty/nr), and a /dev/pts other than the host's own (a container's) gets 1024 fewer: 3072 (/proc/sys/kernel/pty/reserve). Stop agents or raise the limit (sysctl kernel.pty.max)"},
		{4096, 10, 0, 10, "no pseudo-terminal left: the kernel's limit is 4096 (/proc/sys/kernel/pty/max), 10 in use (/proc/sys/kernel/pty/nr); this /dev/pts allows 10 (its mount option max=). Stop agents or raise the limit (sysctl kernel.pty.max)"},
		{-1, -1, -1, -1, "no pseudo-terminal left (opening /dev/ptmx: no space left on device)"},
	} {
		if got := ptyLimitText(tc.max, tc.nr, tc.reserve, tc.mountMax); got != tc.want {
			t.Errorf("ptyLimitText(%d, %d, %d, %d):\n got %s\nwant %s", tc.max, tc.nr, tc.reserve, tc.mountMax, got, tc.want)
		}
	}
}

// TestProcessLimitReported: fork's EAGAIN (no process or thread left) is
// ErrNoProcess saying which limits apply, not ErrNoPTY; other errors stay
// as they are.
func TestProcessLimitReported(t *testing.T) {
	fork := &os.SyscallError{Syscall: "fork/exec", Err: syscall.EAGAIN}
	err := ptyError(fork)
	if !errors.Is(err, ErrNoProcess) || errors.Is(err, ErrNoPTY) || !errors.Is(err, syscall.EAGAIN) {
		t.Errorf("ptyError(EAGAIN) = %v: want ErrNoProcess (and EAGAIN), not ErrNoPTY", err)
	}
	if got, want := procLimitText(32768, 192730, 96365), "no process left (fork: resource temporarily unavailable): the system's processes and threads have reached a limit; every thread takes a pid below 32768 (/proc/sys/kernel/pid_max); at most 192730 threads (/proc/sys/kernel/threads-max); this user may run 96365 (ulimit -u). Each agent takes as many as its own program (the server adds none per agent). Stop agents or raise the limit (sysctl kernel.pid_max, ulimit -u)"; got != want {
		t.Errorf("procLimitText:\n got %s\nwant %s", got, want)
	}
	if other := errors.New("exec: not found"); ptyError(other) != other {
		t.Errorf("ptyError changed an unrelated error")
	}
}
