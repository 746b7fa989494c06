package session

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// KeeperSupported reports whether RunKeeper works here.
const KeeperSupported = true

// RunKeeper is the keeper's main (see keep): `keeper [--grace D] -- command
// args...`. It runs command as its child in its own process group (the
// terminal's foreground group: the keeper is started as the session leader
// of the agent's terminal, so the agent reads the terminal as before), is a
// child subreaper, and returns the
// exit code to exit with once the whole tree has ended:
//   - the agent exits: every descendant left (a daemon it started, a
//     setsid'd grandchild) is killed; the keeper exits as the agent did;
//   - SIGTERM or SIGHUP (the session stops it): passed on to the agent;
//     after the grace period the whole tree is killed;
//   - the server's life pipe (descriptor 3) ends (the server died, even by
//     SIGKILL): SIGTERM to the tree, SIGKILL after the grace period.
//
// With --uid (and --gid, --groups) the command runs as that user while the
// keeper stays the server's, out of the agent's reach. With --gomaxprocs it
// gets that GOMAXPROCS ("unset": none) instead of the keeper's.
//
// stderr gets the reason when the command cannot start (exit code 127).
func RunKeeper(args []string, stderr io.Writer) int {
	k, code := parseKeeper(args, stderr)
	if k == nil {
		return code
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		fmt.Fprintf(stderr, "keeper: child subreaper: %v\n", errno)
		return 127
	}
	serverGone := watchLife()
	// Caught, not ignored: an ignored signal would stay ignored in the
	// agent. SIGCHLD has a channel of its own: one pending notice is
	// enough (every round reaps all that ended), and a burst of them
	// cannot crowd out a SIGTERM.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTSTP)
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	if err := k.cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "keeper: %v\n", err)
		return 127
	}
	status := k.supervise(sigs, chld, serverGone)
	killTree()
	switch {
	case status.Exited():
		return status.ExitStatus()
	case status.Signaled():
		// Die as the agent did, so the session sees the same end.
		sig := status.Signal()
		signal.Reset(sig)
		_ = syscall.Kill(os.Getpid(), sig)
		time.Sleep(100 * time.Millisecond)
		return 128 + int(sig)
	}
	return 1
}

// keeper is one run of the keeper: the agent's command and the grace
// period.
type keeper struct {
	cmd   *exec.Cmd
	grace time.Duration
}

// parseKeeper reads the keeper's command line; on a bad one it returns nil
// and the exit code.
func parseKeeper(args []string, stderr io.Writer) (*keeper, int) {
	fs := flag.NewFlagSet("keeper", flag.ContinueOnError)
	fs.SetOutput(stderr)
	grace := fs.Duration("grace", 3*time.Second, "time between SIGTERM and SIGKILL")
	uid := fs.Int("uid", -1, "run the command as this user id")
	gid := fs.Int("gid", -1, "with this group id")
	groups := fs.String("groups", "", "and these supplementary group ids, comma-separated")
	procs := fs.String("gomaxprocs", "", `the command's GOMAXPROCS ("`+keeperUnset+`": none), when the keeper's own is not for it`)
	if err := fs.Parse(args); err != nil {
		return nil, 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "keeper: no command")
		return nil, 2
	}
	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	switch *procs {
	case "":
	case keeperUnset:
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") })
	default:
		cmd.Env = setEnv(os.Environ(), "GOMAXPROCS", *procs)
	}
	// A keeper killed outright (SIGKILL) cannot end the tree: the agent
	// at least goes with it, rather than running on beside the session's
	// next process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if *uid >= 0 {
		cred := &syscall.Credential{Uid: uint32(*uid), Gid: uint32(*gid)}
		for _, g := range strings.Split(*groups, ",") {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				cred.Groups = append(cred.Groups, uint32(n))
			}
		}
		cmd.SysProcAttr.Credential = cred
	}
	return &keeper{cmd: cmd, grace: *grace}, 0
}

// watchLife returns a channel closed when the server's life pipe
// (descriptor 3) ends. Descriptor 3 is that pipe only when it is a pipe
// (the keeper run by hand has none; then only the agent's end ends it, and
// the channel is nil).
func watchLife() <-chan struct{} {
	var st syscall.Stat_t
	if err := syscall.Fstat(keeperFD, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return nil
	}
	life := os.NewFile(keeperFD, "server-life")
	syscall.CloseOnExec(keeperFD) // the agent does not get it
	gone := make(chan struct{})
	go func() {
		var b [1]byte
		for {
			if _, err := life.Read(b[:]); err != nil {
				close(gone)
				return
			}
		}
	}()
	return gone
}

// supervise waits for the agent's end, passing the session's signals on
// and ending the tree after the grace period once asked to (or once the
// server is gone). Nothing wakes it while nothing happens.
func (k *keeper) supervise(sigs, chld <-chan os.Signal, serverGone <-chan struct{}) syscall.WaitStatus {
	child := k.cmd.Process.Pid
	var status syscall.WaitStatus
	exited := false
	var killAt <-chan time.Time
	for !exited {
		select {
		case <-chld:
			exited, status = reapChildren(child, exited, status)
		case sig := <-sigs:
			switch sig {
			case syscall.SIGTERM, syscall.SIGHUP:
				_ = syscall.Kill(child, sig.(syscall.Signal))
				if killAt == nil {
					killAt = time.After(k.grace)
				}
			}
			// SIGINT, SIGQUIT, SIGTSTP: the terminal sent them to the
			// whole foreground group, the agent included.
		case <-serverGone:
			serverGone = nil
			signalTree(syscall.SIGTERM)
			if killAt == nil {
				killAt = time.After(k.grace)
			}
		case <-killAt:
			killTree()
		}
	}
	return status
}

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER (linux/prctl.h).
const prSetChildSubreaper = 36

// reapChildren reaps every child that ended (the agent, and orphans that
// were reparented to the keeper) and reports the agent's status once it
// ended.
func reapChildren(child int, exited bool, status syscall.WaitStatus) (bool, syscall.WaitStatus) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return exited, status
		}
		if pid == child && (ws.Exited() || ws.Signaled()) {
			exited, status = true, ws
		}
	}
}

// signalTree sends sig to every descendant of this process.
func signalTree(sig syscall.Signal) {
	for _, pid := range descendants(os.Getpid()) {
		_ = syscall.Kill(pid, sig)
	}
}

// killTree kills every descendant with SIGKILL and reaps them, until none
// is left (a process forking meanwhile is caught by the next round; every
// orphan is reparented to the keeper, a subreaper, so none can escape the
// walk), for at most five seconds.
func killTree() {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		pids := descendants(os.Getpid())
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// descendants lists the processes below root, from /proc (zombies aside:
// they are dead and only wait to be reaped).
func descendants(root int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, state, err := procStat(pid)
		if err != nil || state == 'Z' {
			continue
		}
		children[ppid] = append(children[ppid], pid)
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// procStat reads the parent and state of pid from /proc/pid/stat.
func procStat(pid int) (ppid int, state byte, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces and ')'
	if i < 0 || i+4 > len(s) {
		return 0, 0, errors.New("bad stat")
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 2 {
		return 0, 0, errors.New("bad stat")
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0][0], err
}
