package office

import (
	"context"
	"time"
)

// Member roles (office_members.role). An owner manages the office's members
// (docs/frontend.md); admin has no extra rights yet.
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// Member statuses in a member list: a member, or an invited email that has
// no account yet (it joins with accept_office_invitations once signed up).
const (
	MemberJoined  = "member"
	MemberInvited = "invited"
)

// Member is a person of an office: a Supabase Auth user in office_members,
// or an invitation (UserID empty) for an email without an account yet.
type Member struct {
	OfficeID  string    `json:"office_id"`
	UserID    string    `json:"user_id,omitempty"`
	Email     string    `json:"email,omitempty"`
	Role      string    `json:"role"`
	Status    string    `json:"status"` // MemberJoined or MemberInvited
	CreatedAt time.Time `json:"created_at,omitzero"`
}

// Members is the offices' members, as the admin API manages them. Only the
// stores with Supabase users have them (store/postgres, supabase); SQLite
// has no web frontend and so no members. Errors: ENOTFOUND no such office,
// user or member; ECONFLICT already a member; EINVALID a malformed email,
// user id or role.
type Members interface {
	// ListMembers returns the office's members, then its invitations.
	ListMembers(ctx context.Context, officeID string) ([]Member, error)
	// AddMember adds m.UserID, or the user whose email is m.Email
	// (case-insensitive), with m.Role (RoleMember when empty). An email no
	// user has yet is recorded as an invitation (Status MemberInvited).
	AddMember(ctx context.Context, m Member) (Member, error)
	// RemoveMember removes the member with userID, or else the member or
	// invitation with email.
	RemoveMember(ctx context.Context, officeID, userID, email string) (Member, error)
	// MemberRole returns userID's role in the office, or ENOTFOUND when
	// they are not a member.
	MemberRole(ctx context.Context, officeID, userID string) (string, error)
}
