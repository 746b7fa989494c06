package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/store/pgfunc"
)

// The transitions the PostgreSQL stores run as database functions
// (migrations/20261128100000_office_functions.sql), written here for
// SQLite: the same rules, checked by the same store/storetest cases.

// ListDue implements office.Store; see its contract in office/store.go.
// The six reads cost no round trip here.
func (s *Store) ListDue(ctx context.Context, officeID, agentID string) (office.DueWork, error) {
	var (
		w    office.DueWork
		errs [6]error
	)
	mine := office.Due{OfficeIDs: []string{officeID}, AgentID: agentID}
	w.Notices, errs[5] = s.pendingNotices(ctx, officeID, agentID)
	w.Dependencies, errs[0] = s.ListUndeliveredDependencies(ctx, mine)
	w.Answers, errs[1] = s.ListAnsweredUndelivered(ctx, mine)
	w.Results, errs[2] = s.ListResults(ctx, office.ResultFilter{OfficeID: officeID, ToAgentID: agentID, Status: []string{office.ResultPending}})
	w.Messages, errs[3] = s.ListPendingUserMessages(ctx, mine)
	w.Tasks, errs[4] = s.ListInvocations(ctx, office.InvocationFilter{OfficeID: officeID, CalleeAgentID: agentID,
		Status: []string{office.InvocationPending, office.InvocationInProgress}})
	return w, errors.Join(errs[:]...)
}

// ListDueTyping implements office.Store; see its contract in
// office/store.go (office_due with p_typing_at in the PostgreSQL stores):
// the reads, then the marker of the row typed first (office.TypingFirst).
func (s *Store) ListDueTyping(ctx context.Context, officeID, agentID string, at time.Time) (office.DueWork, error) {
	w, err := s.ListDue(ctx, officeID, agentID)
	if err != nil {
		return w, err
	}
	var status string
	err = s.rs.queryRow(ctx, `select status from office_agents where id = ? and office_id = ?`, agentID, officeID).Scan(&status)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return w, s.fail("list due", err)
	}
	row := office.TypingFirst(w, status)
	if row == "" {
		return w, nil
	}
	p, _ := json.Marshal(map[string]any{"row": row, "at": at})
	ev, inserted, err := s.AppendEvent(ctx, office.Event{OfficeID: officeID, AgentID: agentID, Kind: office.EventTyping, Payload: p, DedupeKey: office.TypingKey(row)})
	if err != nil {
		return w, err
	}
	w.Typing = office.Typing{Row: row, Event: ev, Inserted: inserted}
	return w, nil
}

// appendMessage appends m, the agent's message that makes a transition,
// as the event of agentID in officeID within tx (nothing when m.Kind is
// empty): the event, and whether it was appended now (an event with its
// dedupe key stored before is kept).
func appendMessage(ctx context.Context, tx *sql.Tx, officeID, agentID string, m office.Event, now string) (office.Event, bool, error) {
	if m.Kind == "" {
		return office.Event{}, false, nil
	}
	var payload any
	if p := strings.TrimSpace(string(m.Payload)); p != "" {
		payload = p
	}
	ev, err := scanEvent(tx.QueryRowContext(ctx, `insert into office_events (office_id, agent_id, kind, payload, raw, dedupe_key, created_at)
		values (?, ?, ?, ?, ?, ?, ?)
		on conflict (office_id, dedupe_key) where dedupe_key is not null do nothing
		returning `+eventCols, officeID, agentID, m.Kind, payload, nullStr(m.Raw), nullStr(m.DedupeKey), now))
	if errors.Is(err, sql.ErrNoRows) {
		return office.Event{}, false, nil // appended before: the one stored first stands
	}
	return ev, err == nil, err
}

// keepConversation writes agent_session_id only when the row has none: the
// first conversation recorded for an agent holds.
const keepConversation = `agent_session_id = case when agent_sessions.agent_session_id = '' then excluded.agent_session_id else agent_sessions.agent_session_id end`

