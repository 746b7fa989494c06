package postgres

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/office"
)

const questionCols = `id::text, office_id::text, agent_id::text, coalesce(session_id, ''), question_type,
	coalesce(category, ''), question, options, coalesce(default_answer, ''), coalesce(context, ''), required, status,
	coalesce(response, ''), coalesce(answered_by, ''), answered_at, delivered_at, expires_at, created_at, updated_at`

func scanQuestion(r pgx.Row) (office.Question, error) {
	var q office.Question
	err := r.Scan(&q.ID, &q.OfficeID, &q.AgentID, &q.SessionID, &q.QuestionType, &q.Category, &q.Question, &q.Options,
		&q.DefaultAnswer, &q.Context, &q.Required, &q.Status, &q.Response, &q.AnsweredBy, &q.AnsweredAt, &q.DeliveredAt,
		&q.ExpiresAt, &q.CreatedAt, &q.UpdatedAt)
	return q, err
}

// defaultQuestionTTL is how long a question waits when neither it nor its
// office says (5 minutes, as engine.Config.QuestionTTL; docs/notes/office.md).
const defaultQuestionTTL = 5 * time.Minute

// CreateQuestion stores a question. Empty QuestionType is text, empty
// Status pending; a zero ExpiresAt is now plus the office's QuestionTTL
// (5 minutes when the office has none).
func (s *Store) CreateQuestion(ctx context.Context, q office.Question) (office.Question, error) {
	const op = "create question"
	id, err := newID(op, q.ID)
	if err != nil {
		return office.Question{}, err
	}
	officeID, err := ref(op, "office_id", q.OfficeID, false)
	if err != nil {
		return office.Question{}, err
	}
	agentID, err := ref(op, "agent_id", q.AgentID, false)
	if err != nil {
		return office.Question{}, err
	}
	if q.Question == "" {
		return office.Question{}, invalid(op, "question text is required")
	}
	// JSON text, not the slice: under the simple protocol (PgBouncer-style
	// poolers) pgx would send a slice as an array literal.
	options, err := json.Marshal(strs(q.Options))
	if err != nil {
		return office.Question{}, invalid(op, "options: %v", err)
	}
	v, _, err := one(ctx, s, op, `insert into user_questions (id, office_id, agent_id, session_id, question_type, category,
			question, options, default_answer, context, required, status, response, answered_by, answered_at, delivered_at,
			expires_at, created_at, updated_at)
		values ($1, $2, $3, $4, coalesce($5, 'text'), $6, $7, $8::jsonb, $9, $10, $11, coalesce($12, 'pending'), $13, $14, $15, $16,
			coalesce($17, now() + coalesce((select nullif(question_ttl, interval '0') from offices where id = $2), $20::interval)),
			coalesce($18, now()), coalesce($19, now()))
		returning `+questionCols,
		[]any{id, officeID, agentID, null(q.SessionID), null(q.QuestionType), null(q.Category), q.Question, string(options),
			null(q.DefaultAnswer), null(q.Context), q.Required, null(q.Status), null(q.Response), null(q.AnsweredBy),
			q.AnsweredAt, q.DeliveredAt, ts(q.ExpiresAt), ts(q.CreatedAt), ts(q.UpdatedAt), interval(defaultQuestionTTL)},
		scanQuestion)
	return v, err
}

// GetQuestion returns the question, or ENOTFOUND.
func (s *Store) GetQuestion(ctx context.Context, id string) (office.Question, error) {
	return getByID(ctx, s, "get question", "question", questionCols, "user_questions", id, scanQuestion)
}

// ListQuestions returns the questions f selects, oldest first.
func (s *Store) ListQuestions(ctx context.Context, f office.QuestionFilter) ([]office.Question, error) {
	var w filter
	w.id("office_id", f.OfficeID)
	w.id("agent_id", f.AgentID)
	w.in("status", f.Status)
	if w.none {
		return nil, nil
	}
	return list(ctx, s, "list questions", `select `+questionCols+` from user_questions`+w.where()+
		` order by created_at, id`+limit(f.Limit), w.args, scanQuestion)
}

// AnswerQuestion moves a pending question to answered, once.
func (s *Store) AnswerQuestion(ctx context.Context, id, response, answeredBy string) (office.Question, bool, error) {
	if !isUUID(id) {
		return office.Question{}, false, nil
	}
	return one(ctx, s, "answer question", `update user_questions
		set status = 'answered', response = $2, answered_by = $3, answered_at = now()
		where id = $1 and status = 'pending'
		returning `+questionCols, []any{id, response, null(answeredBy)}, scanQuestion)
}

