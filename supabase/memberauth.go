package supabase

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/office-server/office-server/office"
)

// EnvJWTSecret is the project's legacy JWT secret (Supabase dashboard:
// Project Settings → JWT Keys → Legacy JWT Secret). Only a project that
// still signs its users' sessions with it needs it; a project created today
// signs them with an asymmetric key published in its JWKS.
const EnvJWTSecret = "SUPABASE_JWT_SECRET"

// JWKSMaxAge is the longest the verifier keeps the project's public keys
// before fetching them again: a revoked key stops verifying within it.
// Supabase Auth serves its JWKS with max-age=600 (supabase/auth
// internal/api/jwks.go); a shorter max-age is honoured.
const JWKSMaxAge = 10 * time.Minute

// MemberAuth configures the verification of members' access tokens.
type MemberAuth struct {
	// ProjectURL is SUPABASE_URL. The verifier takes the project's public
	// keys from <ProjectURL>/auth/v1/.well-known/jwks.json and wants iss
	// <ProjectURL>/auth/v1. Empty: only the legacy secret verifies, and iss
	// is not checked.
	ProjectURL string
	// JWTSecret is the legacy HS256 secret; empty: HS256 tokens are
	// refused.
	JWTSecret string
	// AllowAnonymous accepts users of Supabase's anonymous sign-ins
	// (is_anonymous true) as members; by default they are refused.
	AllowAnonymous bool
	// Client fetches the JWKS; nil: a client with a 10 s timeout.
	Client *http.Client
	Logger *slog.Logger
}

// MemberTokens verifies the access tokens Supabase Auth gives signed-in
// users: signed by a key of the project's JWKS (ES256 or RS256, the key
// chosen by the token's kid and the algorithm taken from the key) or, on
// the legacy path, HS256 under the project's JWT secret; then exp (required),
// nbf, iss, aud "authenticated", role authenticated, a sub that is a user
// id, and no anonymous user unless allowed. The server's member endpoints
// (server/members.go) use it to learn who calls.
type MemberTokens struct {
	secret    []byte
	issuer    string // "" when the project URL is unknown
	anonymous bool
	keys      *jwks // nil without a project URL
	now       func() time.Time
}

// NewMemberTokens returns a verifier for a; nil when a has neither a
// project URL nor a secret (the member endpoints then say what to set). It
// does no I/O: the JWKS is fetched when a token first needs it.
func NewMemberTokens(a MemberAuth) *MemberTokens {
	if a.ProjectURL == "" && a.JWTSecret == "" {
		return nil
	}
	v := &MemberTokens{anonymous: a.AllowAnonymous, now: time.Now}
	if a.JWTSecret != "" {
		v.secret = []byte(a.JWTSecret)
	}
	if a.ProjectURL != "" {
		base := strings.TrimRight(a.ProjectURL, "/") + "/auth/v1"
		v.issuer = base
		client := a.Client
		if client == nil {
			client = &http.Client{Timeout: 10 * time.Second}
		}
		log := a.Logger
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		v.keys = &jwks{url: base + "/.well-known/jwks.json", client: client, log: log,
			now: func() time.Time { return v.now() },
			// An unknown kid fetches at once (a rotation), but a stream of
			// made-up kids fetches at most once per 10 s after a burst of 3.
			unknown: rate.NewLimiter(rate.Every(10*time.Second), 3)}
	}
	return v
}

// UserID returns the user id of a member's access token. EUNAUTHORIZED:
// the token is malformed, badly signed, of an unknown key, expired, not yet
// valid, of another issuer or audience, or the anon key; EFORBIDDEN: a
// valid token of another role (the service role is not a member) or of an
// anonymous user the server does not allow; EUNAVAILABLE: the project's
// JWKS could not be fetched.
func (v *MemberTokens) UserID(ctx context.Context, token string) (string, error) {
	methods := []string{"ES256", "RS256"}
	if v.secret != nil {
		methods = append(methods, "HS256")
	}
	opts := []jwt.ParserOption{jwt.WithValidMethods(methods), jwt.WithExpirationRequired(),
		jwt.WithAudience("authenticated"), jwt.WithTimeFunc(v.now), jwt.WithJSONNumber()}
	if v.issuer != "" {
		opts = append(opts, jwt.WithIssuer(v.issuer))
	}
	claims := jwt.MapClaims{}
	var keyErr error
	_, err := jwt.NewParser(opts...).ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		k, err := v.key(ctx, t)
		keyErr = err
		return k, err
	})
	switch {
	case keyErr != nil:
		return "", keyErr
	case errors.Is(err, jwt.ErrTokenExpired):
		return "", office.Errorf(office.EUNAUTHORIZED, "the access token expired: sign in again")
	case err != nil:
		return "", office.Errorf(office.EUNAUTHORIZED, "invalid access token: %v", err)
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
	if anon, _ := claims["is_anonymous"].(bool); anon && !v.anonymous {
		return "", office.Errorf(office.EFORBIDDEN, "an anonymous sign-in is not a member: sign in with an account (the server accepts anonymous users with %s=1)", EnvAllowAnonymous)
	}
	return sub, nil
}

