package postgres

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// TransactionPoolerPort is the port of Supabase's transaction pooler
// (Supavisor in transaction mode, and the project's own PgBouncer), which
// hands each transaction to whichever server connection is free.
const TransactionPoolerPort = 6543

// CheckSessionURL returns an error when databaseURL goes through a
// transaction pooler (port 6543, or pgbouncer=true as Prisma marks one),
// which the server cannot use: its change feed LISTENs, its office leases
// set a per-session setting, and migrations hold a session advisory lock,
// and all three need the same server connection for the whole session.
// The error says which connection string to use instead. A URL that does
// not parse is reported too.
func CheckSessionURL(databaseURL string) error {
	cfg, err := pgconn.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("database URL: %w", err)
	}
	why := ""
	if v, ok := cfg.RuntimeParams["pgbouncer"]; ok && !strings.EqualFold(v, "false") {
		why = "pgbouncer=" + v
	}
	hosts := []struct {
		host string
		port uint16
	}{{cfg.Host, cfg.Port}}
	for _, f := range cfg.Fallbacks {
		hosts = append(hosts, struct {
			host string
			port uint16
		}{f.Host, f.Port})
	}
	for _, h := range hosts {
		if h.port == TransactionPoolerPort {
			why = fmt.Sprintf("%s:%d", h.host, h.port)
			break
		}
	}
	if why == "" {
		return nil
	}
	return fmt.Errorf("the database URL is a transaction pooler (%s): the server needs a session of its own "+
		"(LISTEN for the change feed, its lease setting, the migrations' lock). "+
		"Use the session pooler: on Supabase, Connect → Connection string → Session pooler "+
		"(postgres://postgres.<project-ref>:<password>@aws-0-<region>.pooler.supabase.com:5432/postgres), "+
		"that is the same host on port 5432 without pgbouncer=true; or the direct connection (db.<project-ref>.supabase.co:5432, IPv6)", why)
}
