package session

import (
	"fmt"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// An agent's process tree must end with its session, also when the server
// is killed (issue 12, break 9): signalling the agent's process group misses
// descendants that called setsid or ignore SIGHUP, and a killed server
// signals nothing. When Options.Keeper names the keeper (RunKeeper;
// `office-server keeper`), three things see to it, and none of them is a
// process per agent (issue 17: a Go keeper per agent took 6–8 threads, and
// at about 4,000 agents the threads used up kernel.pid_max):
//
//   - The agent starts as a child subreaper: the server runs `keeper exec
//     -- command args`, which sets PR_SET_CHILD_SUBREAPER and then execs
//     the command in its own place (the flag survives execve). While the
//     agent lives, every orphan of its tree (a daemon, a setsid'd
//     grandchild) becomes its child, so the whole tree stays below it.
//     With `user:` it changes to the agent's user before the exec.
//   - The server is a child subreaper too. When an agent ends, what is
//     left of its tree becomes the server's child, outside the server's
//     own session: reaper.sweep kills it, with its descendants, and reaps
//     it.
//   - One watchdog per server (`keeper watch`) is told every agent's pid
//     with a copy of its terminal's master, over a socket whose other end
//     only the server holds. When the server dies, even by SIGKILL, the
//     socket ends: the watchdog stops every agent's tree (SIGSTOP, so none
//     can fork), then kills it. Its copies of the masters keep the
//     terminals from hanging up meanwhile: an agent killed by that SIGHUP
//     would leave its orphans to init before the watchdog could see them.

// The keeper's modes: its first argument.
const (
	keeperExec  = "exec"
	keeperWatch = "watch"
)

// keep makes cmd start through the keeper named by argv (Options.Keeper),
// if any: `argv... exec [--uid U --gid G --groups g,h] -- command
// args...`. cred, if set, is the agent's user: the keeper becomes that
// user just before it execs the command (it is this program, which that
// user may not be allowed to run); without a keeper, cmd itself starts as
// cred. log gets the watchdog's troubles.
func keep(cmd *exec.Cmd, argv []string, cred *syscall.Credential, log *slog.Logger) error {
	if cmd.Err != nil {
		return cmd.Err // the command itself cannot be found: say so now
	}
	if len(argv) == 0 {
		if cred != nil {
			if cmd.SysProcAttr == nil {
				cmd.SysProcAttr = &syscall.SysProcAttr{}
			}
			cmd.SysProcAttr.Credential = cred
		}
		return nil
	}
	// The keeper would start, and its exec fail: check the command here,
	// so a missing one is a failed start, not a crash loop.
	if _, err := exec.LookPath(cmd.Path); err != nil {
		return err
	}
	if err := reaper.enable(argv, log); err != nil {
		return fmt.Errorf("keeper: %w", err)
	}
	args := append(append([]string{}, argv[1:]...), keeperExec)
	if cred != nil {
		groups := make([]string, len(cred.Groups))
		for i, g := range cred.Groups {
			groups[i] = strconv.FormatUint(uint64(g), 10)
		}
		args = append(args, "--uid", strconv.FormatUint(uint64(cred.Uid), 10), "--gid", strconv.FormatUint(uint64(cred.Gid), 10), "--groups", strings.Join(groups, ","))
	}
	args = append(args, "--", cmd.Path)
	args = append(args, cmd.Args[1:]...)
	k := exec.Command(argv[0], args...)
	cmd.Path, cmd.Args, cmd.Err = k.Path, k.Args, k.Err
	return nil
}
