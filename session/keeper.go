package session

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// An agent's process tree must end with its session, also when the server
// is killed (issue 12, break 9): signalling the agent's process group misses
// descendants that called setsid or ignore SIGHUP, and a killed server
// signals nothing. So, when Options.Keeper names it, every agent runs under
// a keeper (RunKeeper; `office-server keeper`): a small process between
// the server and the agent that is a child subreaper (every orphaned
// descendant of the agent becomes its child, so it can always find them)
// and kills the whole tree when the agent exits, when the session stops it,
// or when the server dies — which it learns from a pipe whose only write
// end the server holds (EOF: the kernel closed it with the server).

// keeperUnset, as the keeper's --gomaxprocs, removes GOMAXPROCS from the
// agent's environment.
const keeperUnset = "unset"

// keeperFD is the keeper's descriptor for the read end of the server's
// life pipe (the first of exec.Cmd.ExtraFiles).
const keeperFD = 3

// The server's life pipe: the write end stays open, unused, for the life of
// the process; keepers get the read end.
var (
	lifeOnce sync.Once
	lifeR    *os.File
	//lint:ignore U1000 only held: while it is reachable its finalizer cannot close the write end
	lifeW   *os.File
	lifeErr error
)

// keep makes cmd run under the keeper named by argv (Options.Keeper), if
// any: `argv... --grace D [--uid U --gid G --groups g,h] --gomaxprocs V
// -- command args...`, with the read end of the server's life pipe as descriptor 3.
// cred, if set, is the agent's user: the keeper stays the server's (so the
// agent cannot end it and escape) and starts the agent as cred; without a
// keeper, cmd itself runs as cred.
func keep(cmd *exec.Cmd, argv []string, grace time.Duration, cred *syscall.Credential) error {
	if cmd.Err != nil {
		return cmd.Err // the command itself cannot be found: say so now
	}
	if len(argv) > 0 {
		// The keeper would start, and its child fail: check the command
		// here, so a missing one is a failed start, not a crash loop.
		if _, err := exec.LookPath(cmd.Path); err != nil {
			return err
		}
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
	lifeOnce.Do(func() {
		lifeR, lifeW, lifeErr = os.Pipe()
	})
	if lifeErr != nil {
		return fmt.Errorf("keeper pipe: %w", lifeErr)
	}
	args := append(append([]string{}, argv[1:]...), "--grace", grace.String())
	// The keeper has one thing at a time to do: started with GOMAXPROCS=1
	// its Go runtime takes 0.2 MB less private memory (measured: 1.98 →
	// 1.76 MB a keeper). The agent gets the value it was given, or none
	// (--gomaxprocs).
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	agent, ok := lookup(env, "GOMAXPROCS")
	if !ok {
		agent = keeperUnset
	}
	cmd.Env = setEnv(env, "GOMAXPROCS", "1")
	args = append(args, "--gomaxprocs", agent)
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
	cmd.ExtraFiles = []*os.File{lifeR}
	return nil
}
