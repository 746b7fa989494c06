package postgres

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/office"
)

const invocationCols = `id::text, office_id::text, caller_agent_id::text, coalesce(callee_agent_id::text, ''),
	coalesce(parent_invocation_id::text, ''), depth, reason, coalesce(context, ''), status, coalesce(result_id::text, ''),
	coalesce(error, ''), started_at, completed_at, created_at, updated_at`

func scanInvocation(r pgx.Row) (office.Invocation, error) {
	var i office.Invocation
	err := r.Scan(&i.ID, &i.OfficeID, &i.CallerAgentID, &i.CalleeAgentID, &i.ParentInvocationID, &i.Depth, &i.Reason,
		&i.Context, &i.Status, &i.ResultID, &i.Error, &i.StartedAt, &i.CompletedAt, &i.CreatedAt, &i.UpdatedAt)
	return i, err
}

// CreateInvocation stores an invocation (status pending by default).
func (s *Store) CreateInvocation(ctx context.Context, inv office.Invocation) (office.Invocation, error) {
	const op = "create invocation"
	id, err := newID(op, inv.ID)
	if err != nil {
		return office.Invocation{}, err
	}
	var refs [5]any
	for i, r := range []struct {
		field, id string
		optional  bool
	}{
		{"office_id", inv.OfficeID, false}, {"caller_agent_id", inv.CallerAgentID, false},
		// a rejected invocation may name no callee (no agent could take it)
		{"callee_agent_id", inv.CalleeAgentID, inv.Status == office.InvocationRejected}, {"parent_invocation_id", inv.ParentInvocationID, true},
		{"result_id", inv.ResultID, true},
	} {
		if refs[i], err = ref(op, r.field, r.id, r.optional); err != nil {
			return office.Invocation{}, err
		}
	}
	if inv.Reason == "" {
		return office.Invocation{}, invalid(op, "reason (the task) is required")
	}
	v, _, err := one(ctx, s, op, `insert into agent_invocations (id, office_id, caller_agent_id, callee_agent_id,
			parent_invocation_id, depth, reason, context, status, result_id, error, started_at, completed_at, created_at, updated_at)
		values ($1, $2, $3, $4, $5, $6, $7, $8, coalesce($9, 'pending'), $10, $11, $12, $13, coalesce($14, now()), coalesce($15, now()))
		returning `+invocationCols,
		[]any{id, refs[0], refs[1], refs[2], refs[3], inv.Depth, inv.Reason, null(inv.Context), null(inv.Status), refs[4],
			null(inv.Error), inv.StartedAt, inv.CompletedAt, ts(inv.CreatedAt), ts(inv.UpdatedAt)}, scanInvocation)
	return v, err
}

// GetInvocation returns the invocation, or ENOTFOUND.
func (s *Store) GetInvocation(ctx context.Context, id string) (office.Invocation, error) {
	return getByID(ctx, s, "get invocation", "invocation", invocationCols, "agent_invocations", id, scanInvocation)
}

// ListInvocations returns the invocations f selects (AgentID: caller or
// callee), oldest first.
func (s *Store) ListInvocations(ctx context.Context, f office.InvocationFilter) ([]office.Invocation, error) {
	var w filter
	w.id("office_id", f.OfficeID)
	if f.AgentID != "" {
		if !isUUID(f.AgentID) {
			return nil, nil
		}
		w.raw("(caller_agent_id = $%[1]d or callee_agent_id = $%[1]d)", f.AgentID)
	}
	w.id("callee_agent_id", f.CalleeAgentID)
	w.in("status", f.Status)
	if w.none {
		return nil, nil
	}
	return list(ctx, s, "list invocations", `select `+invocationCols+` from agent_invocations`+w.where()+
		` order by created_at, id`+limit(f.Limit), w.args, scanInvocation)
}

// TransitionInvocation moves the invocation from one of from to to, once,
// applying patch; started_at is set on in_progress, completed_at on a final
// status.
func (s *Store) TransitionInvocation(ctx context.Context, id string, from []string, to string, patch office.InvocationPatch) (office.Invocation, bool, error) {
	const op = "transition invocation"
	if len(from) == 0 {
		return office.Invocation{}, false, invalid(op, "no from status given")
	}
	resultID, err := ref(op, "result_id", patch.ResultID, true)
	if err != nil {
		return office.Invocation{}, false, err
	}
	if !isUUID(id) {
		return office.Invocation{}, false, nil
	}
	return one(ctx, s, op, `update agent_invocations set status = $3,
			result_id = coalesce($4::uuid, result_id),
			error = coalesce($5, error),
			started_at = case when $3 = 'in_progress' then coalesce(started_at, now()) else started_at end,
			completed_at = case when $3 in ('completed', 'failed', 'cancelled', 'rejected') then now() else completed_at end
		where id = $1 and status = any($2)
		returning `+invocationCols, []any{id, from, to, resultID, null(patch.Error)}, scanInvocation)
}

