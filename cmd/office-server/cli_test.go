package main

import (
	"context"
	"debug/buildinfo"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestVersion: --version, -v and version print the module version and the
// VCS commit the built binary carries (debug/buildinfo reads them from the
// file, as `go version -m` does), not a placeholder.
func TestVersion(t *testing.T) {
	bin := buildServer(t)
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"office-server " + bi.Main.Version, bi.GoVersion}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			want = append(want, "commit "+s.Value)
		}
	}
	for _, arg := range []string{"--version", "-v", "version"} {
		out, err := exec.Command(bin, arg).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", arg, err, out)
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s printed %q, want it to hold %q", arg, out, w)
			}
		}
		if strings.Contains(string(out), "dev\n") {
			t.Errorf("%s printed a placeholder: %q", arg, out)
		}
	}
}

// TestExitCodes: 2 for every usage error (an unknown command or flag, a
// bad value in a flag or in the environment), 1 for a failure at run time,
// 0 for help.
func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		code int
		want string // in stderr
	}{
		{args: []string{"bogus"}, code: 2, want: `unknown command "bogus"`},
		{args: []string{"serve", "--bogus"}, code: 2, want: "flag provided but not defined: -bogus"},
		{args: []string{"--bogus"}, code: 2, want: "flag provided but not defined: -bogus"},
		{args: []string{"serve", "--log-level", "loud"}, code: 2, want: `log level "loud"`},
		{args: []string{"serve", "--log-format", "xml"}, code: 2, want: `log format "xml": want text or json`},
		{args: []string{"serve", "--capacity", "-1"}, code: 2, want: "capacity -1"},
		{args: []string{"serve", "--lease", "1s", "--lease-renew", "1s"}, code: 2, want: "at least two renewals"},
		{args: []string{"serve"}, env: map[string]string{"OFFICE_LEASE": "ten"}, code: 2, want: `OFFICE_LEASE="ten": want a duration`},
		{args: []string{"serve"}, env: map[string]string{"OFFICE_NO_AUTOSTART": "maybe"}, code: 2, want: `OFFICE_NO_AUTOSTART="maybe"`},
		{args: []string{"serve", "extra"}, code: 2, want: "unexpected arguments"},
		{args: []string{"help", "bogus"}, code: 2, want: `unknown command "bogus"`},
		{args: []string{"version", "x"}, code: 2, want: "no arguments"},
		{args: []string{"parse", "--bogus"}, code: 2, want: "-bogus"},
		{args: []string{"check"}, code: 2, want: "check FILE"},
		{args: []string{"check", "/nonexistent/office.yaml"}, code: 1, want: "no such file"},
		{args: []string{"serve", "--data-dir", "/proc/office-server-test"}, code: 1, want: "create data dir"},
	} {
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		var out, errb strings.Builder
		code := run(context.Background(), tc.args, strings.NewReader(""), &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%q %v: exit %d, stderr %q; want exit %d with %q", tc.args, tc.env, code, errb.String(), tc.code, tc.want)
		}
		for k := range tc.env {
			t.Setenv(k, "")
		}
	}
}

// TestHelpCommand: help <command> prints that command's help on stdout,
// each flag with its environment variable, and the secrets by name only.
func TestHelpCommand(t *testing.T) {
	t.Setenv("OFFICE_ADMIN_TOKEN", "tok-never-shown-1234")
	t.Setenv("OFFICE_SECRETS_KEY", "key-never-shown")
	var out, errb strings.Builder
	if code := run(context.Background(), []string{"help", "serve"}, nil, &out, &errb); code != 0 {
		t.Fatalf("help serve: exit %d, %s", code, errb.String())
	}
	help := out.String()
	for _, w := range []string{"usage: office-server serve", "--addr", "env OFFICE_ADDR", "--log-format", "env OFFICE_LOG_FORMAT",
		"--lease-renew", "env OFFICE_LEASE_RENEW", "env OFFICE_NODE", "OFFICE_ADMIN_TOKEN", "OFFICE_SECRETS_KEY", "SUPABASE_SERVICE_ROLE_KEY", "SUPABASE_JWT_SECRET"} {
		if !strings.Contains(help, w) {
			t.Errorf("help serve lacks %q", w)
		}
	}
	for _, secret := range []string{"tok-never-shown", "key-never-shown"} {
		if strings.Contains(help, secret) {
			t.Errorf("help serve shows a secret's value %q", secret)
		}
	}
	// Every flag of serve names its variable.
	c := strings.Count(help, "\n  --")
	if e := strings.Count(help, "(env OFFICE_") + strings.Count(help, "(env DATABASE_URL") + strings.Count(help, "(env SUPABASE_URL"); e != c {
		t.Errorf("help serve: %d flags, %d with their variable", c, e)
	}
	for _, cmd := range []string{"migrate", "check", "parse"} {
		out.Reset()
		if code := run(context.Background(), []string{"help", cmd}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "usage: office-server "+cmd) {
			t.Errorf("help %s: exit %d, %q", cmd, code, out.String())
		}
	}
}

// TestSettingPrecedence: a flag wins over its variable, which wins over the
// default, for every kind of setting.
func TestSettingPrecedence(t *testing.T) {
	env := map[string]string{"OFFICE_ADDR": "127.0.0.1:9", "OFFICE_SHUTDOWN_TIMEOUT": "7s", "OFFICE_NO_AUTOSTART": "true",
		"OFFICE_CAPACITY": "3", "OFFICE_LOG_FORMAT": "json", "OFFICE_NODE": "n-env", "OFFICE_PROXY_WAIT": "2m"}
	getenv := func(k string) string { return env[k] }
	c, err := parseServeConfig(nil, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:9" || c.ShutdownTimeout != 7*time.Second || !c.NoAutostart || c.Capacity != 3 || !c.LogJSON || c.Node != "n-env" || c.ProxyWait != 2*time.Minute {
		t.Errorf("from the environment: %+v", c)
	}
	c, err = parseServeConfig([]string{"--addr", "127.0.0.1:10", "--shutdown-timeout", "9s", "--no-autostart=false", "--capacity", "4",
		"--log-format", "text", "--node", "n-flag", "--proxy-wait", "3m"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:10" || c.ShutdownTimeout != 9*time.Second || c.NoAutostart || c.Capacity != 4 || c.LogJSON || c.Node != "n-flag" || c.ProxyWait != 3*time.Minute {
		t.Errorf("flags over the environment: %+v", c)
	}
	c, err = parseServeConfig(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:8080" || c.ShutdownTimeout != 20*time.Second || c.NoAutostart || c.Capacity != 0 || c.LogJSON || c.Node != "" {
		t.Errorf("defaults: %+v", c)
	}
}
