// Package supabase runs the office against a Supabase project: a Store over
// PostgREST (the project's REST API, with the service-role key) and a change
// feed over Supabase Realtime's postgres_changes (Phoenix channels).
package supabase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	postgrest "github.com/supabase-community/postgrest-go"

	"github.com/office-server/office-server/office"
)

// restPath is where a Supabase project serves PostgREST (supabase-go's
// REST_URL).
const restPath = "/rest/v1"

// Store is office.Store over a Supabase project's PostgREST API. It is safe
// for concurrent use.
//
// It is built on postgrest-go rather than supabase-go's Client: supabase-go
// v0.0.4 keeps its postgrest client in an unexported field, so neither the
// HTTP transport (needed to keep PostgREST's status, details and hint, which
// postgrest-go drops) nor the Prefer header (needed for
// resolution=ignore-duplicates) could be reached through it. The URL, schema
// and headers are the ones supabase-go's NewClient sets.
type Store struct {
	rest *postgrest.Client
	conn *http.Transport // the store's own pool (newConnPool)
	// noOnConflict is set when the events table has no unique constraint
	// that ON CONFLICT (office_id, dedupe_key) can use (PostgreSQL 42P10):
	// AppendEvent then inserts and treats a 23505 as a duplicate.
	noOnConflict atomic.Bool
	now          func() time.Time
	// restURL and key serve the calls postgrest-go cannot make with a
	// context and the answer's status (functions: members.go).
	restURL, key string
}

// New returns a Store for the Supabase project at projectURL (e.g.
// https://abcd.supabase.co) using key, which for a server is the
// service-role key (SUPABASE_SERVICE_ROLE_KEY): it bypasses row-level
// security, so it must never leave the server. New does no I/O; Ping checks
// the connection and the schema.
func New(projectURL, key string) (*Store, error) {
	if projectURL == "" || key == "" {
		return nil, office.Errorf(office.EINVALID, "supabase: project URL and key are required")
	}
	restURL := strings.TrimRight(projectURL, "/") + restPath
	rest, err := postgrest.NewClientWithError(restURL, "public", apiHeaders(key))
	if err != nil {
		return nil, office.Errorf(office.EINVALID, "supabase: project URL: %v", err)
	}
	conn := newConnPool()
	rest.Transport.Parent = transport{base: conn}
	return &Store{rest: rest, conn: conn, now: time.Now, restURL: restURL, key: key}, nil
}

// likeLiteral escapes what LIKE would take for a wildcard, so a pattern
// matches the text itself (agent names hold no '*', PostgREST's other one).
var likeLiteral = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// newConnPool is the store's HTTP connection pool. http.DefaultTransport
// keeps two idle connections per host, so with many agents starting or
// being delivered to at once most requests dialed a new connection and
// closed it after: 16% of the server's CPU while 1,000 agents started over
// Supabase (office-load -profile), growing with the office.
func newConnPool() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	return t
}

var _ office.Store = (*Store)(nil)

func (s *Store) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// exec runs one request; out, when not nil, receives the decoded body.
func (s *Store) exec(ctx context.Context, op string, fb *postgrest.FilterBuilder, prefer string, out any) error {
	c := &call{prefer: prefer}
	body, _, err := fb.ExecuteWithContext(withCall(ctx, c))
	if err != nil {
		if c.status >= 400 {
			return wrap(op, parseAPIError(c.status, c.body), err)
		}
		return wrap(op, nil, err)
	}
	if out == nil || len(body) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &office.Error{Code: office.EINTERNAL, Op: op, Message: "decode response", Err: err}
	}
	return nil
}

func (s *Store) from(table string) *postgrest.QueryBuilder { return s.rest.From(table) }

const (
	preferRepresentation = "return=representation"
	preferMinimal        = "return=minimal"
)

// getOne fetches the single row of table with id; ENOTFOUND (PostgREST's 406
// PGRST116) when there is none.
func (s *Store) getOne(ctx context.Context, op, table, id string, out any) error {
	if _, err := uuid.Parse(id); err != nil {
		return &office.Error{Code: office.ENOTFOUND, Op: op, Message: fmt.Sprintf("no %s %q", table, id)}
	}
	return s.exec(ctx, op, s.from(table).Select("*", "", false).Eq("id", id).Single(), "", out)
}

// patch applies a conditional update and returns the rows it changed.
func patch[T any](ctx context.Context, s *Store, op, table string, body map[string]any, filter func(*postgrest.FilterBuilder) *postgrest.FilterBuilder) ([]T, error) {
	var rows []T
	fb := filter(s.from(table).Update(body, "representation", ""))
	if err := s.exec(ctx, op, fb, preferRepresentation, &rows); err != nil {
		return nil, err
	}
	return rows, nil
}

// ---- offices ----

