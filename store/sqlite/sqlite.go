// Package sqlite is the embedded default office.Store: one SQLite file in WAL
// mode through the pure-Go driver github.com/ncruces/go-sqlite3 (no cgo;
// SQLite compiled to WebAssembly and translated to Go), with an
// in-process change feed. It keeps the same tables, columns and semantics as
// the Postgres store and passes store/storetest.
//
// Writes go through a single connection: SQLite admits one writer at a time,
// and queueing writers in database/sql instead of in SQLite's busy handler
// keeps them fair and free of SQLITE_BUSY inside one process. Multi-statement
// writes run in BEGIN IMMEDIATE transactions, and every connection has a busy
// timeout, so a second process on the same file waits its turn instead of
// failing. Reads use a pool of their own and see committed data (WAL
// snapshots), never blocking the writer.
//
// Every transition that must happen once is a single conditional
// UPDATE ... WHERE status = ... RETURNING, so of any number of racing callers
// (goroutines, or processes sharing the file) exactly one sees its row.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ncruces/go-sqlite3"
	_ "github.com/ncruces/go-sqlite3/driver" // database/sql driver "sqlite3"

	"github.com/office-server/office-server/office"
)

//go:embed schema/*.sql
var schemaFS embed.FS

// DriverName is the database/sql driver the store opens its files with.
const DriverName = "sqlite3"

// BusyTimeout is how long a connection waits for another process's write
// lock before SQLITE_BUSY.
const BusyTimeout = 10 * time.Second

// Store is the SQLite office.Store and office.ChangeFeed. It is safe for
// concurrent use. Open it with Open; Close releases it.
type Store struct {
	path string
	w    *sql.DB // the one write connection
	r    *sql.DB // readers
	ws   *stmts  // prepared statements on w
	rs   *stmts  // prepared statements on r
	feed *feed

	stop context.CancelFunc
	wg   sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

var (
	_ office.Store      = (*Store)(nil)
	_ office.ChangeFeed = (*Store)(nil)
)

// journalModes gives an existing database file's -wal and -shm files its
// mode, made now if missing, as SQLite's own unix VFS does (os_unix.c,
// findCreateFileMode): the driver's Go VFS makes them 0644 under the
// umask, and a database kept private would share its contents through
// them. An empty -wal holds no frames and an empty -shm is initialised by
// the first connection.
func journalModes(db string) error {
	st, err := os.Stat(db)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	mode := st.Mode().Perm()
	for _, p := range []string{db + "-wal", db + "-shm"} {
		f, err := os.OpenFile(p, os.O_RDONLY|os.O_CREATE, mode)
		if err != nil {
			return err
		}
		f.Close()
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
	}
	return nil
}

// Open opens (creating if needed) the database file at path, brings its
// schema up to date and starts the change feed's watch for writes by other
// processes. It fails if the file's schema is newer than this build knows.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, office.Errorf(office.EINVALID, "sqlite: empty database path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)") // durable across process crashes; WAL fsyncs at checkpoints
	q.Set("_txlock", "immediate")
	dsn := "file:" + abs + "?" + q.Encode()
	if err := journalModes(abs); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}

	w, err := sql.Open(DriverName, dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	// The writer opens first: it creates the file and switches it to WAL
	// before any reader looks at it.
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: %s: %w", abs, err)
	}

	rq := url.Values{}
	rq.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	rq.Add("_pragma", "foreign_keys(1)")
	rq.Add("_pragma", "query_only(1)")
	r, err := sql.Open(DriverName, "file:"+abs+"?"+rq.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open readers %s: %w", abs, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	if err := r.PingContext(ctx); err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("sqlite: %s: %w", abs, err)
	}

	// Again now that the file is in WAL mode (the switch makes the -wal
	// anew); the writer's connection keeps them from here on.
	if err := journalModes(abs); err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	var version int64
	if err := w.QueryRowContext(ctx, "pragma data_version").Scan(&version); err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("sqlite: %s: %w", abs, err)
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s := &Store{path: abs, w: w, r: r, ws: newStmts(w), rs: newStmts(r), feed: newFeed(), stop: stop}
	// The file watch starts here, not in the goroutine: its goroutines
	// exist once Open returns (a caller counting goroutines sees them all).
	changed := fileChanges(abs, runCtx.Done())
	s.wg.Go(func() { s.watchOtherWriters(runCtx, version, changed) })
	return s, nil
}

