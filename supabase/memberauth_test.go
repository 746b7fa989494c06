package supabase

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/supabase/internal/hs256"
)

// TestMemberTokens: a member's access token is accepted as PostgREST would
// accept it, and every other token is refused with the code the member
// endpoints answer.
func TestMemberTokens(t *testing.T) {
	secret := "a-project-jwt-secret-of-at-least-32-characters"
	v := NewMemberTokens(secret)
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	v.now = func() time.Time { return now }
	uid := uuid.NewString()
	sign := func(claims map[string]any) string { return hs256.Sign([]byte(secret), claims) }
	member := map[string]any{"sub": uid, "role": "authenticated", "aud": "authenticated", "exp": now.Unix() + 60}
	if got, err := v.UserID(sign(member)); err != nil || got != uid {
		t.Fatalf("member's token: %q, %v; want %s", got, err, uid)
	}
	with := func(k string, val any) map[string]any {
		c := map[string]any{}
		for k, v := range member {
			c[k] = v
		}
		if val == nil {
			delete(c, k)
		} else {
			c[k] = val
		}
		return c
	}
	// The member's own claims, unsigned (alg none, no signature).
	claims := strings.Split(sign(member), ".")[1]
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + claims + "."
	for name, c := range map[string]struct {
		token string
		code  string
	}{
		"expired":          {sign(with("exp", now.Unix())), office.EUNAUTHORIZED},
		"no exp":           {sign(with("exp", nil)), office.EUNAUTHORIZED},
		"exp not a number": {sign(with("exp", "soon")), office.EUNAUTHORIZED},
		"anon key":         {sign(with("role", "anon")), office.EUNAUTHORIZED},
		"no role":          {sign(with("role", nil)), office.EUNAUTHORIZED},
		"service role":     {sign(with("role", "service_role")), office.EFORBIDDEN},
		"sub not a uuid":   {sign(with("sub", "admin")), office.EUNAUTHORIZED},
		"another secret":   {hs256.Sign([]byte("another-secret-of-at-least-32-characters!"), member), office.EUNAUTHORIZED},
		"not a JWT":        {"Bearer x", office.EUNAUTHORIZED},
		"alg none":         {none, office.EUNAUTHORIZED},
	} {
		if got, err := v.UserID(c.token); office.ErrorCode(err) != c.code || got != "" {
			t.Errorf("%s: %q, %v; want %s", name, got, err, c.code)
		}
	}
	if NewMemberTokens("") != nil {
		t.Error("a verifier without a secret")
	}
}