// officeRow is offices as PostgREST sends it: question_ttl is an interval,
// which travels as PostgreSQL's text form (see interval.go).
type officeRow struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	QuestionTTL interval  `json:"question_ttl"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func (r officeRow) office() office.Office {
	return office.Office{ID: r.ID, Name: r.Name, QuestionTTL: time.Duration(r.QuestionTTL),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// Ping reads one row of offices: it fails when the project cannot be
// reached, the key is refused, or the migrations have not been applied
// (PostgREST answers 404 PGRST205 for an unknown table).
func (s *Store) Ping(ctx context.Context) error {
	return s.exec(ctx, "ping", s.from("offices").Select("id", "", false).Limit(1, ""), "", nil)
}

// Close closes the store's idle connections and returns nil.
func (s *Store) Close() error {
	s.conn.CloseIdleConnections()
	return nil
}

// UpsertOffice implements office.Store; see its contract in office/store.go.
func (s *Store) UpsertOffice(ctx context.Context, o office.Office) (office.Office, error) {
	const op = "upsert office"
	if strings.TrimSpace(o.Name) == "" && o.ID == "" {
		return office.Office{}, &office.Error{Code: office.EINVALID, Op: op, Message: "office needs an id or a name"}
	}
	for attempt := 0; ; attempt++ {
		var existing []officeRow
		fb := s.from("offices").Select("*", "", false)
		if o.ID != "" {
			if _, err := uuid.Parse(o.ID); err != nil {
				return office.Office{}, &office.Error{Code: office.EINVALID, Op: op, Message: fmt.Sprintf("office id %q is not a UUID", o.ID)}
			}
			fb = fb.Eq("id", o.ID)
		} else {
			fb = fb.Eq("name", o.Name)
		}
		if err := s.exec(ctx, op, fb.Limit(1, ""), "", &existing); err != nil {
			return office.Office{}, err
		}
		now := s.stamp()
		if len(existing) == 1 {
			body := map[string]any{"question_ttl": interval(o.QuestionTTL), "updated_at": now}
			if o.Name != "" {
				body["name"] = o.Name
			}
			rows, err := patch[officeRow](ctx, s, op, "offices", body, func(f *postgrest.FilterBuilder) *postgrest.FilterBuilder {
				return f.Eq("id", existing[0].ID)
			})
			if err != nil {
				return office.Office{}, err
			}
			if len(rows) == 1 {
				return rows[0].office(), nil
			}
		} else {
			id := o.ID
			if id == "" {
				id = uuid.NewString()
			}
			created := o.CreatedAt
			if created.IsZero() {
				created = now
			}
			body := map[string]any{"id": id, "name": o.Name, "question_ttl": interval(o.QuestionTTL),
				"created_at": created, "updated_at": now}
			var rows []officeRow
			err := s.exec(ctx, op, s.from("offices").Insert(body, false, "", "representation", ""), preferRepresentation, &rows)
			if err == nil && len(rows) == 1 {
				return rows[0].office(), nil
			}
			if err != nil && !(office.IsConflict(err) && attempt == 0) {
				return office.Office{}, err
			}
		}
		if attempt > 0 {
			return office.Office{}, &office.Error{Code: office.ECONFLICT, Op: op, Message: "office changed concurrently"}
		}
	}
}

// GetOffice implements office.Store; see its contract in office/store.go.
func (s *Store) GetOffice(ctx context.Context, id string) (office.Office, error) {
	var r officeRow
	if err := s.getOne(ctx, "get office", "offices", id, &r); err != nil {
		return office.Office{}, err
	}
	return r.office(), nil
}

// ListOffices implements office.Store; see its contract in office/store.go.
func (s *Store) ListOffices(ctx context.Context) ([]office.Office, error) {
	var rows []officeRow
	if err := s.exec(ctx, "list offices", s.from("offices").Select("*", "", false).Order("created_at", &postgrest.OrderOpts{Ascending: true}).Order("id", &postgrest.OrderOpts{Ascending: true}), "", &rows); err != nil {
		return nil, err
	}
	out := make([]office.Office, len(rows))
	for i, r := range rows {
		out[i] = r.office()
	}
	return out, nil
}

// ---- agents ----

type agentRow struct {
	ID             string            `json:"id"`
	OfficeID       string            `json:"office_id"`
	Name           string            `json:"name"`
	Role           string            `json:"role"`
	Capabilities   []string          `json:"capabilities"`
	Priority       int               `json:"priority"`
	Expertise      []string          `json:"expertise"`
	AllowedActions []string          `json:"allowed_actions"`
	MaxLoad        int               `json:"max_load"`
	LaunchSpec     office.LaunchSpec `json:"launch_spec"`
	Status         string            `json:"status"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
}

