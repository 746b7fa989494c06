package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/office"
)

const proxyRequestCols = `id::text, office_id::text, requester_agent_id::text, coalesce(proxy_agent_id::text, ''), action,
	payload::text, status, coalesce(reason, ''), coalesce(backup_path, ''), expires_at, created_at, updated_at`

func scanProxyRequest(r pgx.Row) (office.ProxyRequest, error) {
	var p office.ProxyRequest
	var payload string
	err := r.Scan(&p.ID, &p.OfficeID, &p.RequesterAgentID, &p.ProxyAgentID, &p.Action, &payload, &p.Status,
		&p.Reason, &p.BackupPath, &p.ExpiresAt, &p.CreatedAt, &p.UpdatedAt)
	p.Payload = []byte(payload)
	return p, err
}

const proxyTaskCols = `id, office_id::text, request_id::text, requester_agent_id::text, coalesce(proxy_agent_id::text, ''),
	content, priority, status, created_at, updated_at`

func scanProxyTask(r pgx.Row) (office.ProxyTask, error) {
	var t office.ProxyTask
	err := r.Scan(&t.ID, &t.OfficeID, &t.RequestID, &t.RequesterAgentID, &t.ProxyAgentID, &t.Content, &t.Priority, &t.Status,
		&t.CreatedAt, &t.UpdatedAt)
	return t, err
}

// CreateProxyRequest stores r (parked unless r.Status says otherwise).
func (s *Store) CreateProxyRequest(ctx context.Context, r office.ProxyRequest) (office.ProxyRequest, error) {
	const op = "create proxy request"
	id, err := newID(op, r.ID)
	if err != nil {
		return office.ProxyRequest{}, err
	}
	var refs [3]any
	for i, x := range []struct {
		field, id string
		optional  bool
	}{{"office_id", r.OfficeID, false}, {"requester_agent_id", r.RequesterAgentID, false}, {"proxy_agent_id", r.ProxyAgentID, true}} {
		if refs[i], err = ref(op, x.field, x.id, x.optional); err != nil {
			return office.ProxyRequest{}, err
		}
	}
	if r.ExpiresAt.IsZero() {
		return office.ProxyRequest{}, invalid(op, "proxy request has no expiry time")
	}
	if len(r.Payload) == 0 {
		return office.ProxyRequest{}, invalid(op, "proxy request has no payload")
	}
	v, _, err := one(ctx, s, op, `insert into proxy_requests (id, office_id, requester_agent_id, proxy_agent_id, action, payload,
			status, reason, backup_path, expires_at, created_at, updated_at)
		values ($1, $2, $3, $4, $5, $6::jsonb, coalesce($7, 'parked'), $8, $9, $10, coalesce($11, now()), now())
		returning `+proxyRequestCols,
		[]any{id, refs[0], refs[1], refs[2], r.Action, string(r.Payload), null(r.Status), null(r.Reason), null(r.BackupPath),
			r.ExpiresAt, ts(r.CreatedAt)}, scanProxyRequest)
	return v, err
}

// GetProxyRequest returns the request, or ENOTFOUND.
func (s *Store) GetProxyRequest(ctx context.Context, id string) (office.ProxyRequest, error) {
	return getByID(ctx, s, "get proxy request", "proxy request", proxyRequestCols, "proxy_requests", id, scanProxyRequest)
}

// ListProxyRequests returns the requests f selects, oldest first.
func (s *Store) ListProxyRequests(ctx context.Context, f office.ProxyRequestFilter) ([]office.ProxyRequest, error) {
	var w filter
	w.id("office_id", f.OfficeID)
	w.in("status", f.Status)
	if w.none {
		return nil, nil
	}
	return list(ctx, s, "list proxy requests", `select `+proxyRequestCols+` from proxy_requests`+w.where()+
		` order by created_at, id`+limit(f.Limit), w.args, scanProxyRequest)
}

// TransitionProxyRequest moves the request from one of from to to, once,
// and creates patch.Tasks in the same transaction.
func (s *Store) TransitionProxyRequest(ctx context.Context, id string, from []string, to string, patch office.ProxyRequestPatch) (office.ProxyRequest, bool, error) {
	const op = "transition proxy request"
	if len(from) == 0 {
		return office.ProxyRequest{}, false, invalid(op, "no from status given")
	}
	proxyID, err := ref(op, "proxy_agent_id", patch.ProxyAgentID, true)
	if err != nil {
		return office.ProxyRequest{}, false, err
	}
	for _, t := range patch.Tasks {
		if _, err := ref(op, "task proxy_agent_id", t.ProxyAgentID, true); err != nil {
			return office.ProxyRequest{}, false, err
		}
	}
	if !isUUID(id) {
		return office.ProxyRequest{}, false, nil
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return office.ProxyRequest{}, false, wrap(op, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	p, err := scanProxyRequest(tx.QueryRow(ctx, `update proxy_requests set status = $3,
			proxy_agent_id = coalesce($4::uuid, proxy_agent_id), reason = coalesce($5, reason),
			backup_path = coalesce($6, backup_path)
		where id = $1 and status = any($2)
		returning `+proxyRequestCols, id, from, to, proxyID, null(patch.Reason), null(patch.BackupPath)))
	if errors.Is(err, pgx.ErrNoRows) {
		return office.ProxyRequest{}, false, nil
	}
	if err != nil {
		return office.ProxyRequest{}, false, wrap(op, err)
	}
	for _, t := range patch.Tasks {
		if _, err := tx.Exec(ctx, `insert into proxy_tasks (office_id, id, request_id, requester_agent_id, proxy_agent_id,
				content, priority, status) values ($1, $2, $3, $4, $5, $6, coalesce($7, 'medium'), coalesce($8, 'pending'))`,
			p.OfficeID, t.ID, p.ID, p.RequesterAgentID, null(t.ProxyAgentID), t.Content, null(t.Priority), null(t.Status)); err != nil {
			return office.ProxyRequest{}, false, wrap(op, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return office.ProxyRequest{}, false, wrap(op, err)
	}
	return p, true, nil
}

// ListProxyTasks returns the tasks f selects, oldest first.
func (s *Store) ListProxyTasks(ctx context.Context, f office.ProxyTaskFilter) ([]office.ProxyTask, error) {
	var w filter
	w.id("office_id", f.OfficeID)
	w.eq("id", f.ID)
	w.id("proxy_agent_id", f.ProxyAgentID)
	w.id("request_id", f.RequestID)
	w.in("status", f.Status)
	if w.none {
		return nil, nil
	}
	return list(ctx, s, "list proxy tasks", `select `+proxyTaskCols+` from proxy_tasks`+w.where()+
		` order by created_at, id`+limit(f.Limit), w.args, scanProxyTask)
}

// SetProxyTaskStatus sets the status of the office's task id.
func (s *Store) SetProxyTaskStatus(ctx context.Context, officeID, id, status string) (office.ProxyTask, bool, error) {
	if !isUUID(officeID) {
		return office.ProxyTask{}, false, nil
	}
	return one(ctx, s, "set proxy task status", `update proxy_tasks set status = $3 where office_id = $1 and id = $2
		returning `+proxyTaskCols, []any{officeID, id, status}, scanProxyTask)
}
