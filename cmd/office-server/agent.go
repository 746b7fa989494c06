package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"time"

	"github.com/office-server/office-server/internal/demoagent"
)

// The hidden "agent" subcommand runs a built-in scripted agent
// (internal/demoagent) on its standard input and output. The server starts
// it in a PTY for launch specs of kind "builtin".
func init() { commands["agent"] = agentCmd }

func agentCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	script := fs.String("script", "", "built-in script: po, dev or echo")
	peer := fs.String("peer", "", "the agent the script talks to (po: dev, dev: po)")
	step := fs.Duration("step", 700*time.Millisecond, "pause between visible steps")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	return demoagent.Run(ctx, *script, stdin, stdout, demoagent.Options{Peer: *peer, Step: *step})
}
