package supabase

import (
	"time"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/supabase/internal/hs256"
)

// EnvJWTSecret is the project's JWT secret (Supabase dashboard: Project
// Settings → JWT Keys → Legacy JWT Secret), with which the office server
// verifies the access tokens of members who call it directly.
const EnvJWTSecret = "SUPABASE_JWT_SECRET"

// MemberTokens verifies the access tokens Supabase Auth gives signed-in
// users, as PostgREST does: HS256 under the project's JWT secret, not
// expired, role authenticated, and a user id (sub) that is a UUID. The
// server's member endpoints (server/members.go) use it to learn who calls.
type MemberTokens struct {
	secret []byte
	now    func() time.Time
}

// NewMemberTokens returns a verifier for the project's JWT secret; nil when
// the secret is empty (the member endpoints then say it is not set).
func NewMemberTokens(secret string) *MemberTokens {
	if secret == "" {
		return nil
	}
	return &MemberTokens{secret: []byte(secret), now: time.Now}
}

// UserID returns the user id of a member's access token. EUNAUTHORIZED: the
// token is malformed, badly signed, expired, has no exp, or is the anon
// key; EFORBIDDEN: a valid token of another role (the service-role key is
// not a member).
func (v *MemberTokens) UserID(token string) (string, error) {
	claims, err := hs256.Verify(v.secret, token)
	if err != nil {
		return "", office.Errorf(office.EUNAUTHORIZED, "invalid access token: %v", err)
	}
	exp, ok, err := hs256.Exp(claims)
	switch {
	case err != nil:
		return "", office.Errorf(office.EUNAUTHORIZED, "invalid access token: %v", err)
	case !ok:
		return "", office.Errorf(office.EUNAUTHORIZED, "invalid access token: no exp claim")
	case v.now().Unix() >= exp:
		return "", office.Errorf(office.EUNAUTHORIZED, "the access token expired: sign in again")
	}
	role, _ := claims["role"].(string)
	switch role {
	case "authenticated":
	case "anon", "":
		return "", office.Errorf(office.EUNAUTHORIZED, "sign in first: the anon key is not a member's access token")
	default:
		return "", office.Errorf(office.EFORBIDDEN, "a token of role %q is not a member's access token", role)
	}
	sub, _ := claims["sub"].(string)
	if _, err := uuid.Parse(sub); err != nil {
		return "", office.Errorf(office.EUNAUTHORIZED, "invalid access token: sub %q is not a user id", sub)
	}
	return sub, nil
}
