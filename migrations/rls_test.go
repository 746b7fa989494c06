package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/migrations"
	"github.com/office-server/office-server/migrations/supabasetest"
)

// rlsFixture is a Supabase-like database with two offices, A and B, each
// with one member, one agent and pending questions, plus a user who belongs
// to no office.
type rlsFixture struct {
	conn                 *pgx.Conn // the owner (bypasses RLS): sets up and checks
	userA, userB, nobody string
	officeA, officeB     string
	agentA, agentB       string
	qA, qA2, qB          string
	depA                 string
	sessA, sessB         string // agent_sessions of agentA (needs_attention) and agentB (exited)
}

func newRLSFixture(t *testing.T) *rlsFixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := testenv.NewDatabase(t)
	if err := supabasetest.Apply(ctx, url); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.ApplyURL(ctx, url); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	f := &rlsFixture{
		conn:  conn,
		userA: uuid.NewString(), userB: uuid.NewString(), nobody: uuid.NewString(),
		officeA: uuid.NewString(), officeB: uuid.NewString(),
		agentA: uuid.NewString(), agentB: uuid.NewString(),
		qA: uuid.NewString(), qA2: uuid.NewString(), qB: uuid.NewString(),
		depA:  uuid.NewString(),
		sessA: uuid.NewString(), sessB: uuid.NewString(),
	}
	f.exec(t, `insert into auth.users (id, email) values ($1, 'a@example.com'), ($2, 'b@example.com'), ($3, 'n@example.com')`, f.userA, f.userB, f.nobody)
	f.exec(t, `insert into offices (id, name) values ($1, 'A'), ($2, 'B')`, f.officeA, f.officeB)
	f.exec(t, `insert into office_members (office_id, user_id) values ($1, $2), ($3, $4)`, f.officeA, f.userA, f.officeB, f.userB)
	f.exec(t, `insert into office_agents (id, office_id, name) values ($1, $2, 'PO'), ($3, $4, 'PO')`, f.agentA, f.officeA, f.agentB, f.officeB)
	f.exec(t, `insert into user_questions (id, office_id, agent_id, question, expires_at)
		values ($1, $2, $3, 'Which login?', now() + interval '1 hour'),
		       ($4, $2, $3, 'Which database?', now() + interval '1 hour'),
		       ($5, $6, $7, 'B question', now() + interval '1 hour')`,
		f.qA, f.officeA, f.agentA, f.qA2, f.qB, f.officeB, f.agentB)
	f.exec(t, `insert into dependency_requests (id, office_id, agent_id, type, name, status, value, provided_at, expires_at)
		values ($1, $2, $3, 'api_key', 'OPENAI_API_KEY', 'provided', '\x736563726574', now(), now() + interval '1 hour')`,
		f.depA, f.officeA, f.agentA)
	f.exec(t, `insert into agent_sessions (id, office_id, agent_id, status, detail)
		values ($1, $2, $3, 'needs_attention', $4), ($5, $6, $7, 'exited', $8)`,
		f.sessA, f.officeA, f.agentA, sessionDetailA, f.sessB, f.officeB, f.agentB, sessionDetailB)
	return f
}

// The detail of each fixture office's session (agent_sessions.detail).
const (
	sessionDetailA = "Do you trust the files in this folder?\n❯ 1. Yes, proceed\n  2. No, exit"
	sessionDetailB = "exit code 1\nError: 인증 실패 (authentication failed)"
)