func (r agentRow) agent() office.Agent {
	return office.Agent{ID: r.ID, OfficeID: r.OfficeID, Name: r.Name, Role: r.Role, Capabilities: nonNil(r.Capabilities),
		Priority: r.Priority, Expertise: nonNil(r.Expertise), AllowedActions: nonNil(r.AllowedActions), MaxLoad: r.MaxLoad,
		Launch: r.LaunchSpec, Status: r.Status, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// UpsertAgent implements office.Store; see its contract in office/store.go.
func (s *Store) UpsertAgent(ctx context.Context, a office.Agent) (office.Agent, error) {
	const op = "upsert agent"
	if a.OfficeID == "" {
		return office.Agent{}, &office.Error{Code: office.EINVALID, Op: op, Message: "agent needs an office"}
	}
	if err := office.ValidateAgentName(a.Name); err != nil {
		return office.Agent{}, &office.Error{Code: office.EINVALID, Op: op, Message: office.ErrorMessage(err)}
	}
	if a.Status == "" {
		a.Status = office.AgentIdle
	}
	for attempt := 0; ; attempt++ {
		// By ID when set; else by (office_id, lower(name)), an expression
		// index that on_conflict cannot name: find the row (ilike on the
		// name, its '_' escaped: the office's one agent of that name, not
		// the whole roster, which made syncing an office quadratic), then
		// update or insert. A rename onto another agent's name fails with
		// 23505.
		var rows []agentRow
		fb := s.from("office_agents").Select("*", "", false)
		if a.ID != "" {
			if !validID(a.ID) {
				return office.Agent{}, &office.Error{Code: office.EINVALID, Op: op, Message: fmt.Sprintf("agent id %q is not a UUID", a.ID)}
			}
			fb = fb.Eq("id", a.ID)
		} else {
			fb = fb.Eq("office_id", a.OfficeID).Ilike("name", likeLiteral.Replace(a.Name))
		}
		if err := s.exec(ctx, op, fb, "", &rows); err != nil {
			return office.Agent{}, err
		}
		var existing *agentRow
		for i := range rows {
			if a.ID != "" || strings.EqualFold(rows[i].Name, a.Name) {
				existing = &rows[i]
				break
			}
		}
		now := s.stamp()
		body := map[string]any{
			"name": a.Name, "role": a.Role, "capabilities": nonNil(a.Capabilities), "priority": a.Priority,
			"expertise": nonNil(a.Expertise), "allowed_actions": nonNil(a.AllowedActions), "max_load": a.MaxLoad,
			"launch_spec": a.Launch, "status": a.Status, "updated_at": now,
		}
		if existing != nil {
			got, err := patch[agentRow](ctx, s, op, "office_agents", body, func(f *postgrest.FilterBuilder) *postgrest.FilterBuilder {
				return f.Eq("id", existing.ID)
			})
			if err != nil {
				return office.Agent{}, err
			}
			if len(got) == 1 {
				return got[0].agent(), nil
			}
		} else {
			id := a.ID
			if id == "" {
				id = uuid.NewString()
			}
			created := a.CreatedAt
			if created.IsZero() {
				created = now
			}
			body["id"], body["office_id"], body["created_at"] = id, a.OfficeID, created
			var got []agentRow
			err := s.exec(ctx, op, s.from("office_agents").Insert(body, false, "", "representation", ""), preferRepresentation, &got)
			if err == nil && len(got) == 1 {
				return got[0].agent(), nil
			}
			if err != nil && !(office.IsConflict(err) && attempt == 0) {
				return office.Agent{}, err
			}
		}
		if attempt > 0 {
			return office.Agent{}, &office.Error{Code: office.ECONFLICT, Op: op, Message: "agent changed concurrently"}
		}
	}
}

// GetAgent implements office.Store; see its contract in office/store.go.
func (s *Store) GetAgent(ctx context.Context, id string) (office.Agent, error) {
	var r agentRow
	if err := s.getOne(ctx, "get agent", "office_agents", id, &r); err != nil {
		return office.Agent{}, err
	}
	return r.agent(), nil
}

// ListAgents implements office.Store; see its contract in office/store.go.
func (s *Store) ListAgents(ctx context.Context, officeID string) ([]office.Agent, error) {
	var rows []agentRow
	fb := s.from("office_agents").Select("*", "", false)
	if officeID != "" {
		fb = fb.Eq("office_id", officeID)
	}
	if err := s.exec(ctx, "list agents", oldestFirst(fb), "", &rows); err != nil {
		return nil, err
	}
	out := make([]office.Agent, len(rows))
	for i, r := range rows {
		out[i] = r.agent()
	}
	return out, nil
}

func oldestFirst(fb *postgrest.FilterBuilder) *postgrest.FilterBuilder {
	return fb.Order("created_at", &postgrest.OrderOpts{Ascending: true}).Order("id", &postgrest.OrderOpts{Ascending: true})
}

// SetAgentStatus implements office.Store; see its contract in office/store.go.
func (s *Store) SetAgentStatus(ctx context.Context, id, status string) error {
	const op = "set agent status"
	if _, err := uuid.Parse(id); err != nil {
		return &office.Error{Code: office.ENOTFOUND, Op: op, Message: fmt.Sprintf("no agent %q", id)}
	}
	rows, err := patch[agentRow](ctx, s, op, "office_agents", map[string]any{"status": status, "updated_at": s.stamp()},
		func(f *postgrest.FilterBuilder) *postgrest.FilterBuilder { return f.Eq("id", id) })
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		return &office.Error{Code: office.ENOTFOUND, Op: op, Message: fmt.Sprintf("no agent %q", id)}
	}
	return nil
}

// DeleteAgent implements office.Store; see its contract in office/store.go.
func (s *Store) DeleteAgent(ctx context.Context, id string) error {
	const op = "delete agent"
	if _, err := uuid.Parse(id); err != nil {
		return &office.Error{Code: office.ENOTFOUND, Op: op, Message: fmt.Sprintf("no agent %q", id)}
	}
	var rows []agentRow
	if err := s.exec(ctx, op, s.from("office_agents").Delete("representation", "").Eq("id", id), preferRepresentation, &rows); err != nil {
		return err
	}
	if len(rows) == 0 {
		return &office.Error{Code: office.ENOTFOUND, Op: op, Message: fmt.Sprintf("no agent %q", id)}
	}
	return nil
}

// ---- sessions ----

// GetSessionByAgent implements office.Store; see its contract in office/store.go.
func (s *Store) GetSessionByAgent(ctx context.Context, agentID string) (office.SessionRecord, error) {
	const op = "get session"
	if _, err := uuid.Parse(agentID); err != nil {
		return office.SessionRecord{}, &office.Error{Code: office.ENOTFOUND, Op: op, Message: fmt.Sprintf("no session for agent %q", agentID)}
	}
	var r office.SessionRecord
	if err := s.exec(ctx, op, s.from("agent_sessions").Select("*", "", false).Eq("agent_id", agentID).Single(), "", &r); err != nil {
		return office.SessionRecord{}, err
	}
	return r, nil
}

// ListSessions implements office.Store; see its contract in office/store.go.
func (s *Store) ListSessions(ctx context.Context, officeID string) ([]office.SessionRecord, error) {
	var rows []office.SessionRecord
	fb := s.from("agent_sessions").Select("*", "", false)
	if officeID != "" {
		fb = fb.Eq("office_id", officeID)
	}
	if err := s.exec(ctx, "list sessions", oldestFirst(fb), "", &rows); err != nil {
		return nil, err
	}
	return rows, nil
}

// ---- questions ----

// optional returns nil for "", so that nullable uuid columns get NULL.
func optional(v string) any {
	if v == "" {
		return nil
	}
	return v
}

// CreateQuestion implements office.Store; see its contract in office/store.go.
func (s *Store) CreateQuestion(ctx context.Context, q office.Question) (office.Question, error) {
	const op = "create question"
	now := s.stamp()
	if q.ID == "" {
		q.ID = uuid.NewString()
	}
	if q.Status == "" {
		q.Status = office.QuestionPending
	}
	if q.QuestionType == "" {
		q.QuestionType = office.QuestionText
	}
	if q.CreatedAt.IsZero() {
		q.CreatedAt = now
	}
	if q.UpdatedAt.IsZero() {
		q.UpdatedAt = now
	}
	if q.Options == nil {
		q.Options = []string{}
	}
	body := map[string]any{
		"id": q.ID, "office_id": q.OfficeID, "agent_id": q.AgentID, "session_id": optional(q.SessionID),
		"question_type": q.QuestionType, "category": optional(q.Category), "question": q.Question, "options": q.Options,
		"default_answer": optional(q.DefaultAnswer), "context": optional(q.Context), "required": q.Required,
		"status": q.Status, "response": optional(q.Response), "answered_by": optional(q.AnsweredBy),
		"answered_at": q.AnsweredAt, "delivered_at": q.DeliveredAt, "expires_at": q.ExpiresAt,
		"created_at": q.CreatedAt, "updated_at": q.UpdatedAt,
	}
	var rows []office.Question
	if err := s.exec(ctx, op, s.from("user_questions").Insert(body, false, "", "representation", ""), preferRepresentation, &rows); err != nil {
		return office.Question{}, err
	}
	return one(op, rows)
}

func one[T any](op string, rows []T) (T, error) {
	var zero T
	if len(rows) != 1 {
		return zero, &office.Error{Code: office.EINTERNAL, Op: op, Message: fmt.Sprintf("expected one row back, got %d", len(rows))}
	}
	return rows[0], nil
}

// GetQuestion implements office.Store; see its contract in office/store.go.
func (s *Store) GetQuestion(ctx context.Context, id string) (office.Question, error) {
	var q office.Question
	if err := s.getOne(ctx, "get question", "user_questions", id, &q); err != nil {
		return office.Question{}, err
	}
	return q, nil
}

// ListQuestions implements office.Store; see its contract in office/store.go.
func (s *Store) ListQuestions(ctx context.Context, f office.QuestionFilter) ([]office.Question, error) {
	fb := s.from("user_questions").Select("*", "", false)
	fb = eqIf(fb, "office_id", f.OfficeID)
	fb = eqIf(fb, "agent_id", f.AgentID)
	fb = inIf(fb, "status", f.Status)
	fb = limitIf(oldestFirst(fb), f.Limit)
	var rows []office.Question
	if err := s.exec(ctx, "list questions", fb, "", &rows); err != nil {
		return nil, err
	}
	return rows, nil
}

func eqIf(fb *postgrest.FilterBuilder, col, v string) *postgrest.FilterBuilder {
	if v == "" {
		return fb
	}
	return fb.Eq(col, v)
}

func inIf(fb *postgrest.FilterBuilder, col string, vs []string) *postgrest.FilterBuilder {
	if len(vs) == 0 {
		return fb
	}
	return fb.In(col, vs)
}

func limitIf(fb *postgrest.FilterBuilder, n int) *postgrest.FilterBuilder {
	if n <= 0 {
		return fb
	}
	return fb.Limit(n, "")
}

// validID reports whether id can name a row; a malformed id names none (and
// PostgREST would answer 400 22P02 for it).
func validID(id string) bool { _, err := uuid.Parse(id); return err == nil }

// AnswerQuestion implements office.Store; see its contract in office/store.go.
func (s *Store) AnswerQuestion(ctx context.Context, id, response, answeredBy string) (office.Question, bool, error) {
	if !validID(id) {
		return office.Question{}, false, nil
	}
	now := s.stamp()
	rows, err := patch[office.Question](ctx, s, "answer question", "user_questions",
		map[string]any{"status": office.QuestionAnswered, "response": response, "answered_by": optional(answeredBy), "answered_at": now, "updated_at": now},
		func(f *postgrest.FilterBuilder) *postgrest.FilterBuilder {
			return f.Eq("id", id).Eq("status", office.QuestionPending)
		})
	if err != nil || len(rows) == 0 {
		return office.Question{}, false, err
	}
	return rows[0], true, nil
}

// MarkQuestionDelivered implements office.Store; see its contract in office/store.go.
func (s *Store) MarkQuestionDelivered(ctx context.Context, id string) (bool, error) {
	if !validID(id) {
		return false, nil
	}
	now := s.stamp()
	rows, err := patch[office.Question](ctx, s, "mark question delivered", "user_questions",
		map[string]any{"status": office.QuestionDelivered, "delivered_at": now, "updated_at": now},
		func(f *postgrest.FilterBuilder) *postgrest.FilterBuilder {
			return f.Eq("id", id).Eq("status", office.QuestionAnswered)
		})
	return len(rows) == 1, err
}

// ExpireQuestions implements office.Store; see its contract in office/store.go.
func (s *Store) ExpireQuestions(ctx context.Context, now time.Time, officeIDs []string) ([]office.Question, error) {
	rows, err := patch[office.Question](ctx, s, "expire questions", "user_questions",
		map[string]any{"status": office.QuestionExpired, "updated_at": s.stamp()},
		func(f *postgrest.FilterBuilder) *postgrest.FilterBuilder {
			return inIf(f.Eq("status", office.QuestionPending).Lte("expires_at", pgTime(now)), "office_id", officeIDs)
		})
	if err != nil {
		return nil, err
	}
	return nonNilRows(rows), nil
}

func nonNilRows[T any](rows []T) []T {
	if rows == nil {
		return []T{}
	}
	return rows
}

// pgTime formats t for a PostgREST filter value.
func pgTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.999999Z07:00") }

// CancelQuestion implements office.Store; see its contract in office/store.go.
func (s *Store) CancelQuestion(ctx context.Context, id string) (bool, error) {
	if !validID(id) {
		return false, nil
	}
	rows, err := patch[office.Question](ctx, s, "cancel question", "user_questions",
		map[string]any{"status": office.QuestionCancelled, "updated_at": s.stamp()},
		func(f *postgrest.FilterBuilder) *postgrest.FilterBuilder {
			return f.Eq("id", id).In("status", []string{office.QuestionPending, office.QuestionAnswered})
		})
	return len(rows) == 1, err
}

// CancelPendingQuestion implements office.Store; see its contract in office/store.go.
func (s *Store) CancelPendingQuestion(ctx context.Context, id string) (bool, error) {
	if !validID(id) {
		return false, nil
	}
	rows, err := patch[office.Question](ctx, s, "cancel pending question", "user_questions",
		map[string]any{"status": office.QuestionCancelled, "updated_at": s.stamp()},
		func(f *postgrest.FilterBuilder) *postgrest.FilterBuilder {
			return f.Eq("id", id).Eq("status", office.QuestionPending)
		})
	return len(rows) == 1, err
}

// ListAnsweredUndelivered implements office.Store; see its contract in office/store.go.
func (s *Store) ListAnsweredUndelivered(ctx context.Context, d office.Due) ([]office.Question, error) {
	if d.AgentID != "" && !validID(d.AgentID) {
		return []office.Question{}, nil
	}
	fb := s.from("user_questions").Select("*", "", false).Eq("status", office.QuestionAnswered)
	fb = eqIf(inIf(fb, "office_id", d.OfficeIDs), "agent_id", d.AgentID)
	var rows []office.Question
	if err := s.exec(ctx, "list answered questions", oldestFirst(fb), "", &rows); err != nil {
		return nil, err
	}
	return nonNilRows(rows), nil
}

// ---- user messages ----

// CreateUserMessage implements office.Store; see its contract in office/store.go.
func (s *Store) CreateUserMessage(ctx context.Context, m office.UserMessage) (office.UserMessage, error) {
	const op = "create user message"
	now := s.stamp()
	if m.ID == "" {
		m.ID = uuid.NewString()
	}
	if m.Status == "" {
		m.Status = office.MessagePending
	}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = now
	}
	if m.UpdatedAt.IsZero() {
		m.UpdatedAt = now
	}
	body := map[string]any{"id": m.ID, "office_id": m.OfficeID, "agent_id": m.AgentID, "user_id": optional(m.UserID),
		"content": m.Content, "status": m.Status, "delivered_at": m.DeliveredAt, "created_at": m.CreatedAt, "updated_at": m.UpdatedAt}
	var rows []office.UserMessage
	if err := s.exec(ctx, op, s.from("user_messages").Insert(body, false, "", "representation", ""), preferRepresentation, &rows); err != nil {
		return office.UserMessage{}, err
	}
	return one(op, rows)
}

