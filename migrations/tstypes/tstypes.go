// Package tstypes writes TypeScript definitions of a database's public
// schema in the shape `supabase gen types typescript` produces (a Database
// type with Tables[t].Row, Insert, Update and Relationships, Views,
// Functions[f].Args and Returns, Enums, CompositeTypes), so that a web
// frontend using supabase-js (createClient<Database>) is typed against the
// office's migrations. Two departures, both for the member's contract
// (docs/frontend.md): Functions lists only what the authenticated role may
// execute, and MemberColumns lists, per table, the columns a member may
// select.
package tstypes

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// column is one column of a table.
type column struct {
	name, typ   string // typ: the element type's name (udt), "_" prefix for arrays
	nullable    bool
	hasDefault  bool
	memberRead  bool
	generated   bool
	ordinalSort int
}

type relationship struct {
	name, table string
	cols, refs  []string
	oneToOne    bool
}

type param struct {
	name, typ  string
	hasDefault bool
}

type function struct {
	name      string
	args      []param
	returns   string  // scalar udt name, when not a row
	rowCols   []param // the row's columns, when it returns a row or table
	setOf     bool
	rowReturn bool
}

// Generate reads schema public through conn and returns the definitions.
func Generate(ctx context.Context, conn *pgx.Conn) (string, error) {
	// Views are written as none: refuse a schema that has one rather than
	// leave it out of the types silently.
	var views string
	if err := conn.QueryRow(ctx, `select coalesce(string_agg(c.relname, ', ' order by c.relname), '') from pg_class c
		join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'public' and c.relkind in ('v', 'm', 'f')`).Scan(&views); err != nil {
		return "", fmt.Errorf("read views: %w", err)
	}
	if views != "" {
		return "", fmt.Errorf("schema public has views (%s): the generator writes tables and functions only; teach it views first", views)
	}
	tables, err := readTables(ctx, conn)
	if err != nil {
		return "", fmt.Errorf("read tables: %w", err)
	}
	rels, err := readRelationships(ctx, conn)
	if err != nil {
		return "", fmt.Errorf("read foreign keys: %w", err)
	}
	fns, err := readFunctions(ctx, conn)
	if err != nil {
		return "", fmt.Errorf("read functions: %w", err)
	}
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("export type Database = {\n  public: {\n    Tables: {\n")
	names := make([]string, 0, len(tables))
	for n := range tables {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, t := range names {
		writeTable(&b, t, tables[t], rels[t])
	}
	b.WriteString("    }\n    Views: {\n      [_ in never]: never\n    }\n    Functions: {\n")
	for _, f := range fns {
		writeFunction(&b, f)
	}
	b.WriteString("    }\n    Enums: {\n      [_ in never]: never\n    }\n    CompositeTypes: {\n      [_ in never]: never\n    }\n  }\n}\n")
	b.WriteString(helpers)
	writeMemberColumns(&b, names, tables)
	return b.String(), nil
}

// writeTable writes table t's entry of Tables: its Row, Insert (optional
// where nullable, defaulted or generated), Update (all optional) and the
// Relationships of its foreign keys rs.
func writeTable(b *strings.Builder, t string, cols []column, rs []relationship) {
	fmt.Fprintf(b, "      %s: {\n", t)
	b.WriteString("        Row: {\n")
	for _, c := range cols {
		fmt.Fprintf(b, "          %s: %s\n", c.name, tsType(c.typ, c.nullable))
	}
	b.WriteString("        }\n        Insert: {\n")
	for _, c := range cols {
		opt := ""
		if c.nullable || c.hasDefault || c.generated {
			opt = "?"
		}
		fmt.Fprintf(b, "          %s%s: %s\n", c.name, opt, tsType(c.typ, c.nullable))
	}
	b.WriteString("        }\n        Update: {\n")
	for _, c := range cols {
		fmt.Fprintf(b, "          %s?: %s\n", c.name, tsType(c.typ, c.nullable))
	}
	b.WriteString("        }\n        Relationships: [")
	if len(rs) == 0 {
		b.WriteString("]\n")
	} else {
		b.WriteString("\n")
		for _, r := range rs {
			fmt.Fprintf(b, "          {\n            foreignKeyName: %q\n            columns: [%s]\n            isOneToOne: %t\n            referencedRelation: %q\n            referencedColumns: [%s]\n          },\n",
				r.name, quoteList(r.cols), r.oneToOne, r.table, quoteList(r.refs))
		}
		b.WriteString("        ]\n")
	}
	b.WriteString("      }\n")
}

// writeFunction writes f's entry of Functions: its Args (never when it
// takes none; optional where defaulted) and Returns (a row's columns, all
// nullable, or a scalar; an array when it returns a set).
func writeFunction(b *strings.Builder, f function) {
	fmt.Fprintf(b, "      %s: {\n        Args: ", f.name)
	if len(f.args) == 0 {
		b.WriteString("never\n")
	} else {
		b.WriteString("{\n")
		for _, a := range f.args {
			opt := ""
			if a.hasDefault {
				opt = "?"
			}
			fmt.Fprintf(b, "          %s%s: %s\n", a.name, opt, tsType(a.typ, false))
		}
		b.WriteString("        }\n")
	}
	b.WriteString("        Returns: ")
	if f.rowReturn {
		b.WriteString("{\n")
		for _, c := range f.rowCols {
			fmt.Fprintf(b, "          %s: %s\n", c.name, tsType(c.typ, true))
		}
		b.WriteString("        }")
	} else {
		b.WriteString(tsType(f.returns, false))
	}
	if f.setOf {
		b.WriteString("[]")
	}
	b.WriteString("\n      }\n")
}

// writeMemberColumns writes the MemberColumns type: for each of the tables
// (in the order of names), the union of the columns a member may select, or
// never.
func writeMemberColumns(b *strings.Builder, names []string, tables map[string][]column) {
	b.WriteString("\n// The columns a signed-in member (role authenticated) may select, per\n// table: select only these (select('*') is refused where a column is\n// missing, docs/frontend.md).\nexport type MemberColumns = {\n")
	for _, t := range names {
		var cs []string
		for _, c := range tables[t] {
			if c.memberRead {
				cs = append(cs, fmt.Sprintf("%q", c.name))
			}
		}
		if len(cs) == 0 {
			cs = []string{"never"}
		}
		fmt.Fprintf(b, "  %s: %s\n", t, strings.Join(cs, " | "))
	}
	b.WriteString("}\n")
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// tsType maps a PostgreSQL type name (pg_type.typname; arrays start with
// "_") to TypeScript as supabase's generator does.
func tsType(udt string, nullable bool) string {
	var t string
	if strings.HasPrefix(udt, "_") {
		t = tsType(udt[1:], false) + "[]"
	} else {
		switch udt {
		case "bool":
			t = "boolean"
		case "int2", "int4", "int8", "float4", "float8", "numeric", "oid":
			t = "number"
		case "json", "jsonb":
			t = "Json"
		case "void":
			t = "undefined"
		case "record":
			t = "Record<string, unknown>"
		default: // text, uuid, timestamptz, interval, bytea, …
			t = "string"
		}
	}
	if nullable {
		t += " | null"
	}
	return t
}

func readTables(ctx context.Context, conn *pgx.Conn) (map[string][]column, error) {
	rows, err := conn.Query(ctx, `
		select c.relname::text, a.attname::text, t.typname::text, not a.attnotnull,
		       a.atthasdef or a.attidentity <> '', a.attgenerated <> '',
		       has_column_privilege('authenticated', c.oid, a.attname, 'SELECT'), a.attnum
		from pg_class c
		join pg_namespace n on n.oid = c.relnamespace
		join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
		join pg_type t on t.oid = a.atttypid
		where n.nspname = 'public' and c.relkind in ('r', 'p')
		order by c.relname, a.attnum`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]column{}
	for rows.Next() {
		var t string
		var c column
		if err := rows.Scan(&t, &c.name, &c.typ, &c.nullable, &c.hasDefault, &c.generated, &c.memberRead, &c.ordinalSort); err != nil {
			return nil, err
		}
		out[t] = append(out[t], c)
	}
	return out, rows.Err()
}

func readRelationships(ctx context.Context, conn *pgx.Conn) (map[string][]relationship, error) {
	rows, err := conn.Query(ctx, `
		select con.conname::text, child.relname::text, parent.relname::text,
		       array(select a.attname::text from unnest(con.conkey) with ordinality k(n, i)
		             join pg_attribute a on a.attrelid = con.conrelid and a.attnum = k.n order by k.i),
		       array(select a.attname::text from unnest(con.confkey) with ordinality k(n, i)
		             join pg_attribute a on a.attrelid = con.confrelid and a.attnum = k.n order by k.i),
		       exists (select 1 from pg_index ix where ix.indrelid = con.conrelid and ix.indisunique
		               and ix.indpred is null and ix.indexprs is null
		               and (select array_agg(x order by x) from unnest(ix.indkey::int2[]) x)
		                 = (select array_agg(x order by x) from unnest(con.conkey) x))
		from pg_constraint con
		join pg_class child on child.oid = con.conrelid
		join pg_class parent on parent.oid = con.confrelid
		join pg_namespace n on n.oid = child.relnamespace
		join pg_namespace pn on pn.oid = parent.relnamespace
		where con.contype = 'f' and n.nspname = 'public' and pn.nspname = 'public'
		order by child.relname, con.conname`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]relationship{}
	for rows.Next() {
		var child string
		var r relationship
		if err := rows.Scan(&r.name, &child, &r.table, &r.cols, &r.refs, &r.oneToOne); err != nil {
			return nil, err
		}
		out[child] = append(out[child], r)
	}
	return out, rows.Err()
}

// readFunctions reads the functions of schema public the authenticated
// role may execute (not triggers), in name order, with their arguments and
// what they return; a composite return type's columns are read from its
// relation.
func readFunctions(ctx context.Context, conn *pgx.Conn) ([]function, error) {
	rows, err := conn.Query(ctx, `
		select p.proname::text, coalesce(p.proargnames::text[], '{}'), coalesce(p.proargmodes::text[], '{}'),
		       array(select t.typname::text from unnest(coalesce(p.proallargtypes, p.proargtypes::oid[])) with ordinality x(o, i)
		             join pg_type t on t.oid = x.o order by x.i),
		       p.pronargdefaults, p.proretset, rt.typname::text, rt.typtype::text, coalesce(rt.typrelid, 0)::oid
		from pg_proc p
		join pg_namespace n on n.oid = p.pronamespace
		join pg_type rt on rt.oid = p.prorettype
		where n.nspname = 'public' and p.prokind = 'f' and rt.typname <> 'trigger'
		  and has_function_privilege('authenticated', p.oid, 'EXECUTE')
		order by p.proname, p.oid`)
	if err != nil {
		return nil, err
	}
	var rs []rawFunction
	for rows.Next() {
		x, err := scanFunction(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		rs = append(rs, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]function, 0, len(rs))
	for _, x := range rs {
		if x.f.rowReturn && x.f.rowCols == nil {
			x.f.rowCols, err = readRowColumns(ctx, conn, x.relid)
			if err != nil {
				return nil, err
			}
		}
		out = append(out, x.f)
	}
	return out, nil
}

// rawFunction is a function as its pg_proc row gives it: relid is the
// relation of a composite return type, whose columns are read afterwards.
type rawFunction struct {
	f     function
	relid uint32
}

// scanFunction scans one row of readFunctions' query: the input arguments
// (the last ones defaulted), and a row return from OUT/TABLE columns
// (returns record) or a composite type (columns to be read from relid).
func scanFunction(rows pgx.Rows) (rawFunction, error) {
	var names, modes, types []string
	var ndef int
	var typtype string
	var x rawFunction
	var outCol []param
	if err := rows.Scan(&x.f.name, &names, &modes, &types, &ndef, &x.f.setOf, &x.f.returns, &typtype, &x.relid); err != nil {
		return x, err
	}
	for i, typ := range types {
		mode, name := "i", ""
		if i < len(modes) {
			mode = modes[i]
		}
		if i < len(names) {
			name = names[i]
		}
		switch mode {
		case "i", "b", "v":
			x.f.args = append(x.f.args, param{name: name, typ: typ})
		}
		if mode == "o" || mode == "b" || mode == "t" {
			outCol = append(outCol, param{name: name, typ: typ})
		}
	}
	for i := len(x.f.args) - ndef; i < len(x.f.args); i++ {
		if i >= 0 {
			x.f.args[i].hasDefault = true
		}
	}
	switch {
	case len(outCol) > 0 && x.f.returns == "record":
		x.f.rowReturn, x.f.rowCols = true, outCol
	case typtype == "c":
		x.f.rowReturn = true
	}
	return x, nil
}

// readRowColumns reads the columns of relation relid (a composite type's),
// in order.
func readRowColumns(ctx context.Context, conn *pgx.Conn, relid uint32) ([]param, error) {
	cols, err := conn.Query(ctx, `select a.attname::text, t.typname::text from pg_attribute a join pg_type t on t.oid = a.atttypid
				where a.attrelid = $1 and a.attnum > 0 and not a.attisdropped order by a.attnum`, relid)
	if err != nil {
		return nil, err
	}
	defer cols.Close()
	var out []param
	for cols.Next() {
		var p param
		if err := cols.Scan(&p.name, &p.typ); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, cols.Err()
}

const header = `// Generated by migrations/tstypes from the migrated database (migrations/):
// do not edit. Regenerate with
//   go test ./migrations/tstypes -run TestTypesMatchMigrations -update
// The contract these types describe is docs/frontend.md.

export type Json =
  | string
  | number
  | boolean
  | null
  | { [key: string]: Json | undefined }
  | Json[]

`

const helpers = `
type PublicSchema = Database["public"]

export type Tables<T extends keyof PublicSchema["Tables"]> = PublicSchema["Tables"][T]["Row"]
export type TablesInsert<T extends keyof PublicSchema["Tables"]> = PublicSchema["Tables"][T]["Insert"]
export type TablesUpdate<T extends keyof PublicSchema["Tables"]> = PublicSchema["Tables"][T]["Update"]
`
