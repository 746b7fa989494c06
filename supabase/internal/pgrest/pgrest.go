// Package pgrest is a test stand-in for PostgREST: an http.Handler that
// answers the subset of PostgREST's API the supabase store uses, by
// translating each request into SQL on a real PostgreSQL database. It keeps
// PostgREST's wire behaviour where the store depends on it: the query syntax
// (column=op.value filters with eq, neq, gt, gte, lt, lte, in, is, like,
// ilike; or=(...) and and=(...); order; limit; select), the Prefer header
// (return=representation|minimal, resolution=ignore-duplicates|merge-duplicates)
// with on_conflict, the singular media type (406 PGRST116), JSON rendering
// through PostgreSQL's own json_agg (as PostgREST does), status codes by
// SQLSTATE and the error body {code,message,details,hint}.
//
// It is a test helper: it trusts its caller, has no JWT or RLS, and runs
// every request as the database user of its URL.
package pgrest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Change is one row changed by a request, as Realtime would report it.
type Change struct {
	Schema, Table   string
	Type            string // INSERT, UPDATE, DELETE
	Record          map[string]any
	OldRecord       map[string]any
	CommitTimestamp time.Time
}

// Server is the stand-in. Mount it at /rest/v1/ (it strips that prefix).
type Server struct {
	pool   *pgxpool.Pool
	schema string

	// OnChange, when set, is called after each committed write with every
	// row it changed, in order. It must not block for long.
	OnChange func(Change)

	mu   sync.Mutex
	cols map[string]map[string]string // table → column → SQL type
}

// New connects to databaseURL and serves the tables of schema public.
func New(ctx context.Context, databaseURL string) (*Server, error) {
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return nil, err
	}
	return &Server{pool: pool, schema: "public"}, nil
}

// Close closes the database pool.
func (s *Server) Close() { s.pool.Close() }

type apiError struct {
	status                       int
	code, message, details, hint string
}

func (e *apiError) Error() string { return e.message }

func (e *apiError) write(w http.ResponseWriter) {
	nul := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(map[string]any{"code": e.code, "message": e.message, "details": nul(e.details), "hint": nul(e.hint)})
}

func badRequest(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, message: fmt.Sprintf(format, args...)}
}

