package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/store/pgfunc"
)

// The transitions the PostgreSQL stores run as database functions
// (migrations/20261128100000_office_functions.sql), written here for
// SQLite: the same rules, checked by the same store/storetest cases.

// ListDue implements office.Store; see its contract in office/store.go.
// The five reads cost no round trip here.
func (s *Store) ListDue(ctx context.Context, officeID, agentID string) (office.DueWork, error) {
	var (
		w    office.DueWork
		errs [5]error
	)
	mine := office.Due{OfficeIDs: []string{officeID}, AgentID: agentID}
	w.Dependencies, errs[0] = s.ListUndeliveredDependencies(ctx, mine)
	w.Answers, errs[1] = s.ListAnsweredUndelivered(ctx, mine)
	w.Results, errs[2] = s.ListResults(ctx, office.ResultFilter{OfficeID: officeID, ToAgentID: agentID, Status: []string{office.ResultPending}})
	w.Messages, errs[3] = s.ListPendingUserMessages(ctx, mine)
	w.Tasks, errs[4] = s.ListInvocations(ctx, office.InvocationFilter{OfficeID: officeID, CalleeAgentID: agentID,
		Status: []string{office.InvocationPending, office.InvocationInProgress}})
	return w, errors.Join(errs[:]...)
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
	var cur string
	err = tx.QueryRowContext(ctx, `select status from agent_sessions where agent_id = ?`, c.AgentID).Scan(&cur)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return office.SessionRecord{}, office.Event{}, false, s.fail(op, err)
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
				return office.SessionRecord{}, office.Event{}, false, s.fail(op, err)
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
			return office.SessionRecord{}, office.Event{}, false, s.fail(op, err)
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
			return office.SessionRecord{}, office.Event{}, false, s.fail(op, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return office.SessionRecord{}, office.Event{}, false, s.fail(op, err)
	}
	return rec, ev, row != nil, nil
}