// MarkUserMessageDelivered implements office.Store; see its contract in office/store.go.
func (s *Store) MarkUserMessageDelivered(ctx context.Context, id string) (bool, error) {
	if !validID(id) {
		return false, nil
	}
	now := s.stamp()
	rows, err := patch[office.UserMessage](ctx, s, "mark user message delivered", "user_messages",
		map[string]any{"status": office.MessageDelivered, "delivered_at": now, "updated_at": now},
		func(f *postgrest.FilterBuilder) *postgrest.FilterBuilder {
			return f.Eq("id", id).Eq("status", office.MessagePending)
		})
	return len(rows) == 1, err
}

// ListPendingUserMessages implements office.Store; see its contract in office/store.go.
func (s *Store) ListPendingUserMessages(ctx context.Context, d office.Due) ([]office.UserMessage, error) {
	if d.AgentID != "" && !validID(d.AgentID) {
		return []office.UserMessage{}, nil
	}
	fb := s.from("user_messages").Select("*", "", false).Eq("status", office.MessagePending)
	fb = eqIf(inIf(fb, "office_id", d.OfficeIDs), "agent_id", d.AgentID)
	var rows []office.UserMessage
	if err := s.exec(ctx, "list pending user messages", oldestFirst(fb), "", &rows); err != nil {
		return nil, err
	}
	return nonNilRows(rows), nil
}

