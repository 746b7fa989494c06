package migrations_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// TestRLSProxyWork: proxy requests and tasks (20261125000000_proxy_work.sql)
// are read by the members of their office only, written by nobody but the
// server, and invisible to anon.
func TestRLSProxyWork(t *testing.T) {
	f := newRLSFixture(t)
	req := uuid.NewString()
	f.exec(t, `insert into proxy_requests (id, office_id, requester_agent_id, action, payload, expires_at)
		values ($1, $2, $3, 'create_plan', '{"action": "create_plan"}', now() + interval '1 hour')`, req, f.officeA, f.agentA)
	f.exec(t, `insert into proxy_tasks (office_id, id, request_id, requester_agent_id, content)
		values ($1, 'po-abc123', $2, $3, 'API')`, f.officeA, req, f.agentA)
	for _, tt := range []struct {
		name, user string
		want       int
	}{{"member of A", f.userA, 1}, {"member of B", f.userB, 0}, {"non-member", f.nobody, 0}} {
		err := f.as(t, "authenticated", tt.user, func(tx pgx.Tx) error {
			for _, table := range []string{"proxy_requests", "proxy_tasks"} {
				if got := ids(t, tx, "select 'row' from "+table); len(got) != tt.want {
					t.Errorf("%s reads %d rows of %s, want %d", tt.name, len(got), table, tt.want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
	}
	for _, w := range []string{
		"update proxy_requests set status = 'assigned'",
		"update proxy_tasks set status = 'completed'",
		"delete from proxy_tasks",
	} {
		err := f.as(t, "authenticated", f.userA, func(tx pgx.Tx) error {
			_, err := tx.Exec(context.Background(), w)
			return err
		})
		if sqlState(err) != "42501" {
			t.Errorf("member: %s: err %v, want permission denied (42501)", w, err)
		}
	}
	for _, table := range []string{"proxy_requests", "proxy_tasks"} {
		err := f.as(t, "anon", "", func(tx pgx.Tx) error {
			_, err := tx.Exec(context.Background(), "select * from "+table)
			return err
		})
		if sqlState(err) != "42501" {
			t.Errorf("anon select from %s: err %v, want permission denied (42501)", table, err)
		}
	}
}
