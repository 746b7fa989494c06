package postgres

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/office-server/office-server/office"
)

const officeCols = `id::text, name, question_ttl, created_at, updated_at`

func scanOffice(r pgx.Row) (office.Office, error) {
	var o office.Office
	var ttl pgtype.Interval
	err := r.Scan(&o.ID, &o.Name, &ttl, &o.CreatedAt, &o.UpdatedAt)
	o.QuestionTTL = duration(ttl)
	return o, err
}

func interval(d time.Duration) pgtype.Interval {
	return pgtype.Interval{Microseconds: d.Microseconds(), Valid: true}
}

func duration(i pgtype.Interval) time.Duration {
	if !i.Valid {
		return 0
	}
	return time.Duration(i.Microseconds)*time.Microsecond +
		time.Duration(i.Days)*24*time.Hour + time.Duration(i.Months)*30*24*time.Hour
}

// UpsertOffice inserts or updates an office: by ID when set, else by Name.
// Renaming onto another office's name is ECONFLICT.
func (s *Store) UpsertOffice(ctx context.Context, o office.Office) (office.Office, error) {
	const op = "upsert office"
	if o.Name == "" {
		return office.Office{}, invalid(op, "name is required")
	}
	if o.QuestionTTL < 0 {
		return office.Office{}, invalid(op, "question TTL %v is negative", o.QuestionTTL)
	}
	if o.ID != "" {
		if !isUUID(o.ID) {
			return office.Office{}, invalid(op, "id %q is not a UUID", o.ID)
		}
		v, _, err := one(ctx, s, op, `insert into offices (id, name, question_ttl, created_at, updated_at)
			values ($1, $2, $3, coalesce($4, now()), coalesce($5, now()))
			on conflict (id) do update set name = excluded.name, question_ttl = excluded.question_ttl
			returning `+officeCols,
			[]any{o.ID, o.Name, interval(o.QuestionTTL), ts(o.CreatedAt), ts(o.UpdatedAt)}, scanOffice)
		return v, err
	}
	v, _, err := one(ctx, s, op, `insert into offices (id, name, question_ttl, created_at, updated_at)
		values (gen_random_uuid(), $1, $2, coalesce($3, now()), coalesce($4, now()))
		on conflict (name) do update set question_ttl = excluded.question_ttl
		returning `+officeCols,
		[]any{o.Name, interval(o.QuestionTTL), ts(o.CreatedAt), ts(o.UpdatedAt)}, scanOffice)
	return v, err
}

// GetOffice returns the office, or ENOTFOUND.
func (s *Store) GetOffice(ctx context.Context, id string) (office.Office, error) {
	return getByID(ctx, s, "get office", "office", officeCols, "offices", id, scanOffice)
}

// ListOffices returns every office, by name.
func (s *Store) ListOffices(ctx context.Context) ([]office.Office, error) {
	return list(ctx, s, "list offices", `select `+officeCols+` from offices order by name, id`, nil, scanOffice)
}

const agentCols = `id::text, office_id::text, name, role, capabilities, priority, expertise, allowed_actions,
	max_load, launch_spec, status, created_at, updated_at`

func scanAgent(r pgx.Row) (office.Agent, error) {
	var a office.Agent
	var launch []byte
	err := r.Scan(&a.ID, &a.OfficeID, &a.Name, &a.Role, &a.Capabilities, &a.Priority, &a.Expertise, &a.AllowedActions,
		&a.MaxLoad, &launch, &a.Status, &a.CreatedAt, &a.UpdatedAt)
	if err == nil && len(launch) > 0 {
		err = json.Unmarshal(launch, &a.Launch)
	}
	return a, err
}