func (f *rlsFixture) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := f.conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// as runs fn in a transaction as role (anon or authenticated) with the JWT
// claims PostgREST would set for user (none when user is ""), and commits
// when fn succeeds.
func (f *rlsFixture) as(t *testing.T, role, user string, fn func(tx pgx.Tx) error) error {
	t.Helper()
	ctx := context.Background()
	tx, err := f.conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	claims := fmt.Sprintf(`{"role":%q}`, role)
	if user != "" {
		claims = fmt.Sprintf(`{"sub":%q,"role":%q,"aud":"authenticated"}`, user, role)
	}
	if _, err := tx.Exec(ctx, `select set_config('request.jwt.claims', $1, true)`, claims); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "set local role "+role); err != nil {
		t.Fatal(err)
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func ids(t *testing.T, tx pgx.Tx, sql string, args ...any) []string {
	t.Helper()
	rows, err := tx.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return got
}

func update(tx pgx.Tx, sql string, args ...any) (int64, error) {
	tag, err := tx.Exec(context.Background(), sql, args...)
	return tag.RowsAffected(), err
}

// sqlState returns the SQLSTATE of err, "" when it is not a Postgres error.
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func (f *rlsFixture) question(t *testing.T, id string) (status, response, answeredBy string, answered bool, question, agent, office string) {
	t.Helper()
	var at *time.Time
	err := f.conn.QueryRow(context.Background(), `select status, coalesce(response, ''), coalesce(answered_by, ''), answered_at,
		question, agent_id::text, office_id::text from user_questions where id = $1`, id).
		Scan(&status, &response, &answeredBy, &at, &question, &agent, &office)
	if err != nil {
		t.Fatal(err)
	}
	return status, response, answeredBy, at != nil, question, agent, office
}

func TestRLSMemberReadsOwnOfficeOnly(t *testing.T) {
	f := newRLSFixture(t)
	err := f.as(t, "authenticated", f.userA, func(tx pgx.Tx) error {
		for _, q := range []struct{ sql, want string }{
			{"select id::text from offices", f.officeA},
			{"select office_id::text from office_members", f.officeA},
			{"select id::text from office_agents", f.agentA},
		} {
			got := ids(t, tx, q.sql)
			if len(got) != 1 || got[0] != q.want {
				t.Errorf("%s as member of A: got %v, want [%s]", q.sql, got, q.want)
			}
		}
		got := ids(t, tx, "select id::text from user_questions order by question")
		if len(got) != 2 || got[0] != f.qA2 || got[1] != f.qA {
			t.Errorf("questions as member of A: got %v, want [%s %s]", got, f.qA2, f.qA)
		}
		if got := ids(t, tx, "select id::text from user_questions where id = $1", f.qB); len(got) != 0 {
			t.Errorf("member of A read B's question: %v", got)
		}
		// Dependency requests: readable, but never the provided value.
		if got := ids(t, tx, "select name from dependency_requests"); len(got) != 1 || got[0] != "OPENAI_API_KEY" {
			t.Errorf("dependency names as member of A: %v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = f.as(t, "authenticated", f.userA, func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), "select value from dependency_requests")
		return err
	})
	if sqlState(err) != "42501" {
		t.Errorf("member read dependency_requests.value: err %v, want permission denied (42501)", err)
	}
}

func TestRLSNonMemberReadsNothing(t *testing.T) {
	f := newRLSFixture(t)
	err := f.as(t, "authenticated", f.nobody, func(tx pgx.Tx) error {
		for _, table := range []string{"offices", "office_members", "office_agents", "agent_sessions", "user_questions",
			"user_messages", "agent_invocations", "agent_results", "office_events"} {
			if got := ids(t, tx, "select 'row' from "+table); len(got) != 0 {
				t.Errorf("non-member read %d rows of %s", len(got), table)
			}
		}
		if got := ids(t, tx, "select id::text from dependency_requests"); len(got) != 0 {
			t.Errorf("non-member read %d dependency requests", len(got))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = f.as(t, "authenticated", f.nobody, func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), "select public.answer_question($1, 'x')", f.qA)
		return err
	})
	if sqlState(err) != "PT404" {
		t.Errorf("non-member answering A's question: %v; want PT404 (not found)", err)
	}
}

// TestRLSSessionDetail: a member reads the detail (the dialog's text, or why
// the agent exited) of their office's session, and of no other office's.
func TestRLSSessionDetail(t *testing.T) {
	f := newRLSFixture(t)
	for _, tt := range []struct {
		name, user string
		want       []string
	}{
		{"member of A", f.userA, []string{sessionDetailA}},
		{"member of B", f.userB, []string{sessionDetailB}},
		{"non-member", f.nobody, nil},
	} {
		err := f.as(t, "authenticated", tt.user, func(tx pgx.Tx) error {
			got := ids(t, tx, "select detail from agent_sessions order by id")
			if len(got) != len(tt.want) || (len(got) == 1 && got[0] != tt.want[0]) {
				t.Errorf("%s reads session details %q, want %q", tt.name, got, tt.want)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
	}
	err := f.as(t, "authenticated", f.userA, func(tx pgx.Tx) error {
		if got := ids(t, tx, "select detail from agent_sessions where id = $1", f.sessB); len(got) != 0 {
			t.Errorf("member of A read the detail of B's session: %q", got)
		}
		n, err := update(tx, "update agent_sessions set detail = '' where id = $1", f.sessA)
		if n != 0 {
			t.Errorf("member of A changed %d sessions", n)
		}
		return err
	})
	if sqlState(err) != "42501" {
		t.Errorf("member updating a session's detail: err %v, want permission denied (42501)", err)
	}
}

func TestRLSAnonReadsNothing(t *testing.T) {
	f := newRLSFixture(t)
	for _, table := range []string{"offices", "office_members", "office_agents", "agent_sessions", "user_questions",
		"user_messages", "agent_invocations", "agent_results", "dependency_requests", "office_events"} {
		err := f.as(t, "anon", "", func(tx pgx.Tx) error {
			_, err := tx.Exec(context.Background(), "select * from "+table)
			return err
		})
		if sqlState(err) != "42501" {
			t.Errorf("anon select from %s: err %v, want permission denied (42501)", table, err)
		}
	}
	// Not even the membership check (it would tell who belongs where).
	err := f.as(t, "anon", f.userA, func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), "select public.office_is_member($1)", f.officeA)
		return err
	})
	if sqlState(err) != "42501" {
		t.Errorf("anon calling office_is_member: err %v, want permission denied", err)
	}
	// Even with a member's claims, the anon role gets nothing.
	err = f.as(t, "anon", f.userA, func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), "update user_questions set response = 'x', status = 'answered' where id = $1", f.qA)
		return err
	})
	if sqlState(err) != "42501" {
		t.Errorf("anon answer: err %v, want permission denied", err)
	}
}