// SetSessionStatus implements office.Store; see its contract in
// office/store.go (office_set_session_status in the PostgreSQL stores).
func (s *Store) SetSessionStatus(ctx context.Context, c office.SessionStatus) (office.SessionRecord, office.Event, bool, error) {
	const op = "set session status"
	if err := pgfunc.SessionStatusCheck(c); err != nil {
		return office.SessionRecord{}, office.Event{}, false, err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return office.SessionRecord{}, office.Event{}, false, s.fail(op, err)
	}
	defer tx.Rollback()
	rec, ev, ok, err := setSessionStatus(ctx, tx, c)
	if err != nil {
		return office.SessionRecord{}, office.Event{}, false, s.fail(op, err)
	}
	if err := tx.Commit(); err != nil {
		return office.SessionRecord{}, office.Event{}, false, s.fail(op, err)
	}
	return rec, ev, ok, nil
}

// setSessionStatus is SetSessionStatus within tx.
func setSessionStatus(ctx context.Context, tx *sql.Tx, c office.SessionStatus) (office.SessionRecord, office.Event, bool, error) {
	var cur string
	err := tx.QueryRowContext(ctx, `select status from agent_sessions where agent_id = ?`, c.AgentID).Scan(&cur)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return office.SessionRecord{}, office.Event{}, false, err
	}
	status := c.Status
	_, now := nowTS()
	var row *sql.Row
	detail := office.CutSessionDetail(c.Detail)
	if c.Process {
		if cur == office.SessionWaiting && (status == office.SessionReady || status == office.SessionBusy) {
			var waits bool
			err := tx.QueryRowContext(ctx, `select exists (select 1 from user_questions where agent_id = ? and status = 'pending')
				or exists (select 1 from dependency_requests where agent_id = ? and status = 'pending')`, c.AgentID, c.AgentID).Scan(&waits)
			if err != nil {
				return office.SessionRecord{}, office.Event{}, false, err
			}
			if waits {
				status = office.SessionWaiting
			}
		}
		var exit any
		if c.ExitCode != nil {
			exit = *c.ExitCode
		}
		row = tx.QueryRowContext(ctx, `insert into agent_sessions (id, office_id, agent_id, status, detail, pid, exit_code, started_at, node, agent_session_id, created_at, updated_at)
			values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			on conflict (agent_id) do update set status = excluded.status, detail = excluded.detail, pid = excluded.pid,
				exit_code = excluded.exit_code, started_at = coalesce(excluded.started_at, agent_sessions.started_at),
				node = coalesce(nullif(excluded.node, ''), agent_sessions.node), `+keepConversation+`, updated_at = excluded.updated_at
			returning `+sessionCols,
			uuid.NewString(), c.OfficeID, c.AgentID, status, detail, c.PID, exit, nullTS(c.StartedAt), c.Node, c.AgentSessionID, now, now)
	} else if status == "" {
		row = tx.QueryRowContext(ctx, `insert into agent_sessions (id, office_id, agent_id, status, node, agent_session_id, created_at, updated_at)
			values (?, ?, ?, ?, ?, ?, ?, ?)
			on conflict (agent_id) do update set node = coalesce(nullif(excluded.node, ''), agent_sessions.node), `+keepConversation+`,
				updated_at = excluded.updated_at
			returning `+sessionCols,
			uuid.NewString(), c.OfficeID, c.AgentID, office.SessionStarting, c.Node, c.AgentSessionID, now, now)
	} else if !office.StickySessionStatus(cur) {
		row = tx.QueryRowContext(ctx, `insert into agent_sessions (id, office_id, agent_id, status, detail, agent_session_id, created_at, updated_at)
			values (?, ?, ?, ?, ?, ?, ?, ?)
			on conflict (agent_id) do update set status = excluded.status, detail = excluded.detail, `+keepConversation+`,
				updated_at = excluded.updated_at
			returning `+sessionCols,
			uuid.NewString(), c.OfficeID, c.AgentID, status, detail, c.AgentSessionID, now, now)
	}
	var rec office.SessionRecord
	if row != nil {
		if rec, err = scanSession(row); err != nil {
			return office.SessionRecord{}, office.Event{}, false, err
		}
	}
	var ev office.Event
	if c.EventKind != "" {
		var payload any
		if p := strings.TrimSpace(string(c.EventPayload)); p != "" {
			payload = p
		}
		ev, err = scanEvent(tx.QueryRowContext(ctx, `insert into office_events (office_id, agent_id, kind, payload, created_at)
			values (?, ?, ?, ?, ?) returning `+eventCols, c.OfficeID, c.AgentID, c.EventKind, payload, now))
		if err != nil {
			return office.SessionRecord{}, office.Event{}, false, err
		}
	}
	return rec, ev, row != nil, nil
}

