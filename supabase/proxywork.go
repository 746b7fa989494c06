package supabase

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/supabase-community/postgrest-go"

	"github.com/office-server/office-server/office"
)

// ---- proxy requests and tasks ----

// CreateProxyRequest implements office.Store; see its contract in office/store.go.
func (s *Store) CreateProxyRequest(ctx context.Context, r office.ProxyRequest) (office.ProxyRequest, error) {
	const op = "create proxy request"
	now := s.stamp()
	if r.ID == "" {
		r.ID = uuid.NewString()
	}
	if r.Status == "" {
		r.Status = office.ProxyParked
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	if r.ExpiresAt.IsZero() {
		return office.ProxyRequest{}, office.Errorf(office.EINVALID, "proxy request has no expiry time")
	}
	if len(r.Payload) == 0 {
		return office.ProxyRequest{}, office.Errorf(office.EINVALID, "proxy request has no payload")
	}
	body := map[string]any{"id": r.ID, "office_id": r.OfficeID, "requester_agent_id": r.RequesterAgentID,
		"proxy_agent_id": optional(r.ProxyAgentID), "action": r.Action, "payload": r.Payload, "status": r.Status,
		"reason": optional(r.Reason), "backup_path": optional(r.BackupPath), "expires_at": r.ExpiresAt,
		"created_at": r.CreatedAt, "updated_at": now}
	var rows []office.ProxyRequest
	if err := s.exec(ctx, op, s.from("proxy_requests").Insert(body, false, "", "representation", ""), preferRepresentation, &rows); err != nil {
		return office.ProxyRequest{}, err
	}
	return one(op, rows)
}

// GetProxyRequest implements office.Store; see its contract in office/store.go.
func (s *Store) GetProxyRequest(ctx context.Context, id string) (office.ProxyRequest, error) {
	var r office.ProxyRequest
	if err := s.getOne(ctx, "get proxy request", "proxy_requests", id, &r); err != nil {
		return office.ProxyRequest{}, err
	}
	return r, nil
}

// ListProxyRequests implements office.Store; see its contract in office/store.go.
func (s *Store) ListProxyRequests(ctx context.Context, f office.ProxyRequestFilter) ([]office.ProxyRequest, error) {
	if f.OfficeID != "" && !validID(f.OfficeID) {
		return []office.ProxyRequest{}, nil
	}
	fb := s.from("proxy_requests").Select("*", "", false)
	fb = eqIf(fb, "office_id", f.OfficeID)
	fb = inIf(fb, "status", f.Status)
	fb = limitIf(oldestFirst(fb), f.Limit)
	var rows []office.ProxyRequest
	if err := s.exec(ctx, "list proxy requests", fb, "", &rows); err != nil {
		return nil, err
	}
	return rows, nil
}

// TransitionProxyRequest implements office.Store; see its contract in
// office/store.go. PostgREST has no transaction across two requests: the
// tasks are inserted after the transition succeeded, by the one caller
// that won it, so a failure in between leaves an assigned request whose
// tasks are missing (reported as the error), never tasks of a request that
// was not assigned.
func (s *Store) TransitionProxyRequest(ctx context.Context, id string, from []string, to string, p office.ProxyRequestPatch) (office.ProxyRequest, bool, error) {
	const op = "transition proxy request"
	if !validID(id) || len(from) == 0 {
		return office.ProxyRequest{}, false, nil
	}
	now := s.stamp()
	body := map[string]any{"status": to, "updated_at": now}
	if p.ProxyAgentID != "" {
		body["proxy_agent_id"] = p.ProxyAgentID
	}
	if p.Reason != "" {
		body["reason"] = p.Reason
	}
	if p.BackupPath != "" {
		body["backup_path"] = p.BackupPath
	}
	rows, err := patch[office.ProxyRequest](ctx, s, op, "proxy_requests", body,
		func(f *postgrest.FilterBuilder) *postgrest.FilterBuilder { return f.Eq("id", id).In("status", from) })
	if err != nil || len(rows) == 0 {
		return office.ProxyRequest{}, false, err
	}
	r := rows[0]
	if len(p.Tasks) > 0 {
		tasks := make([]map[string]any, len(p.Tasks))
		for i, t := range p.Tasks {
			status, prio := t.Status, t.Priority
			if status == "" {
				status = office.ProxyTaskPending
			}
			if prio == "" {
				prio = "medium"
			}
			tasks[i] = map[string]any{"office_id": r.OfficeID, "id": t.ID, "request_id": r.ID,
				"requester_agent_id": r.RequesterAgentID, "proxy_agent_id": optional(t.ProxyAgentID), "content": t.Content,
				"priority": prio, "status": status, "created_at": now, "updated_at": now}
		}
		if err := s.exec(ctx, op, s.from("proxy_tasks").Insert(tasks, false, "", "minimal", ""), preferMinimal, nil); err != nil {
			// Undo the transition, so that the caller may try again (a
			// task ID taken already: ECONFLICT) and the request is not left
			// without its tasks.
			if _, uerr := patch[office.ProxyRequest](ctx, s, op, "proxy_requests", map[string]any{"status": from[0], "updated_at": s.stamp()},
				func(f *postgrest.FilterBuilder) *postgrest.FilterBuilder { return f.Eq("id", id).Eq("status", to) }); uerr != nil {
				return office.ProxyRequest{}, false, fmt.Errorf("%w (and undoing the transition: %v)", err, uerr)
			}
			return office.ProxyRequest{}, false, err
		}
	}
	return r, true, nil
}

// ListProxyTasks implements office.Store; see its contract in office/store.go.
func (s *Store) ListProxyTasks(ctx context.Context, f office.ProxyTaskFilter) ([]office.ProxyTask, error) {
	for _, id := range []string{f.OfficeID, f.ProxyAgentID, f.RequestID} {
		if id != "" && !validID(id) {
			return []office.ProxyTask{}, nil
		}
	}
	fb := s.from("proxy_tasks").Select("*", "", false)
	fb = eqIf(fb, "office_id", f.OfficeID)
	fb = eqIf(fb, "id", f.ID)
	fb = eqIf(fb, "proxy_agent_id", f.ProxyAgentID)
	fb = eqIf(fb, "request_id", f.RequestID)
	fb = inIf(fb, "status", f.Status)
	fb = limitIf(oldestFirst(fb), f.Limit)
	var rows []office.ProxyTask
	if err := s.exec(ctx, "list proxy tasks", fb, "", &rows); err != nil {
		return nil, err
	}
	return rows, nil
}

// SetProxyTaskStatus implements office.Store; see its contract in office/store.go.
func (s *Store) SetProxyTaskStatus(ctx context.Context, officeID, id, status string) (office.ProxyTask, bool, error) {
	if !validID(officeID) || id == "" {
		return office.ProxyTask{}, false, nil
	}
	rows, err := patch[office.ProxyTask](ctx, s, "set proxy task status", "proxy_tasks",
		map[string]any{"status": status, "updated_at": s.stamp()},
		func(f *postgrest.FilterBuilder) *postgrest.FilterBuilder {
			return f.Eq("office_id", officeID).Eq("id", id)
		})
	if err != nil || len(rows) == 0 {
		return office.ProxyTask{}, false, err
	}
	return rows[0], true, nil
}