// Path returns the database file's absolute path.
func (s *Store) Path() string { return s.path }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.r.QueryRowContext(ctx, "select 1").Scan(&one); err != nil {
		return s.fail("ping", err)
	}
	return nil
}

// Close stops the change feed (every Watch returns) and closes the database.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stop()
		s.feed.close()
		s.wg.Wait()
		s.ws.close()
		s.rs.close()
		s.closeErr = errors.Join(s.r.Close(), s.w.Close())
	})
	return s.closeErr
}

// SchemaVersion returns the newest schema version applied to the file.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.r.QueryRowContext(ctx, "select coalesce(max(version), 0) from schema_migrations").Scan(&v)
	return v, err
}

// migration is one schema file, schema/NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	files, err := fs.Glob(schemaFS, "schema/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, f := range files {
		base := filepath.Base(f)
		num, name, ok := strings.Cut(strings.TrimSuffix(base, ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("schema file %s: want NNNN_name.sql", base)
		}
		b, err := schemaFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// LatestSchemaVersion is the newest schema version this build knows.
func LatestSchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// migrate applies, in one IMMEDIATE transaction, every schema file newer than
// the file's version, recording each in schema_migrations. Two processes
// opening a new file at once serialize on the write lock; the second finds
// the work done.
func migrate(ctx context.Context, w *sql.DB) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `create table if not exists schema_migrations (
		version    integer primary key,
		name       text not null,
		applied_at text not null
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var have int
	if err := tx.QueryRowContext(ctx, "select coalesce(max(version), 0) from schema_migrations").Scan(&have); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if len(ms) > 0 && have > ms[len(ms)-1].version {
		return office.Errorf(office.EINVALID, "database schema version %d is newer than this build knows (%d); upgrade office-server", have, ms[len(ms)-1].version)
	}
	for _, m := range ms {
		if m.version <= have {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("apply schema %04d_%s: %w", m.version, m.name, err)
		}
		if _, err := tx.ExecContext(ctx, "insert into schema_migrations (version, name, applied_at) values (?, ?, ?)", m.version, m.name, ts(time.Now())); err != nil {
			return fmt.Errorf("record schema %04d: %w", m.version, err)
		}
		if strings.Contains(m.sql, "writable_schema") {
			// A definition edited in place: PRAGMA schema_version=N+1 makes
			// every connection, this one too, parse the schema again
			// (sqlite.org/lang_altertable.html, step 7 of "Making Other
			// Kinds Of Table Schema Changes").
			var v int
			if err := tx.QueryRowContext(ctx, "pragma schema_version").Scan(&v); err != nil {
				return fmt.Errorf("read schema_version: %w", err)
			}
			if _, err := tx.ExecContext(ctx, fmt.Sprintf("pragma schema_version = %d", v+1)); err != nil {
				return fmt.Errorf("bump schema_version: %w", err)
			}
		}
	}
	return tx.Commit()
}

// timeLayout is how times are stored: UTC, fixed width, so that text order
// is time order and comparisons in SQL work on the text.
const timeLayout = "2006-01-02T15:04:05.000000Z"

func ts(t time.Time) string { return t.UTC().Truncate(time.Microsecond).Format(timeLayout) }

// nowTS is the store's clock, at the precision it stores.
func nowTS() (time.Time, string) {
	t := time.Now().UTC().Truncate(time.Microsecond)
	return t, t.Format(timeLayout)
}

func parseTS(s string) (time.Time, error) {
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		// Written by another tool: accept RFC 3339 and SQLite's own format.
		for _, l := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999", "2006-01-02 15:04:05"} {
			if t, err2 := time.Parse(l, s); err2 == nil {
				return t.UTC(), nil
			}
		}
		return time.Time{}, fmt.Errorf("bad timestamp %q: %w", s, err)
	}
	return t, nil
}

// nullTS stores a zero or nil time as NULL.
func nullTS(t *time.Time) any {
	if t == nil || t.IsZero() {
		return nil
	}
	return ts(*t)
}

// nullStr stores "" as NULL, as the Postgres store does for optional text.
func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// fail maps a driver error onto the office error codes.
func (s *Store) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	var oe *office.Error
	if errors.As(err, &oe) {
		if oe.Op == "" {
			oe.Op = op
		}
		return oe
	}
	code := office.EINTERNAL
	if errors.Is(err, sql.ErrNoRows) {
		code = office.ENOTFOUND
	} else if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		code = office.EUNAVAILABLE
	} else if errors.Is(err, sql.ErrConnDone) {
		code = office.EUNAVAILABLE
	}
	var se *sqlite3.Error
	if errors.As(err, &se) {
		switch se.ExtendedCode() {
		case sqlite3.CONSTRAINT_UNIQUE, sqlite3.CONSTRAINT_PRIMARYKEY:
			code = office.ECONFLICT
		case sqlite3.CONSTRAINT_FOREIGNKEY, sqlite3.CONSTRAINT_CHECK, sqlite3.CONSTRAINT_NOTNULL:
			code = office.EINVALID
		}
		switch se.Code() {
		case sqlite3.BUSY, sqlite3.LOCKED:
			code = office.EUNAVAILABLE
		}
	}
	if strings.Contains(err.Error(), "database is closed") {
		code = office.EUNAVAILABLE
	}
	return &office.Error{Code: code, Op: "sqlite: " + op, Err: err}
}

func notFound(op, what, id string) error {
	return &office.Error{Code: office.ENOTFOUND, Op: "sqlite: " + op, Message: fmt.Sprintf("no %s %s", what, id)}
}

// inList returns "(?, ?, ?)" and the args for a SQL IN over vals.
func inList(vals []string) (string, []any) {
	args := make([]any, len(vals))
	for i, v := range vals {
		args[i] = v
	}
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", len(vals)), ", ") + ")", args
}

// due returns the condition of a due list (office.Due): cond, the offices
// (all when none are named) and the agent when it is set.
func due(cond string, d office.Due) where {
	var w where
	w.add(cond)
	w.in(officeCol(d.AgentID != ""), d.OfficeIDs)
	w.eq("agent_id", d.AgentID)
	return w
}

// officeCol is the office column of a WHERE clause. With an agent named
// too it is written "+office_id", which SQLite does not use to pick an
// index (its documented way to steer the planner): without statistics it
// would take an (office_id, status, …) index and read every row of the
// office in that state, one agent's delivery costing O(office) (measured:
// a burst of 1,000 answers spent 28% of its CPU here); the agent's own
// index reads only its rows.
func officeCol(agentNamed bool) string {
	if agentNamed {
		return "+office_id"
	}
	return "office_id"
}

// where builds a WHERE clause from conditions added in order.
type where struct {
	conds []string
	args  []any
}

func (w *where) eq(col, v string) {
	if v != "" {
		w.conds = append(w.conds, col+" = ?")
		w.args = append(w.args, v)
	}
}

func (w *where) in(col string, vals []string) {
	if len(vals) > 0 {
		list, args := inList(vals)
		w.conds = append(w.conds, col+" in "+list)
		w.args = append(w.args, args...)
	}
}

func (w *where) add(cond string, args ...any) {
	w.conds = append(w.conds, cond)
	w.args = append(w.args, args...)
}

func (w *where) String() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " where " + strings.Join(w.conds, " and ")
}

func limit(n int) string {
	if n <= 0 {
		return ""
	}
	return " limit " + strconv.Itoa(n)
}

// scanner is *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// collect scans every row of rows with scan.
func collect[T any](rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
