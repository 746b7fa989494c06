package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
)

const invocationCols = `id, office_id, caller_agent_id, coalesce(callee_agent_id, ''), coalesce(parent_invocation_id, ''), depth, reason,
	coalesce(context, ''), status, coalesce(result_id, ''), coalesce(error, ''), started_at, completed_at, created_at, updated_at`

func scanInvocation(r scanner) (office.Invocation, error) {
	var i office.Invocation
	err := r.Scan(&i.ID, &i.OfficeID, &i.CallerAgentID, &i.CalleeAgentID, &i.ParentInvocationID, &i.Depth, &i.Reason,
		&i.Context, &i.Status, &i.ResultID, &i.Error, tsPtr{&i.StartedAt}, tsPtr{&i.CompletedAt}, tsVal{&i.CreatedAt}, tsVal{&i.UpdatedAt})
	return i, err
}

// CreateInvocation stores inv (pending unless inv.Status says otherwise).
func (s *Store) CreateInvocation(ctx context.Context, inv office.Invocation) (office.Invocation, error) {
	if inv.ID == "" {
		inv.ID = uuid.NewString()
	}
	if inv.Status == "" {
		inv.Status = office.InvocationPending
	}
	_, now := nowTS()
	created := now
	if !inv.CreatedAt.IsZero() {
		created = ts(inv.CreatedAt)
	}
	got, err := scanInvocation(s.ws.queryRow(ctx, `insert into agent_invocations (id, office_id, caller_agent_id, callee_agent_id,
			parent_invocation_id, depth, reason, context, status, result_id, error, started_at, completed_at, created_at, updated_at)
		values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) returning `+invocationCols,
		inv.ID, inv.OfficeID, inv.CallerAgentID, nullStr(inv.CalleeAgentID), nullStr(inv.ParentInvocationID), inv.Depth, inv.Reason,
		nullStr(inv.Context), inv.Status, nullStr(inv.ResultID), nullStr(inv.Error), nullTS(inv.StartedAt), nullTS(inv.CompletedAt),
		created, now))
	return got, s.fail("create invocation", err)
}

