// Package pgrest is a test stand-in for PostgREST as a Supabase project
// runs it: an http.Handler that translates each request into SQL on a real
// PostgreSQL and runs it under the request's role, as PostgREST does. What
// it follows, with the PostgREST source lines, is listed in
// docs/notes/supabase.md ("The PostgREST stand-in"). In short:
//
//   - the JWT of the Authorization header is verified against the
//     project's keys (HS256 under the legacy secret; ES256 and RS256 by kid
//     under the published signing keys, signing.Keys.Verify), exp checked
//     with 30 s of skew; its role claim (anon when
//     absent) becomes the transaction's role and the claims become
//     request.jwt.claims, with request.method and request.path, all by
//     set_config(…, true) in the request's transaction; row-level
//     security, column grants and triggers therefore apply as on Supabase;
//   - errors carry PostgREST's codes and statuses (42501 is 401 for anon,
//     403 otherwise; PGRST301/302/303 for tokens; 406 PGRST116 for the
//     singular media type; 409 for 23505/23503);
//   - the query syntax: column filters (eq, neq, gt, gte, lt, lte, in, is,
//     like, ilike, with not.), or=() and and=(), select with aliases and
//     embedded resources through foreign keys (to-many as arrays, to-one as
//     objects), order, limit, offset;
//   - Prefer: return=representation|minimal,
//     resolution=ignore-duplicates|merge-duplicates with on_conflict, and
//     count=exact with Content-Range and 206 for a partial range.
//
// In front of PostgREST, Supabase's API gateway wants an apikey header
// holding one of the project's keys and turns an sb_ key into a role JWT
// (supabasetest's gateway); the stand-in checks that the apikey is a
// project JWT too, and uses it as the bearer token when Authorization is
// absent.
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

	"github.com/office-server/office-server/supabase/internal/signing"
)

// AnonRole is the role of a request whose JWT has no role claim
// (PostgREST's db-anon-role, "anon" on Supabase).
const AnonRole = "anon"

// Server is the stand-in. Mount it at /rest/v1/ (it strips that prefix).
type Server struct {
	pool   *pgxpool.Pool
	schema string
	keys   *signing.Keys

	// Now is the clock tokens are checked against; nil: time.Now.
	Now func() time.Time

	mu     sync.Mutex
	cache  *schemaCache
	counts map[string]int // "METHOD table" → requests served
}

// Counts returns how many requests the stand-in has served, by "METHOD
// table", and resets the counts: a test measures a server's request rate
// with it.
func (s *Server) Counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.counts
	s.counts = map[string]int{}
	return c
}

type schemaCache struct {
	cols map[string]map[string]string // table → column → SQL type
	fks  []foreignKey
	uniq map[string][][]string // table → its unique and primary keys' columns
}

// foreignKey is one foreign key of the schema: child.cols reference
// parent.refs.
type foreignKey struct {
	child  string
	cols   []string
	parent string
	refs   []string
}

// New connects to databaseURL and serves the tables of schema public to
// requests bearing JWTs signed with the project's keys.
func New(ctx context.Context, databaseURL string, keys *signing.Keys) (*Server, error) {
	if keys == nil || len(keys.Secret()) == 0 {
		return nil, errors.New("pgrest: the project's JWT keys are required")
	}
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return nil, err
	}
	return &Server{pool: pool, schema: "public", keys: keys}, nil
}

// Close closes the database pool.
func (s *Server) Close() { s.pool.Close() }

type apiError struct {
	status                       int
	code, message, details, hint string
	header                       http.Header
}

func (e *apiError) Error() string { return e.message }

func (e *apiError) write(w http.ResponseWriter) {
	nul := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	for k, v := range e.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(map[string]any{"code": e.code, "message": e.message, "details": nul(e.details), "hint": nul(e.hint)})
}

func badRequest(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, message: fmt.Sprintf(format, args...)}
}

