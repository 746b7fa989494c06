package tstypes_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/internal/testenv"
)

// TestFrontendDocMatchesDatabase reads docs/frontend.md's lists against
// the catalog of a migrated database, so that the contract cannot drift
// from the migrations: the tables a member reads and the columns readable
// and not (the grants), every status value (the check constraints), the table writes a member may make (insert and
// update columns, delete), the functions a member may call (name and
// arguments), and which tables are live over Realtime and with which
// replica identity (the supabase_realtime publication), including the
// tables the "Watch an office live" snippet subscribes to.
func TestFrontendDocMatchesDatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := migrated(ctx, t)
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "frontend.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	cat := readCatalog(ctx, t, conn)

	t.Run("reads", func(t *testing.T) { checkReads(t, section(t, doc, "## What a member reads"), cat) })
	t.Run("statuses", func(t *testing.T) { checkStatuses(t, section(t, doc, "### Statuses and how they move"), cat) })
	does := section(t, doc, "## What a member does")
	t.Run("writes", func(t *testing.T) { checkWrites(t, tableAfter(t, does, "all the table writes a member may make"), cat) })
	t.Run("functions", func(t *testing.T) { checkFunctions(t, tableAfter(t, does, "all the functions a member may call"), cat) })
	t.Run("live", func(t *testing.T) { checkLive(t, section(t, doc, "### Watch an office live"), cat) })
}

// catalog is what the database says a member may do.
type catalog struct {
	cols      map[string][]string // table → every column, in order
	read      map[string][]string // table → columns authenticated may select
	insert    map[string][]string
	update    map[string][]string
	del       map[string]bool
	functions []string            // "name(arg, arg)": executable by authenticated, not triggers
	identity  map[string]string   // published table → relreplident (f full, d default)
	statuses  map[string][]string // table → the values its status column's check allows
}

