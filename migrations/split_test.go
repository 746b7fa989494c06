package migrations_test

import (
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"

	"github.com/office-server/office-server/migrations"
)

// TestStatements: the cases the Supabase CLI's splitter
// (apps/cli-go/pkg/parser) keeps in one statement or cuts.
func TestStatements(t *testing.T) {
	for _, tc := range []struct {
		name string
		sql  string
		want []string
	}{
		{"two", "select 1;\nselect 2;\n", []string{"select 1", "select 2"}},
		{"no final semicolon", "select 1;select 2", []string{"select 1", "select 2"}},
		{"empty ones dropped", " ;\n;select 1;;", []string{"select 1"}},
		{"comments stay with the next", "-- a; b\nselect 1; /* c; d */ select 2;", []string{"-- a; b\nselect 1", "/* c; d */ select 2"}},
		{"nested block comment", "/* a /* b; */ c; */ select 1; select 2", []string{"/* a /* b; */ c; */ select 1", "select 2"}},
		{"quotes", `select 'a;b', "c;d", 'it''s;'; select 2`, []string{`select 'a;b', "c;d", 'it''s;'`, "select 2"}},
		{"dollar quotes", "create function f() returns int as $$ select 1; $$ language sql; do $x$ begin null; end $x$;",
			[]string{"create function f() returns int as $$ select 1; $$ language sql", "do $x$ begin null; end $x$"}},
		{"parameter is not a tag", "select $1; select 2", []string{"select $1", "select 2"}},
		{"parentheses", "create rule r as on insert to t do also (select 1; select 2); select 3",
			[]string{"create rule r as on insert to t do also (select 1; select 2)", "select 3"}},
		{"begin atomic", "create function f() returns int language sql begin atomic select 1; select 2; end; select 3",
			[]string{"create function f() returns int language sql begin atomic select 1; select 2; end", "select 3"}},
		// As in the CLI: a backslash escapes outside quotes only (inside
		// E'…' it does not, so such a string must not hold a quote and ';').
		{"backslash", `select 1 \; select 2; select 3`, []string{`select 1 \; select 2`, "select 3"}},
		{"goose lines are comments", "-- +goose Up\n-- +goose StatementBegin\ndo $$ begin end $$;\n-- +goose StatementEnd\n",
			[]string{"-- +goose Up\n-- +goose StatementBegin\ndo $$ begin end $$", "-- +goose StatementEnd"}},
	} {
		if diff := cmp.Diff(migrations.Statements(tc.sql), tc.want); diff != "" {
			t.Errorf("%s (-got +want):\n%s", tc.name, diff)
		}
	}
}

// FuzzStatements: the splitter never panics, and it loses nothing but the
// semicolons and white space between statements.
func FuzzStatements(f *testing.F) {
	for _, s := range []string{"select 1; select 2", "$$;$$;", "/* /* */ */;", "'a'';';", "(;);", "begin atomic; end;", "-- x\n;", `\;`} {
		f.Add(s)
	}
	between := func(r rune) bool { return r == ';' || unicode.IsSpace(r) }
	f.Fuzz(func(t *testing.T, sql string) {
		got := migrations.Statements(sql)
		for _, s := range got {
			if s == "" || s != strings.TrimSpace(s) {
				t.Fatalf("statement %q is empty or not trimmed", s)
			}
		}
		// In order, each statement is a piece of sql, and what lies between
		// them is only semicolons and white space.
		rest := sql
		for _, s := range got {
			i := strings.Index(rest, s)
			if i < 0 || strings.TrimFunc(rest[:i], between) != "" {
				t.Fatalf("Statements(%q) = %q: %q is not the next piece", sql, got, s)
			}
			rest = rest[i+len(s):]
		}
		if strings.TrimFunc(rest, between) != "" {
			t.Fatalf("Statements(%q) = %q loses %q", sql, got, rest)
		}
	})
}