// MarkDelivered implements office.Store; see its contract in
// office/store.go (office_mark_delivered in the PostgreSQL stores).
func (s *Store) MarkDelivered(ctx context.Context, d office.Delivered) (time.Time, office.Event, bool, error) {
	const op = "mark delivered"
	if err := pgfunc.MarkDeliveredCheck(d); err != nil {
		return time.Time{}, office.Event{}, false, err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return time.Time{}, office.Event{}, false, s.fail(op, err)
	}
	defer tx.Rollback()
	_, now := nowTS()
	var q string
	switch d.Kind {
	case office.DeliveredQuestion:
		q = `update user_questions set status = 'delivered', delivered_at = ?, updated_at = ?
			where id = ? and office_id = ? and agent_id = ? and status = 'answered' returning delivered_at`
	case office.DeliveredResult:
		q = `update agent_results set status = 'delivered', delivered_at = ?, updated_at = ?
			where id = ? and office_id = ? and to_agent_id = ? and status = 'pending' returning delivered_at`
	case office.DeliveredNotice:
		q = `update office_notices set status = 'delivered', delivered_at = ?
			where id = ? and office_id = ? and agent_id = ? and status = 'pending' returning delivered_at`
	default: // office.DeliveredTask
		q = `update agent_invocations set status = 'in_progress', started_at = coalesce(started_at, ?), updated_at = ?
			where id = ? and office_id = ? and callee_agent_id = ? and status = 'pending' returning started_at`
	}
	args := []any{now, now, d.ID, d.OfficeID, d.AgentID}
	if d.Kind == office.DeliveredNotice {
		args = args[1:] // no updated_at
	}
	var at time.Time
	err = tx.QueryRowContext(ctx, q, args...).Scan(tsVal{&at})
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, office.Event{}, false, nil
	}
	if err != nil {
		return time.Time{}, office.Event{}, false, s.fail(op, err)
	}
	var ev office.Event
	if d.EventKind != "" {
		var payload any
		if p := strings.TrimSpace(string(d.EventPayload)); p != "" {
			payload = p
		}
		ev, err = scanEvent(tx.QueryRowContext(ctx, `insert into office_events (office_id, agent_id, kind, payload, created_at)
			values (?, ?, ?, ?, ?) returning `+eventCols, d.OfficeID, d.AgentID, d.EventKind, payload, now))
		if err != nil {
			return time.Time{}, office.Event{}, false, s.fail(op, err)
		}
	}
	if d.Busy {
		if _, _, _, err := setSessionStatus(ctx, tx, office.SessionStatus{OfficeID: d.OfficeID, AgentID: d.AgentID, Status: office.SessionBusy}); err != nil {
			return time.Time{}, office.Event{}, false, s.fail(op, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return time.Time{}, office.Event{}, false, s.fail(op, err)
	}
	return at, ev, true, nil
}

// AskQuestion implements office.Store; see its contract in
// office/store.go (office_ask in the PostgreSQL stores).
func (s *Store) AskQuestion(ctx context.Context, a office.Ask) (office.Question, []office.Question, []office.Event, bool, error) {
	const op = "ask question"
	if err := pgfunc.AskCheck(a); err != nil {
		return office.Question{}, nil, nil, false, err
	}
	q := a.Question
	if q.QuestionType == "" {
		q.QuestionType = office.QuestionText
	}
	opts, err := jsonText(q.Options, "[]")
	if err != nil {
		return office.Question{}, nil, nil, false, s.fail(op, err)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return office.Question{}, nil, nil, false, s.fail(op, err)
	}
	defer tx.Rollback()
	t, now := nowTS()
	var events []office.Event
	if m, ok, err := appendMessage(ctx, tx, q.OfficeID, q.AgentID, a.Message, now); err != nil {
		return office.Question{}, nil, nil, false, s.fail(op, err)
	} else if ok {
		events = append(events, m)
	}
	expires, err := questionExpiry(ctx, tx, q.OfficeID, a, t)
	if err != nil {
		return office.Question{}, nil, nil, false, s.fail(op, err)
	}
	got, err := scanQuestion(tx.QueryRowContext(ctx, `insert into user_questions (id, office_id, agent_id, session_id, question_type, category,
			question, options, default_answer, context, required, status, expires_at, created_at, updated_at)
		values (?, ?, ?, (select id from agent_sessions where agent_id = ?), ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)
		on conflict (id) do nothing
		returning `+questionCols,
		q.ID, q.OfficeID, q.AgentID, q.AgentID, q.QuestionType, nullStr(q.Category), q.Question, opts,
		nullStr(q.DefaultAnswer), nullStr(q.Context), q.Required, ts(expires), now, now))
	created := err == nil
	if errors.Is(err, sql.ErrNoRows) {
		got, err = scanQuestion(tx.QueryRowContext(ctx, `select `+questionCols+` from user_questions where id = ?`, q.ID))
	}
	if err != nil {
		return office.Question{}, nil, nil, false, s.fail(op, err)
	}
	if created {
		if _, _, _, err := setSessionStatus(ctx, tx, office.SessionStatus{OfficeID: q.OfficeID, AgentID: q.AgentID, Status: office.SessionWaiting}); err != nil {
			return office.Question{}, nil, nil, false, s.fail(op, err)
		}
		if a.EventKind != "" {
			payload, _ := json.Marshal(map[string]any{"question_id": got.ID, "question": got.Question, "type": got.QuestionType,
				"options": got.Options, "expires_at": got.ExpiresAt})
			ev, err := scanEvent(tx.QueryRowContext(ctx, `insert into office_events (office_id, agent_id, kind, payload, dedupe_key, created_at)
				values (?, ?, ?, ?, ?, ?)
				on conflict (office_id, dedupe_key) where dedupe_key is not null do nothing
				returning `+eventCols, q.OfficeID, q.AgentID, a.EventKind, string(payload), nullStr(a.EventDedupeKey), now))
			if err == nil {
				events = append(events, ev)
			} else if errors.Is(err, sql.ErrNoRows) {
				err = nil // appended before: the one stored first stands
			}
			if err != nil {
				return office.Question{}, nil, nil, false, s.fail(op, err)
			}
		}
	}
	rows, err := tx.QueryContext(ctx, `select `+questionCols+` from user_questions
		where office_id = ? and agent_id = ? and status = 'pending' and id <> ? order by created_at, rowid`, got.OfficeID, got.AgentID, got.ID)
	pending, err := collect(rows, err, scanQuestion)
	if err != nil {
		return office.Question{}, nil, nil, false, s.fail(op, err)
	}
	if err := tx.Commit(); err != nil {
		return office.Question{}, nil, nil, false, s.fail(op, err)
	}
	if created {
		// Its deadline, for the engine's sweeper (office.Change.ExpiresAt), as CreateQuestion tells it.
		at := got.ExpiresAt
		s.feed.publish(office.Change{Table: office.TableQuestions, Op: office.OpInsert, ID: got.ID, OfficeID: got.OfficeID, AgentID: got.AgentID, Status: got.Status, ExpiresAt: &at})
	}
	return got, pending, events, created, nil
}

// questionExpiry is when a question asked (at a.At, or now) expires: after
// its office's question_ttl, or a.TTL where the office sets none.
func questionExpiry(ctx context.Context, tx *sql.Tx, officeID string, a office.Ask, now time.Time) (time.Time, error) {
	var ttl int64 // microseconds (schema/0001_office.sql)
	if err := tx.QueryRowContext(ctx, `select question_ttl from offices where id = ?`, officeID).Scan(&ttl); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, err
	}
	asked := now
	if !a.At.IsZero() {
		asked = a.At
	}
	if ttl > 0 {
		return asked.Add(time.Duration(ttl) * time.Microsecond), nil
	}
	return asked.Add(a.TTL), nil
}

