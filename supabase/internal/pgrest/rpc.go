package pgrest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// routine is a function of the exposed schema as the RPC path sees it.
type routine struct {
	name      string
	params    []routineParam // IN parameters, in order
	setOf     bool           // returns setof (or table)
	composite bool           // returns a row type (or table)
}

type routineParam struct {
	name, typ  string
	hasDefault bool
}

// routines reads the functions named name in the exposed schema, as
// PostgREST's schema cache does (SchemaCache.hs, allFunctions): IN and
// INOUT and VARIADIC parameters with their types; whether the function
// returns a set; whether its result is a composite (a table's row type, a
// RETURNS TABLE or OUT parameters) or a scalar.
func (s *Server) routines(ctx context.Context, tx pgx.Tx, name string) ([]routine, error) {
	rows, err := tx.Query(ctx, `
		select coalesce(p.proargnames, '{}'), coalesce(p.proargmodes::text[], '{}'),
		       array(select format_type(t, null) from unnest(coalesce(p.proallargtypes, p.proargtypes::oid[])) t),
		       p.pronargdefaults, p.proretset,
		       t.typtype = 'c' or (t.typtype = 'p' and t.typname = 'record')
		from pg_proc p join pg_namespace n on n.oid = p.pronamespace join pg_type t on t.oid = p.prorettype
		where n.nspname = $1 and p.proname = $2 and p.prokind = 'f'`, s.schema, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []routine
	for rows.Next() {
		var names, modes, types []string
		var ndefaults int
		rt := routine{name: name}
		if err := rows.Scan(&names, &modes, &types, &ndefaults, &rt.setOf, &rt.composite); err != nil {
			return nil, err
		}
		for i, typ := range types {
			mode := "i"
			if i < len(modes) {
				mode = modes[i]
			}
			if mode != "i" && mode != "b" && mode != "v" {
				continue // OUT or TABLE column
			}
			n := ""
			if i < len(names) {
				n = names[i]
			}
			rt.params = append(rt.params, routineParam{name: n, typ: typ})
		}
		// The last pronargdefaults IN parameters have defaults.
		for i := len(rt.params) - ndefaults; i < len(rt.params); i++ {
			if i >= 0 {
				rt.params[i].hasDefault = true
			}
		}
		out = append(out, rt)
	}
	return out, rows.Err()
}

// call answers POST /rpc/<name> with a JSON object of named arguments as
// PostgREST does (Plan/CallPlan.hs, Query/QueryBuilder.hs callPlanToQuery,
// Query/SqlFragment.hs fromJsonBodyF and asJsonF):
//   - the function is the one whose parameters are exactly the body's keys,
//     give or take parameters with defaults; none is 404 PGRST202 "Could
//     not find the function <schema>.<name>(<keys>) in the schema cache";
//   - the arguments are read from the body with json_to_record and passed
//     by name (name := pgrst_body.name);
//   - the body: a scalar function's value (null as null), a composite's
//     row as an object, a set as an array;
//   - it runs in the request's transaction under its role, so EXECUTE
//     grants apply (42501: 401 for anon, 403 otherwise), and an error the
//     function raises is answered by its SQLSTATE (PTnnn: status nnn).
func (s *Server) call(ctx context.Context, tx pgx.Tx, r *http.Request, name string) (result, error) {
	if r.Method != http.MethodPost {
		return result{}, &apiError{status: http.StatusMethodNotAllowed, code: "PGRST101", message: "Only POST is supported by the stand-in for functions"}
	}
	payload, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		return result{}, badRequest("PGRST102", "Empty or invalid json")
	}
	args := map[string]json.RawMessage{}
	if strings.TrimSpace(string(payload)) != "" {
		if err := json.Unmarshal(payload, &args); err != nil || args == nil {
			return result{}, badRequest("PGRST102", "Empty or invalid json")
		}
	} else {
		payload = []byte("{}")
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rts, err := s.routines(ctx, tx, name)
	if err != nil {
		return result{}, err
	}
	var fn *routine
	for i, rt := range rts {
		if matches(rt, args) {
			fn = &rts[i]
			break
		}
	}
	if fn == nil {
		msg := fmt.Sprintf("Could not find the function %s.%s(%s) in the schema cache", s.schema, name, strings.Join(keys, ", "))
		if len(keys) == 0 {
			msg = fmt.Sprintf("Could not find the function %s.%s without parameters in the schema cache", s.schema, name)
		}
		return result{}, &apiError{status: http.StatusNotFound, code: "PGRST202", message: msg}
	}
	var cols, named []string
	for _, p := range fn.params {
		if _, ok := args[p.name]; !ok {
			continue // its default
		}
		id := pgx.Identifier{p.name}.Sanitize()
		cols = append(cols, id+" "+p.typ)
		named = append(named, id+" := pgrst_body."+id)
	}
	callee := pgx.Identifier{s.schema, name}.Sanitize() + "(" + strings.Join(named, ", ") + ")"
	from := "from "
	if len(cols) > 0 {
		from += "json_to_record($1::json) as pgrst_body(" + strings.Join(cols, ", ") + "), lateral "
	}
	var sql string
	switch {
	case fn.composite:
		sql = "select %s from (select pgrst_call.* " + from + callee + " pgrst_call) _postgrest_t"
		agg := "coalesce(json_agg(_postgrest_t), '[]')"
		if !fn.setOf {
			agg = "coalesce(json_agg(_postgrest_t)->0, 'null')"
		}
		sql = fmt.Sprintf(sql, agg)
	default:
		sql = "select %s from (select pgrst_call.pgrst_scalar " + from + "(select " + callee + " pgrst_scalar) pgrst_call) _postgrest_t"
		agg := "coalesce(json_agg(_postgrest_t.pgrst_scalar), '[]')"
		if !fn.setOf {
			agg = "coalesce(json_agg(_postgrest_t.pgrst_scalar)->0, 'null')"
		}
		sql = fmt.Sprintf(sql, agg)
	}
	var qargs []any
	if len(cols) > 0 {
		qargs = append(qargs, string(payload))
	}
	var body json.RawMessage
	if err := tx.QueryRow(ctx, sql, qargs...).Scan(&body); err != nil {
		return result{}, err
	}
	return result{status: http.StatusOK, body: body}, nil
}

// matches reports whether args name every parameter without a default of
// rt and nothing else.
func matches(rt routine, args map[string]json.RawMessage) bool {
	n := 0
	for _, p := range rt.params {
		if _, ok := args[p.name]; ok {
			n++
		} else if !p.hasDefault {
			return false
		}
	}
	return n == len(args)
}

// serveRPC runs call in the request's transaction and writes its answer.
func (s *Server) serveRPC(w http.ResponseWriter, r *http.Request, a auth, name string) {
	ctx := r.Context()
	tx, err := s.begin(ctx, r, a)
	if err != nil {
		fromDB(err, a.authed()).write(w)
		return
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	res, err := s.call(ctx, tx, r, name)
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		fromDB(err, a.authed()).write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(res.status)
	w.Write(res.body)
}