// GetInvocation returns the invocation with id, or ENOTFOUND.
func (s *Store) GetInvocation(ctx context.Context, id string) (office.Invocation, error) {
	i, err := scanInvocation(s.rs.queryRow(ctx, `select `+invocationCols+` from agent_invocations where id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return i, notFound("get invocation", "invocation", id)
	}
	return i, s.fail("get invocation", err)
}

// ListInvocations returns the invocations f selects, oldest first.
func (s *Store) ListInvocations(ctx context.Context, f office.InvocationFilter) ([]office.Invocation, error) {
	var w where
	w.eq(officeCol(f.CalleeAgentID != ""), f.OfficeID)
	if f.AgentID != "" {
		w.add("(caller_agent_id = ? or callee_agent_id = ?)", f.AgentID, f.AgentID)
	}
	w.eq("callee_agent_id", f.CalleeAgentID)
	w.in("status", f.Status)
	rows, err := s.rs.query(ctx, `select `+invocationCols+` from agent_invocations`+w.String()+` order by created_at, rowid`+limit(f.Limit), w.args...)
	out, err := collect(rows, err, scanInvocation)
	return out, s.fail("list invocations", err)
}

// TransitionInvocation moves the invocation from one of the from statuses to
// to, applying patch; ok=false when it is in none of them.
func (s *Store) TransitionInvocation(ctx context.Context, id string, from []string, to string, patch office.InvocationPatch) (office.Invocation, bool, error) {
	if len(from) == 0 {
		return office.Invocation{}, false, office.Errorf(office.EINVALID, "transition invocation %s: no from status", id)
	}
	_, now := nowTS()
	var started, completed any
	switch to {
	case office.InvocationInProgress:
		started = now
	case office.InvocationCompleted, office.InvocationFailed, office.InvocationCancelled, office.InvocationRejected:
		completed = now
	}
	list, fromArgs := inList(from)
	args := []any{to, nullStr(patch.ResultID), nullStr(patch.Error), started, completed, now, id}
	args = append(args, fromArgs...)
	inv, err := scanInvocation(s.ws.queryRow(ctx, `update agent_invocations set status = ?,
			result_id = coalesce(?, result_id), error = coalesce(?, error),
			started_at = coalesce(?, started_at), completed_at = coalesce(?, completed_at), updated_at = ?
		where id = ? and status in `+list+` returning `+invocationCols, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return office.Invocation{}, false, nil
	}
	if err != nil {
		return office.Invocation{}, false, s.fail("transition invocation", err)
	}
	return inv, true, nil
}

// FindOpenInvocation returns the oldest pending or in-progress invocation
// from caller to callee, or ENOTFOUND.
func (s *Store) FindOpenInvocation(ctx context.Context, officeID, callerAgentID, calleeAgentID string) (office.Invocation, error) {
	i, err := scanInvocation(s.rs.queryRow(ctx, `select `+invocationCols+` from agent_invocations
		where office_id = ? and caller_agent_id = ? and callee_agent_id = ? and status in ('pending', 'in_progress')
		order by created_at, rowid limit 1`, officeID, callerAgentID, calleeAgentID))
	if errors.Is(err, sql.ErrNoRows) {
		return i, notFound("find open invocation", "open invocation from", callerAgentID+" to "+calleeAgentID)
	}
	return i, s.fail("find open invocation", err)
}

const resultCols = `id, office_id, coalesce(invocation_id, ''), from_agent_id, to_agent_id, result_type, content_type, content,
	status, delivered_at, created_at, updated_at`

func scanResult(r scanner) (office.Result, error) {
	var x office.Result
	err := r.Scan(&x.ID, &x.OfficeID, &x.InvocationID, &x.FromAgentID, &x.ToAgentID, &x.ResultType, &x.ContentType, &x.Content,
		&x.Status, tsPtr{&x.DeliveredAt}, tsVal{&x.CreatedAt}, tsVal{&x.UpdatedAt})
	return x, err
}

// CreateResult stores r (pending unless r.Status says otherwise).
func (s *Store) CreateResult(ctx context.Context, r office.Result) (office.Result, error) {
	if r.ID == "" {
		r.ID = uuid.NewString()
	}
	if r.Status == "" {
		r.Status = office.ResultPending
	}
	if r.ResultType == "" {
		r.ResultType = "message"
	}
	if r.ContentType == "" {
		r.ContentType = "text/plain"
	}
	_, now := nowTS()
	created := now
	if !r.CreatedAt.IsZero() {
		created = ts(r.CreatedAt)
	}
	got, err := scanResult(s.ws.queryRow(ctx, `insert into agent_results (id, office_id, invocation_id, from_agent_id, to_agent_id,
			result_type, content_type, content, status, delivered_at, created_at, updated_at)
		values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) returning `+resultCols,
		r.ID, r.OfficeID, nullStr(r.InvocationID), r.FromAgentID, r.ToAgentID, r.ResultType, r.ContentType, r.Content,
		r.Status, nullTS(r.DeliveredAt), created, now))
	return got, s.fail("create result", err)
}

// GetResult returns the result with id, or ENOTFOUND.
func (s *Store) GetResult(ctx context.Context, id string) (office.Result, error) {
	r, err := scanResult(s.rs.queryRow(ctx, `select `+resultCols+` from agent_results where id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, notFound("get result", "result", id)
	}
	return r, s.fail("get result", err)
}

// ListResults returns the results f selects, oldest first.
func (s *Store) ListResults(ctx context.Context, f office.ResultFilter) ([]office.Result, error) {
	var w where
	w.eq(officeCol(f.ToAgentID != ""), f.OfficeID)
	w.eq("to_agent_id", f.ToAgentID)
	w.eq("invocation_id", f.InvocationID)
	w.in("status", f.Status)
	rows, err := s.rs.query(ctx, `select `+resultCols+` from agent_results`+w.String()+` order by created_at, rowid`+limit(f.Limit), w.args...)
	out, err := collect(rows, err, scanResult)
	return out, s.fail("list results", err)
}

// MarkResultDelivered moves a pending result to delivered.
func (s *Store) MarkResultDelivered(ctx context.Context, id string) (bool, error) {
	_, now := nowTS()
	return s.transition(ctx, "mark result delivered",
		`update agent_results set status = 'delivered', delivered_at = ?, updated_at = ? where id = ? and status = 'pending'`,
		now, now, id)
}

const dependencyCols = `id, office_id, agent_id, coalesce(session_id, ''), type, name, coalesce(description, ''), required,
	coalesce("default", ''), status, value, coalesce(rejection_reason, ''), expires_at, provided_at, delivered_at, created_at, updated_at`

func scanDependency(r scanner) (office.DependencyRequest, error) {
	var d office.DependencyRequest
	err := r.Scan(&d.ID, &d.OfficeID, &d.AgentID, &d.SessionID, &d.Type, &d.Name, &d.Description, &d.Required,
		&d.Default, &d.Status, &d.Value, &d.RejectionReason, tsVal{&d.ExpiresAt}, tsPtr{&d.ProvidedAt}, tsPtr{&d.DeliveredAt},
		tsVal{&d.CreatedAt}, tsVal{&d.UpdatedAt})
	return d, err
}

