// Command office-server runs an office of AI agents, each in its own
// pseudo-terminal, and routes their protocol messages. See README.md.
//
// Subcommands: serve (the default), check, schema, migrate, parse, version. Each lives in a
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
	"strings"
	"syscall"

	"github.com/office-server/office-server/server"
)

// version, when set at build time with -ldflags "-X main.version=...",
// replaces the module version of the build info (versionLine).
var version = ""

// command is one subcommand: it parses its own flags from args.
type command func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error

// commands maps subcommand names to their implementations; the files of this
// package register theirs in init.
var commands = map[string]command{
	"version": func(_ context.Context, args []string, _ io.Reader, stdout, _ io.Writer) error {
		if len(args) > 0 {
			return usagef("version takes no arguments")
		}
		fmt.Fprintln(stdout, versionLine())
		return nil
	},
}

// versionLine says which build this is: the module version and the VCS
// commit the go command recorded (runtime/debug.ReadBuildInfo), e.g.
// "office-server v0.0.0-20261128131500-da8bf1f0e2c1+dirty (commit
// da8bf1f0e2c1…, 2026-11-28T13:15:00Z, modified; go1.26.8)".
func versionLine() string {
	b := server.ReadBuild()
	if version != "" {
		b.Version = version
	}
	if b.Version == "" {
		b.Version = "(unknown)"
	}
	var parts []string
	if b.Revision != "" {
		parts = append(parts, "commit "+b.Revision)
	}
	if b.Time != "" {
		parts = append(parts, b.Time)
	}
	if b.Modified {
		parts = append(parts, "modified")
	}
	if b.GoVersion != "" {
		parts = append(parts, b.GoVersion)
	}
	if len(parts) == 0 {
		return "office-server " + b.Version
	}
	return fmt.Sprintf("office-server %s (%s)", b.Version, strings.Join(parts, ", "))
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
  check     check an office file as serve would, and more: office-server check FILE
  schema    print the JSON Schema of the office file
  migrate   apply the PostgreSQL migrations (DATABASE_URL) and exit
  parse     read a terminal transcript and print the protocol messages in it
  agent     run a built-in demo agent (po, dev, echo) in this terminal
  version   print the version and commit (also --version, -v)
  help      print this help; help <command> prints the command's

Exit status: 0 on success, 1 when the command fails, 2 for a usage error
(an unknown command or flag, a bad value).
`

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "-help" || arg == "--help"
}

// run dispatches args to a subcommand and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		if len(args) == 1 || args[0] != "help" {
			fmt.Fprint(stdout, usage)
			return 0
		}
		// help <command>: the command's own help, on stdout.
		if _, ok := commands[args[1]]; !ok || len(args) > 2 {
			fmt.Fprintf(stderr, "office-server help: unknown command %q\n\n%s", strings.Join(args[1:], " "), usage)
			return 2
		}
		return run(ctx, []string{args[1], "--help"}, stdin, stdout, stdout)
	}
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version" || args[0] == "-v") {
		args = append([]string{"version"}, args[1:]...)
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
		if errors.As(err, new(usageError)) {
			fmt.Fprintf(stderr, "Run office-server help %s for its flags.\n", name)
			return 2
		}
		return 1
	}
	return 0
}
