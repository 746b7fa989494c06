package supabase

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/store/pgfunc"
)

// The office's transitions that are database functions
// (migrations/20261128100000_office_functions.sql,
// 20261128120000_office_mark_delivered.sql), each one rpc request.

// ListDue implements office.Store; see its contract in office/store.go.
func (s *Store) ListDue(ctx context.Context, officeID, agentID string) (office.DueWork, error) {
	return s.listDue(ctx, officeID, agentID, time.Time{})
}

// ListDueTyping implements office.Store; see its contract in office/store.go.
func (s *Store) ListDueTyping(ctx context.Context, officeID, agentID string, at time.Time) (office.DueWork, error) {
	return s.listDue(ctx, officeID, agentID, at)
}

func (s *Store) listDue(ctx context.Context, officeID, agentID string, typingAt time.Time) (office.DueWork, error) {
	const op = "list due"
	if !validID(officeID) || !validID(agentID) {
		return office.DueWork{}, nil
	}
	var b json.RawMessage
	if err := s.rpc(ctx, op, pgfunc.Due, pgfunc.DueArgs(officeID, agentID, typingAt), &b); err != nil {
		return office.DueWork{}, err
	}
	w, err := pgfunc.DecodeDue(b)
	if err != nil {
		return office.DueWork{}, &office.Error{Code: office.EINTERNAL, Op: op, Message: "decode response", Err: err}
	}
	return w, nil
}

// SetSessionStatus implements office.Store; see its contract in office/store.go.
func (s *Store) SetSessionStatus(ctx context.Context, c office.SessionStatus) (office.SessionRecord, office.Event, bool, error) {
	const op = "set session status"
	if err := pgfunc.SessionStatusCheck(c); err != nil {
		return office.SessionRecord{}, office.Event{}, false, err
	}
	if !validID(c.OfficeID) || !validID(c.AgentID) {
		return office.SessionRecord{}, office.Event{}, false, &office.Error{Code: office.EINVALID, Op: op, Message: fmt.Sprintf("no agent %q in office %q", c.AgentID, c.OfficeID)}
	}
	var b json.RawMessage
	if err := s.rpc(ctx, op, pgfunc.SessionStatus, pgfunc.SessionStatusArgs(c), &b); err != nil {
		return office.SessionRecord{}, office.Event{}, false, err
	}
	rec, ev, ok, err := pgfunc.DecodeSessionStatus(b)
	if err != nil {
		return office.SessionRecord{}, office.Event{}, false, &office.Error{Code: office.EINTERNAL, Op: op, Message: "decode response", Err: err}
	}
	return rec, ev, ok, nil
}

// MarkDelivered implements office.Store; see its contract in office/store.go.
func (s *Store) MarkDelivered(ctx context.Context, d office.Delivered) (time.Time, office.Event, bool, error) {
	const op = "mark delivered"
	if err := pgfunc.MarkDeliveredCheck(d); err != nil {
		return time.Time{}, office.Event{}, false, err
	}
	if !validID(d.OfficeID) || !validID(d.AgentID) || !validID(d.ID) {
		return time.Time{}, office.Event{}, false, nil
	}
	var b json.RawMessage
	if err := s.rpc(ctx, op, pgfunc.MarkDelivered, pgfunc.MarkDeliveredArgs(d), &b); err != nil {
		return time.Time{}, office.Event{}, false, err
	}
	at, ev, ok, err := pgfunc.DecodeMarkDelivered(b)
	if err != nil {
		return time.Time{}, office.Event{}, false, &office.Error{Code: office.EINTERNAL, Op: op, Message: "decode response", Err: err}
	}
	return at, ev, ok, nil
}

// AskQuestion implements office.Store; see its contract in office/store.go.
func (s *Store) AskQuestion(ctx context.Context, a office.Ask) (office.Question, []office.Question, []office.Event, bool, error) {
	const op = "ask question"
	if err := pgfunc.AskCheck(a); err != nil {
		return office.Question{}, nil, nil, false, err
	}
	if !validID(a.Question.ID) || !validID(a.Question.OfficeID) || !validID(a.Question.AgentID) {
		return office.Question{}, nil, nil, false, &office.Error{Code: office.EINVALID, Op: op, Message: "question, office and agent ids must be UUIDs"}
	}
	var b json.RawMessage
	if err := s.rpc(ctx, op, pgfunc.Ask, pgfunc.AskArgs(a), &b); err != nil {
		return office.Question{}, nil, nil, false, err
	}
	q, pending, evs, created, err := pgfunc.DecodeAsk(b)
	if err != nil {
		return office.Question{}, nil, nil, false, &office.Error{Code: office.EINTERNAL, Op: op, Message: "decode response", Err: err}
	}
	return q, pending, evs, created, nil
}

