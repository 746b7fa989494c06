package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// maxStmts bounds the statement cache; filters with IN lists of varying
// length make distinct statements, which past the bound run unprepared.
const maxStmts = 256

// stmts caches prepared statements of one pool. Parsing dominated the cost of
// a store call before (the driver does not cache), so every fixed statement
// is prepared once per connection.
type stmts struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func newStmts(db *sql.DB) *stmts { return &stmts{db: db, m: map[string]*sql.Stmt{}} }

// get returns the prepared statement for q, or nil when the cache is full.
func (c *stmts) get(ctx context.Context, q string) (*sql.Stmt, error) {
	c.mu.Lock()
	st, full := c.m[q], len(c.m) >= maxStmts
	c.mu.Unlock()
	if st != nil || full {
		return st, nil
	}
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[q]; old != nil {
		st.Close()
		return old, nil
	}
	c.m[q] = st
	return st, nil
}

func (c *stmts) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	st, err := c.get(ctx, q)
	if err != nil || st == nil {
		// A failed prepare is reported by the query itself.
		return c.db.QueryRowContext(ctx, q, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

func (c *stmts) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := c.get(ctx, q)
	if err != nil || st == nil {
		return c.db.QueryContext(ctx, q, args...)
	}
	return st.QueryContext(ctx, args...)
}

func (c *stmts) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	st, err := c.get(ctx, q)
	if err != nil || st == nil {
		return c.db.ExecContext(ctx, q, args...)
	}
	return st.ExecContext(ctx, args...)
}

func (c *stmts) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		st.Close()
		delete(c.m, q)
	}
}
