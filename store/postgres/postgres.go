// Package postgres is the office.Store and office.ChangeFeed over
// PostgreSQL with pgx/v5: a local Postgres, or a Supabase project's own
// Postgres (its direct connection or session pooler; LISTEN needs a session,
// so not the transaction pooler). The schema is package migrations'.
//
// Every transition that must happen once is a single conditional UPDATE
// (... WHERE id = $1 AND status = 'answered'), so of any number of racing
// callers, in this process or in others, exactly one wins. The change feed
// LISTENs on a dedicated connection to the NOTIFYs of the migrations'
// triggers, reconnects with backoff, and runs a catch-up query after every
// (re)connect, so a change written while it was down is still reported.
//
// Nothing here needs superuser: the store runs as the tables' owner or as
// service_role.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/office-server/office-server/office"
)

// Channel is the NOTIFY channel of the migrations' change triggers.
const Channel = "office_changes"

// Options tunes a Store; the zero value is fine.
type Options struct {
	Logger *slog.Logger
	// MaxConns bounds the pool (default: pgxpool's, max(4, NumCPU)).
	MaxConns int32
	// Reconnected, when set, is called each time the change feed lost its
	// connection and is about to connect again (a metric).
	Reconnected func()
	// MinBackoff and MaxBackoff bound the change feed's reconnect delay,
	// which doubles after each failed attempt, jittered by ±50 %
	// (reconnect.Backoff; defaults 50ms and 5s).
	MinBackoff, MaxBackoff time.Duration
	// FeedURL, when set, is where the change feed's LISTEN connections go
	// instead of databaseURL: LISTEN needs a session of its own, so with
	// Supabase the store may use the transaction pooler (port 6543, with
	// default_query_exec_mode=simple_protocol) while the feed uses the
	// direct connection or the session pooler.
	FeedURL string
	// PingInterval is how long the feed waits for a notification before it
	// checks its connection with a query (default 15s), so a connection
	// that died silently is noticed.
	PingInterval time.Duration
	// Node, when set, names this server on every pooled connection
	// (the office.node setting): the database then refuses its writes that
	// act for an office it does not hold the lease of (migration
	// 20261126040000_cluster, docs/notes/cluster.md). It needs sessions of
	// its own, as LISTEN does: a direct connection or a session pooler.
	Node string
}

// Store is an office.Store and office.ChangeFeed on a pgx pool. Its methods
// are safe for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	feedCfg *pgx.ConnConfig // the dedicated LISTEN connections' config
	opts    Options
	log     *slog.Logger

	closing context.Context // cancelled by Close: ends every Watch
	close   context.CancelFunc

	mu        sync.Mutex
	listeners map[*listener]struct{}
	connected atomic.Int32 // Watch loops connected and caught up
}

// listener is one Watch's current connection.
type listener struct{ pid uint32 }

var (
	_ office.Store      = (*Store)(nil)
	_ office.ChangeFeed = (*Store)(nil)
)

// Open connects to databaseURL (postgres://… or key=value) and pings it.
// The schema must have been applied (migrations.Apply). Close releases it.
func Open(ctx context.Context, databaseURL string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, &office.Error{Code: office.EINVALID, Op: "open postgres", Message: "bad database URL", Err: err}
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 50 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = 15 * time.Second
	}
	feedCfg := cfg.ConnConfig.Copy()
	if opts.FeedURL != "" {
		if feedCfg, err = pgx.ParseConfig(opts.FeedURL); err != nil {
			return nil, &office.Error{Code: office.EINVALID, Op: "open postgres", Message: "bad feed URL", Err: err}
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if node := opts.Node; node != "" {
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, "select set_config('office.node', $1, false)", node)
			return err
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, wrap("open postgres", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, wrap("open postgres", err)
	}
	closing, cancel := context.WithCancel(context.Background())
	return &Store{
		pool:      pool,
		feedCfg:   feedCfg,
		opts:      opts,
		log:       log.With("component", "store/postgres"),
		closing:   closing,
		close:     cancel,
		listeners: map[*listener]struct{}{},
	}, nil
}

// Pool returns the store's pool, for callers that need plain SQL (tests,
// health checks).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return wrap("ping", err)
	}
	return nil
}

// Close ends every Watch and closes the pool. Queries in flight fail.
func (s *Store) Close() error {
	s.close()
	s.pool.Close()
	return nil
}

// FeedPIDs returns the backend process IDs of the connections the running
// Watch calls LISTEN on, for diagnostics and for tests that kill them
// (select pg_terminate_backend(pid)) to check that the feed recovers.
func (s *Store) FeedPIDs() []uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pids []uint32
	for l := range s.listeners {
		pids = append(pids, l.pid)
	}
	return pids
}

// wrap maps a driver error onto the office's error codes.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	code := office.EINTERNAL
	msg := ""
	var pe *pgconn.PgError
	var ne net.Error
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		code, msg = office.ENOTFOUND, "no such row"
	case errors.As(err, &pe):
		switch pe.Code {
		case "23505":
			code, msg = office.ECONFLICT, "already exists ("+pe.ConstraintName+")"
		case "23503":
			code, msg = office.EINVALID, "refers to a row that does not exist ("+pe.ConstraintName+")"
		case "23514", "23502", "22P02", "22001", "22023", "22007", "22008", "22003", "22021":
			code, msg = office.EINVALID, pe.Message
		case "40001", "40P01", "53300", "57P01", "57P02", "57P03", "08000", "08003", "08006":
			code = office.EUNAVAILABLE
		}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		code = office.EUNAVAILABLE
	case errors.As(err, &ne), pgconn.SafeToRetry(err):
		code = office.EUNAVAILABLE
	}
	return &office.Error{Code: code, Op: op, Message: msg, Err: err}
}

