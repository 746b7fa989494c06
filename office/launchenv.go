package office

import (
	"encoding/base64"
	"fmt"
	"maps"
	"regexp"
	"slices"
)

// An agent's launch env and args may refer to the server's environment as
// ${NAME}: the reference is what is stored, the value is taken when the
// agent starts (ExpandLaunch). Any other env value is stored sealed by the
// secrets key (SealLaunchEnv), as a dependency's secret value is, and
// opened only to start the agent (OpenLaunchEnv): launch_spec holds no
// value in clear for anyone who reads the row.

// sealedEnvPrefix starts an env value stored sealed: the prefix, then the
// standard base64 of Sealer.Seal's bytes.
const sealedEnvPrefix = "sealed:"

// envRef is a reference to the server's environment.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// onlyRefs matches a value made of references alone: nothing to seal.
var onlyRefs = regexp.MustCompile(`^(\$\{[A-Za-z_][A-Za-z0-9_]*\})*$`)

// SealLaunchEnv returns l with every env value that is not made of
// ${NAME} references alone sealed. A value of prev (the agent's stored
// spec, or the zero spec) that opens to the same value is kept as it is,
// so that syncing an unchanged office file changes no row. With no key it
// fails with EUNAVAILABLE naming the variable.
func (s *Sealer) SealLaunchEnv(l, prev LaunchSpec) (LaunchSpec, error) {
	if len(l.Env) == 0 {
		return l, nil
	}
	env := maps.Clone(l.Env)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v := env[k]
		if onlyRefs.MatchString(v) || isSealedEnv(v) {
			continue
		}
		if old, ok := prev.Env[k]; ok && isSealedEnv(old) {
			if was, err := s.openEnv(old); err == nil && was == v {
				env[k] = old
				continue
			}
		}
		if !s.CanSeal() {
			return l, Errorf(EUNAVAILABLE, "launch env %s: a value written in the launch spec is stored encrypted and no secrets key is configured: set OFFICE_SECRETS_KEY, or write ${%s} to take it from the server's environment", k, k)
		}
		b, err := s.Seal(v, true)
		if err != nil {
			return l, fmt.Errorf("launch env %s: %w", k, err)
		}
		env[k] = sealedEnvPrefix + base64.StdEncoding.EncodeToString(b)
	}
	l.Env = env
	return l, nil
}

// OpenLaunchEnv returns l with its sealed env values opened. It fails when
// one cannot be (no key, another key).
func (s *Sealer) OpenLaunchEnv(l LaunchSpec) (LaunchSpec, error) {
	if len(l.Env) == 0 {
		return l, nil
	}
	env := maps.Clone(l.Env)
	for k, v := range env {
		if !isSealedEnv(v) {
			continue
		}
		p, err := s.openEnv(v)
		if err != nil {
			return l, fmt.Errorf("launch env %s: %w", k, err)
		}
		env[k] = p
	}
	l.Env = env
	return l, nil
}

func isSealedEnv(v string) bool {
	return len(v) > len(sealedEnvPrefix) && v[:len(sealedEnvPrefix)] == sealedEnvPrefix
}

func (s *Sealer) openEnv(v string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(v[len(sealedEnvPrefix):])
	if err != nil {
		return "", fmt.Errorf("sealed value: %w", err)
	}
	return s.Open(b)
}

// ExpandLaunch returns l with each ${NAME} in its env values and args
// replaced by lookup(NAME): the server's environment when the agent
// starts. A name lookup does not know is an EINVALID error naming it.
func ExpandLaunch(l LaunchSpec, lookup func(string) (string, bool)) (LaunchSpec, error) {
	var missing error
	expand := func(where, v string) string {
		return envRef.ReplaceAllStringFunc(v, func(ref string) string {
			name := ref[2 : len(ref)-1]
			val, ok := lookup(name)
			if !ok && missing == nil {
				missing = Errorf(EINVALID, "launch %s: %s is not set in the server's environment", where, ref)
			}
			return val
		})
	}
	if len(l.Env) > 0 {
		env := make(map[string]string, len(l.Env))
		for k, v := range l.Env {
			env[k] = expand("env "+k, v)
		}
		l.Env = env
	}
	if len(l.Args) > 0 {
		args := make([]string, len(l.Args))
		for i, a := range l.Args {
			args[i] = expand(fmt.Sprintf("args[%d]", i), a)
		}
		l.Args = args
	}
	return l, missing
}
