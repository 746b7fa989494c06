package session

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// KeeperSupported reports whether RunKeeper works here.
const KeeperSupported = true

// RunKeeper is the keeper's main (see keep), in one of two modes:
//   - `exec [--uid U --gid G --groups g,h] -- command args...`: become a
//     child subreaper (and user U) and exec the command in this process's
//     place (exit code 127 and the reason on stderr when it cannot be run);
//   - `watch`: read agents from the socket on stdin, one message each:
//     "+PID START" with the agent's terminal master attached when one
//     starts, "-PID" when it has ended (START: its start time,
//     /proc/PID/stat field 22, so a reused pid is not taken for it); at
//     the socket's end (the server is gone) stop and kill every listed
//     agent's tree. Terminal and termination signals are ignored: the
//     watchdog ends when its work is done.
func RunKeeper(args []string, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case keeperExec:
			return keeperRunExec(args[1:], stderr)
		case keeperWatch:
			return keeperRunWatch(0)
		}
	}
	fmt.Fprintln(stderr, "keeper: usage: keeper exec -- command args... | keeper watch")
	return 2
}

// watchdogStall is how long a message to the watchdog may wait.
var watchdogStall = 5 * time.Second

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER (linux/prctl.h).
const prSetChildSubreaper = 36

func keeperRunExec(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("keeper exec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	uid := fs.Int("uid", -1, "run the command as this user id")
	gid := fs.Int("gid", -1, "with this group id")
	groups := fs.String("groups", "", "and these supplementary group ids, comma-separated")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "keeper: usage: keeper exec [--uid U --gid G --groups g,h] -- command args...")
		return 2
	}
	if err := setSubreaper(); err != nil {
		fmt.Fprintf(stderr, "keeper: %v\n", err)
		return 127
	}
	if *uid >= 0 {
		var gs []int
		for _, g := range strings.Split(*groups, ",") {
			if n, err := strconv.Atoi(g); err == nil {
				gs = append(gs, n)
			}
		}
		// The subreaper flag stays through the change of user (and exec).
		if err := becomeUser(*uid, *gid, gs); err != nil {
			fmt.Fprintf(stderr, "keeper: become user %d: %v\n", *uid, err)
			return 127
		}
	}
	err := syscall.Exec(fs.Arg(0), fs.Args(), os.Environ())
	fmt.Fprintf(stderr, "keeper: exec %s: %v\n", fs.Arg(0), err)
	return 127
}

// becomeUser changes this process's groups and user, as exec.Cmd's
// Credential does for a child.
func becomeUser(uid, gid int, groups []int) error {
	if err := syscall.Setgroups(groups); err != nil {
		return err
	}
	if err := syscall.Setgid(gid); err != nil {
		return err
	}
	return syscall.Setuid(uid)
}

func setSubreaper() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return fmt.Errorf("child subreaper: %w", errno)
	}
	return nil
}

func keeperRunWatch(sock int) int {
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE)
	type watched struct {
		start  uint64
		master int // the agent's terminal, held open
	}
	agents := map[int]watched{}
	buf := make([]byte, 64)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(sock, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			break // the server is gone
		}
		var fds []int
		if cms, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for i := range cms {
				if got, err := unix.ParseUnixRights(&cms[i]); err == nil {
					fds = append(fds, got...)
				}
			}
		}
		line := string(buf[:n])
		if rest, ok := strings.CutPrefix(line, "+"); ok && len(fds) > 0 {
			pidText, startText, _ := strings.Cut(rest, " ")
			pid, err1 := strconv.Atoi(pidText)
			start, err2 := strconv.ParseUint(startText, 10, 64)
			if err1 == nil && err2 == nil {
				if old, ok := agents[pid]; ok {
					unix.Close(old.master)
				}
				agents[pid] = watched{start, fds[0]}
				fds = fds[1:]
			}
		} else if pid, err := strconv.Atoi(strings.TrimPrefix(line, "-")); err == nil {
			if old, ok := agents[pid]; ok {
				unix.Close(old.master)
				delete(agents, pid)
			}
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	var roots []int
	for pid, a := range agents {
		if st, err := procStartTime(pid); err == nil && st == a.start {
			roots = append(roots, pid)
		}
	}
	freezeKill(roots)
	return 0
}

