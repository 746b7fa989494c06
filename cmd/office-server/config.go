package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/office-server/office-server/agents"
	"github.com/office-server/office-server/cluster"
	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/proxy"
	"github.com/office-server/office-server/store/postgres"
	"github.com/office-server/office-server/supabase"
)

// serveConfig is the serve command's configuration: flags, each with an
// environment variable as its default (the table is in docs/notes/server.md).
type serveConfig struct {
	Addr        string
	DataDir     string
	DatabaseURL string
	// NoMigrate: the schema of DatabaseURL is managed elsewhere (the
	// Supabase CLI); serve checks it is current instead of migrating.
	NoMigrate   bool
	SupabaseURL string
	SupabaseKey string
	// SupabaseKeyFrom names the variable SupabaseKey came from
	// (supabase.KeyFromEnv); SupabaseKeyIgnored the other one when both
	// were set.
	SupabaseKeyFrom, SupabaseKeyIgnored string
	// AllowAnonymousMembers accepts Supabase's anonymous users as members.
	AllowAnonymousMembers bool
	AdminToken            string
	SecretsKey            string
	JWTSecret             string // SUPABASE_JWT_SECRET: verifies members' tokens (server/members.go)
	OfficeFile            string
	Origins               []string
	LogLevel              slog.Level
	LogJSON               bool
	ShutdownTimeout       time.Duration
	// InvocationTimeout fails a task that is not done in time; the caller
	// is told why.
	InvocationTimeout time.Duration
	// ProxyWait is how long a parked PROXY_REQUEST waits for its proxy.
	ProxyWait time.Duration
	// ContentRules is a file of content rules added to the built-in ones
	// (proxy.ParseRules).
	ContentRules string
	AgentBin     string // executable for "builtin" agents; default: this one
	NoAutostart  bool
	// With PostgreSQL, the server is a cluster node (docs/notes/cluster.md):
	// NodeAddr is where other nodes reach its HTTP server (default: the
	// listen address), Capacity how many agents it may run (0: no limit),
	// Lease and LeaseRenew the lease's length and renewal period.
	NodeAddr          string
	Capacity          int
	Lease, LeaseRenew time.Duration
}