// ---- invocations ----

// CreateInvocation implements office.Store; see its contract in office/store.go.
func (s *Store) CreateInvocation(ctx context.Context, inv office.Invocation) (office.Invocation, error) {
	const op = "create invocation"
	now := s.stamp()
	if inv.ID == "" {
		inv.ID = uuid.NewString()
	}
	if inv.Status == "" {
		inv.Status = office.InvocationPending
	}
	if inv.CreatedAt.IsZero() {
		inv.CreatedAt = now
	}
	if inv.UpdatedAt.IsZero() {
		inv.UpdatedAt = now
	}
	body := map[string]any{"id": inv.ID, "office_id": inv.OfficeID, "caller_agent_id": inv.CallerAgentID,
		"callee_agent_id": optional(inv.CalleeAgentID), "parent_invocation_id": optional(inv.ParentInvocationID), "depth": inv.Depth,
		"reason": inv.Reason, "context": optional(inv.Context), "status": inv.Status, "result_id": optional(inv.ResultID),
		"error": optional(inv.Error), "started_at": inv.StartedAt, "completed_at": inv.CompletedAt,
		"created_at": inv.CreatedAt, "updated_at": inv.UpdatedAt}
	var rows []office.Invocation
	if err := s.exec(ctx, op, s.from("agent_invocations").Insert(body, false, "", "representation", ""), preferRepresentation, &rows); err != nil {
		return office.Invocation{}, err
	}
	return one(op, rows)
}

// GetInvocation implements office.Store; see its contract in office/store.go.
func (s *Store) GetInvocation(ctx context.Context, id string) (office.Invocation, error) {
	var inv office.Invocation
	if err := s.getOne(ctx, "get invocation", "agent_invocations", id, &inv); err != nil {
		return office.Invocation{}, err
	}
	return inv, nil
}