// statusOf maps a SQLSTATE to PostgREST's HTTP status (Error.hs,
// mapSQLtoHTTP). authed is false for the anon role.
func statusOf(code, message string, authed bool) int {
	switch {
	case strings.HasPrefix(code, "08"):
		return http.StatusServiceUnavailable
	case strings.HasPrefix(code, "09"):
		return http.StatusInternalServerError
	case strings.HasPrefix(code, "0L"), strings.HasPrefix(code, "0P"), strings.HasPrefix(code, "28"):
		return http.StatusForbidden
	case code == "23503", code == "23505":
		return http.StatusConflict
	case code == "25006":
		return http.StatusMethodNotAllowed
	case code == "22023" && strings.HasPrefix(message, "role") && strings.HasSuffix(message, "does not exist"):
		return http.StatusUnauthorized
	case strings.HasPrefix(code, "25"), strings.HasPrefix(code, "2D"), strings.HasPrefix(code, "38"),
		strings.HasPrefix(code, "39"), strings.HasPrefix(code, "3B"), strings.HasPrefix(code, "40"):
		return http.StatusInternalServerError
	case code == "53400":
		return http.StatusInternalServerError
	case strings.HasPrefix(code, "53"), code == "57P01":
		return http.StatusServiceUnavailable
	case strings.HasPrefix(code, "54"), strings.HasPrefix(code, "55"), strings.HasPrefix(code, "57"),
		strings.HasPrefix(code, "58"), strings.HasPrefix(code, "F0"), strings.HasPrefix(code, "HV"),
		strings.HasPrefix(code, "XX"), code == "42P17":
		return http.StatusInternalServerError
	case code == "P0001":
		return http.StatusBadRequest
	case strings.HasPrefix(code, "PT"):
		// RAISE … USING ERRCODE = 'PTnnn' sets the status nnn; a code that
		// is no status is 500.
		if n, err := strconv.Atoi(code[2:]); err == nil && n >= 100 && n <= 999 {
			return n
		}
		return http.StatusInternalServerError
	case strings.HasPrefix(code, "P0"):
		return http.StatusInternalServerError
	case code == "42883", code == "42P01":
		return http.StatusNotFound
	case code == "42501":
		if authed {
			return http.StatusForbidden
		}
		return http.StatusUnauthorized
	}
	return http.StatusBadRequest
}

func fromDB(err error, authed bool) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return &apiError{status: statusOf(pe.Code, pe.Message, authed), code: pe.Code, message: pe.Message, details: pe.Detail, hint: pe.Hint}
	}
	return &apiError{status: http.StatusServiceUnavailable, code: "PGRST000", message: "Database client error. Retrying the connection.", details: err.Error()}
}

// auth is who a request runs as.
type auth struct {
	role   string
	claims map[string]any
}

func (a auth) authed() bool { return a.role != AnonRole }

// jwtError answers as PostgREST's JwtError does (Error.hs): 401 with a
// WWW-Authenticate header.
func jwtError(code, message string) *apiError {
	h := http.Header{}
	h.Set("WWW-Authenticate", fmt.Sprintf("Bearer error=\"invalid_token\", error_description=%q", message))
	return &apiError{status: http.StatusUnauthorized, code: code, message: message, header: h}
}

