package migrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/office-server/office-server/migrations"
	"github.com/office-server/office-server/migrations/supabasetest"
)

// TestGrantsExplicit: on a database whose default privileges grant nothing
// (a Supabase project created today, migrations/supabasetest), the
// migrations alone give service_role every office table, sequence and
// server function, members their functions, and anon nothing; no trigger
// function is executable by an API role.
func TestGrantsExplicit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, db := openDB(t)
	if err := supabasetest.Apply(ctx, url); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Apply(ctx, db); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct{ what, sql string }{
		{"tables service_role cannot read and write", `
			select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
			where n.nspname = 'public' and c.relkind = 'r'
			  and not (has_table_privilege('service_role', c.oid, 'select') and has_table_privilege('service_role', c.oid, 'insert')
			       and has_table_privilege('service_role', c.oid, 'update') and has_table_privilege('service_role', c.oid, 'delete'))`},
		{"sequences service_role cannot use", `
			select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
			where n.nspname = 'public' and case when c.relkind = 'S' then not has_sequence_privilege('service_role', c.oid, 'usage') end`},
		{"tables members cannot read", `
			select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
			where n.nspname = 'public' and c.relkind = 'r' and c.relname not in ('permission_grants', 'office_notices')
			  and not has_table_privilege('authenticated', c.oid, 'select')
			  and not has_any_column_privilege('authenticated', c.oid, 'select')`},
		{"tables or sequences anon may use", `
			select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
			where n.nspname = 'public' and case
			  when c.relkind = 'r' then has_any_column_privilege('anon', c.oid, 'select, insert, update') or has_table_privilege('anon', c.oid, 'delete')
			  when c.relkind = 'S' then has_sequence_privilege('anon', c.oid, 'usage, select, update') end`},
		{"functions anon may call", `
			select p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace
			where n.nspname = 'public' and has_function_privilege('anon', p.oid, 'execute')`},
		{"trigger functions an API role may call", `
			select p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace
			where n.nspname = 'public' and p.prorettype = 'trigger'::regtype
			  and (has_function_privilege('authenticated', p.oid, 'execute') or has_function_privilege('service_role', p.oid, 'execute'))`},
		{"server functions service_role cannot call", `
			select f from unnest(array['answer_question(uuid,text)', 'provide_dependency(uuid,text)', 'reject_dependency(uuid,text)',
			  'office_admin_add_member(uuid,uuid,text,text)', 'office_admin_list_members(uuid)', 'office_admin_remove_member(uuid,uuid,text)']) f
			where not has_function_privilege('service_role', 'public.' || f, 'execute')`},
		{"member functions members cannot call", `
			select f from unnest(array['answer_question(uuid,text)', 'provide_dependency(uuid,text)', 'reject_dependency(uuid,text)',
			  'add_office_member(uuid,text,text)', 'remove_office_member(uuid,uuid)', 'list_office_members(uuid)',
			  'accept_office_invitations()', 'office_is_member(uuid)', 'office_is_owner(uuid)']) f
			where not has_function_privilege('authenticated', 'public.' || f, 'execute')`},
	} {
		rows, err := db.QueryContext(ctx, q.sql)
		if err != nil {
			t.Fatalf("%s: %v", q.what, err)
		}
		var bad []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			bad = append(bad, s)
		}
		rows.Close()
		if len(bad) > 0 {
			t.Errorf("%s: %v", q.what, bad)
		}
	}
}