// MarkQuestionDelivered moves an answered question to delivered, once.
func (s *Store) MarkQuestionDelivered(ctx context.Context, id string) (bool, error) {
	if !isUUID(id) {
		return false, nil
	}
	return s.exec(ctx, "mark question delivered", `update user_questions set status = 'delivered', delivered_at = now()
		where id = $1 and status = 'answered'`, id)
}

// ExpireQuestions expires every pending question of officeIDs (all offices
// when empty) with expires_at <= now and returns those (each is returned by
// exactly one call), oldest first.
func (s *Store) ExpireQuestions(ctx context.Context, now time.Time, officeIDs []string) ([]office.Question, error) {
	offices, none := officeSet(officeIDs)
	if none {
		return []office.Question{}, nil
	}
	return list(ctx, s, "expire questions", `with x as (
			update user_questions set status = 'expired' where status = 'pending' and expires_at <= $1
				and ($2::uuid[] is null or office_id = any($2::uuid[])) returning *)
		select `+questionCols+` from x order by created_at, id`, []any{now, offices}, scanQuestion)
}

// CancelQuestion moves a pending or answered question to cancelled, once.
func (s *Store) CancelQuestion(ctx context.Context, id string) (bool, error) {
	if !isUUID(id) {
		return false, nil
	}
	return s.exec(ctx, "cancel question", `update user_questions set status = 'cancelled'
		where id = $1 and status in ('pending', 'answered')`, id)
}

// CancelPendingQuestion moves a pending question to cancelled, once; an
// answered one is left as it is.
func (s *Store) CancelPendingQuestion(ctx context.Context, id string) (bool, error) {
	if !isUUID(id) {
		return false, nil
	}
	return s.exec(ctx, "cancel pending question", `update user_questions set status = 'cancelled'
		where id = $1 and status = 'pending'`, id)
}

// ListAnsweredUndelivered returns the answered questions due as d says,
// oldest first.
func (s *Store) ListAnsweredUndelivered(ctx context.Context, d office.Due) ([]office.Question, error) {
	w := due("status = 'answered'", d)
	if w.none {
		return nil, nil
	}
	return list(ctx, s, "list answered questions", `select `+questionCols+` from user_questions`+w.where()+
		` order by created_at, id`, w.args, scanQuestion)
}

const messageCols = `id::text, office_id::text, agent_id::text, coalesce(user_id, ''), content, status, delivered_at,
	created_at, updated_at`

func scanMessage(r pgx.Row) (office.UserMessage, error) {
	var m office.UserMessage
	err := r.Scan(&m.ID, &m.OfficeID, &m.AgentID, &m.UserID, &m.Content, &m.Status, &m.DeliveredAt, &m.CreatedAt, &m.UpdatedAt)
	return m, err
}

// CreateUserMessage stores a message to an agent (status pending by default).
func (s *Store) CreateUserMessage(ctx context.Context, m office.UserMessage) (office.UserMessage, error) {
	const op = "create user message"
	id, err := newID(op, m.ID)
	if err != nil {
		return office.UserMessage{}, err
	}
	officeID, err := ref(op, "office_id", m.OfficeID, false)
	if err != nil {
		return office.UserMessage{}, err
	}
	agentID, err := ref(op, "agent_id", m.AgentID, false)
	if err != nil {
		return office.UserMessage{}, err
	}
	if m.Content == "" {
		return office.UserMessage{}, invalid(op, "content is required")
	}
	v, _, err := one(ctx, s, op, `insert into user_messages (id, office_id, agent_id, user_id, content, status, delivered_at,
			created_at, updated_at)
		values ($1, $2, $3, $4, $5, coalesce($6, 'pending'), $7, coalesce($8, now()), coalesce($9, now()))
		returning `+messageCols,
		[]any{id, officeID, agentID, null(m.UserID), m.Content, null(m.Status), m.DeliveredAt, ts(m.CreatedAt), ts(m.UpdatedAt)},
		scanMessage)
	return v, err
}

// MarkUserMessageDelivered moves a pending message to delivered, once.
func (s *Store) MarkUserMessageDelivered(ctx context.Context, id string) (bool, error) {
	if !isUUID(id) {
		return false, nil
	}
	return s.exec(ctx, "mark user message delivered", `update user_messages set status = 'delivered', delivered_at = now()
		where id = $1 and status = 'pending'`, id)
}

// ListPendingUserMessages returns the pending messages due as d says,
// oldest first.
func (s *Store) ListPendingUserMessages(ctx context.Context, d office.Due) ([]office.UserMessage, error) {
	w := due("status = 'pending'", d)
	if w.none {
		return nil, nil
	}
	return list(ctx, s, "list pending user messages", `select `+messageCols+` from user_messages`+w.where()+
		` order by created_at, id`, w.args, scanMessage)
}
