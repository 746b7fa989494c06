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

const officeCols = `id, name, question_ttl, created_at, updated_at`

func scanOffice(r scanner) (office.Office, error) {
	var o office.Office
	var ttl int64
	err := r.Scan(&o.ID, &o.Name, &ttl, tsVal{&o.CreatedAt}, tsVal{&o.UpdatedAt})
	o.QuestionTTL = time.Duration(ttl) * time.Microsecond
	return o, err
}

// UpsertOffice inserts o, or updates the office with o.ID when set, else the
// one named o.Name. A name taken by another office is ECONFLICT.
func (s *Store) UpsertOffice(ctx context.Context, o office.Office) (office.Office, error) {
	const op = "upsert office"
	if strings.TrimSpace(o.Name) == "" {
		return office.Office{}, office.Errorf(office.EINVALID, "office name is empty")
	}
	if o.QuestionTTL < 0 {
		return office.Office{}, office.Errorf(office.EINVALID, "office question TTL %v is negative", o.QuestionTTL)
	}
	_, now := nowTS()
	created := now
	if !o.CreatedAt.IsZero() {
		created = ts(o.CreatedAt)
	}
	target := "name"
	if o.ID != "" {
		target = "id"
	} else {
		o.ID = uuid.NewString()
	}
	row := s.ws.queryRow(ctx, `insert into offices (`+officeCols+`) values (?, ?, ?, ?, ?)
		on conflict (`+target+`) do update set name = excluded.name, question_ttl = excluded.question_ttl, updated_at = excluded.updated_at
		returning `+officeCols,
		o.ID, o.Name, o.QuestionTTL.Microseconds(), created, now)
	got, err := scanOffice(row)
	return got, s.fail(op, err)
}

// GetOffice returns the office with id, or ENOTFOUND.
func (s *Store) GetOffice(ctx context.Context, id string) (office.Office, error) {
	o, err := scanOffice(s.rs.queryRow(ctx, `select `+officeCols+` from offices where id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return o, notFound("get office", "office", id)
	}
	return o, s.fail("get office", err)
}

// ListOffices returns every office by name.
func (s *Store) ListOffices(ctx context.Context) ([]office.Office, error) {
	rows, err := s.rs.query(ctx, `select `+officeCols+` from offices order by name`)
	out, err := collect(rows, err, scanOffice)
	return out, s.fail("list offices", err)
}

const agentCols = `id, office_id, name, role, capabilities, priority, expertise, allowed_actions, max_load, launch_spec, status, created_at, updated_at`

func scanAgent(r scanner) (office.Agent, error) {
	var a office.Agent
	err := r.Scan(&a.ID, &a.OfficeID, &a.Name, &a.Role, jsonVal{&a.Capabilities}, &a.Priority, jsonVal{&a.Expertise},
		jsonVal{&a.AllowedActions}, &a.MaxLoad, jsonVal{&a.Launch}, &a.Status, tsVal{&a.CreatedAt}, tsVal{&a.UpdatedAt})
	return a, err
}

// UpsertAgent inserts a, or updates the agent of a.OfficeID whose name equals
// a.Name case-insensitively. With a.ID set, it updates or inserts that agent;
// if another agent of the office has the name already, it is ECONFLICT. An
// empty Status keeps the stored one (idle for a new agent).
func (s *Store) UpsertAgent(ctx context.Context, a office.Agent) (office.Agent, error) {
	const op = "upsert agent"
	if err := office.ValidateAgentName(a.Name); err != nil {
		return office.Agent{}, err
	}
	caps, err := jsonText(a.Capabilities, "[]")
	if err != nil {
		return office.Agent{}, s.fail(op, err)
	}
	exp, _ := jsonText(a.Expertise, "[]")
	acts, _ := jsonText(a.AllowedActions, "[]")
	launch, err := jsonText(a.Launch, "{}")
	if err != nil {
		return office.Agent{}, s.fail(op, err)
	}
	_, now := nowTS()
	created := now
	if !a.CreatedAt.IsZero() {
		created = ts(a.CreatedAt)
	}

	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return office.Agent{}, s.fail(op, err)
	}
	defer tx.Rollback()
	var byName string
	err = tx.QueryRowContext(ctx, `select id from office_agents where office_id = ? and lower(name) = lower(?)`, a.OfficeID, a.Name).Scan(&byName)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return office.Agent{}, s.fail(op, err)
	}
	id := a.ID
	switch {
	case id != "" && byName != "" && byName != id:
		return office.Agent{}, &office.Error{Code: office.ECONFLICT, Op: "sqlite: " + op,
			Message: "another agent of the office is named " + a.Name}
	case id == "" && byName != "":
		id = byName
	case id == "":
		id = uuid.NewString()
	}
	row := tx.QueryRowContext(ctx, `insert into office_agents (`+agentCols+`)
		values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, coalesce(?, 'idle'), ?, ?)
		on conflict (id) do update set office_id = excluded.office_id, name = excluded.name, role = excluded.role,
			capabilities = excluded.capabilities, priority = excluded.priority, expertise = excluded.expertise,
			allowed_actions = excluded.allowed_actions, max_load = excluded.max_load, launch_spec = excluded.launch_spec,
			status = coalesce(?, office_agents.status), updated_at = excluded.updated_at
		returning `+agentCols,
		id, a.OfficeID, a.Name, a.Role, caps, a.Priority, exp, acts, a.MaxLoad, launch, nullStr(a.Status), created, now,
		nullStr(a.Status))
	got, err := scanAgent(row)
	if err != nil {
		return office.Agent{}, s.fail(op, err)
	}
	return got, s.fail(op, tx.Commit())
}

// GetAgent returns the agent with id, or ENOTFOUND.
func (s *Store) GetAgent(ctx context.Context, id string) (office.Agent, error) {
	a, err := scanAgent(s.rs.queryRow(ctx, `select `+agentCols+` from office_agents where id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return a, notFound("get agent", "agent", id)
	}
	return a, s.fail("get agent", err)
}