// statusOf maps a SQLSTATE to PostgREST's HTTP status (docs.postgrest.org,
// "Errors": HTTP Status Codes).
func statusOf(code string) int {
	switch {
	case code == "23503", code == "23505":
		return http.StatusConflict
	case code == "42501":
		return http.StatusForbidden // 401 when the role is anon
	case code == "42P01", code == "42883":
		return http.StatusNotFound
	case code == "25006":
		return http.StatusMethodNotAllowed
	case strings.HasPrefix(code, "08"), strings.HasPrefix(code, "53") && code != "53400":
		return http.StatusServiceUnavailable
	case strings.HasPrefix(code, "22"), strings.HasPrefix(code, "23"), strings.HasPrefix(code, "42"), code == "P0001":
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

func fromDB(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return &apiError{status: statusOf(pe.Code), code: pe.Code, message: pe.Message, details: pe.Detail, hint: pe.Hint}
	}
	return &apiError{status: http.StatusServiceUnavailable, code: "PGRST000", message: "Database client error. Retrying the connection.", details: err.Error()}
}

func (s *Server) columns(ctx context.Context, table string) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.cols[table]; ok {
		return c, nil
	}
	rows, err := s.pool.Query(ctx, `
		select c.relname, a.attname, format_type(a.atttypid, a.atttypmod)
		from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
		where n.nspname = $1 and c.relkind in ('r', 'v', 'p') and a.attnum > 0 and not a.attisdropped`, s.schema)
	if err != nil {
		return nil, err
	}
	all := map[string]map[string]string{}
	for rows.Next() {
		var t, c, typ string
		if err := rows.Scan(&t, &c, &typ); err != nil {
			return nil, err
		}
		if all[t] == nil {
			all[t] = map[string]string{}
		}
		all[t][c] = typ
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	s.cols = all
	c, ok := all[table]
	if !ok {
		return nil, &apiError{status: http.StatusNotFound, code: "PGRST205",
			message: fmt.Sprintf("Could not find the table '%s.%s' in the schema cache", s.schema, table)}
	}
	return c, nil
}

// request is one parsed PostgREST request.
type request struct {
	table    string
	cols     map[string]string
	where    []string
	args     []any
	order    []string
	limit    int
	selected string
	single   bool
	prefer   map[string]string
}

func (q *request) ident(col string) (string, error) {
	if _, ok := q.cols[col]; !ok {
		return "", &apiError{status: http.StatusBadRequest, code: "42703", message: fmt.Sprintf("column %s.%s does not exist", q.table, col)}
	}
	return pgx.Identifier{q.table, col}.Sanitize(), nil
}

func (q *request) arg(v any) string {
	q.args = append(q.args, v)
	return "$" + strconv.Itoa(len(q.args))
}

// condition translates one column filter ("eq.value") to SQL.
func (q *request) condition(col, filter string) (string, error) {
	id, err := q.ident(col)
	if err != nil {
		return "", err
	}
	typ := q.cols[col]
	negate := false
	if strings.HasPrefix(filter, "not.") {
		negate, filter = true, filter[4:]
	}
	op, val, ok := strings.Cut(filter, ".")
	if !ok {
		return "", badRequest("PGRST100", "failed to parse filter (%s)", filter)
	}
	var sql string
	switch op {
	case "eq", "neq", "gt", "gte", "lt", "lte":
		sym := map[string]string{"eq": "=", "neq": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}[op]
		sql = fmt.Sprintf("%s %s cast(%s::text as %s)", id, sym, q.arg(val), typ)
	case "like", "ilike":
		kw := map[string]string{"like": "like", "ilike": "ilike"}[op]
		sql = fmt.Sprintf("%s::text %s %s", id, kw, q.arg(strings.ReplaceAll(val, "*", "%")))
	case "in":
		list, err := parseList(val)
		if err != nil {
			return "", err
		}
		sql = fmt.Sprintf("%s = any(cast(%s::text[] as %s[]))", id, q.arg(list), typ)
	case "is":
		switch strings.ToLower(val) {
		case "null", "true", "false", "unknown":
			sql = fmt.Sprintf("%s is %s", id, strings.ToLower(val))
		case "not_null":
			sql = fmt.Sprintf("%s is not null", id)
		default:
			return "", badRequest("PGRST100", "failed to parse filter (is.%s)", val)
		}
	default:
		return "", badRequest("PGRST100", "failed to parse filter (%s)", filter)
	}
	if negate {
		sql = "not (" + sql + ")"
	}
	return sql, nil
}

// parseList parses "(a,b,\"c,d\")".
func parseList(v string) ([]string, error) {
	if len(v) < 2 || !strings.HasPrefix(v, "(") || !strings.HasSuffix(v, ")") {
		return nil, badRequest("PGRST100", "failed to parse list %q", v)
	}
	v = v[1 : len(v)-1]
	var out []string
	var cur strings.Builder
	quoted := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '"':
			quoted = !quoted
		case c == '\\' && quoted && i+1 < len(v):
			i++
			cur.WriteByte(v[i])
		case c == ',' && !quoted:
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	if v != "" {
		out = append(out, cur.String())
	}
	return out, nil
}

// logic translates or=(a.eq.1,b.eq.2) (flat lists only).
func (q *request) logic(joiner, v string) (string, error) {
	list, err := parseList(v)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, item := range list {
		col, filter, ok := strings.Cut(item, ".")
		if !ok {
			return "", badRequest("PGRST100", "failed to parse logic tree (%s)", v)
		}
		c, err := q.condition(col, filter)
		if err != nil {
			return "", err
		}
		parts = append(parts, c)
	}
	if len(parts) == 0 {
		return "true", nil
	}
	return "(" + strings.Join(parts, " "+joiner+" ") + ")", nil
}

func (s *Server) parse(r *http.Request) (*request, error) {
	table := strings.Trim(strings.TrimPrefix(r.URL.Path, "/rest/v1"), "/")
	if table == "" || strings.Contains(table, "/") {
		return nil, &apiError{status: http.StatusNotFound, code: "PGRST125", message: "Invalid path specified in request URL"}
	}
	cols, err := s.columns(r.Context(), table)
	if err != nil {
		return nil, err
	}
	q := &request{table: table, cols: cols, selected: "*", prefer: map[string]string{}}
	for _, h := range r.Header.Values("Prefer") {
		for _, p := range strings.Split(h, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			q.prefer[k] = v
		}
	}
	q.single = strings.Contains(r.Header.Get("Accept"), "application/vnd.pgrst.object+json")
	for key, vals := range r.URL.Query() {
		for _, v := range vals {
			switch key {
			case "select":
				if v != "*" {
					var sel []string
					for _, c := range strings.Split(v, ",") {
						id, err := q.ident(c)
						if err != nil {
							return nil, err
						}
						sel = append(sel, id)
					}
					q.selected = strings.Join(sel, ", ")
				}
			case "order":
				for _, term := range strings.Split(v, ",") {
					parts := strings.Split(term, ".")
					id, err := q.ident(parts[0])
					if err != nil {
						return nil, err
					}
					o := id
					for _, p := range parts[1:] {
						switch p {
						case "asc", "desc":
							o += " " + p
						case "nullsfirst":
							o += " nulls first"
						case "nullslast":
							o += " nulls last"
						default:
							return nil, badRequest("PGRST100", "failed to parse order (%s)", term)
						}
					}
					q.order = append(q.order, o)
				}
			case "limit":
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 {
					return nil, badRequest("PGRST100", "failed to parse limit (%s)", v)
				}
				q.limit = n
			case "on_conflict", "columns":
				// used by the write handlers
			case "or", "and":
				c, err := q.logic(key, v)
				if err != nil {
					return nil, err
				}
				q.where = append(q.where, c)
			default:
				c, err := q.condition(key, v)
				if err != nil {
					return nil, err
				}
				q.where = append(q.where, c)
			}
		}
	}
	return q, nil
}

func (q *request) whereSQL() string {
	if len(q.where) == 0 {
		return ""
	}
	return " where " + strings.Join(q.where, " and ")
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q, err := s.parse(r)
	if err != nil {
		fromDB(err).write(w)
		return
	}
	var status int
	var body []byte
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		status, body, err = s.get(r.Context(), q)
	case http.MethodPost:
		status, body, err = s.write(r, q, "INSERT")
	case http.MethodPatch:
		status, body, err = s.write(r, q, "UPDATE")
	case http.MethodDelete:
		status, body, err = s.write(r, q, "DELETE")
	default:
		err = &apiError{status: http.StatusMethodNotAllowed, code: "PGRST117", message: "Unsupported HTTP method: " + r.Method}
	}
	if err != nil {
		fromDB(err).write(w)
		return
	}
	if body == nil {
		w.WriteHeader(status)
		return
	}
	if q.single {
		w.Header().Set("Content-Type", "application/vnd.pgrst.object+json; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
	}
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// singular checks a result for the object media type and returns the
// object; PostgREST answers 406 PGRST116 when there is not exactly one row.
func singular(rows []json.RawMessage) ([]byte, error) {
	if len(rows) != 1 {
		return nil, &apiError{status: http.StatusNotAcceptable, code: "PGRST116",
			message: "Cannot coerce the result to a single JSON object", details: fmt.Sprintf("The result contains %d rows", len(rows))}
	}
	return rows[0], nil
}

func (s *Server) get(ctx context.Context, q *request) (int, []byte, error) {
	// The table is aliased to its own name: filters name table.column.
	sql := fmt.Sprintf("select %s from %s as %s%s", q.selected, pgx.Identifier{s.schema, q.table}.Sanitize(),
		pgx.Identifier{q.table}.Sanitize(), q.whereSQL())
	if len(q.order) > 0 {
		sql += " order by " + strings.Join(q.order, ", ")
	}
	if q.limit > 0 {
		sql += " limit " + strconv.Itoa(q.limit)
	}
	var rows []json.RawMessage
	if err := s.pool.QueryRow(ctx, "select coalesce(json_agg(_r), '[]'::json) from ("+sql+") _r", q.args...).Scan(&rows); err != nil {
		return 0, nil, err
	}
	if q.single {
		b, err := singular(rows)
		return http.StatusOK, b, err
	}
	b, _ := json.Marshal(rows)
	return http.StatusOK, b, nil
}

func (s *Server) write(r *http.Request, q *request, op string) (int, []byte, error) {
	ctx := r.Context()
	tbl := pgx.Identifier{s.schema, q.table}.Sanitize() + " as " + pgx.Identifier{q.table}.Sanitize()
	var payload []byte
	var keys []string
	if op != "DELETE" {
		var err error
		payload, err = io.ReadAll(io.LimitReader(r.Body, 16<<20))
		if err != nil {
			return 0, nil, badRequest("PGRST102", "Empty or invalid json")
		}
		keys, err = bodyKeys(payload)
		if err != nil {
			return 0, nil, err
		}
		for _, k := range keys {
			if _, err := q.ident(k); err != nil {
				return 0, nil, &apiError{status: http.StatusBadRequest, code: "PGRST204",
					message: fmt.Sprintf("Could not find the '%s' column of '%s' in the schema cache", k, q.table)}
			}
		}
	}
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = pgx.Identifier{k}.Sanitize()
	}
	rowType := pgx.Identifier{s.schema, q.table}.Sanitize()
	var sql string
	var oldSQL string
	switch op {
	case "INSERT":
		p := q.arg(string(payload))
		sql = fmt.Sprintf("insert into %s (%s) select %s from json_populate_recordset(null::%s, case when json_typeof(%s::json) = 'array' then %s::json else json_build_array(%s::json) end) _b",
			tbl, strings.Join(quoted, ", "), strings.Join(quoted, ", "), rowType, p, p, p)
		if oc := r.URL.Query().Get("on_conflict"); oc != "" || q.prefer["resolution"] != "" {
			var target []string
			for _, c := range strings.Split(oc, ",") {
				if c == "" {
					continue
				}
				if _, err := q.ident(c); err != nil {
					return 0, nil, err
				}
				target = append(target, pgx.Identifier{c}.Sanitize())
			}
			if len(target) == 0 {
				target = []string{`"id"`} // the primary key, as PostgREST defaults to
			}
			switch q.prefer["resolution"] {
			case "ignore-duplicates":
				sql += fmt.Sprintf(" on conflict (%s) do nothing", strings.Join(target, ", "))
			case "merge-duplicates":
				var set []string
				for _, c := range quoted {
					set = append(set, fmt.Sprintf("%s = excluded.%s", c, c))
				}
				sql += fmt.Sprintf(" on conflict (%s) do update set %s", strings.Join(target, ", "), strings.Join(set, ", "))
			}
		}
	case "UPDATE":
		if len(keys) == 0 {
			return http.StatusOK, []byte("[]"), nil
		}
		p := q.arg(string(payload))
		var set []string
		for _, c := range quoted {
			set = append(set, fmt.Sprintf("%s = _b.%s", c, c))
		}
		sql = fmt.Sprintf("update %s set %s from json_populate_record(null::%s, %s::json) _b%s", tbl, strings.Join(set, ", "), rowType, p, q.whereSQL())
		oldSQL = fmt.Sprintf("select to_json(%s) from %s%s for update of %s", pgx.Identifier{q.table}.Sanitize(), tbl, q.whereSQL(), pgx.Identifier{q.table}.Sanitize())
	case "DELETE":
		sql = fmt.Sprintf("delete from %s%s", tbl, q.whereSQL())
	}
	sql = fmt.Sprintf("with _w as (%s returning %s.*) select coalesce(json_agg(_w), '[]'::json), clock_timestamp() from _w", sql, pgx.Identifier{q.table}.Sanitize())

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var old []map[string]any
	if oldSQL != "" {
		rows, err := tx.Query(ctx, oldSQL, q.args[:len(q.args)-1]...)
		if err != nil {
			return 0, nil, err
		}
		for rows.Next() {
			var o map[string]any
			if err := rows.Scan(&o); err != nil {
				rows.Close()
				return 0, nil, err
			}
			old = append(old, o)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, nil, err
		}
	}
	var rows []json.RawMessage
	var at time.Time
	if err := tx.QueryRow(ctx, sql, q.args...).Scan(&rows, &at); err != nil {
		return 0, nil, err
	}
	var out []byte
	if q.single {
		if out, err = singular(rows); err != nil {
			return 0, nil, err // rolled back, as PostgREST does
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, nil, err
	}
	s.notify(op, q.table, rows, old, at)

	status := http.StatusOK
	if op == "INSERT" {
		status = http.StatusCreated
	}
	if q.prefer["return"] != "representation" {
		if op != "INSERT" {
			status = http.StatusNoContent
		}
		return status, nil, nil
	}
	if out == nil {
		out, _ = json.Marshal(rows)
	}
	return status, out, nil
}

func (s *Server) notify(op, table string, rows []json.RawMessage, old []map[string]any, at time.Time) {
	if s.OnChange == nil {
		return
	}
	oldByID := map[any]map[string]any{}
	for _, o := range old {
		oldByID[o["id"]] = o
	}
	for _, raw := range rows {
		var rec map[string]any
		if json.Unmarshal(raw, &rec) != nil {
			continue
		}
		c := Change{Schema: s.schema, Table: table, Type: op, CommitTimestamp: at}
		switch op {
		case "INSERT":
			c.Record = rec
		case "UPDATE":
			c.Record, c.OldRecord = rec, oldByID[rec["id"]]
		case "DELETE":
			c.OldRecord = rec
		}
		s.OnChange(c)
	}
}

// bodyKeys returns the union of the keys of a JSON object or array of
// objects, in first-seen order.
func bodyKeys(b []byte) ([]string, error) {
	var objs []map[string]json.RawMessage
	trimmed := strings.TrimSpace(string(b))
	if strings.HasPrefix(trimmed, "[") {
		if err := json.Unmarshal(b, &objs); err != nil {
			return nil, badRequest("PGRST102", "Empty or invalid json")
		}
	} else {
		var o map[string]json.RawMessage
		if err := json.Unmarshal(b, &o); err != nil || o == nil {
			return nil, badRequest("PGRST102", "Empty or invalid json")
		}
		objs = append(objs, o)
	}
	seen := map[string]bool{}
	var keys []string
	for _, o := range objs {
		for k := range o {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	return keys, nil
}