// FindOpenInvocation returns the oldest pending or in_progress invocation
// from caller to callee in the office, or ENOTFOUND.
func (s *Store) FindOpenInvocation(ctx context.Context, officeID, callerAgentID, calleeAgentID string) (office.Invocation, error) {
	const op = "find open invocation"
	if !isUUID(officeID) || !isUUID(callerAgentID) || !isUUID(calleeAgentID) {
		return office.Invocation{}, notFound(op, "open invocation to", calleeAgentID)
	}
	v, ok, err := one(ctx, s, op, `select `+invocationCols+` from agent_invocations
		where office_id = $1 and caller_agent_id = $2 and callee_agent_id = $3 and status in ('pending', 'in_progress')
		order by created_at, id limit 1`, []any{officeID, callerAgentID, calleeAgentID}, scanInvocation)
	if err == nil && !ok {
		err = notFound(op, "open invocation to", calleeAgentID)
	}
	return v, err
}

const resultCols = `id::text, office_id::text, coalesce(invocation_id::text, ''), from_agent_id::text, to_agent_id::text,
	result_type, content_type, content, status, delivered_at, created_at, updated_at`

func scanResult(r pgx.Row) (office.Result, error) {
	var x office.Result
	err := r.Scan(&x.ID, &x.OfficeID, &x.InvocationID, &x.FromAgentID, &x.ToAgentID, &x.ResultType, &x.ContentType,
		&x.Content, &x.Status, &x.DeliveredAt, &x.CreatedAt, &x.UpdatedAt)
	return x, err
}

// CreateResult stores a result (status pending by default; result_type
// message and content_type text/plain when empty).
func (s *Store) CreateResult(ctx context.Context, r office.Result) (office.Result, error) {
	const op = "create result"
	id, err := newID(op, r.ID)
	if err != nil {
		return office.Result{}, err
	}
	var refs [4]any
	for i, x := range []struct {
		field, id string
		optional  bool
	}{{"office_id", r.OfficeID, false}, {"invocation_id", r.InvocationID, true}, {"from_agent_id", r.FromAgentID, false}, {"to_agent_id", r.ToAgentID, false}} {
		if refs[i], err = ref(op, x.field, x.id, x.optional); err != nil {
			return office.Result{}, err
		}
	}
	v, _, err := one(ctx, s, op, `insert into agent_results (id, office_id, invocation_id, from_agent_id, to_agent_id,
			result_type, content_type, content, status, delivered_at, created_at, updated_at)
		values ($1, $2, $3, $4, $5, coalesce($6, 'message'), coalesce($7, 'text/plain'), $8, coalesce($9, 'pending'), $10,
			coalesce($11, now()), coalesce($12, now()))
		returning `+resultCols,
		[]any{id, refs[0], refs[1], refs[2], refs[3], null(r.ResultType), null(r.ContentType), r.Content, null(r.Status),
			r.DeliveredAt, ts(r.CreatedAt), ts(r.UpdatedAt)}, scanResult)
	return v, err
}

// GetResult returns the result, or ENOTFOUND.
func (s *Store) GetResult(ctx context.Context, id string) (office.Result, error) {
	return getByID(ctx, s, "get result", "result", resultCols, "agent_results", id, scanResult)
}

// ListResults returns the results f selects, oldest first.
func (s *Store) ListResults(ctx context.Context, f office.ResultFilter) ([]office.Result, error) {
	var w filter
	w.id("office_id", f.OfficeID)
	w.id("to_agent_id", f.ToAgentID)
	w.id("invocation_id", f.InvocationID)
	w.in("status", f.Status)
	if w.none {
		return nil, nil
	}
	return list(ctx, s, "list results", `select `+resultCols+` from agent_results`+w.where()+
		` order by created_at, id`+limit(f.Limit), w.args, scanResult)
}

// MarkResultDelivered moves a pending result to delivered, once.
func (s *Store) MarkResultDelivered(ctx context.Context, id string) (bool, error) {
	if !isUUID(id) {
		return false, nil
	}
	return s.exec(ctx, "mark result delivered", `update agent_results set status = 'delivered', delivered_at = now()
		where id = $1 and status = 'pending'`, id)
}

