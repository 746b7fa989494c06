package session

import (
	"errors"
	"slices"
)

// KindBuiltin runs one of the server's own scripted agents: Spec.Command is
// the office-server executable, run as `agent --script Spec.Script`, read
// off its screen like any CLI (KindCommand) with BuiltinPrompt as its
// default prompt pattern.
const KindBuiltin = "builtin"

// BuiltinPrompt is the ready pattern of the built-in scripted agents: they
// print "> " when they wait for a line.
const BuiltinPrompt = `^>\s*$`

func checkBuiltin(spec *Spec) error {
	if spec.Script == "" {
		return errors.New("kind builtin needs a script")
	}
	if spec.Command == "" {
		return errors.New("kind builtin needs the server's executable (Command)")
	}
	if spec.PromptPattern == "" {
		spec.PromptPattern = BuiltinPrompt
	}
	return checkCommand(spec)
}

// builtinDriver is a commandDriver with the scripted agent's arguments.
type builtinDriver struct{ *commandDriver }

func newBuiltinDriver(s *Session) driver { return builtinDriver{&commandDriver{s: s}} }

func (d builtinDriver) launch(spec Spec) ([]string, []string, error) {
	args := append([]string{"agent", "--script", spec.Script}, slices.Clone(spec.Args)...)
	return args, buildEnv(spec, false), nil
}