// parseServeConfig reads flags from args over the environment (getenv).
func parseServeConfig(args []string, getenv func(string) string, stderr io.Writer) (serveConfig, error) {
	env := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	var c serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Addr, "addr", env("OFFICE_ADDR", "127.0.0.1:8080"), "listen address (env OFFICE_ADDR); loopback by default")
	fs.StringVar(&c.DataDir, "data-dir", env("OFFICE_DATA_DIR", "./data"), "data directory: SQLite store, admin token, secrets key (env OFFICE_DATA_DIR)")
	fs.StringVar(&c.DatabaseURL, "database-url", getenv("DATABASE_URL"), "PostgreSQL URL (env DATABASE_URL)")
	noMigrate, err := strconv.ParseBool(env("OFFICE_NO_MIGRATE", "false"))
	if err != nil {
		return c, fmt.Errorf("OFFICE_NO_MIGRATE %q: want true or false", getenv("OFFICE_NO_MIGRATE"))
	}
	fs.BoolVar(&c.NoMigrate, "no-migrate", noMigrate, "with DATABASE_URL: do not apply the migrations, only check that the schema has them all and say which are missing (env OFFICE_NO_MIGRATE=true)")
	fs.StringVar(&c.SupabaseURL, "supabase-url", getenv("SUPABASE_URL"), "Supabase project URL (env SUPABASE_URL): the store, with SUPABASE_SECRET_KEY or the legacy SUPABASE_SERVICE_ROLE_KEY; with DATABASE_URL, only the project whose Auth signs members' tokens")
	fs.StringVar(&c.OfficeFile, "office", getenv("OFFICE_FILE"), "office file (YAML) synced into the store at start (env OFFICE_FILE)")
	origins := fs.String("allowed-origins", getenv("OFFICE_ALLOWED_ORIGINS"), "extra allowed Origins for the console, comma-separated (env OFFICE_ALLOWED_ORIGINS); the server's own origins are always allowed")
	level := fs.String("log-level", env("OFFICE_LOG_LEVEL", "info"), "debug, info, warn or error (env OFFICE_LOG_LEVEL)")
	fs.BoolVar(&c.LogJSON, "log-json", getenv("OFFICE_LOG_FORMAT") == "json", "JSON logs (env OFFICE_LOG_FORMAT=json)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 20*time.Second, "bound on graceful shutdown")
	fs.DurationVar(&c.InvocationTimeout, "invocation-timeout", engine.DefaultInvocationTimeout, "a task not done in this time fails and its caller is told")
	fs.DurationVar(&c.ProxyWait, "proxy-wait", engine.DefaultProxyWait, "a PROXY_REQUEST waiting for a busy proxy this long times out: backed up to a file, a person asked")
	fs.StringVar(&c.ContentRules, "content-rules", getenv("OFFICE_CONTENT_RULES"), "file of content rules for proxy requests, added to the built-in ones (env OFFICE_CONTENT_RULES)")
	fs.StringVar(&c.AgentBin, "agent-bin", getenv("OFFICE_AGENT_BIN"), "executable for builtin agents (default: this executable)")
	fs.BoolVar(&c.NoAutostart, "no-autostart", false, "do not start the agents' sessions at start")
	fs.BoolVar(&c.AllowAnonymousMembers, "allow-anonymous-members", isTrue(getenv(supabase.EnvAllowAnonymous)), "accept Supabase's anonymous sign-ins (is_anonymous) as members on the member endpoints (env "+supabase.EnvAllowAnonymous+")")
	fs.StringVar(&c.NodeAddr, "node-addr", getenv("OFFICE_NODE_ADDR"), "with PostgreSQL: host:port where the other servers reach this one, for the console's terminals (env OFFICE_NODE_ADDR; default: the listen address)")
	capacity := fs.String("capacity", env("OFFICE_CAPACITY", "0"), "with PostgreSQL: how many agents this server may run; 0: no limit (env OFFICE_CAPACITY)")
	fs.DurationVar(&c.Lease, "lease", cluster.DefaultLease, "with PostgreSQL: how long an office stays this server's unrenewed; a server that stops loses its offices within lease + lease-renew")
	fs.DurationVar(&c.LeaseRenew, "lease-renew", cluster.DefaultRenew, "with PostgreSQL: how often the leases are renewed and offices placed")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	// Secrets come from the environment only: flags show up in ps.
	c.AdminToken = getenv("OFFICE_ADMIN_TOKEN")
	c.SecretsKey = getenv("OFFICE_SECRETS_KEY")
	c.JWTSecret = getenv("SUPABASE_JWT_SECRET")
	for _, o := range strings.Split(*origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			c.Origins = append(c.Origins, o)
		}
	}
	if c.DatabaseURL != "" {
		if err := postgres.CheckSessionURL(c.DatabaseURL); err != nil {
			return c, fmt.Errorf("DATABASE_URL: %w", err)
		}
	}
	n, err := strconv.Atoi(*capacity)
	if err != nil || n < 0 {
		return c, fmt.Errorf("capacity %q: want a number of agents, 0 for no limit", *capacity)
	}
	c.Capacity = n
	if c.LeaseRenew <= 0 || c.Lease < 2*c.LeaseRenew {
		return c, fmt.Errorf("lease %v with renewal every %v: the lease must last at least two renewals", c.Lease, c.LeaseRenew)
	}
	if err := c.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		return c, fmt.Errorf("log level %q: want debug, info, warn or error", *level)
	}
	if err := checkSupabaseURL(c, getenv); err != nil {
		return c, err
	}
	if c.storeKind() == "supabase" {
		c.SupabaseKey, c.SupabaseKeyFrom, c.SupabaseKeyIgnored, err = supabase.KeyFromEnv(getenv)
		if err != nil {
			return c, fmt.Errorf("SUPABASE_URL needs the project's secret key in the environment: %w", err)
		}
	}
	return c, nil
}

// isTrue reads a boolean environment value: 1, true, yes or on.
func isTrue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// storeKind names the store the configuration selects.
func (c serveConfig) storeKind() string {
	switch {
	case c.DatabaseURL != "":
		return "postgres"
	case c.SupabaseURL != "":
		return "supabase"
	}
	return "sqlite"
}

// secretFile returns the secret kept in dir/name, creating it (0600) with
// gen() when it does not exist; created says whether it was made now.
func secretFile(dir, name string, gen func() string) (value string, created bool, err error) {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err == nil {
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", false, fmt.Errorf("%s is empty: delete it to generate a new one", path)
		}
		return v, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", false, fmt.Errorf("create data dir: %w", err)
	}
	v := gen()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := f.WriteString(v + "\n"); err != nil {
		f.Close()
		return "", false, fmt.Errorf("write %s: %w", path, err)
	}
	return v, true, f.Close()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// officeFile is the YAML office file: one office and its agents.