const dependencyCols = `id::text, office_id::text, agent_id::text, coalesce(session_id, ''), type, name,
	coalesce(description, ''), required, coalesce("default", ''), status, value, coalesce(rejection_reason, ''),
	expires_at, provided_at, delivered_at, created_at, updated_at`

func scanDependency(r pgx.Row) (office.DependencyRequest, error) {
	var d office.DependencyRequest
	err := r.Scan(&d.ID, &d.OfficeID, &d.AgentID, &d.SessionID, &d.Type, &d.Name, &d.Description, &d.Required, &d.Default,
		&d.Status, &d.Value, &d.RejectionReason, &d.ExpiresAt, &d.ProvidedAt, &d.DeliveredAt, &d.CreatedAt, &d.UpdatedAt)
	return d, err
}

// defaultDependencyTTL is how long a dependency request waits when it does
// not say: a person may need a while to fetch an API key.
const defaultDependencyTTL = 24 * time.Hour

// CreateDependency stores a dependency request (status pending by default;
// a zero ExpiresAt is now plus 24 hours).
func (s *Store) CreateDependency(ctx context.Context, d office.DependencyRequest) (office.DependencyRequest, error) {
	const op = "create dependency request"
	id, err := newID(op, d.ID)
	if err != nil {
		return office.DependencyRequest{}, err
	}
	officeID, err := ref(op, "office_id", d.OfficeID, false)
	if err != nil {
		return office.DependencyRequest{}, err
	}
	agentID, err := ref(op, "agent_id", d.AgentID, false)
	if err != nil {
		return office.DependencyRequest{}, err
	}
	if d.Type == "" || d.Name == "" {
		return office.DependencyRequest{}, invalid(op, "type and name are required")
	}
	v, _, err := one(ctx, s, op, `insert into dependency_requests (id, office_id, agent_id, session_id, type, name, description,
			required, "default", status, value, rejection_reason, expires_at, provided_at, delivered_at, created_at, updated_at)
		values ($1, $2, $3, $4, $5, $6, $7, $8, $9, coalesce($10, 'pending'), $11, $12, coalesce($13, now() + $18::interval),
			$14, $15, coalesce($16, now()), coalesce($17, now()))
		returning `+dependencyCols,
		[]any{id, officeID, agentID, null(d.SessionID), d.Type, d.Name, null(d.Description), d.Required, null(d.Default),
			null(d.Status), d.Value, null(d.RejectionReason), ts(d.ExpiresAt), d.ProvidedAt, d.DeliveredAt, ts(d.CreatedAt),
			ts(d.UpdatedAt), interval(defaultDependencyTTL)}, scanDependency)
	return v, err
}

// GetDependency returns the dependency request, or ENOTFOUND.
func (s *Store) GetDependency(ctx context.Context, id string) (office.DependencyRequest, error) {
	return getByID(ctx, s, "get dependency request", "dependency request", dependencyCols, "dependency_requests", id, scanDependency)
}

// ListDependencies returns the dependency requests f selects, oldest first.
func (s *Store) ListDependencies(ctx context.Context, f office.DependencyFilter) ([]office.DependencyRequest, error) {
	var w filter
	w.id("office_id", f.OfficeID)
	w.id("agent_id", f.AgentID)
	w.in("status", f.Status)
	if w.none {
		return nil, nil
	}
	return list(ctx, s, "list dependency requests", `select `+dependencyCols+` from dependency_requests`+w.where()+
		` order by created_at, id`+limit(f.Limit), w.args, scanDependency)
}

// ProvideDependency moves a pending request to provided with value, once.
func (s *Store) ProvideDependency(ctx context.Context, id string, value []byte) (office.DependencyRequest, bool, error) {
	if !isUUID(id) {
		return office.DependencyRequest{}, false, nil
	}
	if value == nil {
		value = []byte{}
	}
	return one(ctx, s, "provide dependency", `update dependency_requests
		set status = 'provided', value = $2, provided_at = now()
		where id = $1 and status = 'pending'
		returning `+dependencyCols, []any{id, value}, scanDependency)
}

// RejectDependency moves a pending request to rejected with reason, once.
func (s *Store) RejectDependency(ctx context.Context, id, reason string) (office.DependencyRequest, bool, error) {
	if !isUUID(id) {
		return office.DependencyRequest{}, false, nil
	}
	return one(ctx, s, "reject dependency", `update dependency_requests
		set status = 'rejected', rejection_reason = $2
		where id = $1 and status = 'pending'
		returning `+dependencyCols, []any{id, null(reason)}, scanDependency)
}

