package supabase

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/store/pgfunc"
)

// The office's transitions that are database functions
// (migrations/20261128100000_office_functions.sql), each one rpc request.

// ListDue implements office.Store; see its contract in office/store.go.
func (s *Store) ListDue(ctx context.Context, officeID, agentID string) (office.DueWork, error) {
	const op = "list due"
	if !validID(officeID) || !validID(agentID) {
		return office.DueWork{}, nil
	}
	var b json.RawMessage
	if err := s.rpc(ctx, op, pgfunc.Due, pgfunc.DueArgs(officeID, agentID), &b); err != nil {
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
