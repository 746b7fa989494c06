package main

import (
	"os"

	"github.com/office-server/office-server/session"
)

// The hidden "keeper" subcommand (session.RunKeeper) makes each agent a
// child subreaper before it execs the agent (`keeper exec`), and is the
// server's one watchdog (`keeper watch`), so that the agent's whole process
// tree ends with its session and with the server, even a killed one (issue
// 12, break 9). It is dispatched before anything else.
func keeperMain(args []string) (code int, ok bool) {
	if len(args) == 0 || args[0] != "keeper" {
		return 0, false
	}
	return session.RunKeeper(args[1:], os.Stderr), true
}

// keeperArgv is the command line that runs the keeper: this executable.
func keeperArgv() ([]string, error) {
	if !session.KeeperSupported {
		return nil, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return []string{exe, "keeper"}, nil
}