// ListInvocations implements office.Store; see its contract in office/store.go.
func (s *Store) ListInvocations(ctx context.Context, f office.InvocationFilter) ([]office.Invocation, error) {
	fb := s.from("agent_invocations").Select("*", "", false)
	fb = eqIf(fb, "office_id", f.OfficeID)
	if f.AgentID != "" {
		if !validID(f.AgentID) {
			return []office.Invocation{}, nil
		}
		fb = fb.Or(fmt.Sprintf("caller_agent_id.eq.%s,callee_agent_id.eq.%s", f.AgentID, f.AgentID), "")
	}
	if f.CalleeAgentID != "" {
		if !validID(f.CalleeAgentID) {
			return []office.Invocation{}, nil
		}
		fb = fb.Eq("callee_agent_id", f.CalleeAgentID)
	}
	fb = inIf(fb, "status", f.Status)
	fb = limitIf(oldestFirst(fb), f.Limit)
	var rows []office.Invocation
	if err := s.exec(ctx, "list invocations", fb, "", &rows); err != nil {
		return nil, err
	}
	return rows, nil
}

// TransitionInvocation implements office.Store; see its contract in office/store.go.
func (s *Store) TransitionInvocation(ctx context.Context, id string, from []string, to string, p office.InvocationPatch) (office.Invocation, bool, error) {
	if !validID(id) || len(from) == 0 {
		return office.Invocation{}, false, nil
	}
	now := s.stamp()
	body := map[string]any{"status": to, "updated_at": now}
	if p.ResultID != "" {
		body["result_id"] = p.ResultID
	}
	if p.Error != "" {
		body["error"] = p.Error
	}
	switch to {
	case office.InvocationInProgress:
		body["started_at"] = now
	case office.InvocationCompleted, office.InvocationFailed, office.InvocationCancelled, office.InvocationRejected:
		body["completed_at"] = now
	}
	rows, err := patch[office.Invocation](ctx, s, "transition invocation", "agent_invocations", body,
		func(f *postgrest.FilterBuilder) *postgrest.FilterBuilder { return f.Eq("id", id).In("status", from) })
	if err != nil || len(rows) == 0 {
		return office.Invocation{}, false, err
	}
	return rows[0], true, nil
}

// FindOpenInvocation implements office.Store; see its contract in office/store.go.
func (s *Store) FindOpenInvocation(ctx context.Context, officeID, callerAgentID, calleeAgentID string) (office.Invocation, error) {
	const op = "find open invocation"
	notFound := &office.Error{Code: office.ENOTFOUND, Op: op, Message: "no open invocation"}
	if !validID(callerAgentID) || !validID(calleeAgentID) {
		return office.Invocation{}, notFound
	}
	fb := s.from("agent_invocations").Select("*", "", false)
	fb = eqIf(fb, "office_id", officeID).Eq("caller_agent_id", callerAgentID).Eq("callee_agent_id", calleeAgentID).
		In("status", []string{office.InvocationPending, office.InvocationInProgress})
	var rows []office.Invocation
	if err := s.exec(ctx, op, oldestFirst(fb).Limit(1, ""), "", &rows); err != nil {
		return office.Invocation{}, err
	}
	if len(rows) == 0 {
		return office.Invocation{}, notFound
	}
	return rows[0], nil
}

// ---- results ----

// CreateResult implements office.Store; see its contract in office/store.go.
func (s *Store) CreateResult(ctx context.Context, r office.Result) (office.Result, error) {
	const op = "create result"
	now := s.stamp()
	if r.ID == "" {
		r.ID = uuid.NewString()
	}
	if r.Status == "" {
		r.Status = office.ResultPending
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = now
	}
	body := map[string]any{"id": r.ID, "office_id": r.OfficeID, "invocation_id": optional(r.InvocationID),
		"from_agent_id": r.FromAgentID, "to_agent_id": r.ToAgentID, "result_type": r.ResultType,
		"content_type": r.ContentType, "content": r.Content, "status": r.Status, "delivered_at": r.DeliveredAt,
		"created_at": r.CreatedAt, "updated_at": r.UpdatedAt}
	var rows []office.Result
	if err := s.exec(ctx, op, s.from("agent_results").Insert(body, false, "", "representation", ""), preferRepresentation, &rows); err != nil {
		return office.Result{}, err
	}
	return one(op, rows)
}

// GetResult implements office.Store; see its contract in office/store.go.
func (s *Store) GetResult(ctx context.Context, id string) (office.Result, error) {
	var r office.Result
	if err := s.getOne(ctx, "get result", "agent_results", id, &r); err != nil {
		return office.Result{}, err
	}
	return r, nil
}

// ListResults implements office.Store; see its contract in office/store.go.
func (s *Store) ListResults(ctx context.Context, f office.ResultFilter) ([]office.Result, error) {
	fb := s.from("agent_results").Select("*", "", false)
	fb = eqIf(fb, "office_id", f.OfficeID)
	fb = eqIf(fb, "to_agent_id", f.ToAgentID)
	fb = eqIf(fb, "invocation_id", f.InvocationID)
	fb = inIf(fb, "status", f.Status)
	fb = limitIf(oldestFirst(fb), f.Limit)
	var rows []office.Result
	if err := s.exec(ctx, "list results", fb, "", &rows); err != nil {
		return nil, err
	}
	return rows, nil
}

// MarkResultDelivered implements office.Store; see its contract in office/store.go.
func (s *Store) MarkResultDelivered(ctx context.Context, id string) (bool, error) {
	if !validID(id) {
		return false, nil
	}
	now := s.stamp()
	rows, err := patch[office.Result](ctx, s, "mark result delivered", "agent_results",
		map[string]any{"status": office.ResultDelivered, "delivered_at": now, "updated_at": now},
		func(f *postgrest.FilterBuilder) *postgrest.FilterBuilder {
			return f.Eq("id", id).Eq("status", office.ResultPending)
		})
	return len(rows) == 1, err
}

// ---- dependency requests ----