// ListAgents returns the office's agents by name.
func (s *Store) ListAgents(ctx context.Context, officeID string) ([]office.Agent, error) {
	rows, err := s.rs.query(ctx, `select `+agentCols+` from office_agents where office_id = ? order by lower(name)`, officeID)
	out, err := collect(rows, err, scanAgent)
	return out, s.fail("list agents", err)
}

// SetAgentStatus sets the agent's status, or returns ENOTFOUND.
func (s *Store) SetAgentStatus(ctx context.Context, id, status string) error {
	_, now := nowTS()
	res, err := s.ws.exec(ctx, `update office_agents set status = ?, updated_at = ? where id = ?`, status, now, id)
	if err != nil {
		return s.fail("set agent status", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound("set agent status", "agent", id)
	}
	return nil
}

// DeleteAgent deletes the agent and, by cascade, its sessions, questions,
// messages, invocations, results and dependency requests; its events stay.
func (s *Store) DeleteAgent(ctx context.Context, id string) error {
	res, err := s.ws.exec(ctx, `delete from office_agents where id = ?`, id)
	if err != nil {
		return s.fail("delete agent", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound("delete agent", "agent", id)
	}
	return nil
}

const sessionCols = `id, office_id, agent_id, node, pid, status, agent_session_id, started_at, last_output_at, exit_code, detail, created_at, updated_at`

func scanSession(r scanner) (office.SessionRecord, error) {
	var x office.SessionRecord
	err := r.Scan(&x.ID, &x.OfficeID, &x.AgentID, &x.Node, &x.PID, &x.Status, &x.AgentSessionID,
		tsPtr{&x.StartedAt}, tsPtr{&x.LastOutputAt}, intPtr{&x.ExitCode}, &x.Detail, tsVal{&x.CreatedAt}, tsVal{&x.UpdatedAt})
	return x, err
}

// GetSessionByAgent returns the agent's session row, or ENOTFOUND.
func (s *Store) GetSessionByAgent(ctx context.Context, agentID string) (office.SessionRecord, error) {
	x, err := scanSession(s.rs.queryRow(ctx, `select `+sessionCols+` from agent_sessions where agent_id = ?`, agentID))
	if errors.Is(err, sql.ErrNoRows) {
		return x, notFound("get session", "session of agent", agentID)
	}
	return x, s.fail("get session", err)
}

// ListSessions returns the office's session rows.
func (s *Store) ListSessions(ctx context.Context, officeID string) ([]office.SessionRecord, error) {
	rows, err := s.rs.query(ctx, `select `+sessionCols+` from agent_sessions where office_id = ? order by created_at, rowid`, officeID)
	out, err := collect(rows, err, scanSession)
	return out, s.fail("list sessions", err)
}