// insertResult stores r for the oldest open task from its recipient to its
// sender, or, when a row with its id exists (a result handled again),
// returns that row; created says which.
func insertResult(ctx context.Context, tx *sql.Tx, r office.Result, now string) (office.Result, bool, error) {
	res, err := scanResult(tx.QueryRowContext(ctx, `insert into agent_results (id, office_id, invocation_id, from_agent_id, to_agent_id,
			result_type, content_type, content, status, created_at, updated_at)
		values (?, ?, (select id from agent_invocations where office_id = ? and caller_agent_id = ? and callee_agent_id = ?
				and status in ('pending', 'in_progress') order by created_at, rowid limit 1),
			?, ?, ?, ?, ?, 'pending', ?, ?)
		on conflict (id) do nothing
		returning `+resultCols,
		r.ID, r.OfficeID, r.OfficeID, r.ToAgentID, r.FromAgentID, r.FromAgentID, r.ToAgentID, r.ResultType, r.ContentType, r.Content, now, now))
	if errors.Is(err, sql.ErrNoRows) {
		res, err = scanResult(tx.QueryRowContext(ctx, `select `+resultCols+` from agent_results where id = ?`, r.ID))
		return res, false, err
	}
	return res, err == nil, err
}

// DeliverResult implements office.Store; see its contract in
// office/store.go (office_deliver_result in the PostgreSQL stores).
func (s *Store) DeliverResult(ctx context.Context, d office.ResultDelivery) (office.ResultStored, error) {
	const op = "deliver result"
	if err := pgfunc.DeliverResultCheck(d); err != nil {
		return office.ResultStored{}, err
	}
	r := d.Result
	if r.ResultType == "" {
		r.ResultType = "message"
	}
	if r.ContentType == "" {
		r.ContentType = "text/plain"
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return office.ResultStored{}, s.fail(op, err)
	}
	defer tx.Rollback()
	_, now := nowTS()
	var out office.ResultStored
	if m, ok, err := appendMessage(ctx, tx, r.OfficeID, r.FromAgentID, d.Message, now); err != nil {
		return office.ResultStored{}, s.fail(op, err)
	} else if ok {
		out.Events = append(out.Events, m)
	}
	if out.Result, out.Created, err = insertResult(ctx, tx, r, now); err != nil {
		return office.ResultStored{}, s.fail(op, err)
	}
	res := out.Result
	event := func(kind, key string, payload map[string]string) error {
		p, _ := json.Marshal(payload)
		ev, err := scanEvent(tx.QueryRowContext(ctx, `insert into office_events (office_id, agent_id, kind, payload, dedupe_key, created_at)
			values (?, ?, ?, ?, ?, ?)
			on conflict (office_id, dedupe_key) where dedupe_key is not null do nothing
			returning `+eventCols, res.OfficeID, res.FromAgentID, kind, string(p), nullStr(key), now))
		if errors.Is(err, sql.ErrNoRows) {
			return nil // appended before: the one stored first stands
		}
		if err == nil {
			out.Events = append(out.Events, ev)
		}
		return err
	}
	if res.InvocationID != "" {
		n, err := tx.ExecContext(ctx, `update agent_invocations set status = 'completed', result_id = ?, completed_at = ?, updated_at = ?
			where id = ? and status in ('pending', 'in_progress')`, res.ID, now, now, res.InvocationID)
		if err != nil {
			return office.ResultStored{}, s.fail(op, err)
		}
		if k, _ := n.RowsAffected(); k == 1 {
			out.Completed = true
			if d.CompletedEventKind != "" {
				if err := event(d.CompletedEventKind, d.CompletedDedupeKey, map[string]string{"invocation_id": res.InvocationID, "result_id": res.ID}); err != nil {
					return office.ResultStored{}, s.fail(op, err)
				}
			}
		}
	}
	if d.EventKind != "" {
		if err := event(d.EventKind, d.EventDedupeKey, map[string]string{"result_id": res.ID, "to": d.ToName, "invocation_id": res.InvocationID, "type": res.ResultType}); err != nil {
			return office.ResultStored{}, s.fail(op, err)
		}
	}
	if err := tx.QueryRowContext(ctx, `select exists (select 1 from agent_invocations where office_id = ? and callee_agent_id = ? and status = 'pending')`,
		res.OfficeID, res.FromAgentID).Scan(&out.NextTask); err != nil {
		return office.ResultStored{}, s.fail(op, err)
	}
	if err := tx.Commit(); err != nil {
		return office.ResultStored{}, s.fail(op, err)
	}
	return out, nil
}