// dependencyRow is dependency_requests as PostgREST sends it: value is a
// bytea column, which PostgREST writes and reads as PostgreSQL's hex text
// form ("\x4142..."); see encodeBytea.
type dependencyRow struct {
	office.DependencyRequest
	Value *string `json:"value"`
}

func (r dependencyRow) dependency() (office.DependencyRequest, error) {
	d := r.DependencyRequest
	if r.Value != nil {
		v, err := decodeBytea(*r.Value)
		if err != nil {
			return d, err
		}
		d.Value = v
	}
	return d, nil
}

func dependencies(op string, rows []dependencyRow) ([]office.DependencyRequest, error) {
	out := make([]office.DependencyRequest, 0, len(rows))
	for _, r := range rows {
		d, err := r.dependency()
		if err != nil {
			return nil, &office.Error{Code: office.EINTERNAL, Op: op, Message: "decode value", Err: err}
		}
		out = append(out, d)
	}
	return out, nil
}

// CreateDependency implements office.Store; see its contract in office/store.go.
func (s *Store) CreateDependency(ctx context.Context, d office.DependencyRequest) (office.DependencyRequest, error) {
	const op = "create dependency"
	now := s.stamp()
	if d.ID == "" {
		d.ID = uuid.NewString()
	}
	if d.Status == "" {
		d.Status = office.DependencyPending
	}
	if d.CreatedAt.IsZero() {
		d.CreatedAt = now
	}
	if d.UpdatedAt.IsZero() {
		d.UpdatedAt = now
	}
	body := map[string]any{"id": d.ID, "office_id": d.OfficeID, "agent_id": d.AgentID, "session_id": optional(d.SessionID),
		"type": d.Type, "name": d.Name, "description": optional(d.Description), "required": d.Required,
		"default": optional(d.Default), "status": d.Status, "value": encodeBytea(d.Value),
		"rejection_reason": optional(d.RejectionReason), "expires_at": d.ExpiresAt, "provided_at": d.ProvidedAt,
		"delivered_at": d.DeliveredAt, "created_at": d.CreatedAt, "updated_at": d.UpdatedAt}
	var rows []dependencyRow
	if err := s.exec(ctx, op, s.from("dependency_requests").Insert(body, false, "", "representation", ""), preferRepresentation, &rows); err != nil {
		return office.DependencyRequest{}, err
	}
	out, err := dependencies(op, rows)
	if err != nil {
		return office.DependencyRequest{}, err
	}
	return one(op, out)
}

// GetDependency implements office.Store; see its contract in office/store.go.
func (s *Store) GetDependency(ctx context.Context, id string) (office.DependencyRequest, error) {
	const op = "get dependency"
	var r dependencyRow
	if err := s.getOne(ctx, op, "dependency_requests", id, &r); err != nil {
		return office.DependencyRequest{}, err
	}
	out, err := dependencies(op, []dependencyRow{r})
	if err != nil {
		return office.DependencyRequest{}, err
	}
	return out[0], nil
}

// ListDependencies implements office.Store; see its contract in office/store.go.
func (s *Store) ListDependencies(ctx context.Context, f office.DependencyFilter) ([]office.DependencyRequest, error) {
	const op = "list dependencies"
	fb := s.from("dependency_requests").Select("*", "", false)
	fb = eqIf(fb, "office_id", f.OfficeID)
	fb = eqIf(fb, "agent_id", f.AgentID)
	fb = inIf(fb, "status", f.Status)
	fb = limitIf(oldestFirst(fb), f.Limit)
	var rows []dependencyRow
	if err := s.exec(ctx, op, fb, "", &rows); err != nil {
		return nil, err
	}
	return dependencies(op, rows)
}

func (s *Store) transitionDependency(ctx context.Context, op, id string, body map[string]any) (office.DependencyRequest, bool, error) {
	if !validID(id) {
		return office.DependencyRequest{}, false, nil
	}
	rows, err := patch[dependencyRow](ctx, s, op, "dependency_requests", body,
		func(f *postgrest.FilterBuilder) *postgrest.FilterBuilder {
			return f.Eq("id", id).Eq("status", office.DependencyPending)
		})
	if err != nil || len(rows) == 0 {
		return office.DependencyRequest{}, false, err
	}
	out, err := dependencies(op, rows)
	if err != nil {
		return office.DependencyRequest{}, false, err
	}
	return out[0], true, nil
}

// ProvideDependency implements office.Store; see its contract in office/store.go.
func (s *Store) ProvideDependency(ctx context.Context, id string, value []byte) (office.DependencyRequest, bool, error) {
	now := s.stamp()
	return s.transitionDependency(ctx, "provide dependency", id,
		map[string]any{"status": office.DependencyProvided, "value": encodeBytea(value), "provided_at": now, "updated_at": now})
}

// RejectDependency implements office.Store; see its contract in office/store.go.
func (s *Store) RejectDependency(ctx context.Context, id, reason string) (office.DependencyRequest, bool, error) {
	return s.transitionDependency(ctx, "reject dependency", id,
		map[string]any{"status": office.DependencyRejected, "rejection_reason": reason, "updated_at": s.stamp()})
}

// ExpireDependencies implements office.Store; see its contract in office/store.go.
func (s *Store) ExpireDependencies(ctx context.Context, now time.Time) ([]office.DependencyRequest, error) {
	const op = "expire dependencies"
	rows, err := patch[dependencyRow](ctx, s, op, "dependency_requests",
		map[string]any{"status": office.DependencyExpired, "updated_at": s.stamp()},
		func(f *postgrest.FilterBuilder) *postgrest.FilterBuilder {
			return f.Eq("status", office.DependencyPending).Lte("expires_at", pgTime(now))
		})
	if err != nil {
		return nil, err
	}
	return dependencies(op, rows)
}

var deliverableDependency = []string{office.DependencyProvided, office.DependencyRejected, office.DependencyExpired}