// EnvAllowAnonymous, set to 1 or true, makes the server accept Supabase's
// anonymous users as members (MemberAuth.AllowAnonymous).
const EnvAllowAnonymous = "OFFICE_ALLOW_ANONYMOUS_MEMBERS"

// key returns the key that verifies t: the legacy secret for HS256 (never
// a public key: a token "signed" with the public key as an HMAC secret
// fails), else the JWKS key named by kid, whose algorithm must be the
// token's.
func (v *MemberTokens) key(ctx context.Context, t *jwt.Token) (any, error) {
	alg := t.Method.Alg()
	if alg == "HS256" {
		return v.secret, nil // WithValidMethods admits HS256 only with a secret
	}
	if v.keys == nil {
		return nil, office.Errorf(office.EUNAUTHORIZED, "invalid access token: %s tokens are verified with the project's signing keys; set SUPABASE_URL", alg)
	}
	kid, _ := t.Header["kid"].(string)
	if kid == "" {
		return nil, office.Errorf(office.EUNAUTHORIZED, "invalid access token: %s without a kid", alg)
	}
	k, err := v.keys.get(ctx, kid)
	if err != nil {
		return nil, err
	}
	if k.alg != alg {
		return nil, office.Errorf(office.EUNAUTHORIZED, "invalid access token: signed %s, but key %s is an %s key", alg, kid, k.alg)
	}
	return k.pub, nil
}

// jwks is the project's JWKS as last fetched. It fetches when a token
// needs it and the copy is older than its max-age (Cache-Control, at most
// JWKSMaxAge), or when a token names a kid it lacks (rate-limited). No
// goroutine: a fetch happens in the request that needs it, one at a time.
type jwks struct {
	url     string
	client  *http.Client
	log     *slog.Logger
	now     func() time.Time
	unknown *rate.Limiter

	mu       sync.Mutex
	keys     map[string]publicKey
	fetched  time.Time
	maxAge   time.Duration
	failedAt time.Time // the last failed fetch: none again for a few seconds
}

type publicKey struct {
	alg string // ES256 or RS256, from the key
	pub any
}

func (c *jwks) get(ctx context.Context, kid string) (publicKey, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.keys == nil || now.Sub(c.fetched) >= c.maxAge {
		if now.Sub(c.failedAt) < 5*time.Second {
			return publicKey{}, office.Errorf(office.EUNAVAILABLE, "cannot verify the access token: the project's signing keys could not be fetched; try again in a few seconds")
		}
		if err := c.fetch(ctx, now); err != nil {
			c.keys, c.failedAt = nil, now // no stale keys: a revoked one must stop verifying
			c.log.Warn("supabase: fetch JWKS", "url", c.url, "err", err)
			return publicKey{}, office.Errorf(office.EUNAVAILABLE, "cannot verify the access token: the project's signing keys: %v", err)
		}
	} else if _, ok := c.keys[kid]; !ok && c.unknown.AllowN(now, 1) {
		if err := c.fetch(ctx, now); err != nil {
			c.log.Warn("supabase: fetch JWKS", "url", c.url, "err", err)
		}
	}
	k, ok := c.keys[kid]
	if !ok {
		return publicKey{}, office.Errorf(office.EUNAUTHORIZED, "invalid access token: no signing key %q in the project's JWKS (revoked, or not the project's)", kid)
	}
	return k, nil
}

// fetch replaces the keys with the JWKS's.
func (c *jwks) fetch(ctx context.Context, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", userAgent)
	res, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", c.url, res.Status)
	}
	var set jwkset.JWKSMarshal
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&set); err != nil {
		return fmt.Errorf("decode %s: %w", c.url, err)
	}
	keys := map[string]publicKey{}
	for _, m := range set.Keys {
		k, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		if err != nil {
			c.log.Warn("supabase: JWKS key skipped", "kid", m.KID, "err", err)
			continue
		}
		alg, ok := algOf(k.Key(), string(m.ALG))
		if !ok || m.KID == "" {
			c.log.Warn("supabase: JWKS key skipped: not an ES256 (P-256) or RS256 key with a kid", "kid", m.KID, "alg", m.ALG, "kty", m.KTY)
			continue
		}
		keys[m.KID] = publicKey{alg: alg, pub: k.Key()}
	}
	c.keys, c.fetched, c.maxAge = keys, now, maxAge(res.Header.Get("Cache-Control"))
	return nil
}

// algOf is the algorithm a JWK's key signs with: ES256 for a P-256 key,
// RS256 for an RSA key (a JWK whose alg says otherwise is not used).
func algOf(key any, declared string) (string, bool) {
	var alg string
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return "", false
		}
		alg = "ES256"
	case *rsa.PublicKey:
		alg = "RS256"
	default:
		return "", false
	}
	if declared != "" && declared != alg {
		return "", false
	}
	return alg, true
}

// maxAge reads Cache-Control's max-age, at most JWKSMaxAge (also when
// absent or unreadable).
func maxAge(cacheControl string) time.Duration {
	for _, d := range strings.Split(cacheControl, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(d), "max-age="); ok {
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				return min(time.Duration(n)*time.Second, JWKSMaxAge)
			}
		}
	}
	return JWKSMaxAge
}