func invalid(op, format string, args ...any) error {
	return &office.Error{Code: office.EINVALID, Op: op, Message: fmt.Sprintf(format, args...)}
}

func notFound(op, what, id string) error {
	return &office.Error{Code: office.ENOTFOUND, Op: op, Message: fmt.Sprintf("no %s %q", what, id)}
}

// isUUID reports whether id can name a row: IDs are UUIDs, and an ID that
// is not one names no row (ENOTFOUND, not a database error).
func isUUID(id string) bool {
	_, err := uuid.Parse(id)
	return err == nil
}

// newID returns id, or a new UUID when id is empty; a non-UUID is invalid.
func newID(op, id string) (string, error) {
	if id == "" {
		return uuid.NewString(), nil
	}
	if !isUUID(id) {
		return "", invalid(op, "id %q is not a UUID", id)
	}
	return id, nil
}

// ref checks a reference to another row: a UUID, or "" (NULL) when optional.
func ref(op, field, id string, optional bool) (any, error) {
	if id == "" {
		if optional {
			return nil, nil
		}
		return nil, invalid(op, "%s is required", field)
	}
	if !isUUID(id) {
		return nil, invalid(op, "%s %q is not a UUID", field, id)
	}
	return id, nil
}

// ts returns t, or nil (SQL NULL, so the column default applies) when zero.
func ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// null returns s, or nil (SQL NULL) when empty.
func null(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// strs makes a nil slice empty: the array columns are NOT NULL.
func strs(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// officeSet returns the UUIDs of ids as a query argument: nil (all offices)
// when ids is empty. none is true when ids named offices but none of them
// can exist, so the answer is empty without asking.
func officeSet(ids []string) (arg any, none bool) {
	if len(ids) == 0 {
		return nil, false
	}
	var ok []string
	for _, id := range ids {
		if isUUID(id) {
			ok = append(ok, id)
		}
	}
	if len(ok) == 0 {
		return nil, true
	}
	return ok, false
}

// due returns the filter of a due list (office.Due): cond, then the
// offices (all when none are named) and the agent when it is set. Built
// as plain conditions so that the planner uses the agent's index.
func due(cond string, d office.Due) filter {
	w := filter{conds: []string{cond}}
	if offices, none := officeSet(d.OfficeIDs); none {
		w.none = true
	} else if offices != nil {
		w.in("office_id", offices.([]string))
	}
	w.id("agent_id", d.AgentID)
	return w
}

// filter builds a WHERE clause with numbered parameters.
type filter struct {
	conds []string
	args  []any
	none  bool // a condition no row can meet (e.g. a non-UUID id)
}

// eq adds "col = $n" for a non-empty value.
func (f *filter) eq(col, v string) {
	if v == "" {
		return
	}
	f.args = append(f.args, v)
	f.conds = append(f.conds, fmt.Sprintf("%s = $%d", col, len(f.args)))
}

// id adds "col = $n" for a non-empty UUID; a non-UUID matches nothing.
func (f *filter) id(col, v string) {
	if v == "" {
		return
	}
	if !isUUID(v) {
		f.none = true
		return
	}
	f.eq(col, v)
}

// in adds "col = any($n)" for a non-empty list.
func (f *filter) in(col string, vs []string) {
	if len(vs) == 0 {
		return
	}
	f.args = append(f.args, vs)
	f.conds = append(f.conds, fmt.Sprintf("%s = any($%d)", col, len(f.args)))
}

// raw adds a condition with one argument referenced as $%d.
func (f *filter) raw(cond string, v any) {
	f.args = append(f.args, v)
	f.conds = append(f.conds, fmt.Sprintf(cond, len(f.args)))
}

func (f *filter) where() string {
	if len(f.conds) == 0 {
		return ""
	}
	w := " where " + f.conds[0]
	for _, c := range f.conds[1:] {
		w += " and " + c
	}
	return w
}

func limit(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" limit %d", n)
}

// list runs a query and scans every row with scan.
func list[T any](ctx context.Context, s *Store, op, sql string, args []any, scan func(pgx.Row) (T, error)) ([]T, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, wrap(op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) { return scan(r) })
	if err != nil {
		return nil, wrap(op, err)
	}
	return out, nil
}

// one runs a query that returns at most one row; ok is false without it.
func one[T any](ctx context.Context, s *Store, op, sql string, args []any, scan func(pgx.Row) (T, error)) (v T, ok bool, err error) {
	v, err = scan(s.pool.QueryRow(ctx, sql, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return v, false, nil
	}
	if err != nil {
		return v, false, wrap(op, err)
	}
	return v, true, nil
}

// getByID reads one row of table by its id (cols, scanned by scan); a
// malformed or unknown id is ENOTFOUND naming what ("question", …).
func getByID[T any](ctx context.Context, s *Store, op, what, cols, table, id string, scan func(pgx.Row) (T, error)) (T, error) {
	if !isUUID(id) {
		var zero T
		return zero, notFound(op, what, id)
	}
	v, ok, err := one(ctx, s, op, `select `+cols+` from `+table+` where id = $1`, []any{id}, scan)
	if err == nil && !ok {
		err = notFound(op, what, id)
	}
	return v, err
}

// exec runs a conditional update and reports whether it changed a row.
func (s *Store) exec(ctx context.Context, op, sql string, args ...any) (bool, error) {
	tag, err := s.pool.Exec(ctx, sql, args...)
	if err != nil {
		return false, wrap(op, err)
	}
	return tag.RowsAffected() > 0, nil
}