// dependencyChange is the feed's note of a dependency that awaits the office.
func dependencyChange(op string, d office.DependencyRequest) office.Change {
	return office.Change{Table: office.TableDependencies, Op: op, ID: d.ID, OfficeID: d.OfficeID, AgentID: d.AgentID, Status: d.Status}
}

// CreateDependency stores d (pending unless d.Status says otherwise).
func (s *Store) CreateDependency(ctx context.Context, d office.DependencyRequest) (office.DependencyRequest, error) {
	if d.ID == "" {
		d.ID = uuid.NewString()
	}
	if d.Status == "" {
		d.Status = office.DependencyPending
	}
	if d.ExpiresAt.IsZero() {
		return office.DependencyRequest{}, office.Errorf(office.EINVALID, "dependency request has no expiry time")
	}
	_, now := nowTS()
	created := now
	if !d.CreatedAt.IsZero() {
		created = ts(d.CreatedAt)
	}
	var value any
	if d.Value != nil {
		value = d.Value
	}
	got, err := scanDependency(s.ws.queryRow(ctx, `insert into dependency_requests (id, office_id, agent_id, session_id, type, name,
			description, required, "default", status, value, rejection_reason, expires_at, provided_at, delivered_at, created_at, updated_at)
		values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) returning `+dependencyCols,
		d.ID, d.OfficeID, d.AgentID, nullStr(d.SessionID), d.Type, d.Name, nullStr(d.Description), d.Required,
		nullStr(d.Default), d.Status, value, nullStr(d.RejectionReason), ts(d.ExpiresAt), nullTS(d.ProvidedAt), nullTS(d.DeliveredAt),
		created, now))
	if err != nil {
		return office.DependencyRequest{}, s.fail("create dependency", err)
	}
	if got.Status != office.DependencyPending && got.DeliveredAt == nil {
		s.feed.publish(dependencyChange(office.OpInsert, got))
	} else if got.Status == office.DependencyPending {
		c := dependencyChange(office.OpInsert, got)
		at := got.ExpiresAt
		c.ExpiresAt = &at // its deadline, for the engine's sweeper
		s.feed.publish(c)
	}
	return got, nil
}