// UpsertAgent inserts or updates an agent. With an ID, the agent of that ID
// is updated (renamed if Name changed) or created with it; without, the
// agent of (OfficeID, lower(Name)) is updated or created. A name that
// another agent of the office has (in any case) is ECONFLICT. An empty
// Status is idle for a new agent and unchanged for an existing one.
func (s *Store) UpsertAgent(ctx context.Context, a office.Agent) (office.Agent, error) {
	const op = "upsert agent"
	if err := office.ValidateAgentName(a.Name); err != nil {
		return office.Agent{}, invalid(op, "%s", office.ErrorMessage(err))
	}
	officeID, err := ref(op, "office_id", a.OfficeID, false)
	if err != nil {
		return office.Agent{}, err
	}
	if a.MaxLoad < 0 {
		return office.Agent{}, invalid(op, "max_load %d is negative", a.MaxLoad)
	}
	launch, err := json.Marshal(a.Launch)
	if err != nil {
		return office.Agent{}, invalid(op, "launch spec: %v", err)
	}
	args := []any{officeID, a.Name, a.Role, strs(a.Capabilities), a.Priority, strs(a.Expertise), strs(a.AllowedActions),
		a.MaxLoad, string(launch), null(a.Status), ts(a.CreatedAt), ts(a.UpdatedAt)}
	if a.ID != "" {
		if !isUUID(a.ID) {
			return office.Agent{}, invalid(op, "id %q is not a UUID", a.ID)
		}
		// Update by ID first; only a missing row is inserted, so a rename
		// onto a taken name fails on the unique index (ECONFLICT).
		v, ok, err := one(ctx, s, op, `update office_agents set name = $2, role = $3, capabilities = $4, priority = $5,
				expertise = $6, allowed_actions = $7, max_load = $8, launch_spec = $9, status = coalesce($10, status)
			where id = $11 and office_id = $1
			returning `+agentCols, append(args[:10:10], a.ID), scanAgent)
		if err != nil || ok {
			return v, err
		}
		v, _, err = one(ctx, s, op, `insert into office_agents (office_id, name, role, capabilities, priority, expertise,
				allowed_actions, max_load, launch_spec, status, created_at, updated_at, id)
			values ($1, $2, $3, $4, $5, $6, $7, $8, $9, coalesce($10, 'idle'), coalesce($11, now()), coalesce($12, now()), $13)
			returning `+agentCols, append(args, a.ID), scanAgent)
		return v, err
	}
	v, _, err := one(ctx, s, op, `insert into office_agents (office_id, name, role, capabilities, priority, expertise,
			allowed_actions, max_load, launch_spec, status, created_at, updated_at)
		values ($1, $2, $3, $4, $5, $6, $7, $8, $9, coalesce($10, 'idle'), coalesce($11, now()), coalesce($12, now()))
		on conflict (office_id, lower(name)) do update set name = excluded.name, role = excluded.role,
			capabilities = excluded.capabilities, priority = excluded.priority, expertise = excluded.expertise,
			allowed_actions = excluded.allowed_actions, max_load = excluded.max_load, launch_spec = excluded.launch_spec,
			status = coalesce($10, office_agents.status)
		returning `+agentCols, args, scanAgent)
	return v, err
}

// GetAgent returns the agent, or ENOTFOUND.
func (s *Store) GetAgent(ctx context.Context, id string) (office.Agent, error) {
	return getByID(ctx, s, "get agent", "agent", agentCols, "office_agents", id, scanAgent)
}

// ListAgents returns the office's agents by priority (highest first), then name.
func (s *Store) ListAgents(ctx context.Context, officeID string) ([]office.Agent, error) {
	if !isUUID(officeID) {
		return nil, nil
	}
	return list(ctx, s, "list agents", `select `+agentCols+` from office_agents where office_id = $1
		order by priority desc, lower(name), id`, []any{officeID}, scanAgent)
}

// SetAgentStatus sets the agent's status, or returns ENOTFOUND.
func (s *Store) SetAgentStatus(ctx context.Context, id, status string) error {
	const op = "set agent status"
	if !isUUID(id) {
		return notFound(op, "agent", id)
	}
	ok, err := s.exec(ctx, op, `update office_agents set status = $2 where id = $1`, id, status)
	if err == nil && !ok {
		err = notFound(op, "agent", id)
	}
	return err
}

// DeleteAgent deletes the agent and, by cascade, its sessions, questions,
// messages, invocations, results and dependency requests (events stay).
func (s *Store) DeleteAgent(ctx context.Context, id string) error {
	const op = "delete agent"
	if !isUUID(id) {
		return notFound(op, "agent", id)
	}
	ok, err := s.exec(ctx, op, `delete from office_agents where id = $1`, id)
	if err == nil && !ok {
		err = notFound(op, "agent", id)
	}
	return err
}

const sessionCols = `id::text, office_id::text, agent_id::text, node, pid, status, agent_session_id,
	started_at, last_output_at, exit_code, detail, created_at, updated_at`

func scanSession(r pgx.Row) (office.SessionRecord, error) {
	var x office.SessionRecord
	err := r.Scan(&x.ID, &x.OfficeID, &x.AgentID, &x.Node, &x.PID, &x.Status, &x.AgentSessionID,
		&x.StartedAt, &x.LastOutputAt, &x.ExitCode, &x.Detail, &x.CreatedAt, &x.UpdatedAt)
	return x, err
}

// GetSessionByAgent returns the agent's session row, or ENOTFOUND.
func (s *Store) GetSessionByAgent(ctx context.Context, agentID string) (office.SessionRecord, error) {
	const op = "get session"
	if !isUUID(agentID) {
		return office.SessionRecord{}, notFound(op, "session of agent", agentID)
	}
	v, ok, err := one(ctx, s, op, `select `+sessionCols+` from agent_sessions where agent_id = $1`, []any{agentID}, scanSession)
	if err == nil && !ok {
		err = notFound(op, "session of agent", agentID)
	}
	return v, err
}

// ListSessions returns the office's session rows.
func (s *Store) ListSessions(ctx context.Context, officeID string) ([]office.SessionRecord, error) {
	if !isUUID(officeID) {
		return nil, nil
	}
	return list(ctx, s, "list sessions", `select `+sessionCols+` from agent_sessions where office_id = $1
		order by created_at, id`, []any{officeID}, scanSession)
}