// authenticate checks the gateway's apikey, then does what PostgREST's
// Auth/Jwt.hs does with the bearer token.
func (s *Server) authenticate(r *http.Request) (auth, error) {
	apikey := r.Header.Get("apikey")
	if apikey == "" {
		apikey = r.URL.Query().Get("apikey")
	}
	if apikey == "" {
		return auth{}, &apiError{status: http.StatusUnauthorized, message: "No API key found in request", hint: "No `apikey` request header or url param was found."}
	}
	if _, err := s.keys.Verify(apikey); err != nil {
		return auth{}, &apiError{status: http.StatusUnauthorized, message: "Invalid API key", hint: "Double check your Supabase `anon` or `service_role` API key."}
	}
	token := apikey
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, t, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "bearer") {
			return auth{}, jwtError("PGRST301", "Empty JWT is sent in Authorization header")
		}
		token = strings.TrimSpace(t)
	}
	if token == "" {
		return auth{}, jwtError("PGRST301", "Empty JWT is sent in Authorization header")
	}
	claims, err := s.keys.Verify(token)
	switch {
	case errors.Is(err, signing.ErrParts):
		return auth{}, jwtError("PGRST301", fmt.Sprintf("Expected 3 parts in JWT; got %d", len(strings.Split(token, "."))))
	case errors.Is(err, signing.ErrAlgorithm):
		return auth{}, jwtError("PGRST301", "Wrong or unsupported encoding algorithm")
	case errors.Is(err, signing.ErrKey):
		return auth{}, jwtError("PGRST301", "No suitable key or wrong key type")
	case errors.Is(err, signing.ErrSignature):
		return auth{}, jwtError("PGRST301", "JWT cryptographic operation failed")
	case err != nil:
		return auth{}, jwtError("PGRST303", "Parsing claims failed")
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	const allowedSkew = 30 // seconds, Auth/Jwt.hs allowedSkewSeconds
	exp, has, err := signing.Exp(claims)
	if err != nil {
		return auth{}, jwtError("PGRST303", "The JWT 'exp' claim must be a number")
	}
	if has && now().Unix()-allowedSkew > exp {
		return auth{}, jwtError("PGRST303", "JWT expired")
	}
	role := AnonRole
	if v, ok := claims["role"].(string); ok && v != "" {
		role = v
	}
	return auth{role: role, claims: claims}, nil
}

// begin opens the request's transaction and sets its variables as
// PostgREST's txVarQuery does (Query/PreQuery.hs): search_path, role,
// request.jwt.claims (with role inserted), request.method, request.path,
// each by set_config(…, true), that is SET LOCAL.
func (s *Server) begin(ctx context.Context, r *http.Request, a auth) (pgx.Tx, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	claims := make(map[string]any, len(a.claims)+1)
	for k, v := range a.claims {
		claims[k] = v
	}
	claims["role"] = a.role
	cj, _ := json.Marshal(claims)
	if _, err := tx.Exec(ctx, `select set_config('search_path', $1, true), set_config('role', $2, true),
		set_config('request.jwt.claims', $3, true), set_config('request.method', $4, true), set_config('request.path', $5, true)`,
		pgx.Identifier{s.schema}.Sanitize(), a.role, string(cj), r.Method, r.URL.Path); err != nil {
		tx.Rollback(context.WithoutCancel(ctx))
		return nil, err
	}
	return tx, nil
}

