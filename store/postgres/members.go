package postgres

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/office-server/office-server/office"
)

var _ office.Members = (*Store)(nil)

// Members are managed through the server's functions of
// migrations/20261126050000_office_members_admin.sql, which resolve emails
// through auth.users and keep invitations, as the Supabase store does over
// PostgREST: one implementation, in the database.

// ListMembers implements office.Members.
func (s *Store) ListMembers(ctx context.Context, officeID string) ([]office.Member, error) {
	const op = "list members"
	if !isUUID(officeID) {
		return nil, notFound(op, "office", officeID)
	}
	rows, err := s.pool.Query(ctx, `select coalesce(user_id::text, ''), coalesce(email, ''), role, status, created_at
		from office_admin_list_members($1)`, officeID)
	if err != nil {
		return nil, memberErr(op, err)
	}
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (office.Member, error) {
		m := office.Member{OfficeID: officeID}
		err := r.Scan(&m.UserID, &m.Email, &m.Role, &m.Status, &m.CreatedAt)
		return m, err
	})
	if err != nil {
		return nil, memberErr(op, err)
	}
	return ms, nil
}

// AddMember implements office.Members.
func (s *Store) AddMember(ctx context.Context, m office.Member) (office.Member, error) {
	const op = "add member"
	if !isUUID(m.OfficeID) {
		return office.Member{}, notFound(op, "office", m.OfficeID)
	}
	if m.UserID != "" && !isUUID(m.UserID) {
		return office.Member{}, invalid(op, "user id %q is not a UUID", m.UserID)
	}
	if m.Role == "" {
		m.Role = office.RoleMember
	}
	var out []byte
	err := s.pool.QueryRow(ctx, `select office_admin_add_member($1, $2, $3, $4)::text`,
		m.OfficeID, null(m.UserID), null(m.Email), m.Role).Scan(&out)
	if err != nil {
		return office.Member{}, memberErr(op, err)
	}
	return memberResult(op, m.OfficeID, out)
}

// RemoveMember implements office.Members.
func (s *Store) RemoveMember(ctx context.Context, officeID, userID, email string) (office.Member, error) {
	const op = "remove member"
	if !isUUID(officeID) {
		return office.Member{}, notFound(op, "office", officeID)
	}
	if userID != "" && !isUUID(userID) {
		return office.Member{}, notFound(op, "member", userID)
	}
	var out []byte
	err := s.pool.QueryRow(ctx, `select office_admin_remove_member($1, $2, $3)::text`,
		officeID, null(userID), null(email)).Scan(&out)
	if err != nil {
		return office.Member{}, memberErr(op, err)
	}
	return memberResult(op, officeID, out)
}

// MemberRole implements office.Members.
func (s *Store) MemberRole(ctx context.Context, officeID, userID string) (string, error) {
	const op = "member role"
	if !isUUID(officeID) || !isUUID(userID) {
		return "", notFound(op, "member", userID)
	}
	var role string
	err := s.pool.QueryRow(ctx, `select role from office_members where office_id = $1 and user_id = $2`, officeID, userID).Scan(&role)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", notFound(op, "member", userID)
	}
	if err != nil {
		return "", wrap(op, err)
	}
	return role, nil
}

// memberResult reads the functions' {"status","user_id","email","role"}.
func memberResult(op, officeID string, out []byte) (office.Member, error) {
	var r struct {
		Status string `json:"status"`
		UserID string `json:"user_id"`
		Email  string `json:"email"`
		Role   string `json:"role"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return office.Member{}, &office.Error{Code: office.EINTERNAL, Op: op, Message: "decode result", Err: err}
	}
	m := office.Member{OfficeID: officeID, UserID: r.UserID, Email: r.Email, Role: r.Role, Status: office.MemberJoined}
	if r.Status == "invited" || r.Status == "uninvited" {
		m.Status = office.MemberInvited
	}
	return m, nil
}

// memberErr maps the functions' errors (PostgREST's PTnnn SQLSTATEs and
// 22023) onto office codes, keeping their messages, which say what to fix.
func memberErr(op string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "PT404":
			return &office.Error{Code: office.ENOTFOUND, Op: op, Message: pe.Message, Err: err}
		case "PT409":
			return &office.Error{Code: office.ECONFLICT, Op: op, Message: pe.Message, Err: err}
		}
	}
	return wrap(op, err)
}