// MarkDependencyDelivered implements office.Store; see its contract in office/store.go.
func (s *Store) MarkDependencyDelivered(ctx context.Context, id string) (bool, error) {
	if !validID(id) {
		return false, nil
	}
	now := s.stamp()
	rows, err := patch[dependencyRow](ctx, s, "mark dependency delivered", "dependency_requests",
		map[string]any{"delivered_at": now, "updated_at": now},
		func(f *postgrest.FilterBuilder) *postgrest.FilterBuilder {
			return f.Eq("id", id).Is("delivered_at", "null").In("status", deliverableDependency)
		})
	return len(rows) == 1, err
}

// ListUndeliveredDependencies implements office.Store; see its contract in office/store.go.
func (s *Store) ListUndeliveredDependencies(ctx context.Context, d office.Due) ([]office.DependencyRequest, error) {
	const op = "list undelivered dependencies"
	if d.AgentID != "" && !validID(d.AgentID) {
		return []office.DependencyRequest{}, nil
	}
	fb := s.from("dependency_requests").Select("*", "", false).In("status", deliverableDependency).Is("delivered_at", "null")
	fb = eqIf(inIf(fb, "office_id", d.OfficeIDs), "agent_id", d.AgentID)
	var rows []dependencyRow
	if err := s.exec(ctx, op, oldestFirst(fb), "", &rows); err != nil {
		return nil, err
	}
	return dependencies(op, rows)
}

// ---- events ----

type eventRow struct {
	ID        int64           `json:"id"`
	OfficeID  string          `json:"office_id"`
	AgentID   *string         `json:"agent_id"`
	SessionID *string         `json:"session_id"`
	Kind      string          `json:"kind"`
	Payload   json.RawMessage `json:"payload"`
	Raw       *string         `json:"raw"`
	DedupeKey *string         `json:"dedupe_key"`
	CreatedAt time.Time       `json:"created_at"`
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (r eventRow) event() office.Event {
	e := office.Event{ID: r.ID, OfficeID: r.OfficeID, AgentID: deref(r.AgentID), SessionID: deref(r.SessionID), Kind: r.Kind,
		Raw: deref(r.Raw), DedupeKey: deref(r.DedupeKey), CreatedAt: r.CreatedAt}
	if len(r.Payload) > 0 && string(r.Payload) != "null" {
		e.Payload = r.Payload
	}
	return e
}

// AppendEvent inserts e. With a DedupeKey it asks PostgREST for
// on_conflict=office_id,dedupe_key and Prefer resolution=ignore-duplicates
// (INSERT ... ON CONFLICT DO NOTHING): PostgREST then answers 201 with an
// empty array for an ignored row, and the existing event is read back.
func (s *Store) AppendEvent(ctx context.Context, e office.Event) (office.Event, bool, error) {
	const op = "append event"
	if e.OfficeID == "" || e.Kind == "" {
		return office.Event{}, false, &office.Error{Code: office.EINVALID, Op: op, Message: "event needs an office and a kind"}
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = s.stamp()
	}
	body := map[string]any{"office_id": e.OfficeID, "agent_id": optional(e.AgentID), "session_id": optional(e.SessionID),
		"kind": e.Kind, "raw": optional(e.Raw), "dedupe_key": optional(e.DedupeKey), "created_at": e.CreatedAt}
	if len(e.Payload) > 0 {
		if !json.Valid(e.Payload) {
			return office.Event{}, false, &office.Error{Code: office.EINVALID, Op: op, Message: "payload is not JSON"}
		}
		body["payload"] = e.Payload
	}
	var rows []eventRow
	if e.DedupeKey != "" && !s.noOnConflict.Load() {
		fb := s.from("office_events").Insert(body, true, "office_id,dedupe_key", "representation", "")
		err := s.exec(ctx, op, fb, "resolution=ignore-duplicates,"+preferRepresentation, &rows)
		var api *APIError
		if errors.As(err, &api) && api.Code == "42P10" {
			s.noOnConflict.Store(true) // no usable unique constraint: fall through to a plain insert
		} else if err != nil {
			return office.Event{}, false, err
		} else if len(rows) == 0 {
			ev, err := s.eventByKey(ctx, op, e.OfficeID, e.DedupeKey)
			return ev, false, err
		} else {
			return rows[0].event(), true, nil
		}
	}
	err := s.exec(ctx, op, s.from("office_events").Insert(body, false, "", "representation", ""), preferRepresentation, &rows)
	if err != nil {
		if e.DedupeKey != "" && office.IsConflict(err) {
			ev, gerr := s.eventByKey(ctx, op, e.OfficeID, e.DedupeKey)
			return ev, false, gerr
		}
		return office.Event{}, false, err
	}
	r, err := one(op, rows)
	if err != nil {
		return office.Event{}, false, err
	}
	return r.event(), true, nil
}

func (s *Store) eventByKey(ctx context.Context, op, officeID, key string) (office.Event, error) {
	var r eventRow
	if err := s.exec(ctx, op, s.from("office_events").Select("*", "", false).Eq("office_id", officeID).Eq("dedupe_key", key).Single(), "", &r); err != nil {
		return office.Event{}, err
	}
	return r.event(), nil
}

// ListEvents implements office.Store; see its contract in office/store.go.
func (s *Store) ListEvents(ctx context.Context, f office.EventFilter) ([]office.Event, error) {
	fb := s.from("office_events").Select("*", "", false)
	fb = eqIf(fb, "office_id", f.OfficeID)
	fb = eqIf(fb, "agent_id", f.AgentID)
	if f.AfterID > 0 {
		fb = fb.Gt("id", fmt.Sprint(f.AfterID))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	fb = fb.Order("id", &postgrest.OrderOpts{Ascending: true}).Limit(limit, "")
	var rows []eventRow
	if err := s.exec(ctx, "list events", fb, "", &rows); err != nil {
		return nil, err
	}
	out := make([]office.Event, len(rows))
	for i, r := range rows {
		out[i] = r.event()
	}
	return out, nil
}