// schemaCache returns the tables' columns, keys and foreign keys, read once
// as the database owner (PostgREST's schema cache).
func (s *Server) schemaCache(ctx context.Context) (*schemaCache, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache != nil {
		return s.cache, nil
	}
	sc := &schemaCache{cols: map[string]map[string]string{}, uniq: map[string][][]string{}}
	rows, err := s.pool.Query(ctx, `
		select c.relname, a.attname, format_type(a.atttypid, a.atttypmod)
		from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
		where n.nspname = $1 and c.relkind in ('r', 'v', 'p') and a.attnum > 0 and not a.attisdropped`, s.schema)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var t, c, typ string
		if err := rows.Scan(&t, &c, &typ); err != nil {
			return nil, err
		}
		if sc.cols[t] == nil {
			sc.cols[t] = map[string]string{}
		}
		sc.cols[t][c] = typ
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	colsOf := func(key string) string {
		return fmt.Sprintf(`array(select a.attname::text from unnest(c.%s) with ordinality k(n, o)
			join pg_attribute a on a.attrelid = c.%s and a.attnum = k.n order by k.o)`, key,
			map[string]string{"conkey": "conrelid", "confkey": "confrelid"}[key])
	}
	rows, err = s.pool.Query(ctx, `
		select c.contype::text, cl.relname::text, `+colsOf("conkey")+`, coalesce(fr.relname::text, ''),
			case when c.contype = 'f' then `+colsOf("confkey")+` else '{}'::text[] end
		from pg_constraint c join pg_class cl on cl.oid = c.conrelid join pg_namespace n on n.oid = cl.relnamespace
		left join pg_class fr on fr.oid = c.confrelid
		where n.nspname = $1 and c.contype in ('f', 'p', 'u')
		order by c.conname`, s.schema)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var typ, child, parent string
		var cols, refs []string
		if err := rows.Scan(&typ, &child, &cols, &parent, &refs); err != nil {
			return nil, err
		}
		if typ == "f" {
			sc.fks = append(sc.fks, foreignKey{child: child, cols: cols, parent: parent, refs: refs})
		} else {
			sc.uniq[child] = append(sc.uniq[child], cols)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	s.cache = sc
	return sc, nil
}

func (sc *schemaCache) table(schema, name string) (map[string]string, error) {
	c, ok := sc.cols[name]
	if !ok {
		return nil, &apiError{status: http.StatusNotFound, code: "PGRST205",
			message: fmt.Sprintf("Could not find the table '%s.%s' in the schema cache", schema, name)}
	}
	return c, nil
}

// request is one parsed PostgREST request.
type request struct {
	schema   string
	sc       *schemaCache
	table    string
	cols     map[string]string
	where    []string
	args     []any
	order    []string
	limit    int
	offset   int
	selected string
	single   bool
	prefer   map[string]string
	nested   int // embedded resources so far, to name their aliases
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

// selectItem is one element of a select parameter.
type selectItem struct {
	alias, name string
	children    []selectItem // non-nil: an embedded resource
	embed       bool
}

// parseSelect parses PostgREST's select syntax: "*", "col", "alias:col",
// "col::type" (the cast is ignored), and "[alias:]table[!hint](items)".
func parseSelect(s string) ([]selectItem, error) {
	var items []selectItem
	depth, start := 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch s[i] {
			case '(':
				depth++
				continue
			case ')':
				depth--
				if depth < 0 {
					return nil, badRequest("PGRST100", "failed to parse select parameter (%s)", s)
				}
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		part := strings.TrimSpace(s[start:i])
		start = i + 1
		if part == "" {
			continue
		}
		var it selectItem
		if open := strings.IndexByte(part, '('); open >= 0 {
			if !strings.HasSuffix(part, ")") {
				return nil, badRequest("PGRST100", "failed to parse select parameter (%s)", s)
			}
			kids, err := parseSelect(part[open+1 : len(part)-1])
			if err != nil {
				return nil, err
			}
			if kids == nil {
				kids = []selectItem{}
			}
			it.children, it.embed = kids, true
			part = part[:open]
			part, _, _ = strings.Cut(part, "!") // hints (!inner, !fk_name) are not followed
		}
		if a, n, ok := strings.Cut(part, ":"); ok && !strings.HasPrefix(n, ":") {
			it.alias, part = a, n
		}
		part, _, _ = strings.Cut(part, "::")
		part = strings.Trim(part, `"`)
		it.name = part
		items = append(items, it)
	}
	if depth != 0 {
		return nil, badRequest("PGRST100", "failed to parse select parameter (%s)", s)
	}
	return items, nil
}

// selectList renders items for the table aliased alias (whose columns are
// cols) as a SQL select list.
func (q *request) selectList(table, alias string, cols map[string]string, items []selectItem) (string, error) {
	if len(items) == 0 {
		return pgx.Identifier{alias}.Sanitize() + ".*", nil
	}
	var out []string
	for _, it := range items {
		if it.name == "*" && !it.embed {
			out = append(out, pgx.Identifier{alias}.Sanitize()+".*")
			continue
		}
		name := it.alias
		if name == "" {
			name = it.name
		}
		if !it.embed {
			if _, ok := cols[it.name]; !ok {
				return "", &apiError{status: http.StatusBadRequest, code: "42703", message: fmt.Sprintf("column %s.%s does not exist", table, it.name)}
			}
			out = append(out, pgx.Identifier{alias, it.name}.Sanitize()+" as "+pgx.Identifier{name}.Sanitize())
			continue
		}
		sub, err := q.embed(table, alias, it)
		if err != nil {
			return "", err
		}
		out = append(out, sub+" as "+pgx.Identifier{name}.Sanitize())
	}
	return strings.Join(out, ", "), nil
}

// embed renders an embedded resource as a correlated subquery, following
// the one foreign key between the two tables (PostgREST's resource
// embedding): a key on the embedded table gives an array (one-to-many,
// or an object when the key's columns are unique: one-to-one), a key on
// the parent table gives an object or null (many-to-one).
func (q *request) embed(parent, parentAlias string, it selectItem) (string, error) {
	cols, err := q.sc.table(q.schema, it.name)
	if err != nil {
		return "", err
	}
	type rel struct {
		fk     foreignKey
		toMany bool
	}
	var rels []rel
	for _, fk := range q.sc.fks {
		switch {
		case fk.child == it.name && fk.parent == parent:
			rels = append(rels, rel{fk, !q.sc.unique(fk.child, fk.cols)})
		case fk.child == parent && fk.parent == it.name:
			rels = append(rels, rel{fk, false})
		}
	}
	if len(rels) == 0 {
		return "", &apiError{status: http.StatusBadRequest, code: "PGRST200",
			message: fmt.Sprintf("Could not find a relationship between '%s' and '%s' in the schema cache", parent, it.name),
			hint:    "Perhaps you meant a different table name."}
	}
	if len(rels) > 1 {
		return "", &apiError{status: http.StatusMultipleChoices, code: "PGRST201",
			message: fmt.Sprintf("Could not embed because more than one relationship was found for '%s' and '%s'", parent, it.name)}
	}
	q.nested++
	alias := fmt.Sprintf("pgrst_%d", q.nested)
	inner, err := q.selectList(it.name, alias, cols, it.children)
	if err != nil {
		return "", err
	}
	r := rels[0]
	var on []string
	for i := range r.fk.cols {
		childAlias, parentSide := alias, parentAlias
		if r.fk.child == parent {
			childAlias, parentSide = parentAlias, alias
		}
		on = append(on, fmt.Sprintf("%s = %s", pgx.Identifier{childAlias, r.fk.cols[i]}.Sanitize(), pgx.Identifier{parentSide, r.fk.refs[i]}.Sanitize()))
	}
	from := fmt.Sprintf("select %s from %s as %s where %s", inner, pgx.Identifier{q.schema, it.name}.Sanitize(),
		pgx.Identifier{alias}.Sanitize(), strings.Join(on, " and "))
	if r.toMany {
		return fmt.Sprintf("(select coalesce(json_agg(%s_j), '[]'::json) from (%s) %s_j)", alias, from, alias), nil
	}
	return fmt.Sprintf("(select row_to_json(%s_j) from (%s) %s_j limit 1)", alias, from, alias), nil
}

func (sc *schemaCache) unique(table string, cols []string) bool {
	for _, key := range sc.uniq[table] {
		if len(key) != len(cols) {
			continue
		}
		set := map[string]bool{}
		for _, c := range key {
			set[c] = true
		}
		all := true
		for _, c := range cols {
			all = all && set[c]
		}
		if all {
			return true
		}
	}
	return false
}

// parse reads a request for /rest/v1/<table>: the table (from the schema
// cache), the Prefer and Accept headers, and the query's filters, order,
// range and select. A bad request is an *apiError with PostgREST's code.
func (s *Server) parse(r *http.Request) (*request, error) {
	table := strings.Trim(strings.TrimPrefix(r.URL.Path, "/rest/v1"), "/")
	if table == "" || strings.Contains(table, "/") {
		return nil, &apiError{status: http.StatusNotFound, code: "PGRST125", message: "Invalid path specified in request URL"}
	}
	sc, err := s.schemaCache(r.Context())
	if err != nil {
		return nil, err
	}
	cols, err := sc.table(s.schema, table)
	if err != nil {
		return nil, err
	}
	q := &request{schema: s.schema, sc: sc, table: table, cols: cols, prefer: map[string]string{}}
	for _, h := range r.Header.Values("Prefer") {
		for _, p := range strings.Split(h, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			q.prefer[k] = v
		}
	}
	q.single = strings.Contains(r.Header.Get("Accept"), "application/vnd.pgrst.object+json")
	var items []selectItem
	for key, vals := range r.URL.Query() {
		for _, v := range vals {
			if key == "select" {
				if items, err = parseSelect(v); err != nil {
					return nil, err
				}
				continue
			}
			if err := q.param(key, v); err != nil {
				return nil, err
			}
		}
	}
	if q.selected, err = q.selectList(table, table, cols, items); err != nil {
		return nil, err
	}
	return q, nil
}

// param adds one query parameter other than select to q: order, limit,
// offset, a logic tree (or, and) or a column filter.
func (q *request) param(key, v string) error {
	switch key {
	case "order":
		return q.orderBy(v)
	case "limit", "offset":
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return badRequest("PGRST100", "failed to parse %s (%s)", key, v)
		}
		if key == "limit" {
			q.limit = n
		} else {
			q.offset = n
		}
	case "on_conflict", "columns", "apikey":
		// used by the write handlers, or the gateway's
	case "or", "and":
		c, err := q.logic(key, v)
		if err != nil {
			return err
		}
		q.where = append(q.where, c)
	default:
		c, err := q.condition(key, v)
		if err != nil {
			return err
		}
		q.where = append(q.where, c)
	}
	return nil
}

// orderBy adds the terms of an order parameter (col.desc.nullslast,…).
func (q *request) orderBy(v string) error {
	for _, term := range strings.Split(v, ",") {
		parts := strings.Split(term, ".")
		id, err := q.ident(parts[0])
		if err != nil {
			return err
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
				return badRequest("PGRST100", "failed to parse order (%s)", term)
			}
		}
		q.order = append(q.order, o)
	}
	return nil
}