// Invoke implements office.Store; see its contract in office/store.go
// (office_invoke in the PostgreSQL stores).
func (s *Store) Invoke(ctx context.Context, i office.Invoke) (office.Invocation, []office.Event, bool, error) {
	const op = "invoke"
	if err := pgfunc.InvokeCheck(i); err != nil {
		return office.Invocation{}, nil, false, err
	}
	v := i.Invocation
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return office.Invocation{}, nil, false, s.fail(op, err)
	}
	defer tx.Rollback()
	_, now := nowTS()
	var events []office.Event
	if m, ok, err := appendMessage(ctx, tx, v.OfficeID, v.CallerAgentID, i.Message, now); err != nil {
		return office.Invocation{}, nil, false, s.fail(op, err)
	} else if ok {
		events = append(events, m)
	}
	inv, err := scanInvocation(tx.QueryRowContext(ctx, `insert into agent_invocations (id, office_id, caller_agent_id, callee_agent_id,
			parent_invocation_id, depth, reason, context, status, created_at, updated_at)
		values (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)
		on conflict (id) do nothing
		returning `+invocationCols,
		v.ID, v.OfficeID, v.CallerAgentID, v.CalleeAgentID, nullStr(v.ParentInvocationID), v.Depth, v.Reason, nullStr(v.Context), now, now))
	created := err == nil
	if errors.Is(err, sql.ErrNoRows) {
		inv, err = scanInvocation(tx.QueryRowContext(ctx, `select `+invocationCols+` from agent_invocations where id = ?`, v.ID))
	}
	if err != nil {
		return office.Invocation{}, nil, false, s.fail(op, err)
	}
	if created && i.EventKind != "" {
		var payload any
		if p := strings.TrimSpace(string(i.EventPayload)); p != "" {
			payload = p
		}
		ev, err := scanEvent(tx.QueryRowContext(ctx, `insert into office_events (office_id, agent_id, kind, payload, dedupe_key, created_at)
			values (?, ?, ?, ?, ?, ?)
			on conflict (office_id, dedupe_key) where dedupe_key is not null do nothing
			returning `+eventCols, v.OfficeID, v.CallerAgentID, i.EventKind, payload, nullStr(i.EventDedupeKey), now))
		if err == nil {
			events = append(events, ev)
		} else if errors.Is(err, sql.ErrNoRows) {
			err = nil // appended before: the one stored first stands
		}
		if err != nil {
			return office.Invocation{}, nil, false, s.fail(op, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return office.Invocation{}, nil, false, s.fail(op, err)
	}
	return inv, events, created, nil
}

// ListOpenWork implements office.Store; see its contract in
// office/store.go. The two reads cost no round trip here.
func (s *Store) ListOpenWork(ctx context.Context, officeID string) (office.OpenWork, error) {
	var (
		w          office.OpenWork
		errI, errT error
	)
	w.Invocations, errI = s.ListInvocations(ctx, office.InvocationFilter{OfficeID: officeID, Status: []string{office.InvocationPending, office.InvocationInProgress}})
	w.ProxyTasks, errT = s.ListProxyTasks(ctx, office.ProxyTaskFilter{OfficeID: officeID, Status: office.ProxyTaskOpen})
	return w, errors.Join(errI, errT)
}

// AppendEvents implements office.Store; see its contract in
// office/store.go (office_append_events in the PostgreSQL stores): each
// event as AppendEvent appends it, in one transaction.
func (s *Store) AppendEvents(ctx context.Context, events []office.Event) ([]office.Event, []bool, error) {
	const op = "append events"
	if len(events) == 0 {
		return nil, nil, nil
	}
	if err := pgfunc.AppendEventsCheck(events); err != nil {
		return nil, nil, err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, s.fail(op, err)
	}
	defer tx.Rollback()
	_, now := nowTS()
	stored, inserted := make([]office.Event, len(events)), make([]bool, len(events))
	for i, e := range events {
		var payload any
		if p := strings.TrimSpace(string(e.Payload)); p != "" {
			payload = p
		}
		created := now
		if !e.CreatedAt.IsZero() {
			created = ts(e.CreatedAt)
		}
		stored[i], err = scanEvent(tx.QueryRowContext(ctx, `insert into office_events (office_id, agent_id, session_id, kind, payload, raw, dedupe_key, created_at)
			values (?, ?, ?, ?, ?, ?, ?, ?)
			on conflict (office_id, dedupe_key) where dedupe_key is not null do nothing
			returning `+eventCols,
			e.OfficeID, nullStr(e.AgentID), nullStr(e.SessionID), e.Kind, payload, nullStr(e.Raw), nullStr(e.DedupeKey), created))
		inserted[i] = err == nil
		if errors.Is(err, sql.ErrNoRows) {
			// A duplicate: the one stored first stands, and is returned.
			stored[i], err = scanEvent(tx.QueryRowContext(ctx, `select `+eventCols+` from office_events where office_id = ? and dedupe_key = ?`, e.OfficeID, e.DedupeKey))
		}
		if err != nil {
			return nil, nil, s.fail(op, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, s.fail(op, err)
	}
	return stored, inserted, nil
}

const noticeCols = `id, office_id, agent_id, text, status, delivered_at, created_at`

func scanNotice(r scanner) (office.Notice, error) {
	var n office.Notice
	err := r.Scan(&n.ID, &n.OfficeID, &n.AgentID, &n.Text, &n.Status, tsPtr{&n.DeliveredAt}, tsVal{&n.CreatedAt})
	return n, err
}

// pendingNotices is office_due's "notices": the agent's pending notices,
// oldest first.
func (s *Store) pendingNotices(ctx context.Context, officeID, agentID string) ([]office.Notice, error) {
	rows, err := s.rs.query(ctx, `select `+noticeCols+` from office_notices
		where agent_id = ? and office_id = ? and status = 'pending' order by rowid`, agentID, officeID)
	out, err := collect(rows, err, scanNotice)
	return out, s.fail("list due", err)
}

// AddNotices implements office.Store; see its contract in
// office/notices.go (office_add_notices in the PostgreSQL stores): in
// one transaction of the one writer, so the bound holds.
func (s *Store) AddNotices(ctx context.Context, officeID, agentID string, texts []string, limit int) (int, error) {
	const op = "add notices"
	if err := pgfunc.AddNoticesCheck(texts); err != nil || len(texts) == 0 {
		return 0, err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, s.fail(op, err)
	}
	defer tx.Rollback()
	var pending int
	err = tx.QueryRowContext(ctx, `select count(n.id) from office_agents a left join office_notices n
		on n.agent_id = a.id and n.status = 'pending' where a.id = ? and a.office_id = ? group by a.id`, agentID, officeID).Scan(&pending)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, &office.Error{Code: office.EINVALID, Op: op, Message: "no agent " + agentID + " in office " + officeID}
	}
	if err != nil {
		return 0, s.fail(op, err)
	}
	room := len(texts)
	if limit > 0 {
		room = min(room, max(0, limit-pending))
	}
	_, now := nowTS()
	for _, t := range texts[:room] {
		if _, err := tx.ExecContext(ctx, `insert into office_notices (id, office_id, agent_id, text, created_at) values (?, ?, ?, ?, ?)`,
			uuid.NewString(), officeID, agentID, t, now); err != nil {
			return 0, s.fail(op, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, s.fail(op, err)
	}
	return room, nil
}
