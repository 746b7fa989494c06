// Command office-server runs an office of AI agents, each in its own
// pseudo-terminal, and routes their protocol messages. See README.md.
//
// Subcommands: serve (the default), migrate, parse, version. Each lives in a
// file of its own here; main only dispatches.
package main

import (
	"context"
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

// run dispatches args to a subcommand and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	name := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	if name == "help" {
		fmt.Fprintln(stdout, "usage: office-server [serve|migrate|parse|version] [flags]")
		return 0
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "office-server: unknown command %q (want serve, migrate, parse or version)\n", name)
		return 2
	}
	if err := cmd(ctx, args, stdin, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "office-server %s: %v\n", name, err)
		return 1
	}
	return 0
}