func (q *request) whereSQL() string {
	if len(q.where) == 0 {
		return ""
	}
	return " where " + strings.Join(q.where, " and ")
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.counts == nil {
		s.counts = map[string]int{}
	}
	s.counts[r.Method+" "+strings.Trim(strings.TrimPrefix(r.URL.Path, "/rest/v1"), "/")]++
	s.mu.Unlock()
	a, err := s.authenticate(r)
	if err != nil {
		fromDB(err, false).write(w)
		return
	}
	ctx := r.Context()
	if fn, ok := strings.CutPrefix(strings.Trim(strings.TrimPrefix(r.URL.Path, "/rest/v1"), "/"), "rpc/"); ok {
		s.serveRPC(w, r, a, fn)
		return
	}
	q, err := s.parse(r)
	if err != nil {
		fromDB(err, a.authed()).write(w)
		return
	}
	tx, err := s.begin(ctx, r, a)
	if err != nil {
		fromDB(err, a.authed()).write(w)
		return
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var res result
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		res, err = s.get(ctx, tx, q)
	case http.MethodPost:
		res, err = s.write(ctx, tx, r, q, "INSERT")
	case http.MethodPatch:
		res, err = s.write(ctx, tx, r, q, "UPDATE")
	case http.MethodDelete:
		res, err = s.write(ctx, tx, r, q, "DELETE")
	default:
		err = &apiError{status: http.StatusMethodNotAllowed, code: "PGRST117", message: "Unsupported HTTP method: " + r.Method}
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		fromDB(err, a.authed()).write(w)
		return
	}
	if res.contentRange != "" {
		w.Header().Set("Content-Range", res.contentRange)
	}
	if res.body == nil {
		w.WriteHeader(res.status)
		return
	}
	if q.single {
		w.Header().Set("Content-Type", "application/vnd.pgrst.object+json; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
	}
	w.WriteHeader(res.status)
	if r.Method != http.MethodHead {
		w.Write(res.body)
	}
}

// result is what a handler answers.
type result struct {
	status       int
	body         []byte
	contentRange string
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

// contentRange renders the Content-Range header and the status as
// PostgREST's RangeQuery.hs does (rangeStatusHeader, contentRangeH).
func contentRange(lower, n int, total int64, counted bool) (string, int) {
	upper := lower + n - 1
	rng := "*"
	if (!counted || total != 0) && lower <= upper {
		rng = fmt.Sprintf("%d-%d", lower, upper)
	}
	tot := "*"
	status := http.StatusOK
	if counted {
		tot = strconv.FormatInt(total, 10)
		switch {
		case int64(lower) > total:
			status = http.StatusRequestedRangeNotSatisfiable
		case int64(1+upper-lower) < total:
			status = http.StatusPartialContent
		}
	}
	return rng + "/" + tot, status
}

func (s *Server) get(ctx context.Context, tx pgx.Tx, q *request) (result, error) {
	// The table is aliased to its own name: filters name table.column.
	from := fmt.Sprintf("from %s as %s%s", pgx.Identifier{s.schema, q.table}.Sanitize(),
		pgx.Identifier{q.table}.Sanitize(), q.whereSQL())
	sql := "select " + q.selected + " " + from
	if len(q.order) > 0 {
		sql += " order by " + strings.Join(q.order, ", ")
	}
	if q.limit > 0 {
		sql += " limit " + strconv.Itoa(q.limit)
	}
	if q.offset > 0 {
		sql += " offset " + strconv.Itoa(q.offset)
	}
	var rows []json.RawMessage
	if err := tx.QueryRow(ctx, "select coalesce(json_agg(_r), '[]'::json) from ("+sql+") _r", q.args...).Scan(&rows); err != nil {
		return result{}, err
	}
	var total int64
	counted := q.prefer["count"] == "exact"
	if counted {
		if err := tx.QueryRow(ctx, "select count(*) "+from, q.args...).Scan(&total); err != nil {
			return result{}, err
		}
	}
	cr, status := contentRange(q.offset, len(rows), total, counted)
	if status == http.StatusRequestedRangeNotSatisfiable {
		// Response.hs: the error body, with the Content-Range header.
		return result{}, &apiError{status: status, code: "PGRST103", message: "Requested range not satisfiable",
			details: fmt.Sprintf("An offset of %d was requested, but there are only %d rows.", q.offset, total),
			header:  http.Header{"Content-Range": {cr}}}
	}
	if q.single {
		b, err := singular(rows)
		return result{status: http.StatusOK, body: b, contentRange: cr}, err
	}
	b, _ := json.Marshal(rows)
	return result{status: status, body: b, contentRange: cr}, nil
}

// write runs an INSERT, UPDATE or DELETE (op) of q in tx and returns its
// response: the rows when Prefer return=representation, else only the
// status and Content-Range.
func (s *Server) write(ctx context.Context, tx pgx.Tx, r *http.Request, q *request, op string) (result, error) {
	var payload []byte
	var keys []string
	if op != "DELETE" {
		var err error
		if payload, keys, err = q.body(r); err != nil {
			return result{}, err
		}
	}
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = pgx.Identifier{k}.Sanitize()
	}
	tbl := pgx.Identifier{s.schema, q.table}.Sanitize() + " as " + pgx.Identifier{q.table}.Sanitize()
	rowType := pgx.Identifier{s.schema, q.table}.Sanitize()
	var sql string
	switch op {
	case "INSERT":
		p := q.arg(string(payload))
		sql = fmt.Sprintf("insert into %s (%s) select %s from json_populate_recordset(null::%s, case when json_typeof(%s::json) = 'array' then %s::json else json_build_array(%s::json) end) _b",
			tbl, strings.Join(quoted, ", "), strings.Join(quoted, ", "), rowType, p, p, p)
		conflict, err := q.onConflict(r, quoted)
		if err != nil {
			return result{}, err
		}
		sql += conflict
	case "UPDATE":
		if len(keys) == 0 {
			return result{status: http.StatusOK, body: []byte("[]")}, nil
		}
		p := q.arg(string(payload))
		var set []string
		for _, c := range quoted {
			set = append(set, fmt.Sprintf("%s = _b.%s", c, c))
		}
		sql = fmt.Sprintf("update %s set %s from json_populate_record(null::%s, %s::json) _b%s", tbl, strings.Join(set, ", "), rowType, p, q.whereSQL())
	case "DELETE":
		sql = fmt.Sprintf("delete from %s%s", tbl, q.whereSQL())
	}
	return q.exec(ctx, tx, sql, op)
}

// body reads a write's JSON body (an object or an array of objects, at
// most 16 MiB) and the columns it names, each of which must be q's
// table's.
func (q *request) body(r *http.Request) (payload []byte, keys []string, err error) {
	payload, err = io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		return nil, nil, badRequest("PGRST102", "Empty or invalid json")
	}
	keys, err = bodyKeys(payload)
	if err != nil {
		return nil, nil, err
	}
	for _, k := range keys {
		if _, err := q.ident(k); err != nil {
			return nil, nil, &apiError{status: http.StatusBadRequest, code: "PGRST204",
				message: fmt.Sprintf("Could not find the '%s' column of '%s' in the schema cache", k, q.table)}
		}
	}
	return payload, keys, nil
}

