package main

import (
	"os"

	"github.com/office-server/office-server/session"
)

// The hidden "hook" subcommand is the Claude Code hook the server writes
// into each agent's settings: `hook permission SOCKET`
// (session.RunPermissionHook) hands a tool-permission request to the
// running server and prints its decision (docs/notes/permissions.md). It
// is dispatched before anything else, like the keeper.
func hookMain(args []string) (code int, ok bool) {
	if len(args) == 0 || args[0] != "hook" {
		return 0, false
	}
	return session.RunPermissionHook(args[1:], os.Stdin, os.Stdout, os.Stderr), true
}

// hookArgv is the command line of the hook: this executable.
func hookArgv() ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return []string{exe, "hook"}, nil
}
