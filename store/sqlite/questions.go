package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
)

const questionCols = `id, office_id, agent_id, coalesce(session_id, ''), question_type, coalesce(category, ''), question,
	options, coalesce(default_answer, ''), coalesce(context, ''), required, status, coalesce(response, ''),
	coalesce(answered_by, ''), answered_at, delivered_at, expires_at, created_at, updated_at`

func scanQuestion(r scanner) (office.Question, error) {
	var q office.Question
	err := r.Scan(&q.ID, &q.OfficeID, &q.AgentID, &q.SessionID, &q.QuestionType, &q.Category, &q.Question,
		jsonVal{&q.Options}, &q.DefaultAnswer, &q.Context, &q.Required, &q.Status, &q.Response,
		&q.AnsweredBy, tsPtr{&q.AnsweredAt}, tsPtr{&q.DeliveredAt}, tsVal{&q.ExpiresAt}, tsVal{&q.CreatedAt}, tsVal{&q.UpdatedAt})
	return q, err
}

// CreateQuestion stores q (pending unless q.Status says otherwise).
func (s *Store) CreateQuestion(ctx context.Context, q office.Question) (office.Question, error) {
	const op = "create question"
	if q.ID == "" {
		q.ID = uuid.NewString()
	}
	if q.Status == "" {
		q.Status = office.QuestionPending
	}
	if q.QuestionType == "" {
		q.QuestionType = office.QuestionText
	}
	if q.ExpiresAt.IsZero() {
		return office.Question{}, office.Errorf(office.EINVALID, "question has no expiry time")
	}
	opts, err := jsonText(q.Options, "[]")
	if err != nil {
		return office.Question{}, s.fail(op, err)
	}
	_, now := nowTS()
	created := now
	if !q.CreatedAt.IsZero() {
		created = ts(q.CreatedAt)
	}
	row := s.ws.queryRow(ctx, `insert into user_questions (id, office_id, agent_id, session_id, question_type, category,
			question, options, default_answer, context, required, status, response, answered_by, answered_at, delivered_at,
			expires_at, created_at, updated_at)
		values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		returning `+questionCols,
		q.ID, q.OfficeID, q.AgentID, nullStr(q.SessionID), q.QuestionType, nullStr(q.Category), q.Question, opts,
		nullStr(q.DefaultAnswer), nullStr(q.Context), q.Required, q.Status, nullStr(q.Response), nullStr(q.AnsweredBy),
		nullTS(q.AnsweredAt), nullTS(q.DeliveredAt), ts(q.ExpiresAt), created, now)
	got, err := scanQuestion(row)
	if err != nil {
		return office.Question{}, s.fail(op, err)
	}
	switch got.Status {
	case office.QuestionAnswered:
		s.feed.publish(office.Change{Table: office.TableQuestions, Op: office.OpInsert, ID: got.ID, OfficeID: got.OfficeID, AgentID: got.AgentID, Status: got.Status})
	case office.QuestionPending:
		// Its deadline, for the engine's sweeper (office.Change.ExpiresAt).
		at := got.ExpiresAt
		s.feed.publish(office.Change{Table: office.TableQuestions, Op: office.OpInsert, ID: got.ID, OfficeID: got.OfficeID, AgentID: got.AgentID, Status: got.Status, ExpiresAt: &at})
	}
	return got, nil
}

