package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

func init() { commands["check"] = checkCmd }

const checkSummary = `usage: office-server check FILE

Check an office file as serve would, and more: every key and value (kinds,
allowed actions, permission modes, built-in scripts, durations), which
launch keys apply to which kind, that each agent's command is an
executable here and that each ${NAME} it refers to is set. Problems are
printed as FILE:LINE: where: what, with a suggestion for a likely typo.
Exit status: 0 when the file is good, 1 when it has a problem, 2 for a
usage error.
`

// errCheckFailed is check's error once the problems were printed.
var errCheckFailed = errors.New("the office file has problems")

func checkCmd(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	s := newSettings("check", checkSummary, os.Getenv, stderr)
	files, err := s.ParseArgs(args)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return usagef("want one office file: office-server check FILE")
	}
	name := files[0]
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	o, agents, ps := checkOfficeFile(b, checkOptions{Deep: true, Getenv: os.Getenv})
	for _, p := range ps {
		fmt.Fprintln(stderr, officeFileLine(name, p))
	}
	if len(ps) > 0 {
		return errCheckFailed
	}
	fmt.Fprintf(stdout, "%s: office %q with %d agents: ok\n", name, o.Name, len(agents))
	return nil
}
