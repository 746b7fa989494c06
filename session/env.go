package session

import (
	"os"
	"strings"
)

// Environment variables passed through from the server's environment to
// every agent, and to claude agents only (by prefix).
var (
	passEnv       = []string{"PATH", "LANG", "LC_ALL", "LC_CTYPE", "USER", "LOGNAME", "SHELL", "TZ", "TMPDIR", "HOME"}
	passEnvClaude = []string{"ANTHROPIC_", "CLAUDE_", "DISABLE_", "HTTP_PROXY=", "HTTPS_PROXY=", "NO_PROXY=", "http_proxy=", "https_proxy=", "no_proxy=", "NODE_EXTRA_CA_CERTS=", "SSL_CERT_FILE="}
)

// buildEnv returns a minimal environment for an agent: a few variables of
// the server's own, TERM, for claude the variables it needs, then spec.Env
// (which wins).
func buildEnv(spec Spec, claude bool) []string {
	var env []string
	for _, k := range passEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if claude {
		for _, kv := range os.Environ() {
			for _, p := range passEnvClaude {
				if strings.HasPrefix(kv, p) {
					env = append(env, kv)
					break
				}
			}
		}
		if _, ok := lookup(env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"); !ok {
			env = append(env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
		}
		if _, ok := lookup(env, "DISABLE_AUTOUPDATER"); !ok {
			env = append(env, "DISABLE_AUTOUPDATER=1")
		}
	}
	if _, ok := lookup(env, "LANG"); !ok {
		env = append(env, "LANG=C.UTF-8")
	}
	env = setEnv(env, "TERM", "xterm-256color")
	if spec.Home != "" {
		env = setEnv(env, "HOME", spec.Home)
	}
	for _, kv := range spec.Env {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			env = setEnv(env, k, v)
		}
	}
	return env
}

func lookup(env []string, k string) (string, bool) {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v, true
		}
	}
	return "", false
}

func setEnv(env []string, k, v string) []string {
	out := env[:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, k+"=") {
			out = append(out, kv)
		}
	}
	return append(out, k+"="+v)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