// GetQuestion returns the question with id, or ENOTFOUND.
func (s *Store) GetQuestion(ctx context.Context, id string) (office.Question, error) {
	q, err := scanQuestion(s.rs.queryRow(ctx, `select `+questionCols+` from user_questions where id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return q, notFound("get question", "question", id)
	}
	return q, s.fail("get question", err)
}

// ListQuestions returns the questions f selects, oldest first.
func (s *Store) ListQuestions(ctx context.Context, f office.QuestionFilter) ([]office.Question, error) {
	var w where
	w.eq(officeCol(f.AgentID != ""), f.OfficeID)
	w.eq("agent_id", f.AgentID)
	w.in("status", f.Status)
	rows, err := s.rs.query(ctx, `select `+questionCols+` from user_questions`+w.String()+` order by created_at, rowid`+limit(f.Limit), w.args...)
	out, err := collect(rows, err, scanQuestion)
	return out, s.fail("list questions", err)
}

// AnswerQuestion moves a pending question to answered; ok=false when it is
// not pending (or does not exist).
func (s *Store) AnswerQuestion(ctx context.Context, id, response, answeredBy string) (office.Question, bool, error) {
	_, now := nowTS()
	q, err := scanQuestion(s.ws.queryRow(ctx, `update user_questions
		set status = 'answered', response = ?, answered_by = ?, answered_at = ?, updated_at = ?
		where id = ? and status = 'pending' returning `+questionCols,
		response, nullStr(answeredBy), now, now, id))
	if errors.Is(err, sql.ErrNoRows) {
		return office.Question{}, false, nil
	}
	if err != nil {
		return office.Question{}, false, s.fail("answer question", err)
	}
	s.feed.publish(office.Change{Table: office.TableQuestions, Op: office.OpUpdate, ID: q.ID, OfficeID: q.OfficeID, AgentID: q.AgentID, Status: q.Status})
	return q, true, nil
}

// transition runs a conditional update and reports whether it changed a row.
func (s *Store) transition(ctx context.Context, op, query string, args ...any) (bool, error) {
	res, err := s.ws.exec(ctx, query, args...)
	if err != nil {
		return false, s.fail(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, s.fail(op, err)
	}
	return n == 1, nil
}

// MarkQuestionDelivered moves an answered question to delivered.
func (s *Store) MarkQuestionDelivered(ctx context.Context, id string) (bool, error) {
	_, now := nowTS()
	return s.transition(ctx, "mark question delivered",
		`update user_questions set status = 'delivered', delivered_at = ?, updated_at = ? where id = ? and status = 'answered'`,
		now, now, id)
}

// ExpireQuestions expires every pending question of officeIDs (all offices
// when empty) due at now and returns exactly those rows.
func (s *Store) ExpireQuestions(ctx context.Context, at time.Time, officeIDs []string) ([]office.Question, error) {
	_, now := nowTS()
	w := due("status = 'pending' and expires_at <= ?", office.Due{OfficeIDs: officeIDs})
	rows, err := s.ws.query(ctx, `update user_questions set status = 'expired', updated_at = ?`+w.String()+` returning `+questionCols,
		append([]any{now, ts(at)}, w.args...)...)
	out, err := collect(rows, err, scanQuestion)
	return out, s.fail("expire questions", err)
}

// CancelQuestion moves a pending or answered question to cancelled.
func (s *Store) CancelQuestion(ctx context.Context, id string) (bool, error) {
	_, now := nowTS()
	return s.transition(ctx, "cancel question",
		`update user_questions set status = 'cancelled', updated_at = ? where id = ? and status in ('pending', 'answered')`,
		now, id)
}

// CancelPendingQuestion moves a pending question to cancelled; an answered
// one is left as it is.
func (s *Store) CancelPendingQuestion(ctx context.Context, id string) (bool, error) {
	_, now := nowTS()
	return s.transition(ctx, "cancel pending question",
		`update user_questions set status = 'cancelled', updated_at = ? where id = ? and status = 'pending'`,
		now, id)
}

// ListAnsweredUndelivered returns answered questions due as d says, oldest
// first.
func (s *Store) ListAnsweredUndelivered(ctx context.Context, d office.Due) ([]office.Question, error) {
	q, args := answeredQuery(d)
	rows, err := s.rs.query(ctx, q, args...)
	out, err := collect(rows, err, scanQuestion)
	return out, s.fail("list answered questions", err)
}

func answeredQuery(d office.Due) (string, []any) {
	w := due("status = 'answered'", d)
	return `select ` + questionCols + ` from user_questions` + w.String() + ` order by created_at, rowid`, w.args
}

const messageCols = `id, office_id, agent_id, coalesce(user_id, ''), content, status, delivered_at, created_at, updated_at`

func scanMessage(r scanner) (office.UserMessage, error) {
	var m office.UserMessage
	err := r.Scan(&m.ID, &m.OfficeID, &m.AgentID, &m.UserID, &m.Content, &m.Status, tsPtr{&m.DeliveredAt}, tsVal{&m.CreatedAt}, tsVal{&m.UpdatedAt})
	return m, err
}

// CreateUserMessage stores m (pending unless m.Status says otherwise).
func (s *Store) CreateUserMessage(ctx context.Context, m office.UserMessage) (office.UserMessage, error) {
	if m.ID == "" {
		m.ID = uuid.NewString()
	}
	if m.Status == "" {
		m.Status = office.MessagePending
	}
	_, now := nowTS()
	created := now
	if !m.CreatedAt.IsZero() {
		created = ts(m.CreatedAt)
	}
	got, err := scanMessage(s.ws.queryRow(ctx, `insert into user_messages (id, office_id, agent_id, user_id, content, status, delivered_at, created_at, updated_at)
		values (?, ?, ?, ?, ?, ?, ?, ?, ?) returning `+messageCols,
		m.ID, m.OfficeID, m.AgentID, nullStr(m.UserID), m.Content, m.Status, nullTS(m.DeliveredAt), created, now))
	if err != nil {
		return office.UserMessage{}, s.fail("create user message", err)
	}
	if got.Status == office.MessagePending {
		s.feed.publish(office.Change{Table: office.TableMessages, Op: office.OpInsert, ID: got.ID, OfficeID: got.OfficeID, AgentID: got.AgentID, Status: got.Status})
	}
	return got, nil
}

// MarkUserMessageDelivered moves a pending message to delivered.
func (s *Store) MarkUserMessageDelivered(ctx context.Context, id string) (bool, error) {
	_, now := nowTS()
	return s.transition(ctx, "mark user message delivered",
		`update user_messages set status = 'delivered', delivered_at = ?, updated_at = ? where id = ? and status = 'pending'`,
		now, now, id)
}

// ListPendingUserMessages returns pending messages due as d says, oldest
// first.
func (s *Store) ListPendingUserMessages(ctx context.Context, d office.Due) ([]office.UserMessage, error) {
	w := due("status = 'pending'", d)
	rows, err := s.rs.query(ctx, `select `+messageCols+` from user_messages`+w.String()+` order by created_at, rowid`, w.args...)
	out, err := collect(rows, err, scanMessage)
	return out, s.fail("list pending user messages", err)
}