// reaper is this process's side of the keeper: the agents it started, the
// sweep of what ended agents leave behind, and the watchdog.
var reaper = &reaperState{agents: map[int]*os.File{}, spared: map[int]bool{}, leftover: map[int]bool{}}

type reaperState struct {
	once sync.Once
	err  error

	mu     sync.Mutex
	on     bool             // this process is a child subreaper and sweeps
	sid    int              // this process's session: its own children
	agents map[int]*os.File // every session's process, started and not yet forgotten (ended): its terminal
	// Children outside our session: agents' leftovers being killed, and
	// others, spared (see sweep).
	spared, leftover map[int]bool
	watch            *os.File // our end of the watchdog's socket (nil: none running)
	watchPid         int      // the watchdog's process
	argv             []string // the keeper's command line
	log              *slog.Logger
}

// enable makes this process a child subreaper that sweeps what agents
// leave, and starts the watchdog, once.
func (r *reaperState) enable(argv []string, log *slog.Logger) error {
	r.once.Do(func() {
		if log == nil {
			log = slog.Default()
		}
		if r.err = setSubreaper(); r.err != nil {
			return
		}
		sid, err := unix.Getsid(0)
		if err != nil {
			r.err = err
			return
		}
		r.mu.Lock()
		r.on, r.sid, r.argv, r.log = true, sid, argv, log
		r.err = r.startWatchLocked()
		r.mu.Unlock()
		chld := make(chan os.Signal, 1)
		signal.Notify(chld, syscall.SIGCHLD)
		go func() {
			for range chld {
				r.sweep()
			}
		}()
	})
	return r.err
}

// startWatchLocked starts the watchdog and tells it the agents running.
func (r *reaperState) startWatchLocked() error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("watchdog socket: %w", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return fmt.Errorf("watchdog socket: %w", err)
	}
	pw := os.NewFile(uintptr(fds[0]), "watchdog") // on the poller: a full socket parks, no thread waits
	pr := os.NewFile(uintptr(fds[1]), "watchdog")
	cmd := exec.Command(r.argv[0], append(append([]string{}, r.argv[1:]...), keeperWatch)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pr, os.Stderr, os.Stderr
	cmd.Env = setEnv(os.Environ(), "GOMAXPROCS", "1")
	// Its own process group: a ^C to the server's terminal is not for it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The agents running are told before the watchdog starts, as many as
	// the socket holds: a server killed just after the start (a watchdog
	// started again, say) leaves it knowing them all. The rest, if any,
	// once it reads.
	r.watch, r.watchPid = pw, 0
	var rest []int
	for pid, master := range r.agents {
		if len(rest) > 0 || !r.tryTellLocked(pid, master) {
			rest = append(rest, pid)
		}
	}
	err = cmd.Start()
	pr.Close()
	if err != nil {
		pw.Close()
		r.watch = nil
		return fmt.Errorf("start the watchdog: %w", ptyError(err))
	}
	r.watchPid = cmd.Process.Pid
	for _, pid := range rest {
		r.tellLocked('+', pid, r.agents[pid])
	}
	go r.awaitWatchdog(cmd, pw)
	return nil
}