// onConflict is an INSERT's "on conflict" clause for the on_conflict
// parameter and Prefer resolution (ignore- or merge-duplicates) of the
// quoted columns; "" when there is none.
func (q *request) onConflict(r *http.Request, quoted []string) (string, error) {
	oc := r.URL.Query().Get("on_conflict")
	if oc == "" && q.prefer["resolution"] == "" {
		return "", nil
	}
	var target []string
	for _, c := range strings.Split(oc, ",") {
		if c == "" {
			continue
		}
		if _, err := q.ident(c); err != nil {
			return "", err
		}
		target = append(target, pgx.Identifier{c}.Sanitize())
	}
	if len(target) == 0 {
		target = []string{`"id"`} // the primary key, as PostgREST defaults to
	}
	switch q.prefer["resolution"] {
	case "ignore-duplicates":
		return fmt.Sprintf(" on conflict (%s) do nothing", strings.Join(target, ", ")), nil
	case "merge-duplicates":
		var set []string
		for _, c := range quoted {
			set = append(set, fmt.Sprintf("%s = excluded.%s", c, c))
		}
		return fmt.Sprintf(" on conflict (%s) do update set %s", strings.Join(target, ", "), strings.Join(set, ", ")), nil
	}
	return "", nil
}

// exec runs a write's sql in tx and builds the response of op: the rows
// (selected as q asks) when Prefer return=representation, and the single
// object when Accept asks for one (more or fewer rows roll it back).
func (q *request) exec(ctx context.Context, tx pgx.Tx, sql, op string) (result, error) {
	repr := q.prefer["return"] == "representation"
	var rows []json.RawMessage
	var n int
	if repr {
		// RETURNING needs the SELECT privilege and policies, as PostgREST's
		// representation does.
		sql = fmt.Sprintf("with %s as (%s returning %s.*) select coalesce(json_agg(_r), '[]'::json), count(*) from (select %s from %s) _r",
			pgx.Identifier{q.table}.Sanitize(), sql, pgx.Identifier{q.table}.Sanitize(), q.selected, pgx.Identifier{q.table}.Sanitize())
		if err := tx.QueryRow(ctx, sql, q.args...).Scan(&rows, &n); err != nil {
			return result{}, err
		}
	} else {
		tag, err := tx.Exec(ctx, sql, q.args...)
		if err != nil {
			return result{}, err
		}
		n = int(tag.RowsAffected())
	}
	var out []byte
	if q.single {
		if !repr {
			rows = make([]json.RawMessage, n)
		}
		b, err := singular(rows)
		if err != nil {
			return result{}, err // rolled back, as PostgREST does
		}
		if repr {
			out = b
		}
	}
	return writeResult(op, repr, rows, n, out), nil
}

// writeResult is the response to a write of n rows: 201 for INSERT (with
// Content-Range */*), else 200, or 204 without representation; out, when
// set, is the body (the single object), else rows.
func writeResult(op string, repr bool, rows []json.RawMessage, n int, out []byte) result {
	cr, _ := contentRange(0, n, 0, false)
	if op == "INSERT" {
		cr = "*/*"
	}
	status := http.StatusOK
	if op == "INSERT" {
		status = http.StatusCreated
	}
	if !repr {
		if op != "INSERT" {
			status = http.StatusNoContent
		}
		return result{status: status, contentRange: cr}
	}
	if out == nil {
		out, _ = json.Marshal(rows)
	}
	return result{status: status, body: out, contentRange: cr}
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
