package supabase

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/office-server/office-server/office"
)

var _ office.Members = (*Store)(nil)

// ---- members ----

// Members are managed through the server's functions of
// migrations/20261126050000_office_members_admin.sql (execute granted to
// service_role only): auth.users, where emails are, is not exposed by
// PostgREST.

// ListMembers implements office.Members.
func (s *Store) ListMembers(ctx context.Context, officeID string) ([]office.Member, error) {
	const op = "list members"
	if !validID(officeID) {
		return nil, &office.Error{Code: office.ENOTFOUND, Op: op, Message: "no office " + officeID}
	}
	var rows []struct {
		UserID    *string   `json:"user_id"`
		Email     *string   `json:"email"`
		Role      string    `json:"role"`
		Status    string    `json:"status"`
		CreatedAt time.Time `json:"created_at"`
	}
	if err := s.rpc(ctx, op, "office_admin_list_members", map[string]any{"office_id": officeID}, &rows); err != nil {
		return nil, err
	}
	out := make([]office.Member, 0, len(rows))
	for _, r := range rows {
		m := office.Member{OfficeID: officeID, Role: r.Role, Status: r.Status, CreatedAt: r.CreatedAt}
		if r.UserID != nil {
			m.UserID = *r.UserID
		}
		if r.Email != nil {
			m.Email = *r.Email
		}
		out = append(out, m)
	}
	return out, nil
}

// AddMember implements office.Members.
func (s *Store) AddMember(ctx context.Context, m office.Member) (office.Member, error) {
	const op = "add member"
	if !validID(m.OfficeID) {
		return office.Member{}, &office.Error{Code: office.ENOTFOUND, Op: op, Message: "no office " + m.OfficeID}
	}
	if m.UserID != "" && !validID(m.UserID) {
		return office.Member{}, office.Errorf(office.EINVALID, "user id %q is not a UUID", m.UserID)
	}
	if m.Role == "" {
		m.Role = office.RoleMember
	}
	var r memberChange
	args := map[string]any{"office_id": m.OfficeID, "user_id": optional(m.UserID), "email": optional(m.Email), "role": m.Role}
	if err := s.rpc(ctx, op, "office_admin_add_member", args, &r); err != nil {
		return office.Member{}, err
	}
	return r.member(m.OfficeID), nil
}

// RemoveMember implements office.Members.
func (s *Store) RemoveMember(ctx context.Context, officeID, userID, email string) (office.Member, error) {
	const op = "remove member"
	if !validID(officeID) || userID != "" && !validID(userID) {
		return office.Member{}, &office.Error{Code: office.ENOTFOUND, Op: op, Message: "no such member"}
	}
	var r memberChange
	args := map[string]any{"office_id": officeID, "user_id": optional(userID), "email": optional(email)}
	if err := s.rpc(ctx, op, "office_admin_remove_member", args, &r); err != nil {
		return office.Member{}, err
	}
	return r.member(officeID), nil
}

// MemberRole implements office.Members.
func (s *Store) MemberRole(ctx context.Context, officeID, userID string) (string, error) {
	const op = "member role"
	notFound := &office.Error{Code: office.ENOTFOUND, Op: op, Message: "no member " + userID}
	if !validID(officeID) || !validID(userID) {
		return "", notFound
	}
	var rows []struct {
		Role string `json:"role"`
	}
	fb := s.from("office_members").Select("role", "", false).Eq("office_id", officeID).Eq("user_id", userID)
	if err := s.exec(ctx, op, fb, "", &rows); err != nil {
		return "", err
	}
	if len(rows) == 0 {
		return "", notFound
	}
	return rows[0].Role, nil
}

// memberChange is the functions' {"status","user_id","email","role"}.
type memberChange struct {
	Status string `json:"status"`
	UserID string `json:"user_id"`
	Email  string `json:"email"`
	Role   string `json:"role"`
}

func (r memberChange) member(officeID string) office.Member {
	m := office.Member{OfficeID: officeID, UserID: r.UserID, Email: r.Email, Role: r.Role, Status: office.MemberJoined}
	if r.Status == "invited" || r.Status == "uninvited" {
		m.Status = office.MemberInvited
	}
	return m
}

// rpc calls a database function (POST /rest/v1/rpc/<fn>) with the
// service-role key and decodes its answer into out. An error answer keeps
// PostgREST's message, which says what to fix.
func (s *Store) rpc(ctx context.Context, op, fn string, args map[string]any, out any) error {
	body, err := json.Marshal(args)
	if err != nil {
		return &office.Error{Code: office.EINTERNAL, Op: op, Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.restURL+"/rpc/"+fn, bytes.NewReader(body))
	if err != nil {
		return &office.Error{Code: office.EINTERNAL, Op: op, Err: err}
	}
	setAPIHeaders(req.Header, s.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := (&http.Client{Transport: s.conn}).Do(req)
	if err != nil {
		return wrap(op, nil, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return wrap(op, nil, err)
	}
	if resp.StatusCode >= 400 {
		api := parseAPIError(resp.StatusCode, b)
		return &office.Error{Code: officeCode(api), Op: op, Message: api.Message, Err: api}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return &office.Error{Code: office.EINTERNAL, Op: op, Message: "decode response", Err: err}
	}
	return nil
}
