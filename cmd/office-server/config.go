package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/office-server/office-server/cluster"
	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/proxy"
	"github.com/office-server/office-server/store/postgres"
	"github.com/office-server/office-server/supabase"
)

// serveConfig is the serve command's configuration: flags, each with an
// environment variable under it (docs/cli.md lists them).
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
	// MaxLive caps the live agents of this server (engine.Config.MaxLive);
	// 0: no cap.
	MaxLive int
	// Node names this server in agent_sessions.node; with PostgreSQL it is
	// also the cluster node's id (default: the data directory's node-id).
	Node string
	// With PostgreSQL, the server is a cluster node (docs/notes/cluster.md):
	// NodeAddr is where other nodes reach its HTTP server (default: the
	// listen address), Capacity how many agents it may run (0: no limit),
	// Lease and LeaseRenew the lease's length and renewal period.
	NodeAddr          string
	Capacity          int
	Lease, LeaseRenew time.Duration
}

// serveSummary heads serve's help.
const serveSummary = `usage: office-server serve [flags]

Run the office: the agents' sessions, the router, the console and the
admin API. The store is SQLite in --data-dir unless DATABASE_URL or
SUPABASE_URL is set.
`

// parseServeConfig reads flags from args over the environment (getenv).
// A bad flag or value is a usageError.
func parseServeConfig(args []string, getenv func(string) string, stderr io.Writer) (serveConfig, error) {
	var c serveConfig
	var origins, level, format string
	s := newSettings("serve", serveSummary, getenv, stderr)
	s.String(&c.Addr, "addr", "OFFICE_ADDR", "127.0.0.1:8080", "listen address; loopback by default")
	s.String(&c.DataDir, "data-dir", "OFFICE_DATA_DIR", "./data", "data directory: SQLite store, admin token, secrets key, node id")
	s.String(&c.DatabaseURL, "database-url", "DATABASE_URL", "", "PostgreSQL URL: the store, and this server a cluster node")
	s.Bool(&c.NoMigrate, "no-migrate", "OFFICE_NO_MIGRATE", "with DATABASE_URL: apply no migration, only check that the schema has them all and say which are missing")
	s.String(&c.SupabaseURL, "supabase-url", "SUPABASE_URL", "", "Supabase project URL: the store, with SUPABASE_SECRET_KEY or the legacy SUPABASE_SERVICE_ROLE_KEY; with DATABASE_URL, only the project whose Auth signs members' tokens")
	s.String(&c.OfficeFile, "office", "OFFICE_FILE", "", "office file (YAML) synced into the store at start (check it with office-server check)")
	s.String(&origins, "allowed-origins", "OFFICE_ALLOWED_ORIGINS", "", "extra allowed Origins for the console, comma-separated; the server's own origins are always allowed")
	s.String(&level, "log-level", "OFFICE_LOG_LEVEL", "info", "debug, info, warn or error")
	s.String(&format, "log-format", "OFFICE_LOG_FORMAT", "text", "text or json")
	s.Duration(&c.ShutdownTimeout, "shutdown-timeout", "OFFICE_SHUTDOWN_TIMEOUT", 20*time.Second, "bound on graceful shutdown")
	s.Duration(&c.InvocationTimeout, "invocation-timeout", "OFFICE_INVOCATION_TIMEOUT", engine.DefaultInvocationTimeout, "a task not done in this time fails and its caller is told")
	s.Duration(&c.ProxyWait, "proxy-wait", "OFFICE_PROXY_WAIT", engine.DefaultProxyWait, "a PROXY_REQUEST waiting for a busy proxy this long times out: backed up to a file, a person asked")
	s.String(&c.ContentRules, "content-rules", "OFFICE_CONTENT_RULES", "", "file of content rules for proxy requests, added to the built-in ones")
	s.String(&c.AgentBin, "agent-bin", "OFFICE_AGENT_BIN", "", "executable for builtin agents (default: this executable)")
	s.Bool(&c.NoAutostart, "no-autostart", "OFFICE_NO_AUTOSTART", "do not start the agents' sessions at start")
	s.Int(&c.MaxLive, "max-live", "OFFICE_MAX_LIVE", 0, "most agents live at once on this server: beyond it, the least recently used idle agent hibernates before another wakes, and wake-ups wait in line; 0: no cap")
	s.Bool(&c.AllowAnonymousMembers, "allow-anonymous-members", supabase.EnvAllowAnonymous, "accept Supabase's anonymous sign-ins (is_anonymous) as members on the member endpoints")
	s.String(&c.Node, "node", "OFFICE_NODE", "", "this server's node name, recorded in agent_sessions.node (with PostgreSQL, default: the node id kept in the data directory)")
	s.String(&c.NodeAddr, "node-addr", "OFFICE_NODE_ADDR", "", "with PostgreSQL: host:port where the other servers reach this one, for the console's terminals (default: the listen address)")
	s.Int(&c.Capacity, "capacity", "OFFICE_CAPACITY", 0, "with PostgreSQL: how many agents this server may run; 0: no limit")
	s.Duration(&c.Lease, "lease", "OFFICE_LEASE", cluster.DefaultLease, "with PostgreSQL: how long an office stays this server's unrenewed; a server that stops loses its offices within lease + lease-renew")
	s.Duration(&c.LeaseRenew, "lease-renew", "OFFICE_LEASE_RENEW", cluster.DefaultRenew, "with PostgreSQL: how often the leases are renewed and offices placed")
	s.Secret("SUPABASE_SECRET_KEY", "the Supabase project's secret key (sb_secret_…), with SUPABASE_URL alone")
	s.Secret("SUPABASE_SERVICE_ROLE_KEY", "the legacy service-role key (a JWT), with SUPABASE_URL alone")
	c.AdminToken = s.Secret("OFFICE_ADMIN_TOKEN", "the admin token (default: made on first start and kept in the data directory)")
	c.SecretsKey = s.Secret("OFFICE_SECRETS_KEY", "64 hex digits or base64 of 32 bytes: seals secret values at rest (default with SQLite: kept in the data directory)")
	c.JWTSecret = s.Secret("SUPABASE_JWT_SECRET", "verifies members' tokens (HS256 projects)")
	if err := s.Parse(args); err != nil {
		return c, err
	}
	for _, o := range strings.Split(origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			c.Origins = append(c.Origins, o)
		}
	}
	if c.DatabaseURL != "" {
		if err := postgres.CheckSessionURL(c.DatabaseURL); err != nil {
			return c, usagef("DATABASE_URL: %w", err)
		}
	}
	if c.MaxLive < 0 {
		return c, usagef("max-live %d: want a number of agents, 0 for no cap", c.MaxLive)
	}
	if c.Capacity < 0 {
		return c, usagef("capacity %d: want a number of agents, 0 for no limit", c.Capacity)
	}
	if c.LeaseRenew <= 0 || c.Lease < 2*c.LeaseRenew {
		return c, usagef("lease %v with renewal every %v: the lease must last at least two renewals", c.Lease, c.LeaseRenew)
	}
	if err := c.LogLevel.UnmarshalText([]byte(level)); err != nil {
		return c, usagef("log level %q: want debug, info, warn or error", level)
	}
	switch format {
	case "text":
	case "json":
		c.LogJSON = true
	default:
		return c, usagef("log format %q: want text or json", format)
	}
	if err := checkSupabaseURL(c, getenv); err != nil {
		return c, usageError{err}
	}
	if c.storeKind() == "supabase" {
		var err error
		c.SupabaseKey, c.SupabaseKeyFrom, c.SupabaseKeyIgnored, err = supabase.KeyFromEnv(getenv)
		if err != nil {
			return c, usagef("SUPABASE_URL needs the project's secret key in the environment: %w", err)
		}
	}
	return c, nil
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
		// HibernateAfter is every resuming agent's default idle time
		// before it hibernates (office.LaunchSpec.HibernateAfter).
		HibernateAfter time.Duration `yaml:"hibernate_after"`
	} `yaml:"office"`
	Agents []agentFile `yaml:"agents"`
}

type agentFile struct {
	Name           string   `yaml:"name"`
	Role           string   `yaml:"role"`
	Capabilities   []string `yaml:"capabilities"`
	Priority       int      `yaml:"priority"`
	Expertise      []string `yaml:"expertise"`
	AllowedActions []string `yaml:"allowed_actions"`
	MaxLoad        int      `yaml:"max_load"`
	Disabled       bool     `yaml:"disabled"`
	// HibernateAfter, when given, is the agent's own idle time before it
	// hibernates (0: never), in place of the office's.
	HibernateAfter *time.Duration `yaml:"hibernate_after"`
	Launch         launchFile     `yaml:"launch"`
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
