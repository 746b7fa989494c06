package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
)

const proxyRequestCols = `id, office_id, requester_agent_id, coalesce(proxy_agent_id, ''), action, payload, status,
	coalesce(reason, ''), coalesce(backup_path, ''), expires_at, created_at, updated_at`

func scanProxyRequest(r scanner) (office.ProxyRequest, error) {
	var p office.ProxyRequest
	var payload string
	err := r.Scan(&p.ID, &p.OfficeID, &p.RequesterAgentID, &p.ProxyAgentID, &p.Action, &payload, &p.Status,
		&p.Reason, &p.BackupPath, tsVal{&p.ExpiresAt}, tsVal{&p.CreatedAt}, tsVal{&p.UpdatedAt})
	p.Payload = []byte(payload)
	return p, err
}

const proxyTaskCols = `id, office_id, request_id, requester_agent_id, coalesce(proxy_agent_id, ''), content, priority, status,
	created_at, updated_at`

func scanProxyTask(r scanner) (office.ProxyTask, error) {
	var t office.ProxyTask
	err := r.Scan(&t.ID, &t.OfficeID, &t.RequestID, &t.RequesterAgentID, &t.ProxyAgentID, &t.Content, &t.Priority, &t.Status,
		tsVal{&t.CreatedAt}, tsVal{&t.UpdatedAt})
	return t, err
}

// CreateProxyRequest stores r (parked unless r.Status says otherwise).
func (s *Store) CreateProxyRequest(ctx context.Context, r office.ProxyRequest) (office.ProxyRequest, error) {
	const op = "create proxy request"
	if r.ID == "" {
		r.ID = uuid.NewString()
	}
	if r.Status == "" {
		r.Status = office.ProxyParked
	}
	if r.ExpiresAt.IsZero() {
		return office.ProxyRequest{}, office.Errorf(office.EINVALID, "proxy request has no expiry time")
	}
	if len(r.Payload) == 0 {
		return office.ProxyRequest{}, office.Errorf(office.EINVALID, "proxy request has no payload")
	}
	_, now := nowTS()
	created := now
	if !r.CreatedAt.IsZero() {
		created = ts(r.CreatedAt)
	}
	got, err := scanProxyRequest(s.ws.queryRow(ctx, `insert into proxy_requests (id, office_id, requester_agent_id, proxy_agent_id,
			action, payload, status, reason, backup_path, expires_at, created_at, updated_at)
		values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) returning `+proxyRequestCols,
		r.ID, r.OfficeID, r.RequesterAgentID, nullStr(r.ProxyAgentID), r.Action, string(r.Payload), r.Status,
		nullStr(r.Reason), nullStr(r.BackupPath), ts(r.ExpiresAt), created, now))
	return got, s.fail(op, err)
}

// GetProxyRequest returns the request with id, or ENOTFOUND.
func (s *Store) GetProxyRequest(ctx context.Context, id string) (office.ProxyRequest, error) {
	p, err := scanProxyRequest(s.rs.queryRow(ctx, `select `+proxyRequestCols+` from proxy_requests where id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return p, notFound("get proxy request", "proxy request", id)
	}
	return p, s.fail("get proxy request", err)
}

// ListProxyRequests returns the requests f selects, oldest first.
func (s *Store) ListProxyRequests(ctx context.Context, f office.ProxyRequestFilter) ([]office.ProxyRequest, error) {
	var w where
	w.eq("office_id", f.OfficeID)
	w.in("status", f.Status)
	rows, err := s.rs.query(ctx, `select `+proxyRequestCols+` from proxy_requests`+w.String()+` order by created_at, rowid`+limit(f.Limit), w.args...)
	out, err := collect(rows, err, scanProxyRequest)
	return out, s.fail("list proxy requests", err)
}

// TransitionProxyRequest moves the request from one of from to to, once,
// and creates patch.Tasks in the same transaction.
func (s *Store) TransitionProxyRequest(ctx context.Context, id string, from []string, to string, patch office.ProxyRequestPatch) (office.ProxyRequest, bool, error) {
	const op = "transition proxy request"
	if len(from) == 0 {
		return office.ProxyRequest{}, false, office.Errorf(office.EINVALID, "no from status given")
	}
	_, now := nowTS()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return office.ProxyRequest{}, false, s.fail(op, err)
	}
	defer tx.Rollback()
	list, args := inList(from)
	p, err := scanProxyRequest(tx.QueryRowContext(ctx, `update proxy_requests set status = ?,
			proxy_agent_id = coalesce(?, proxy_agent_id), reason = coalesce(?, reason), backup_path = coalesce(?, backup_path),
			updated_at = ?
		where id = ? and status in `+list+` returning `+proxyRequestCols,
		append([]any{to, nullStr(patch.ProxyAgentID), nullStr(patch.Reason), nullStr(patch.BackupPath), now, id}, args...)...))
	if errors.Is(err, sql.ErrNoRows) {
		return office.ProxyRequest{}, false, nil
	}
	if err != nil {
		return office.ProxyRequest{}, false, s.fail(op, err)
	}
	for _, t := range patch.Tasks {
		if t.Status == "" {
			t.Status = office.ProxyTaskPending
		}
		if t.Priority == "" {
			t.Priority = "medium"
		}
		if _, err := tx.ExecContext(ctx, `insert into proxy_tasks (office_id, id, request_id, requester_agent_id, proxy_agent_id,
				content, priority, status, created_at, updated_at) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.OfficeID, t.ID, p.ID, p.RequesterAgentID, nullStr(t.ProxyAgentID), t.Content, t.Priority, t.Status, now, now); err != nil {
			return office.ProxyRequest{}, false, s.fail(op, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return office.ProxyRequest{}, false, s.fail(op, err)
	}
	return p, true, nil
}

// ListProxyTasks returns the tasks f selects, oldest first.
func (s *Store) ListProxyTasks(ctx context.Context, f office.ProxyTaskFilter) ([]office.ProxyTask, error) {
	var w where
	w.eq("office_id", f.OfficeID)
	w.eq("id", f.ID)
	w.eq("proxy_agent_id", f.ProxyAgentID)
	w.eq("request_id", f.RequestID)
	w.in("status", f.Status)
	rows, err := s.rs.query(ctx, `select `+proxyTaskCols+` from proxy_tasks`+w.String()+` order by created_at, rowid`+limit(f.Limit), w.args...)
	out, err := collect(rows, err, scanProxyTask)
	return out, s.fail("list proxy tasks", err)
}

// SetProxyTaskStatus sets the status of the office's task id.
func (s *Store) SetProxyTaskStatus(ctx context.Context, officeID, id, status string) (office.ProxyTask, bool, error) {
	_, now := nowTS()
	t, err := scanProxyTask(s.ws.queryRow(ctx, `update proxy_tasks set status = ?, updated_at = ?
		where office_id = ? and id = ? returning `+proxyTaskCols, status, now, officeID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return office.ProxyTask{}, false, nil
	}
	if err != nil {
		return office.ProxyTask{}, false, s.fail("set proxy task status", err)
	}
	return t, true, nil
}