func TestRLSMemberAnswers(t *testing.T) {
	f := newRLSFixture(t)
	err := f.as(t, "authenticated", f.userA, func(tx pgx.Tx) error {
		var status string
		if err := tx.QueryRow(context.Background(), "select status from public.answer_question($1, 'email')", f.qA).Scan(&status); err != nil {
			return err
		}
		if status != "answered" {
			t.Errorf("answer_question returned status %q, want answered", status)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("member answering a pending question of their office: %v", err)
	}
	status, response, by, answered, _, _, _ := f.question(t, f.qA)
	if status != "answered" || response != "email" || by != f.userA || !answered {
		t.Fatalf("after answer: status %q response %q answered_by %q answered_at set %v; want answered, email, %s, true",
			status, response, by, answered, f.userA)
	}

	// Answering twice is an error (PT409), not a silent no-op.
	err = f.as(t, "authenticated", f.userA, func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), "select public.answer_question($1, 'sso')", f.qA)
		return err
	})
	if sqlState(err) != "PT409" {
		t.Fatalf("second answer: %v; want PT409", err)
	}
	if _, response, _, _, _, _, _ := f.question(t, f.qA); response != "email" {
		t.Fatalf("second answer changed response to %q", response)
	}
}

func TestRLSMemberCannot(t *testing.T) {
	f := newRLSFixture(t)
	tests := []struct {
		name  string
		sql   string
		args  func() []any
		state string // "" : no error but no row changed
	}{
		{"change question text", "update user_questions set question = 'rm -rf?' where id = $1", func() []any { return []any{f.qA2} }, "42501"},
		{"change question text while answering", "update user_questions set question = 'x', response = 'y', status = 'answered' where id = $1", func() []any { return []any{f.qA2} }, "42501"},
		{"move question to another agent", "update user_questions set agent_id = $2 where id = $1", func() []any { return []any{f.qA2, f.agentB} }, "42501"},
		{"move question to another office", "update user_questions set office_id = $2 where id = $1", func() []any { return []any{f.qA2, f.officeB} }, "42501"},
		{"set answered_by", "update user_questions set response = 'y', status = 'answered', answered_by = 'someone' where id = $1", func() []any { return []any{f.qA2} }, "42501"},
		{"set answered_at", "update user_questions set response = 'y', status = 'answered', answered_at = now() - interval '1 day' where id = $1", func() []any { return []any{f.qA2} }, "42501"},
		{"cancel a question", "update user_questions set status = 'cancelled' where id = $1", func() []any { return []any{f.qA2} }, "42501"},
		{"mark delivered", "update user_questions set status = 'delivered' where id = $1", func() []any { return []any{f.qA2} }, "42501"},
		{"answer without response", "update user_questions set status = 'answered' where id = $1", func() []any { return []any{f.qA2} }, "42501"},
		{"answer by update", "update user_questions set response = 'y', status = 'answered' where id = $1", func() []any { return []any{f.qA2} }, "42501"},
		{"answer another office's question", "update user_questions set response = 'y', status = 'answered' where id = $1", func() []any { return []any{f.qB} }, "42501"},
		{"answer another office's question (rpc)", "select public.answer_question($1, 'y')", func() []any { return []any{f.qB} }, "PT404"},
		{"answer with no response (rpc)", "select public.answer_question($1, null)", func() []any { return []any{f.qA2} }, "22023"},
		{"read a launch spec", "select launch_spec from office_agents where id = $1", func() []any { return []any{f.agentA} }, "42501"},
		{"read an agent's raw output", "select raw from office_events where office_id = $1", func() []any { return []any{f.officeA} }, "42501"},
		{"read every column of the events", "select * from office_events where office_id = $1", func() []any { return []any{f.officeA} }, "42501"},
		{"reject a provided dependency", "select public.reject_dependency($1, 'no')", func() []any { return []any{f.depA} }, "PT409"},
		{"add a member without being owner", "select public.add_office_member($1, 'n@example.com')", func() []any { return []any{f.officeA} }, "42501"},
		{"call a helper", "select public.office_normalize_answer(q, 'y') from user_questions q where id = $1", func() []any { return []any{f.qA2} }, "42501"},
		{"delete a question", "delete from user_questions where id = $1", func() []any { return []any{f.qA2} }, "42501"},
		{"insert a question", "insert into user_questions (office_id, agent_id, question, expires_at) values ($1, $2, 'q', now())", func() []any { return []any{f.officeA, f.agentA} }, "42501"},
		{"rename an agent", "update office_agents set name = 'x' where id = $1", func() []any { return []any{f.agentA} }, "42501"},
		{"join another office", "insert into office_members (office_id, user_id) values ($1, $2)", func() []any { return []any{f.officeB, f.userA} }, "42501"},
		{"message another office's agent", "insert into user_messages (office_id, agent_id, content) values ($1, $2, 'hi')", func() []any { return []any{f.officeB, f.agentB} }, "42501"},
		{"message another office's agent under own office", "insert into user_messages (office_id, agent_id, content) values ($1, $2, 'hi')", func() []any { return []any{f.officeA, f.agentB} }, "42501"},
		{"message as someone else", "insert into user_messages (office_id, agent_id, content, user_id) values ($1, $2, 'hi', 'x')", func() []any { return []any{f.officeA, f.agentA} }, "42501"},
		{"message already delivered", "insert into user_messages (office_id, agent_id, content, status) values ($1, $2, 'hi', 'delivered')", func() []any { return []any{f.officeA, f.agentA} }, "42501"},
		{"provide a dependency", "update dependency_requests set value = 'x' where id = $1", func() []any { return []any{f.depA} }, "42501"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n int64
			err := f.as(t, "authenticated", f.userA, func(tx pgx.Tx) error {
				var err error
				n, err = update(tx, tt.sql, tt.args()...)
				return err
			})
			if got := sqlState(err); got != tt.state || (err != nil && tt.state == "") {
				t.Fatalf("err %v (SQLSTATE %q), want SQLSTATE %q", err, got, tt.state)
			}
			if n != 0 {
				t.Fatalf("%d rows changed", n)
			}
		})
	}
	// Nothing above changed the questions.
	for _, id := range []string{f.qA2, f.qB} {
		status, _, by, answered, question, agent, office := f.question(t, id)
		if status != "pending" || by != "" || answered {
			t.Errorf("question %s: status %q answered_by %q answered %v after the refused updates", id, status, by, answered)
		}
		if id == f.qA2 && (question != "Which database?" || agent != f.agentA || office != f.officeA) {
			t.Errorf("question %s changed: %q %s %s", id, question, agent, office)
		}
	}
}

