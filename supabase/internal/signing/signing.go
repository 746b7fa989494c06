// Package signing keeps a stand-in Supabase project's JWT signing keys as
// Supabase Auth keeps a project's (supabase/auth internal/conf/jwk.go): the
// legacy HS256 secret, and asymmetric keys (ES256 by default, RS256
// possible) each with a kid, one of them signing. Public keys are published
// as Auth's /.well-known/jwks.json publishes them (internal/api/jwks.go:
// kty, kid, alg, use "sig", key_ops ["verify"]; never the HS256 secret).
// A key goes standby → in use → previously used → revoked, as on the
// dashboard's JWT Keys page: a previously used key still verifies, a revoked
// one is gone from the JWKS and verifies nothing.
//
// The PostgREST and Realtime stand-ins verify with Verify; tests sign with
// Sign and SignHS256. It uses github.com/golang-jwt/jwt/v5, the library
// Supabase Auth signs with.
package signing

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"

	"github.com/golang-jwt/jwt/v5"
)

// The ways a token fails before its claims are read, named after
// PostgREST's JwtDecodeError (src/library/PostgREST/Error.hs).
var (
	ErrParts     = errors.New("expected 3 parts in JWT")
	ErrAlgorithm = errors.New("wrong or unsupported encoding algorithm")
	ErrKey       = errors.New("no suitable key or wrong key type")
	ErrSignature = errors.New("JWT cryptographic operation failed")
	ErrClaims    = errors.New("parsing claims failed")
)

// Keys is a project's signing keys. Its methods are safe for concurrent use.
type Keys struct {
	secret []byte

	mu      sync.Mutex
	keys    []*key // published and verifying, in the order made
	signing string // kid of the key in use
}

type key struct {
	kid, alg string
	priv     crypto.Signer
}

// New returns keys with the legacy secret and one ES256 key in use, as a
// project created today has them.
func New(secret []byte) *Keys {
	k := &Keys{secret: secret}
	k.Rotate("ES256")
	return k
}

// Secret returns the legacy HS256 secret.
func (k *Keys) Secret() []byte { return k.secret }

// Add makes a standby key of alg (ES256 or RS256): published, verifying,
// not yet signing. It returns its kid.
func (k *Keys) Add(alg string) string {
	var priv crypto.Signer
	var err error
	switch alg {
	case "ES256":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "RS256":
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		panic("signing: unsupported algorithm " + alg)
	}
	if err != nil {
		panic(err)
	}
	b := make([]byte, 8)
	rand.Read(b)
	kid := fmt.Sprintf("%x-%s", b, strings.ToLower(alg))
	k.mu.Lock()
	k.keys = append(k.keys, &key{kid: kid, alg: alg, priv: priv})
	k.mu.Unlock()
	return kid
}

// Rotate makes a new key of alg the key in use; the one it replaces stays
// published as previously used. It returns the new kid.
func (k *Keys) Rotate(alg string) string {
	kid := k.Add(alg)
	k.mu.Lock()
	k.signing = kid
	k.mu.Unlock()
	return kid
}

// Current returns the kid of the key in use.
func (k *Keys) Current() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.signing
}

// Revoke removes the key kid: no longer published nor verifying. Revoking
// the key in use leaves the project without one until Rotate.
func (k *Keys) Revoke(kid string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, x := range k.keys {
		if x.kid == kid {
			k.keys = append(k.keys[:i], k.keys[i+1:]...)
		}
	}
	if k.signing == kid {
		k.signing = ""
	}
}

func (k *Keys) find(kid string) *key {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, x := range k.keys {
		if x.kid == kid {
			return x
		}
	}
	return nil
}

// Sign returns claims signed with the key in use, its kid in the header,
// as Supabase Auth's tokens.SignJWT does (aud serialised as a string).
func (k *Keys) Sign(claims map[string]any) string {
	return k.SignWith(k.Current(), claims)
}

// SignWith signs claims with the key kid (which may be revoked since: the
// private half stays with the caller's token). It panics on an unknown kid.
func (k *Keys) SignWith(kid string, claims map[string]any) string {
	x := k.find(kid)
	if x == nil {
		panic("signing: no key " + kid)
	}
	return SignKey(x.alg, kid, x.priv, claims)
}

