package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/store/postgres"
)

// changes collects what a Watch reports.
type changes struct {
	mu   sync.Mutex
	seen []office.Change
	wake chan struct{}
}

func newChanges() *changes { return &changes{wake: make(chan struct{}, 1)} }

func (c *changes) add(ch office.Change) {
	c.mu.Lock()
	c.seen = append(c.seen, ch)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *changes) wait(t *testing.T, what string, pred func(office.Change) bool) office.Change {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		for _, ch := range c.seen {
			if pred(ch) {
				c.mu.Unlock()
				return ch
			}
		}
		seen := fmt.Sprint(c.seen)
		c.mu.Unlock()
		select {
		case <-c.wake:
		case <-deadline:
			t.Fatalf("no %s within 10s; seen %s", what, seen)
		}
	}
}

// watch runs s.Watch until the test ends and waits until it is connected.
func watch(t *testing.T, s *postgres.Store, offices []string) *changes {
	t.Helper()
	c := newChanges()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Watch(ctx, offices, c.add) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch returned %v", err)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); !s.Connected(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("feed did not connect")
		}
	}
	return c
}

// TestMemberAnswerReachesFeed: a person answers from the frontend, as
// Supabase's authenticated role under row-level security; the database
// stamps who and when, the server's feed hears it, and the server delivers
// it once.
func TestMemberAnswerReachesFeed(t *testing.T) {
	ctx := t.Context()
	appURL, adminURL := supabaseLike(t)
	s, err := postgres.Open(ctx, appURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o, err := s.UpsertOffice(ctx, office.Office{Name: "HQ"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.UpsertAgent(ctx, office.Agent{OfficeID: o.ID, Name: "PO"})
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.CreateQuestion(ctx, office.Question{OfficeID: o.ID, AgentID: a.ID, Question: "Ship it?",
		QuestionType: office.QuestionConfirmation, Options: []string{"yes", "no"}})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(q.ExpiresAt); d < 4*time.Minute || d > 6*time.Minute {
		t.Errorf("default expiry in %v; want about 5 minutes", d)
	}
	member := uuid.NewString()
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, `insert into auth.users (id) values ($1)`, member); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `insert into office_members (office_id, user_id) values ($1, $2)`, o.ID, member); err != nil {
		t.Fatal(err)
	}

	feed := watch(t, s, []string{o.ID})
	asMember := func(sql string, args ...any) { t.Helper(); execAsMember(t, admin, member, sql, args...) }
	asMember(`select public.answer_question($1, 'yes')`, q.ID)
	got := feed.wait(t, "the member's answer", func(c office.Change) bool { return c.ID == q.ID && c.Op == office.OpUpdate })
	want := office.Change{Table: office.TableQuestions, Op: office.OpUpdate, ID: q.ID, OfficeID: o.ID, AgentID: a.ID, Status: office.QuestionAnswered}
	if got != want {
		t.Errorf("change %+v; want %+v", got, want)
	}
	stored, err := s.GetQuestion(ctx, q.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Response != "yes" || stored.AnsweredBy != member || stored.AnsweredAt == nil {
		t.Errorf("stored answer %q by %q at %v; want yes by %s, stamped", stored.Response, stored.AnsweredBy, stored.AnsweredAt, member)
	}
	list, err := s.ListAnsweredUndelivered(ctx, office.Due{OfficeIDs: []string{o.ID}})
	if err != nil || len(list) != 1 || list[0].ID != q.ID {
		t.Errorf("ListAnsweredUndelivered = %v, %v; want the answered question", list, err)
	}
	for i, want := range []bool{true, false} {
		ok, err := s.MarkQuestionDelivered(ctx, q.ID)
		if err != nil || ok != want {
			t.Errorf("MarkQuestionDelivered #%d = %v, %v; want %v", i+1, ok, err, want)
		}
	}

	asMember(`insert into user_messages (office_id, agent_id, content) values ($1, $2, 'also add SSO')`, o.ID, a.ID)
	msg := feed.wait(t, "the member's message", func(c office.Change) bool { return c.Table == office.TableMessages })
	ms, err := s.ListPendingUserMessages(ctx, office.Due{OfficeIDs: []string{o.ID}, AgentID: a.ID})
	if err != nil || len(ms) != 1 || ms[0].ID != msg.ID {
		t.Fatalf("ListPendingUserMessages = %v, %v; want the member's message %s", ms, err, msg.ID)
	}
	if m := ms[0]; m.Content != "also add SSO" || m.UserID != member || m.Status != office.MessagePending || msg.Op != office.OpInsert {
		t.Errorf("message %+v via change %+v; want the member's pending message", m, msg)
	}
}

// execAsMember runs sql, which must touch one row, as member under
// Supabase's authenticated role and row-level security, and commits.
func execAsMember(t *testing.T, admin *pgx.Conn, member, sql string, args ...any) {
	ctx := context.Background()
	t.Helper()
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `select set_config('request.jwt.claims', $1, true)`,
		fmt.Sprintf(`{"sub":%q,"role":"authenticated"}`, member)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `set local role authenticated`); err != nil {
		t.Fatal(err)
	}
	if tag, err := tx.Exec(ctx, sql, args...); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("%s as member: %v rows, %v", sql, tag.RowsAffected(), err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCloseEndsWatch(t *testing.T) {
	s, _ := open(t, postgres.Options{})
	done := make(chan error, 1)
	go func() { done <- s.Watch(context.Background(), nil, func(office.Change) {}) }()
	for deadline := time.Now().Add(10 * time.Second); !s.Connected(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("feed did not connect")
		}
	}
	s.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Watch returned %v after Close; want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Watch still running 10s after Close")
	}
	if s.Connected() || len(s.FeedPIDs()) != 0 {
		t.Errorf("after Close: Connected %v, feed pids %v", s.Connected(), s.FeedPIDs())
	}
}

// TestFeedReconnectsWhileDatabaseRefuses: the feed keeps trying, with
// backoff, while its connections are killed as soon as they appear.
func TestFeedSurvivesRepeatedKills(t *testing.T) {
	s, _ := open(t, postgres.Options{MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	ctx := t.Context()
	o, err := s.UpsertOffice(ctx, office.Office{Name: "HQ"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.UpsertAgent(ctx, office.Agent{OfficeID: o.ID, Name: "Dev"})
	if err != nil {
		t.Fatal(err)
	}
	feed := watch(t, s, nil)
	var ids []string
	for i := range 5 {
		killFeed(t, s)
		q, err := s.CreateQuestion(ctx, office.Question{OfficeID: o.ID, AgentID: a.ID, Question: fmt.Sprint("q", i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.AnswerQuestion(ctx, q.ID, "a", ""); !ok || err != nil {
			t.Fatalf("AnswerQuestion: %v %v", ok, err)
		}
		ids = append(ids, q.ID)
	}
	for _, id := range ids {
		feed.wait(t, "answer "+id, func(c office.Change) bool { return c.ID == id && c.Status == office.QuestionAnswered })
	}
}

func TestErrorCodes(t *testing.T) {
	s, _ := open(t, postgres.Options{})
	ctx := t.Context()
	o, err := s.UpsertOffice(ctx, office.Office{Name: "HQ"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.UpsertAgent(ctx, office.Agent{OfficeID: o.ID, Name: "Dev"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.UpsertOffice(ctx, office.Office{Name: "Other"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  func() error
		code string
	}{
		{"get with a non-UUID id", func() error { _, err := s.GetQuestion(ctx, "nope"); return err }, office.ENOTFOUND},
		{"create with a non-UUID id", func() error {
			_, err := s.CreateQuestion(ctx, office.Question{ID: "nope", OfficeID: o.ID, AgentID: a.ID, Question: "q"})
			return err
		}, office.EINVALID},
		{"question of a missing agent", func() error {
			_, err := s.CreateQuestion(ctx, office.Question{OfficeID: o.ID, AgentID: uuid.NewString(), Question: "q"})
			return err
		}, office.EINVALID},
		{"question of another office's agent", func() error {
			_, err := s.CreateQuestion(ctx, office.Question{OfficeID: other.ID, AgentID: a.ID, Question: "q"})
			return err
		}, office.EINVALID},
		{"unknown question type", func() error {
			_, err := s.CreateQuestion(ctx, office.Question{OfficeID: o.ID, AgentID: a.ID, Question: "q", QuestionType: "essay"})
			return err
		}, office.EINVALID},
		{"empty question", func() error {
			_, err := s.CreateQuestion(ctx, office.Question{OfficeID: o.ID, AgentID: a.ID})
			return err
		}, office.EINVALID},
		{"unknown agent status", func() error { return s.SetAgentStatus(ctx, a.ID, "sleepy") }, office.EINVALID},
		{"duplicate question id", func() error {
			q, err := s.CreateQuestion(ctx, office.Question{OfficeID: o.ID, AgentID: a.ID, Question: "q"})
			if err != nil {
				return err
			}
			_, err = s.CreateQuestion(ctx, office.Question{ID: q.ID, OfficeID: o.ID, AgentID: a.ID, Question: "q"})
			return err
		}, office.ECONFLICT},
		{"rename office onto a taken name", func() error {
			_, err := s.UpsertOffice(ctx, office.Office{ID: other.ID, Name: "HQ"})
			return err
		}, office.ECONFLICT},
		{"event payload not JSON", func() error {
			_, _, err := s.AppendEvent(ctx, office.Event{OfficeID: o.ID, Kind: "k", Payload: []byte("{")})
			return err
		}, office.EINVALID},
		{"transition with no from", func() error {
			_, _, err := s.TransitionInvocation(ctx, uuid.NewString(), nil, office.InvocationCompleted, office.InvocationPatch{})
			return err
		}, office.EINVALID},
	} {
		if got := office.ErrorCode(tc.err()); got != tc.code {
			t.Errorf("%s: code %q; want %q", tc.name, got, tc.code)
		}
	}
	// A closed store fails instead of hanging.
	s.Close()
	if got := office.ErrorCode(s.Ping(ctx)); got == "" {
		t.Errorf("Ping after Close: no error")
	}
}

// TestFeedReportsOnlyWhatAwaitsTheOffice: the triggers notify for an answer,
// a new message and a provided, rejected or expired dependency, for a new
// pending question or dependency request (with its expires_at, for the
// engine's timers), and for nothing else (a cancelled question, a
// delivery, an agent change).
func TestFeedReportsOnlyWhatAwaitsTheOffice(t *testing.T) {
	s, _ := open(t, postgres.Options{})
	ctx := t.Context()
	o, err := s.UpsertOffice(ctx, office.Office{Name: "HQ"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.UpsertAgent(ctx, office.Agent{OfficeID: o.ID, Name: "Dev"})
	if err != nil {
		t.Fatal(err)
	}
	feed := watch(t, s, nil)
	must := func(ok bool, err error) {
		t.Helper()
		if !ok || err != nil {
			t.Fatalf("transition: ok %v err %v", ok, err)
		}
	}
	newQ := func() office.Question { return feedQuestion(t, s, o.ID, a.ID) }
	newD := func(exp time.Time) office.DependencyRequest { return feedDependency(t, s, o.ID, a.ID, exp) }

	// Quiet: none of these awaits the office.
	cancelled := newQ()
	must(s.CancelQuestion(ctx, cancelled.ID))
	if err := s.SetAgentStatus(ctx, a.ID, office.AgentActive); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AppendEvent(ctx, office.Event{OfficeID: o.ID, Kind: "step"}); err != nil {
		t.Fatal(err)
	}

	// Loud, in this order.
	answered := newQ()
	_, ok, err := s.AnswerQuestion(ctx, answered.ID, "yes", "")
	must(ok, err)
	must(s.MarkQuestionDelivered(ctx, answered.ID)) // quiet
	m, err := s.CreateUserMessage(ctx, office.UserMessage{OfficeID: o.ID, AgentID: a.ID, Content: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	must(s.MarkUserMessageDelivered(ctx, m.ID)) // quiet
	provided := newD(time.Now().Add(time.Hour))
	_, ok, err = s.ProvideDependency(ctx, provided.ID, []byte("secret"))
	must(ok, err)
	must(s.MarkDependencyDelivered(ctx, provided.ID)) // quiet
	rejected := newD(time.Now().Add(time.Hour))
	_, ok, err = s.RejectDependency(ctx, rejected.ID, "no")
	must(ok, err)
	expired := newD(time.Now().Add(-time.Second))
	if got, err := s.ExpireDependencies(ctx, time.Now()); err != nil || len(got) != 1 {
		t.Fatalf("ExpireDependencies = %v, %v", got, err)
	}
	last := newQ()
	_, ok, err = s.AnswerQuestion(ctx, last.ID, "yes", "")
	must(ok, err)

	feed.wait(t, "the last answer", func(c office.Change) bool { return c.ID == last.ID && c.Op == office.OpUpdate })
	got := feedLines(t, feed, cancelled)
	want := []string{
		"user_questions INSERT " + cancelled.ID + " pending expires",
		"user_questions INSERT " + answered.ID + " pending expires",
		"user_questions UPDATE " + answered.ID + " answered",
		"user_messages INSERT " + m.ID + " pending",
		"dependency_requests INSERT " + provided.ID + " pending expires",
		"dependency_requests UPDATE " + provided.ID + " provided",
		"dependency_requests INSERT " + rejected.ID + " pending expires",
		"dependency_requests UPDATE " + rejected.ID + " rejected",
		"dependency_requests INSERT " + expired.ID + " pending expires",
		"dependency_requests UPDATE " + expired.ID + " expired",
		"user_questions INSERT " + last.ID + " pending expires",
		"user_questions UPDATE " + last.ID + " answered",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("feed reported\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// feedLines are the changes the feed saw, one line each: table, op, id,
// status and whether it carries expires_at (checked against the
// cancelled question's).
func feedLines(t *testing.T, feed *changes, cancelled office.Question) []string {
	feed.mu.Lock()
	defer feed.mu.Unlock()
	var got []string
	for _, c := range feed.seen {
		line := c.Table + " " + c.Op + " " + c.ID + " " + c.Status
		if c.ExpiresAt != nil {
			line += " expires"
		}
		if c.ID == cancelled.ID && c.ExpiresAt != nil && !c.ExpiresAt.Equal(cancelled.ExpiresAt) {
			t.Errorf("new question's expires_at in the notification = %v, want %v", c.ExpiresAt, cancelled.ExpiresAt)
		}
		got = append(got, line)
	}
	return got
}

func feedQuestion(t *testing.T, s *postgres.Store, officeID, agentID string) office.Question {
	q, err := s.CreateQuestion(context.Background(), office.Question{OfficeID: officeID, AgentID: agentID, Question: "q", ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func feedDependency(t *testing.T, s *postgres.Store, officeID, agentID string, exp time.Time) office.DependencyRequest {
	d, err := s.CreateDependency(context.Background(), office.DependencyRequest{OfficeID: officeID, AgentID: agentID, Type: "api_key", Name: "K", ExpiresAt: exp})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestFeedURL: the feed's LISTEN connection goes to Options.FeedURL.
func TestFeedURL(t *testing.T) {
	_, url := open(t, postgres.Options{})
	s, err := postgres.Open(t.Context(), url, postgres.Options{FeedURL: url + "&application_name=office_feed_url_test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	watch(t, s, nil)
	pids := s.FeedPIDs()
	if len(pids) != 1 {
		t.Fatalf("feed pids %v; want one", pids)
	}
	var app string
	if err := s.Pool().QueryRow(t.Context(), "select application_name from pg_stat_activity where pid = $1", int32(pids[0])).Scan(&app); err != nil {
		t.Fatal(err)
	}
	if app != "office_feed_url_test" {
		t.Errorf("feed connection application_name %q; want the FeedURL's office_feed_url_test", app)
	}
	if _, err := postgres.Open(t.Context(), url, postgres.Options{FeedURL: "postgres://%zz"}); office.ErrorCode(err) != office.EINVALID {
		t.Errorf("Open with a bad FeedURL: %v; want EINVALID", err)
	}
}
