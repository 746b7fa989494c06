// Command office-server runs an office of AI agents, each in its own
// pseudo-terminal, and routes their protocol messages. See README.md.
//
// Subcommands: serve (the default), migrate, parse, version. Each lives in a
// file of its own here; main only dispatches.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// command is one subcommand: it parses its own flags from args.
type command func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error

// commands maps subcommand names to their implementations; the files of this
// package register theirs in init.
var commands = map[string]command{
	"version": func(_ context.Context, _ []string, _ io.Reader, stdout, _ io.Writer) error {
		fmt.Fprintln(stdout, "office-server", version)
		return nil
	},
}

func main() {
	if code, ok := keeperMain(os.Args[1:]); ok {
		os.Exit(code)
	}
	if code, ok := hookMain(os.Args[1:]); ok {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// usage lists the subcommands (office-server help, -h, --help).
const usage = `usage: office-server [command] [flags]

Commands:
  serve     run the office: the agents' sessions, the router, the console and
            the admin API (the default command)
  migrate   apply the PostgreSQL migrations (DATABASE_URL) and exit
  parse     read a terminal transcript and print the protocol messages in it
  agent     run a built-in demo agent (po, dev, echo) in this terminal
  version   print the version
  help      print this help

Run office-server <command> --help for a command's flags.
`

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "-help" || arg == "--help"
}

// run dispatches args to a subcommand and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	name := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "office-server: unknown command %q\n\n%s", name, usage)
		return 2
	}
	if err := cmd(ctx, args, stdin, stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0 // the flag set printed the command's flags
		}
		fmt.Fprintf(stderr, "office-server %s: %v\n", name, err)
		return 1
	}
	return 0
}