// GetDependency returns the request with id, or ENOTFOUND.
func (s *Store) GetDependency(ctx context.Context, id string) (office.DependencyRequest, error) {
	d, err := scanDependency(s.rs.queryRow(ctx, `select `+dependencyCols+` from dependency_requests where id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return d, notFound("get dependency", "dependency request", id)
	}
	return d, s.fail("get dependency", err)
}

// ListDependencies returns the requests f selects, oldest first.
func (s *Store) ListDependencies(ctx context.Context, f office.DependencyFilter) ([]office.DependencyRequest, error) {
	var w where
	w.eq(officeCol(f.AgentID != ""), f.OfficeID)
	w.eq("agent_id", f.AgentID)
	w.in("status", f.Status)
	rows, err := s.rs.query(ctx, `select `+dependencyCols+` from dependency_requests`+w.String()+` order by created_at, rowid`+limit(f.Limit), w.args...)
	out, err := collect(rows, err, scanDependency)
	return out, s.fail("list dependencies", err)
}

// ProvideDependency moves a pending request to provided with value (stored
// as given: the office encrypts secrets before).
func (s *Store) ProvideDependency(ctx context.Context, id string, value []byte) (office.DependencyRequest, bool, error) {
	_, now := nowTS()
	if value == nil {
		value = []byte{}
	}
	return s.dependencyTransition(ctx, "provide dependency", `update dependency_requests
		set status = 'provided', value = ?, provided_at = ?, updated_at = ? where id = ? and status = 'pending'
		returning `+dependencyCols, value, now, now, id)
}

// RejectDependency moves a pending request to rejected with reason.
func (s *Store) RejectDependency(ctx context.Context, id, reason string) (office.DependencyRequest, bool, error) {
	_, now := nowTS()
	return s.dependencyTransition(ctx, "reject dependency", `update dependency_requests
		set status = 'rejected', rejection_reason = ?, updated_at = ? where id = ? and status = 'pending'
		returning `+dependencyCols, nullStr(reason), now, id)
}

func (s *Store) dependencyTransition(ctx context.Context, op, query string, args ...any) (office.DependencyRequest, bool, error) {
	d, err := scanDependency(s.ws.queryRow(ctx, query, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return office.DependencyRequest{}, false, nil
	}
	if err != nil {
		return office.DependencyRequest{}, false, s.fail(op, err)
	}
	s.feed.publish(dependencyChange(office.OpUpdate, d))
	return d, true, nil
}

// ExpireDependencies expires every pending request due at now and returns
// exactly those rows.
func (s *Store) ExpireDependencies(ctx context.Context, at time.Time) ([]office.DependencyRequest, error) {
	_, now := nowTS()
	rows, err := s.ws.query(ctx, `update dependency_requests set status = 'expired', updated_at = ?
		where status = 'pending' and expires_at <= ? returning `+dependencyCols, now, ts(at))
	out, err := collect(rows, err, scanDependency)
	if err != nil {
		return nil, s.fail("expire dependencies", err)
	}
	for _, d := range out {
		s.feed.publish(dependencyChange(office.OpUpdate, d))
	}
	return out, nil
}

// MarkDependencyDelivered sets delivered_at once on a provided, rejected or
// expired request.
func (s *Store) MarkDependencyDelivered(ctx context.Context, id string) (bool, error) {
	_, now := nowTS()
	return s.transition(ctx, "mark dependency delivered", `update dependency_requests set delivered_at = ?, updated_at = ?
		where id = ? and status in ('provided', 'rejected', 'expired') and delivered_at is null`, now, now, id)
}

// ListUndeliveredDependencies returns provided, rejected or expired requests
// not yet delivered, due as d says, oldest first.
func (s *Store) ListUndeliveredDependencies(ctx context.Context, d office.Due) ([]office.DependencyRequest, error) {
	w := due("status in ('provided', 'rejected', 'expired') and delivered_at is null", d)
	rows, err := s.rs.query(ctx, `select `+dependencyCols+` from dependency_requests`+w.String()+` order by created_at, rowid`, w.args...)
	out, err := collect(rows, err, scanDependency)
	return out, s.fail("list undelivered dependencies", err)
}

const eventCols = `id, office_id, coalesce(agent_id, ''), coalesce(session_id, ''), kind, payload, coalesce(raw, ''), coalesce(dedupe_key, ''), created_at`

func scanEvent(r scanner) (office.Event, error) {
	var e office.Event
	err := r.Scan(&e.ID, &e.OfficeID, &e.AgentID, &e.SessionID, &e.Kind, rawJSON{&e.Payload}, &e.Raw, &e.DedupeKey, tsVal{&e.CreatedAt})
	return e, err
}

// AppendEvent appends e; with a DedupeKey already in the office it does
// nothing and returns inserted=false.
func (s *Store) AppendEvent(ctx context.Context, e office.Event) (office.Event, bool, error) {
	var payload any
	if p := strings.TrimSpace(string(e.Payload)); p != "" {
		payload = p
	}
	_, now := nowTS()
	created := now
	if !e.CreatedAt.IsZero() {
		created = ts(e.CreatedAt)
	}
	got, err := scanEvent(s.ws.queryRow(ctx, `insert into office_events (office_id, agent_id, session_id, kind, payload, raw, dedupe_key, created_at)
		values (?, ?, ?, ?, ?, ?, ?, ?)
		on conflict (office_id, dedupe_key) where dedupe_key is not null do nothing
		returning `+eventCols,
		e.OfficeID, nullStr(e.AgentID), nullStr(e.SessionID), e.Kind, payload, nullStr(e.Raw), nullStr(e.DedupeKey), created))
	if errors.Is(err, sql.ErrNoRows) {
		// A duplicate: the one stored first stands, and is returned.
		got, err = scanEvent(s.ws.queryRow(ctx, `select `+eventCols+` from office_events where office_id = ? and dedupe_key = ?`, e.OfficeID, e.DedupeKey))
		if err != nil {
			return office.Event{}, false, s.fail("append event", err)
		}
		return got, false, nil
	}
	if err != nil {
		return office.Event{}, false, s.fail("append event", err)
	}
	return got, true, nil
}

// ListEvents returns events after f.AfterID, oldest first, at most f.Limit
// (default 100).
func (s *Store) ListEvents(ctx context.Context, f office.EventFilter) ([]office.Event, error) {
	var w where
	w.add("id > ?", f.AfterID)
	w.eq("office_id", f.OfficeID)
	w.eq("agent_id", f.AgentID)
	n := f.Limit
	if n <= 0 {
		n = 100
	}
	rows, err := s.rs.query(ctx, `select `+eventCols+` from office_events`+w.String()+` order by id`+limit(n), w.args...)
	out, err := collect(rows, err, scanEvent)
	return out, s.fail("list events", err)
}