// SignKey signs claims with any private key under alg, kid in the header:
// for tokens of keys the project never had.
func SignKey(alg, kid string, priv any, claims map[string]any) string {
	t := jwt.NewWithClaims(jwt.GetSigningMethod(alg), jwt.MapClaims(claims))
	if kid != "" {
		t.Header["kid"] = kid
	}
	s, err := t.SignedString(priv)
	if err != nil {
		panic(fmt.Sprintf("signing: %v", err))
	}
	return s
}

// SignHS256 returns claims signed with the legacy secret, as the legacy
// anon and service-role keys and a legacy project's sessions are.
func (k *Keys) SignHS256(claims map[string]any) string {
	return SignKey("HS256", "", k.secret, claims)
}

// PublicKey returns the public half of key kid (nil if unknown), for tests
// that forge a token with it.
func (k *Keys) PublicKey(kid string) crypto.PublicKey {
	if x := k.find(kid); x != nil {
		return x.priv.Public()
	}
	return nil
}

// JWKS returns the JSON Web Key Set of the published public keys, each as
// RFC 7517/7518 write them and Auth publishes them.
func (k *Keys) JWKS() []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	keys := []map[string]any{}
	enc := base64.RawURLEncoding.EncodeToString
	for _, x := range k.keys {
		j := map[string]any{"kid": x.kid, "alg": x.alg, "use": "sig", "key_ops": []string{"verify"}}
		switch pub := x.priv.Public().(type) {
		case *ecdsa.PublicKey:
			b, _ := pub.Bytes() // 0x04 || x || y, 32 bytes each for P-256
			j["kty"], j["crv"] = "EC", "P-256"
			j["x"], j["y"] = enc(b[1:33]), enc(b[33:65])
		case *rsa.PublicKey:
			j["kty"] = "RSA"
			j["n"], j["e"] = enc(pub.N.Bytes()), enc(big.NewInt(int64(pub.E)).Bytes())
		}
		keys = append(keys, j)
	}
	b, _ := json.Marshal(map[string]any{"keys": keys})
	return b
}

// Verify checks token's signature as PostgREST does with the project's key
// set (its jwt-secret holds the legacy secret and the JWKS): HS256 against
// the secret; ES256 and RS256 against the published key named by kid, whose
// algorithm must be the token's. It returns the claims (numbers as
// json.Number) without checking them: callers apply their own rules
// (PostgREST allows 30 s of skew on exp, Realtime none).
func (k *Keys) Verify(token string) (map[string]any, error) {
	if n := len(strings.Split(token, ".")); n != 3 {
		return nil, fmt.Errorf("%w; got %d", ErrParts, n)
	}
	var kerr error
	p := jwt.NewParser(jwt.WithoutClaimsValidation(), jwt.WithJSONNumber())
	claims := jwt.MapClaims{}
	_, err := p.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		alg, _ := t.Header["alg"].(string)
		switch alg {
		case "HS256":
			return k.secret, nil
		case "ES256", "RS256":
		default:
			kerr = ErrAlgorithm
			return nil, kerr
		}
		kid, _ := t.Header["kid"].(string)
		x := k.find(kid)
		if x == nil || x.alg != alg {
			kerr = ErrKey
			return nil, kerr
		}
		return x.priv.Public(), nil
	})
	switch {
	case kerr != nil:
		return nil, kerr
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return nil, ErrSignature
	case errors.Is(err, jwt.ErrTokenMalformed):
		return nil, ErrClaims
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrSignature, err)
	}
	return claims, nil
}

// Exp returns the exp claim in Unix seconds; ok is false when it is absent,
// and err is set when it is not a number.
func Exp(claims map[string]any) (exp int64, ok bool, err error) {
	v, present := claims["exp"]
	if !present {
		return 0, false, nil
	}
	n, isNum := v.(json.Number)
	if !isNum {
		return 0, true, errors.New("the JWT 'exp' claim must be a number")
	}
	f, err := n.Float64()
	if err != nil {
		return 0, true, errors.New("the JWT 'exp' claim must be a number")
	}
	return int64(f), true, nil
}

// KID returns the kid of token's header, unverified; "" when it has none.
func KID(token string) string {
	t, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
	if err != nil {
		return ""
	}
	kid, _ := t.Header["kid"].(string)
	return kid
}
