package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Every setting of a command is a flag and an environment variable, with
// one precedence: the flag, else the variable, else the default. Secrets
// are variables only (a flag shows in ps) and are listed in the help with
// their names, never their values. docs/cli.md lists them all.

// usageError is a mistake in how the command was called: an unknown flag
// or command, a bad value. run exits 2 for it, 1 for any other failure.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usageError.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// setting is one flag of a command, and the variable it is read from.
type setting struct {
	flag, env, def, usage string
}

// secretSetting is a setting read from the environment only.
type secretSetting struct{ env, usage string }

// settings builds a command's flag set over the environment.
type settings struct {
	fs      *flag.FlagSet
	getenv  func(string) string
	list    []setting
	secrets []secretSetting
	errs    []error
	summary string    // the command's usage line and what it does
	out     io.Writer // where the help goes
}

func newSettings(name, summary string, getenv func(string) string, stderr io.Writer) *settings {
	s := &settings{fs: flag.NewFlagSet(name, flag.ContinueOnError), getenv: getenv, summary: summary, out: stderr}
	s.fs.SetOutput(stderr)
	// The help is printed for -h only (Parse): a mistake gets one line
	// and where to look, not the whole help.
	s.fs.Usage = func() {}
	return s
}

// value returns the environment's value for env, else def.
func (s *settings) value(env, def string) string {
	if env != "" {
		if v := s.getenv(env); v != "" {
			return v
		}
	}
	return def
}

func (s *settings) add(name, env, def, usage string) string {
	s.list = append(s.list, setting{flag: name, env: env, def: def, usage: usage})
	return s.value(env, def)
}

// String defines a string setting.
func (s *settings) String(p *string, name, env, def, usage string) {
	s.fs.StringVar(p, name, s.add(name, env, def, usage), usage)
}

// Duration defines a duration setting; a variable that is not a duration
// is a usage error from Parse.
func (s *settings) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	v := s.add(name, env, def.String(), usage)
	d, err := time.ParseDuration(v)
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("%s=%q: want a duration like 30s, 10m or 1h30m", env, v))
		d = def
	}
	s.fs.DurationVar(p, name, d, usage)
}

// Int defines a whole-number setting.
func (s *settings) Int(p *int, name, env string, def int, usage string) {
	v := s.add(name, env, strconv.Itoa(def), usage)
	n, err := strconv.Atoi(v)
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("%s=%q: want a whole number", env, v))
		n = def
	}
	s.fs.IntVar(p, name, n, usage)
}

// Bool defines a boolean setting (the variable: true/false, 1/0).
func (s *settings) Bool(p *bool, name, env string, usage string) {
	v := s.add(name, env, "false", usage)
	b, err := strconv.ParseBool(v)
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("%s=%q: want true or false", env, v))
	}
	s.fs.BoolVar(p, name, b, usage)
}

// Secret names a variable read from the environment only.
func (s *settings) Secret(env, usage string) string {
	s.secrets = append(s.secrets, secretSetting{env: env, usage: usage})
	return s.getenv(env)
}

// Parse parses args, which hold only flags; every failure is a usageError
// except flag.ErrHelp (the help was printed).
func (s *settings) Parse(args []string) error {
	rest, err := s.ParseArgs(args)
	if err == nil && len(rest) > 0 {
		return usagef("unexpected arguments %q", rest)
	}
	return err
}

// ParseArgs is Parse for a command that takes arguments after its flags:
// it returns them.
func (s *settings) ParseArgs(args []string) ([]string, error) {
	s.fs.SetOutput(io.Discard) // Parse's own messages: the error is returned
	err := s.fs.Parse(args)
	s.fs.SetOutput(s.out)
	if errors.Is(err, flag.ErrHelp) {
		s.printUsage(s.out)
		return nil, err
	}
	if err != nil {
		return nil, usageError{err}
	}
	if len(s.errs) > 0 {
		return nil, usageError{errors.Join(s.errs...)}
	}
	return s.fs.Args(), nil
}

// printUsage prints the command's help: each flag with its variable and
// default, then the secrets by name.
func (s *settings) printUsage(w io.Writer) {
	fmt.Fprint(w, s.summary)
	if len(s.list) == 0 {
		return
	}
	fmt.Fprintf(w, "\nFlags (a flag wins over its environment variable, which wins over the default):\n")
	for _, st := range s.list {
		f := s.fs.Lookup(st.flag)
		arg := ""
		if _, isBool := f.Value.(interface{ IsBoolFlag() bool }); !isBool {
			arg, _ = flag.UnquoteUsage(f)
			if arg == "" {
				arg = "value"
			}
			arg = " " + arg
		}
		fmt.Fprintf(w, "  --%s%s\n", st.flag, arg)
		fmt.Fprintf(w, "\t%s\n", st.usage)
		var meta []string
		if st.env != "" {
			meta = append(meta, "env "+st.env)
		}
		if st.def != "" {
			meta = append(meta, "default "+st.def)
		}
		if len(meta) > 0 {
			fmt.Fprintf(w, "\t(%s)\n", strings.Join(meta, "; "))
		}
	}
	if len(s.secrets) > 0 {
		fmt.Fprintf(w, "\nSecrets (environment only, never shown):\n")
		for _, sec := range s.secrets {
			fmt.Fprintf(w, "  %s\n\t%s\n", sec.env, sec.usage)
		}
	}
}