// tryTellLocked tells the watchdog of a running agent if the socket takes
// the message at once; false when it is full (or the agent is gone, which
// costs nothing to try again).
func (r *reaperState) tryTellLocked(pid int, master *os.File) bool {
	msg, ok := startMessage(pid, master)
	if !ok {
		return true // already gone: nothing to tell
	}
	sent := false
	rc, err1 := r.watch.SyscallConn()
	mc, err2 := master.SyscallConn()
	if err1 != nil || err2 != nil {
		return false
	}
	_ = mc.Control(func(mfd uintptr) {
		_ = rc.Control(func(fd uintptr) {
			sent = unix.Sendmsg(int(fd), msg, unix.UnixRights(int(mfd)), nil, unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT) == nil
		})
	})
	return sent
}

// startMessage is the watchdog's message for an agent's start: its pid
// and its start time (so that a pid reused later is not killed); false
// when the agent is gone or has no terminal.
func startMessage(pid int, master *os.File) ([]byte, bool) {
	start, err := procStartTime(pid)
	if err != nil || master == nil {
		return nil, false
	}
	return fmt.Appendf(nil, "+%d %d", pid, start), true
}

// awaitWatchdog starts the watchdog again if it ends while the server
// runs (someone killed it): without it, a killed server would leave its
// agents running.
func (r *reaperState) awaitWatchdog(cmd *exec.Cmd, pw *os.File) {
	_ = awaitExit(cmd.Process.Pid)
	err := cmd.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watch != pw {
		return
	}
	pw.Close()
	r.watch = nil
	r.log.Error("the agents' watchdog ended; starting it again", "err", err)
	time.AfterFunc(time.Second, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.watch == nil {
			if err := r.startWatchLocked(); err != nil {
				r.log.Error("the agents' watchdog cannot start: a killed server would leave its agents running", "err", err)
			}
		}
	})
}

// tellLocked tells the watchdog of an agent's start ('+', with its
// terminal's master) or end ('-').
func (r *reaperState) tellLocked(op byte, pid int, master *os.File) {
	if r.watch == nil {
		return
	}
	msg := fmt.Appendf(nil, "-%d", pid)
	if op == '+' {
		var ok bool
		if msg, ok = startMessage(pid, master); !ok {
			return // already gone
		}
	}
	send := func(oob []byte) {
		rc, err := r.watch.SyscallConn()
		if err != nil {
			return
		}
		// A watchdog that reads nothing for this long is stuck (stopped,
		// say): it is killed and another one started (awaitWatchdog),
		// rather than every agent's start waiting on it.
		_ = r.watch.SetWriteDeadline(time.Now().Add(watchdogStall))
		err = rc.Write(func(fd uintptr) bool {
			return unix.Sendmsg(int(fd), msg, oob, nil, unix.MSG_NOSIGNAL) != unix.EAGAIN
		})
		if errors.Is(err, os.ErrDeadlineExceeded) && r.watchPid > 0 {
			r.log.Error("the agents' watchdog reads nothing; killing it", "pid", r.watchPid)
			_ = syscall.Kill(r.watchPid, syscall.SIGKILL)
			r.watchPid = 0
		}
	}
	if master == nil {
		send(nil)
		return
	}
	if mc, err := master.SyscallConn(); err == nil {
		_ = mc.Control(func(fd uintptr) { send(unix.UnixRights(int(fd))) })
	}
}

// start runs fork, which starts an agent's process and returns its pid
// and its terminal's master, and records the process as an agent's (not a
// leftover) before any sweep can see it.
func (r *reaperState) start(fork func() (int, *os.File, error)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, master, err := fork()
	if err != nil {
		return err
	}
	r.agents[pid] = master
	r.tellLocked('+', pid, master)
	return nil
}

// ended forgets an agent's process, once it has been waited for.
func (r *reaperState) ended(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.agents, pid)
	r.tellLocked('-', pid, nil)
}