// DeliverResult implements office.Store; see its contract in office/store.go.
func (s *Store) DeliverResult(ctx context.Context, d office.ResultDelivery) (office.ResultStored, error) {
	const op = "deliver result"
	if err := pgfunc.DeliverResultCheck(d); err != nil {
		return office.ResultStored{}, err
	}
	r := d.Result
	if !validID(r.ID) || !validID(r.OfficeID) || !validID(r.FromAgentID) || !validID(r.ToAgentID) {
		return office.ResultStored{}, &office.Error{Code: office.EINVALID, Op: op, Message: "result, office and agent ids must be UUIDs"}
	}
	var b json.RawMessage
	if err := s.rpc(ctx, op, pgfunc.DeliverResult, pgfunc.DeliverResultArgs(d), &b); err != nil {
		return office.ResultStored{}, err
	}
	out, err := pgfunc.DecodeDeliverResult(b)
	if err != nil {
		return office.ResultStored{}, &office.Error{Code: office.EINTERNAL, Op: op, Message: "decode response", Err: err}
	}
	return out, nil
}

// Invoke implements office.Store; see its contract in office/store.go.
func (s *Store) Invoke(ctx context.Context, i office.Invoke) (office.Invocation, []office.Event, bool, error) {
	const op = "invoke"
	if err := pgfunc.InvokeCheck(i); err != nil {
		return office.Invocation{}, nil, false, err
	}
	v := i.Invocation
	if !validID(v.ID) || !validID(v.OfficeID) || !validID(v.CallerAgentID) || !validID(v.CalleeAgentID) ||
		(v.ParentInvocationID != "" && !validID(v.ParentInvocationID)) {
		return office.Invocation{}, nil, false, &office.Error{Code: office.EINVALID, Op: op, Message: "invocation, office and agent ids must be UUIDs"}
	}
	var b json.RawMessage
	if err := s.rpc(ctx, op, pgfunc.Invoke, pgfunc.InvokeArgs(i), &b); err != nil {
		return office.Invocation{}, nil, false, err
	}
	inv, evs, created, err := pgfunc.DecodeInvoke(b)
	if err != nil {
		return office.Invocation{}, nil, false, &office.Error{Code: office.EINTERNAL, Op: op, Message: "decode response", Err: err}
	}
	return inv, evs, created, nil
}

// ListOpenWork implements office.Store; see its contract in office/store.go.
func (s *Store) ListOpenWork(ctx context.Context, officeID string) (office.OpenWork, error) {
	const op = "list open work"
	if !validID(officeID) {
		return office.OpenWork{}, nil
	}
	var b json.RawMessage
	if err := s.rpc(ctx, op, pgfunc.OpenWork, pgfunc.OpenWorkArgs(officeID), &b); err != nil {
		return office.OpenWork{}, err
	}
	w, err := pgfunc.DecodeOpenWork(b)
	if err != nil {
		return office.OpenWork{}, &office.Error{Code: office.EINTERNAL, Op: op, Message: "decode response", Err: err}
	}
	return w, nil
}

// AppendEvents implements office.Store; see its contract in office/store.go.
func (s *Store) AppendEvents(ctx context.Context, events []office.Event) ([]office.Event, []bool, error) {
	const op = "append events"
	if len(events) == 0 {
		return nil, nil, nil
	}
	if err := pgfunc.AppendEventsCheck(events); err != nil {
		return nil, nil, err
	}
	for _, e := range events {
		if !validID(e.OfficeID) || (e.AgentID != "" && !validID(e.AgentID)) {
			return nil, nil, &office.Error{Code: office.EINVALID, Op: op, Message: "office and agent ids must be UUIDs"}
		}
	}
	var b json.RawMessage
	if err := s.rpc(ctx, op, pgfunc.AppendEvents, pgfunc.AppendEventsArgs(events), &b); err != nil {
		return nil, nil, err
	}
	stored, inserted, err := pgfunc.DecodeAppendEvents(b)
	if err != nil {
		return nil, nil, &office.Error{Code: office.EINTERNAL, Op: op, Message: "decode response", Err: err}
	}
	return stored, inserted, nil
}

// AddNotices implements office.Store; see its contract in office/notices.go.
func (s *Store) AddNotices(ctx context.Context, officeID, agentID string, texts []string, limit int) (int, error) {
	const op = "add notices"
	if err := pgfunc.AddNoticesCheck(texts); err != nil || len(texts) == 0 {
		return 0, err
	}
	if !validID(officeID) || !validID(agentID) {
		return 0, &office.Error{Code: office.EINVALID, Op: op, Message: fmt.Sprintf("no agent %q in office %q", agentID, officeID)}
	}
	var b json.RawMessage
	if err := s.rpc(ctx, op, pgfunc.AddNotices, pgfunc.AddNoticesArgs(officeID, agentID, texts, limit), &b); err != nil {
		return 0, err
	}
	n, err := pgfunc.DecodeAddNotices(b)
	if err != nil {
		return 0, &office.Error{Code: office.EINTERNAL, Op: op, Message: "decode response", Err: err}
	}
	return n, nil
}