func readCatalog(ctx context.Context, t *testing.T, conn *pgx.Conn) catalog {
	t.Helper()
	c := catalog{cols: map[string][]string{}, read: map[string][]string{}, insert: map[string][]string{},
		update: map[string][]string{}, del: map[string]bool{}, identity: map[string]string{}, statuses: map[string][]string{}}
	rows, err := conn.Query(ctx, `select c.relname::text, a.attname::text,
		       has_column_privilege('authenticated', c.oid, a.attname, 'SELECT'),
		       has_column_privilege('authenticated', c.oid, a.attname, 'INSERT'),
		       has_column_privilege('authenticated', c.oid, a.attname, 'UPDATE'),
		       has_table_privilege('authenticated', c.oid, 'DELETE')
		from pg_class c join pg_namespace n on n.oid = c.relnamespace
		join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
		where n.nspname = 'public' and c.relkind in ('r', 'p', 'v', 'm', 'f')
		order by c.relname, a.attnum`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tbl, col string
		var sel, ins, upd, del bool
		if err := rows.Scan(&tbl, &col, &sel, &ins, &upd, &del); err != nil {
			t.Fatal(err)
		}
		c.cols[tbl] = append(c.cols[tbl], col)
		for _, x := range []struct {
			ok bool
			m  map[string][]string
		}{{sel, c.read}, {ins, c.insert}, {upd, c.update}} {
			if x.ok {
				x.m[tbl] = append(x.m[tbl], col)
			}
		}
		if del {
			c.del[tbl] = true
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows, err = conn.Query(ctx, `select p.proname::text || '(' || array_to_string(array(
		         select split_part(x, ' ', 1) from unnest(string_to_array(nullif(pg_get_function_identity_arguments(p.oid), ''), ', ')) x), ', ') || ')'
		from pg_proc p join pg_namespace n on n.oid = p.pronamespace join pg_type rt on rt.oid = p.prorettype
		where n.nspname = 'public' and p.prokind = 'f' and rt.typname <> 'trigger'
		  and has_function_privilege('authenticated', p.oid, 'EXECUTE')
		order by 1`)
	if err != nil {
		t.Fatal(err)
	}
	if c.functions, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	rows, err = conn.Query(ctx, `select p.tablename::text, c.relreplident::text from pg_publication_tables p
		join pg_namespace n on n.nspname = p.schemaname join pg_class c on c.relnamespace = n.oid and c.relname = p.tablename
		where p.pubname = 'supabase_realtime' and p.schemaname = 'public'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tbl, id string
		if err := rows.Scan(&tbl, &id); err != nil {
			t.Fatal(err)
		}
		c.identity[tbl] = id
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(c.identity) == 0 {
		t.Fatal("no table in the supabase_realtime publication")
	}
	c.statuses = readStatuses(ctx, t, conn)
	return c
}

// readStatuses returns, per table, the values allowed by the check
// constraint on its status column alone.
func readStatuses(ctx context.Context, t *testing.T, conn *pgx.Conn) map[string][]string {
	t.Helper()
	rows, err := conn.Query(ctx, `select c.relname::text, pg_get_constraintdef(con.oid)
		from pg_constraint con join pg_class c on c.oid = con.conrelid join pg_namespace n on n.oid = c.relnamespace
		join pg_attribute a on a.attrelid = c.oid and a.attname = 'status'
		where n.nspname = 'public' and con.contype = 'c' and con.conkey = array[a.attnum]`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	value := regexp.MustCompile(`'(\w+)'::text`)
	for rows.Next() {
		var tbl, def string
		if err := rows.Scan(&tbl, &def); err != nil {
			t.Fatal(err)
		}
		for _, m := range value.FindAllStringSubmatch(def, -1) {
			out[tbl] = append(out[tbl], m[1])
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// section returns the text from the heading to the next heading of the
// same or a higher level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("docs/frontend.md has no %q", heading)
	}
	rest := doc[i+1+len(heading):]
	level := strings.Repeat("#", strings.Index(heading, " "))
	for _, h := range []string{"\n" + level + " ", "\n" + level[:len(level)-1] + " "} {
		if len(h) > 2 {
			if j := strings.Index(rest, h); j >= 0 {
				rest = rest[:j]
			}
		}
	}
	return rest
}

// tableAfter returns the markdown table that follows the first line
// containing phrase.
func tableAfter(t *testing.T, text, phrase string) string {
	t.Helper()
	i := strings.Index(text, phrase)
	if i < 0 {
		t.Fatalf("docs/frontend.md has no %q", phrase)
	}
	var table []string
	for _, line := range strings.Split(text[i:], "\n")[1:] {
		if strings.HasPrefix(line, "|") {
			table = append(table, line)
		} else if len(table) > 0 {
			break
		}
	}
	return strings.Join(table, "\n")
}

// tableRows returns the cells of the markdown table rows whose first cell
// starts with a code span.
func tableRows(text string) [][]string {
	var out [][]string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		out = append(out, cells)
	}
	return out
}

var codeSpan = regexp.MustCompile("`([^`]*)`")

// names returns the identifiers in a cell's code spans: "`a, b`" and
// "`a`, `b`" both give a, b.
func names(cell string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
		for _, n := range strings.Split(m[1], ",") {
			if n = strings.TrimSpace(n); n != "" {
				out = append(out, n)
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sameSet(t *testing.T, what string, doc, db []string) {
	t.Helper()
	d, b := slices.Clone(doc), slices.Clone(db)
	sort.Strings(d)
	sort.Strings(b)
	if !slices.Equal(d, b) {
		t.Errorf("%s: docs/frontend.md says %v; the database %v", what, d, b)
	}
}

// checkReads: the "What a member reads" table names every table a member
// may select from; "Member may read" lists the granted columns (or says
// all, with none listed), "Not readable" the columns not granted.
func checkReads(t *testing.T, text string, cat catalog) {
	rows := tableRows(text)
	var tables []string
	for _, r := range rows {
		if len(r) != 4 {
			t.Errorf("row %v: want 4 cells", r)
			continue
		}
		tbl := names(r[0])[0]
		tables = append(tables, tbl)
		var hidden []string
		for _, c := range cat.cols[tbl] {
			if !slices.Contains(cat.read[tbl], c) {
				hidden = append(hidden, c)
			}
		}
		if listed := names(r[1]); len(listed) > 0 || !strings.HasPrefix(r[1], "all") {
			sameSet(t, tbl+" readable columns", listed, cat.read[tbl])
		}
		sameSet(t, tbl+" columns not readable", names(r[2]), hidden)
	}
	sameSet(t, "tables a member reads", tables, sortedKeys(cat.read))
}

// checkStatuses: every table a member reads that has a status column has
// a paragraph "**`table.status`**", which names each value the column's
// check allows.
func checkStatuses(t *testing.T, text string, cat catalog) {
	paragraphs := map[string]string{}
	for _, p := range strings.Split(text, "\n\n") {
		if m := regexp.MustCompile("^\\*\\*`(\\w+)\\.status`\\*\\*").FindStringSubmatch(p); m != nil {
			paragraphs[m[1]] = p
		}
	}
	var withStatus []string
	for tbl := range cat.read {
		if slices.Contains(cat.read[tbl], "status") {
			withStatus = append(withStatus, tbl)
		}
	}
	sameSet(t, "tables whose statuses are described", sortedKeys(paragraphs), withStatus)
	for tbl, p := range paragraphs {
		if len(cat.statuses[tbl]) == 0 {
			t.Errorf("%s.status: no check constraint lists its values", tbl)
		}
		for _, v := range cat.statuses[tbl] {
			if !strings.Contains(p, "`"+v+"`") {
				t.Errorf("%s.status %q: allowed by the database, not described in docs/frontend.md", tbl, v)
			}
		}
	}
}

// checkWrites: the table of table writes is every insert, update and
// delete granted to members.
func checkWrites(t *testing.T, text string, cat catalog) {
	var tables []string
	for _, r := range tableRows(text) {
		if len(r) != 5 {
			t.Errorf("row %v: want 5 cells", r)
			continue
		}
		tbl := names(r[0])[0]
		tables = append(tables, tbl)
		sameSet(t, tbl+" insert columns", names(r[1]), cat.insert[tbl])
		sameSet(t, tbl+" update columns", names(r[2]), cat.update[tbl])
		if (r[3] == "yes") != cat.del[tbl] {
			t.Errorf("%s delete: docs/frontend.md says %q; the database %t", tbl, r[3], cat.del[tbl])
		}
	}
	written := map[string]bool{}
	for _, m := range []map[string][]string{cat.insert, cat.update} {
		for k := range m {
			written[k] = true
		}
	}
	for k := range cat.del {
		written[k] = true
	}
	sameSet(t, "tables a member writes", tables, sortedKeys(written))
}

// checkFunctions: the functions' table is every function a member may
// execute, with its arguments' names.
func checkFunctions(t *testing.T, text string, cat catalog) {
	var fns []string
	for _, r := range tableRows(text) {
		for _, m := range codeSpan.FindAllStringSubmatch(r[0], -1) {
			fns = append(fns, m[1])
		}
	}
	sameSet(t, "functions a member may call", fns, cat.functions)
}

// checkLive: the Live, Live key only and Not live lists are the
// publication, its replica identities and the rest of what members read;
// the snippet subscribes to every published table.
func checkLive(t *testing.T, text string, cat catalog) {
	lists := map[string][]string{}
	for _, item := range strings.Split(text, "\n- ") {
		for _, label := range []string{"**Live**", "**Live, key only**", "**Not live**"} {
			if strings.HasPrefix(item, label) {
				_, after, _ := strings.Cut(item, "):")
				lists[label] = names(after)
			}
		}
	}
	var full, key, notLive []string
	for tbl, id := range cat.identity {
		if id == "f" {
			full = append(full, tbl)
		} else {
			key = append(key, tbl)
		}
	}
	for tbl := range cat.read {
		if cat.identity[tbl] == "" {
			notLive = append(notLive, tbl)
		}
	}
	sameSet(t, "live tables, replica identity full", lists["**Live**"], full)
	sameSet(t, "live tables, key only", lists["**Live, key only**"], key)
	sameSet(t, "tables not live", lists["**Not live**"], notLive)
	_, snippet, _ := strings.Cut(text, "for (const table of [")
	snippet, _, _ = strings.Cut(snippet, "])")
	var subscribed []string
	for _, m := range regexp.MustCompile(`'(\w+)'`).FindAllStringSubmatch(snippet, -1) {
		subscribed = append(subscribed, m[1])
	}
	sameSet(t, "tables the snippet watches", subscribed, sortedKeys(cat.identity))
}