// sweep kills and reaps what ended agents left. An agent and its tree are
// in sessions of their own (this process's own helpers share its session),
// and while an agent lives its orphans are its children, not ours; when
// it ends, what is left becomes our child before the agent can be waited
// for. So a new child outside our session is an agent's leftover when its
// session is an agent's or when an agent has ended and is not yet
// forgotten (ended); any other (a daemon of some other child of ours, in a
// program that embeds the manager) is spared, and never touched.
func (r *reaperState) sweep() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.on {
		return
	}
	var left []int
	present := map[int]bool{}
	dying := -1 // whether an agent has ended: not looked at yet
	for _, pid := range childrenOf(os.Getpid()) {
		if _, ok := r.agents[pid]; ok {
			continue
		}
		f, err := statFields(pid)
		if err != nil || len(f) < 4 {
			continue
		}
		sid, _ := strconv.Atoi(f[3])
		if sid == r.sid {
			continue
		}
		present[pid] = true
		switch {
		case r.spared[pid]:
		case r.leftover[pid] || r.agents[sid] != nil || r.agentEnded(&dying):
			if f[0] == "Z" {
				_, _ = syscall.Wait4(pid, nil, syscall.WNOHANG, nil)
				delete(r.leftover, pid)
				continue
			}
			r.leftover[pid] = true
			left = append(left, pid)
		default:
			r.spared[pid] = true
		}
	}
	for _, set := range []map[int]bool{r.spared, r.leftover} {
		for pid := range set {
			if !present[pid] {
				delete(set, pid)
			}
		}
	}
	if len(left) > 0 {
		freezeKill(left) // their ends bring SIGCHLD, and the next sweep reaps them
	}
}

// agentEnded reports whether an agent's process has ended and is not yet
// forgotten (a zombie, or waited for and not yet ended), looking once
// per sweep (*dying: -1 not yet, 0 no, 1 yes).
func (r *reaperState) agentEnded(dying *int) bool {
	if *dying < 0 {
		*dying = 0
		for pid := range r.agents {
			if _, state, err := procStat(pid); err != nil || state == 'Z' {
				*dying = 1
				break
			}
		}
	}
	return *dying == 1
}

// freezeKill kills roots and every descendant: first SIGSTOP to each, round
// after round until a round finds no new process (a stopped process cannot
// fork), then SIGKILL to them all.
func freezeKill(roots []int) {
	if len(roots) == 0 {
		return
	}
	stopped := map[int]bool{}
	quiet := 0
	for round := 0; round < 100 && quiet < 2; round++ {
		quiet++
		for _, pid := range append(append([]int{}, roots...), treeOf(roots)...) {
			if !stopped[pid] {
				stopped[pid] = true
				quiet = 0
				_ = syscall.Kill(pid, syscall.SIGSTOP)
			}
		}
	}
	for pid := range stopped {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// childrenOf lists pid's children (from its threads' /proc children
// lists, or, where the kernel has none, from every process's parent).
func childrenOf(pid int) []int {
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	if err != nil || len(tasks) == 0 {
		return processChildren()[pid]
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			return processChildren()[pid]
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// processChildren maps every live process to its children, from /proc
// (zombies aside: they are dead and only wait to be reaped).
func processChildren() map[int][]int {
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
	return children
}

// treeOf lists the live processes below roots.
func treeOf(roots []int) []int {
	children := processChildren()
	var out []int
	queue := append([]int{}, roots...)
	seen := map[int]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}

// statFields returns /proc/pid/stat's fields after the command name: [0]
// the state, [1] the parent, [2] the process group, [3] the session, …
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces and ')'
	if i < 0 || i+4 > len(s) {
		return nil, errors.New("bad stat")
	}
	return strings.Fields(s[i+2:]), nil
}

// procStat reads the parent and state of pid from /proc/pid/stat.
func procStat(pid int) (ppid int, state byte, err error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, 0, err
	}
	if len(f) < 2 {
		return 0, 0, errors.New("bad stat")
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0][0], err
}

// procStartTime reads pid's start time (clock ticks after boot).
func procStartTime(pid int) (uint64, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 20 {
		return 0, errors.New("bad stat")
	}
	return strconv.ParseUint(f[19], 10, 64)
}