// ExpireDependencies expires every pending request with expires_at <= now
// and returns those (each by exactly one call), oldest first.
func (s *Store) ExpireDependencies(ctx context.Context, now time.Time) ([]office.DependencyRequest, error) {
	return list(ctx, s, "expire dependencies", `with x as (
			update dependency_requests set status = 'expired' where status = 'pending' and expires_at <= $1 returning *)
		select `+dependencyCols+` from x order by created_at, id`, []any{now}, scanDependency)
}

// MarkDependencyDelivered sets delivered_at, once, on a provided, rejected
// or expired request.
func (s *Store) MarkDependencyDelivered(ctx context.Context, id string) (bool, error) {
	if !isUUID(id) {
		return false, nil
	}
	return s.exec(ctx, "mark dependency delivered", `update dependency_requests set delivered_at = now()
		where id = $1 and delivered_at is null and status in ('provided', 'rejected', 'expired')`, id)
}

// ListUndeliveredDependencies returns the provided, rejected or expired
// requests not yet delivered, due as d says, oldest first.
func (s *Store) ListUndeliveredDependencies(ctx context.Context, d office.Due) ([]office.DependencyRequest, error) {
	w := due("status in ('provided', 'rejected', 'expired') and delivered_at is null", d)
	if w.none {
		return nil, nil
	}
	return list(ctx, s, "list undelivered dependencies", `select `+dependencyCols+` from dependency_requests`+w.where()+
		` order by created_at, id`, w.args, scanDependency)
}

const eventCols = `id, office_id::text, coalesce(agent_id::text, ''), coalesce(session_id, ''), kind, payload,
	coalesce(raw, ''), coalesce(dedupe_key, ''), created_at`

func scanEvent(r pgx.Row) (office.Event, error) {
	var e office.Event
	var payload []byte
	err := r.Scan(&e.ID, &e.OfficeID, &e.AgentID, &e.SessionID, &e.Kind, &payload, &e.Raw, &e.DedupeKey, &e.CreatedAt)
	if len(payload) > 0 {
		e.Payload = json.RawMessage(payload)
	}
	return e, err
}

// AppendEvent appends e to the audit log. With a DedupeKey that the office
// has already, it stores nothing and returns the existing event and
// inserted=false.
func (s *Store) AppendEvent(ctx context.Context, e office.Event) (office.Event, bool, error) {
	const op = "append event"
	officeID, err := ref(op, "office_id", e.OfficeID, false)
	if err != nil {
		return office.Event{}, false, err
	}
	agentID, err := ref(op, "agent_id", e.AgentID, true)
	if err != nil {
		return office.Event{}, false, err
	}
	if e.Kind == "" {
		return office.Event{}, false, invalid(op, "kind is required")
	}
	var payload any
	if len(e.Payload) > 0 {
		if !json.Valid(e.Payload) {
			return office.Event{}, false, invalid(op, "payload is not valid JSON")
		}
		payload = string(e.Payload)
	}
	v, ok, err := one(ctx, s, op, `insert into office_events (office_id, agent_id, session_id, kind, payload, raw, dedupe_key, created_at)
		values ($1, $2, $3, $4, $5, $6, $7, coalesce($8, now()))
		on conflict (office_id, dedupe_key) where dedupe_key is not null do nothing
		returning `+eventCols,
		[]any{officeID, agentID, null(e.SessionID), e.Kind, payload, null(e.Raw), null(e.DedupeKey), ts(e.CreatedAt)}, scanEvent)
	if err != nil || ok {
		return v, ok, err
	}
	// A duplicate: the one stored first stands.
	v, _, err = one(ctx, s, op, `select `+eventCols+` from office_events where office_id = $1 and dedupe_key = $2`,
		[]any{officeID, e.DedupeKey}, scanEvent)
	return v, false, err
}

// ListEvents returns the events f selects with ID > AfterID, oldest first,
// at most Limit (default 100).
func (s *Store) ListEvents(ctx context.Context, f office.EventFilter) ([]office.Event, error) {
	var w filter
	w.id("office_id", f.OfficeID)
	w.id("agent_id", f.AgentID)
	if f.AfterID > 0 {
		w.raw("id > $%d", f.AfterID)
	}
	if w.none {
		return nil, nil
	}
	n := f.Limit
	if n <= 0 {
		n = 100
	}
	return list(ctx, s, "list events", `select `+eventCols+` from office_events`+w.where()+` order by id`+limit(n), w.args, scanEvent)
}