// TestRLSEventsWithoutRaw: a member reads their office's events, every
// column but raw (an agent's output as printed, where a secret it printed
// would be); the server (service_role) reads raw.
func TestRLSEventsWithoutRaw(t *testing.T) {
	f := newRLSFixture(t)
	f.exec(t, `insert into office_events (office_id, kind, payload, raw) values ($1, 'message.invoke', '{"to":"dev"}', 'sk-raw-canary')`, f.officeA)
	var kind, payload string
	err := f.as(t, "authenticated", f.userA, func(tx pgx.Tx) error {
		return tx.QueryRow(context.Background(), `select kind, payload::text from office_events where office_id = $1`, f.officeA).Scan(&kind, &payload)
	})
	if err != nil || kind != "message.invoke" || payload != `{"to": "dev"}` {
		t.Fatalf("member reads %q %q, %v", kind, payload, err)
	}
	var raw string
	err = f.as(t, "service_role", "", func(tx pgx.Tx) error {
		return tx.QueryRow(context.Background(), `select raw from office_events where office_id = $1`, f.officeA).Scan(&raw)
	})
	if err != nil || raw != "sk-raw-canary" {
		t.Fatalf("service_role reads raw %q, %v", raw, err)
	}
}

func TestRLSMemberWritesMessage(t *testing.T) {
	f := newRLSFixture(t)
	var id string
	err := f.as(t, "authenticated", f.userA, func(tx pgx.Tx) error {
		// RETURNING reads the row back: members may read their office's messages.
		return tx.QueryRow(context.Background(),
			"insert into user_messages (office_id, agent_id, content) values ($1, $2, 'please also add SSO') returning id::text",
			f.officeA, f.agentA).Scan(&id)
	})
	if err != nil {
		t.Fatalf("member writing a message to an agent of their office: %v", err)
	}
	var user, status string
	if err := f.conn.QueryRow(context.Background(), "select user_id, status from user_messages where id = $1", id).Scan(&user, &status); err != nil {
		t.Fatal(err)
	}
	if user != f.userA || status != "pending" {
		t.Fatalf("message user_id %q status %q, want %s pending", user, status, f.userA)
	}
	// The member of B does not see it.
	err = f.as(t, "authenticated", f.userB, func(tx pgx.Tx) error {
		if got := ids(t, tx, "select id::text from user_messages"); len(got) != 0 {
			t.Errorf("member of B reads A's messages: %v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRLSServiceRoleBypasses(t *testing.T) {
	f := newRLSFixture(t)
	err := f.as(t, "service_role", "", func(tx pgx.Tx) error {
		if got := ids(t, tx, "select id::text from user_questions"); len(got) != 3 {
			t.Errorf("service_role reads %d questions, want 3", len(got))
		}
		n, err := update(tx, "update user_questions set response = 'console', status = 'answered', answered_at = now(), answered_by = '' where id = $1", f.qB)
		if err == nil && n != 1 {
			t.Errorf("service_role answer changed %d rows", n)
		}
		return err
	})
	if err != nil {
		t.Fatalf("service_role: %v", err)
	}
}

// TestRLSOwnerManagesMembers: an owner adds a member by email, invites an
// address with no account yet (which joins once signed up), changes a role
// and removes; a plain member can do none of it, not even promote
// themselves; nobody leaves an office without an owner.
func TestRLSOwnerManagesMembers(t *testing.T) {
	f := newRLSFixture(t)
	ctx := context.Background()
	f.exec(t, `update office_members set role = 'owner' where office_id = $1 and user_id = $2`, f.officeA, f.userA)
	call := func(user, sql string, args ...any) (string, error) {
		var out string
		err := f.as(t, "authenticated", user, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, sql, args...).Scan(&out)
		})
		return out, err
	}
	// B is a member of office B only: they cannot add anyone to A, nor themselves.
	if _, err := call(f.userB, `select public.add_office_member($1, 'n@example.com')::text`, f.officeA); sqlState(err) != "42501" {
		t.Errorf("non-owner add: %v; want 42501", err)
	}
	if _, err := call(f.userB, `insert into office_members (office_id, user_id) values ($1, $2) returning 'x'`, f.officeA, f.userB); sqlState(err) != "42501" {
		t.Errorf("self insert: %v; want 42501", err)
	}
	// The owner adds n (an existing account) and invites someone new.
	if got, err := call(f.userA, `select public.add_office_member($1, 'N@Example.com') ->> 'status'`, f.officeA); err != nil || got != "added" {
		t.Fatalf("add existing: %q %v", got, err)
	}
	if _, err := call(f.userA, `select public.add_office_member($1, 'n@example.com')::text`, f.officeA); sqlState(err) != "PT409" {
		t.Errorf("add twice: %v; want PT409", err)
	}
	if got, err := call(f.userA, `select public.add_office_member($1, 'later@example.com', 'admin') ->> 'status'`, f.officeA); err != nil || got != "invited" {
		t.Fatalf("invite: %q %v", got, err)
	}
	if _, err := call(f.userA, `select public.add_office_member($1, 'not an email')::text`, f.officeA); sqlState(err) != "22023" {
		t.Errorf("bad email: %v; want 22023", err)
	}
	// n, now a member, may not promote themselves nor remove the owner.
	err := f.as(t, "authenticated", f.nobody, func(tx pgx.Tx) error {
		n, err := update(tx, `update office_members set role = 'owner' where office_id = $1 and user_id = $2`, f.officeA, f.nobody)
		if err == nil && n != 0 {
			t.Errorf("a member promoted themselves")
		}
		return err
	})
	if err != nil && sqlState(err) != "42501" {
		t.Errorf("self promotion: %v", err)
	}
	if _, err := call(f.nobody, `select public.remove_office_member($1, $2)::text`, f.officeA, f.userA); sqlState(err) != "42501" {
		t.Errorf("member removes owner: %v; want 42501", err)
	}
	// Members list with emails.
	if got, err := call(f.nobody, `select string_agg(email || ':' || role, ',' order by email) from public.list_office_members($1)`, f.officeA); err != nil || got != "a@example.com:owner,n@example.com:member" {
		t.Errorf("list: %q %v", got, err)
	}
	// The invited address signs up and joins.
	later := uuid.NewString()
	f.exec(t, `insert into auth.users (id, email) values ($1, 'Later@example.com')`, later)
	if got, err := call(later, `select string_agg(x::text, ',') from public.accept_office_invitations() x`); err != nil || got != f.officeA {
		t.Fatalf("accept: %q %v; want %s", got, err, f.officeA)
	}
	var role string
	if err := f.conn.QueryRow(ctx, `select role from office_members where office_id = $1 and user_id = $2`, f.officeA, later).Scan(&role); err != nil || role != "admin" {
		t.Errorf("invited user's membership: %q %v; want admin", role, err)
	}
	// The last owner stays, by function and by plain delete.
	if _, err := call(f.userA, `select public.remove_office_member($1, $2)::text`, f.officeA, f.userA); sqlState(err) != "PT409" {
		t.Errorf("last owner leaves: %v; want PT409", err)
	}
	err = f.as(t, "authenticated", f.userA, func(tx pgx.Tx) error {
		_, err := update(tx, `delete from office_members where office_id = $1 and user_id = $2`, f.officeA, f.userA)
		return err
	})
	if sqlState(err) != "PT409" {
		t.Errorf("last owner deleted by row: %v; want PT409", err)
	}
	// The owner removes n; n leaves nothing behind.
	if _, err := call(f.userA, `select public.remove_office_member($1, $2)::text`, f.officeA, f.nobody); err != nil {
		t.Errorf("remove: %v", err)
	}
	if _, err := call(f.nobody, `select public.list_office_members($1)::text`, f.officeA); sqlState(err) != "PT404" {
		t.Errorf("removed member lists: %v; want PT404", err)
	}
}

// TestAnswerQuestionChecks: answer_question accepts what the office's
// validAnswer (engine/api.go) accepts, stores it as validAnswer returns it,
// and refuses the rest with 22023 before anything is written.
func TestAnswerQuestionChecks(t *testing.T) {
	f := newRLSFixture(t)
	ctx := context.Background()
	tests := []struct {
		name, typ, options string
		required           bool
		response, want     string // want "" : refused with 22023
	}{
		{"selection, case and spaces", "selection", `["Dark mode", "Notifications"]`, false, " dark MODE\u3000", "Dark mode"},
		{"selection, not an option", "selection", `["Dark mode", "Notifications"]`, false, "Purple", ""},
		{"selection without options", "selection", `[]`, false, " anything ", "anything"},
		{"confirmation, Korean yes", "confirmation", `[]`, false, "네", "yes"},
		{"confirmation, y", "confirmation", `[]`, false, "Y", "yes"},
		{"confirmation, false", "confirmation", `[]`, false, "false", "no"},
		{"confirmation, an option", "confirmation", `["Yes", "No, use staging"]`, false, "no, use staging", "No, use staging"},
		{"confirmation, neither", "confirmation", `[]`, false, "maybe", ""},
		{"text", "text", `[]`, false, "  hi  ", "hi"},
		{"text, empty but optional", "text", `[]`, false, " ", ""},
		{"text, empty and required", "text", `[]`, true, " ", ""},
		// A permission request takes any text (engine/api.go AnswerQuestion):
		// a deny carries the person's reason.
		{"permission, an option", "selection", `["allow once", "allow for this session", "deny"]`, true, "Allow once", "Allow once"},
		{"permission, deny with a reason", "selection", `["allow once", "allow for this session", "deny"]`, true, " deny: not before the release ", "deny: not before the release"},
		{"permission, empty", "selection", `["allow once", "allow for this session", "deny"]`, true, " ", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			category := ""
			if strings.HasPrefix(tc.name, "permission") {
				category = "permission"
			}
			var id string
			if err := f.conn.QueryRow(ctx, `insert into user_questions (office_id, agent_id, question, question_type, options, required, category, expires_at)
				values ($1, $2, 'q?', $3, $4::jsonb, $5, nullif($6, ''), now() + interval '1 hour') returning id::text`,
				f.officeA, f.agentA, tc.typ, tc.options, tc.required, category).Scan(&id); err != nil {
				t.Fatal(err)
			}
			var got string
			err := f.as(t, "authenticated", f.userA, func(tx pgx.Tx) error {
				return tx.QueryRow(ctx, `select response from public.answer_question($1, $2)`, id, tc.response).Scan(&got)
			})
			refused := tc.want == "" && !(tc.typ == "text" && !tc.required)
			switch {
			case refused && sqlState(err) != "22023":
				t.Errorf("answer %q: %q, %v; want 22023", tc.response, got, err)
			case !refused && (err != nil || got != tc.want):
				t.Errorf("answer %q: %q, %v; want %q", tc.response, got, err, tc.want)
			}
			status, _, _, _, _, _, _ := f.question(t, id)
			if refused && status != "pending" {
				t.Errorf("a refused answer left the question %s", status)
			}
		})
	}
}