type officeFile struct {
	Office struct {
		Name        string        `yaml:"name"`
		QuestionTTL time.Duration `yaml:"question_ttl"`
		// Permissions are every agent's defaults: its own rules are
		// added to them, its own timeout wins.
		Permissions *office.PermissionPolicy `yaml:"permissions"`
	} `yaml:"office"`
	Agents []agentFile `yaml:"agents"`
}

type agentFile struct {
	Name           string     `yaml:"name"`
	Role           string     `yaml:"role"`
	Capabilities   []string   `yaml:"capabilities"`
	Priority       int        `yaml:"priority"`
	Expertise      []string   `yaml:"expertise"`
	AllowedActions []string   `yaml:"allowed_actions"`
	MaxLoad        int        `yaml:"max_load"`
	Disabled       bool       `yaml:"disabled"`
	Launch         launchFile `yaml:"launch"`
}

type launchFile struct {
	Kind           string            `yaml:"kind"`
	Command        string            `yaml:"command"`
	Args           []string          `yaml:"args"`
	Env            map[string]string `yaml:"env"`
	Dir            string            `yaml:"dir"`
	PromptPattern  string            `yaml:"prompt_pattern"`
	Model          string            `yaml:"model"`
	PermissionMode string            `yaml:"permission_mode"`
	Script         string            `yaml:"script"`
	User           string            `yaml:"user"`
	// Permissions is the agent's tool-permission policy (Claude Code).
	Permissions *office.PermissionPolicy `yaml:"permissions"`
}

// loadOfficeFile reads and checks an office file. Unknown keys, missing
// names, duplicate agents and unknown launch kinds are errors naming the
// place.
func loadOfficeFile(path string) (office.Office, []office.Agent, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return office.Office{}, nil, fmt.Errorf("read office file: %w", err)
	}
	return parseOfficeFile(path, b)
}

func parseOfficeFile(name string, b []byte) (office.Office, []office.Agent, error) {
	var f officeFile
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return office.Office{}, nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := checkKeys(&doc, reflect.TypeOf(f), ""); err != nil {
		return office.Office{}, nil, fmt.Errorf("%s: %w", name, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return office.Office{}, nil, fmt.Errorf("%s: %w", name, yamlTypeError(err))
	}
	if strings.TrimSpace(f.Office.Name) == "" {
		return office.Office{}, nil, fmt.Errorf("%s: office.name is required", name)
	}
	o := office.Office{Name: f.Office.Name, QuestionTTL: f.Office.QuestionTTL}
	if err := f.Office.Permissions.Check(); err != nil {
		return o, nil, fmt.Errorf("%s: office.%s", name, office.ErrorMessage(err))
	}
	seen := map[string]bool{}
	var list []office.Agent
	for i, a := range f.Agents {
		where := fmt.Sprintf("%s: agents[%d]", name, i)
		if strings.TrimSpace(a.Name) == "" {
			return o, nil, fmt.Errorf("%s: name is required", where)
		}
		if seen[strings.ToLower(a.Name)] {
			return o, nil, fmt.Errorf("%s: agent %q declared twice", where, a.Name)
		}
		seen[strings.ToLower(a.Name)] = true
		launch := office.LaunchSpec{
			Kind: a.Launch.Kind, Command: a.Launch.Command, Args: a.Launch.Args, Env: a.Launch.Env,
			Dir: a.Launch.Dir, PromptPattern: a.Launch.PromptPattern, Model: a.Launch.Model,
			PermissionMode: a.Launch.PermissionMode, Script: a.Launch.Script, User: a.Launch.User,
			Permissions: a.Launch.Permissions.Merge(f.Office.Permissions),
		}
		if err := agents.CheckLaunch(launch); err != nil {
			return o, nil, fmt.Errorf("%s (%s): launch: %w", where, a.Name, err)
		}
		status := office.AgentIdle
		if a.Disabled {
			status = office.AgentDisabled
		}
		list = append(list, office.Agent{
			Name: a.Name, Role: a.Role, Capabilities: a.Capabilities, Priority: a.Priority,
			Expertise: a.Expertise, AllowedActions: a.AllowedActions, MaxLoad: a.MaxLoad, Status: status,
			Launch: launch,
		})
	}
	return o, list, nil
}

// contentRules returns the proxy content rules: the built-in ones, with the
// rules of file (when named) added or replacing them by name. A file that
// cannot be read or holds a bad rule stops the server with the line.
func contentRules(file string) ([]proxy.Rule, error) {
	if file == "" {
		return proxy.DefaultRules(), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("content rules: %w", err)
	}
	rules, err := proxy.ParseRules(proxy.DefaultRules(), string(b))
	if err != nil {
		return nil, fmt.Errorf("content rules %s: %w", file, err)
	}
	return rules, nil
}
