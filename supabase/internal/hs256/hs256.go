// Package hs256 signs and verifies the JWTs of a Supabase project: HS256
// over the project's JWT secret (RFC 7519, RFC 7515 §A.1), the legacy keys'
// scheme that the anon and service-role keys and the sessions of Supabase
// Auth use. The PostgREST and Realtime stand-ins verify with it; tests sign
// keys and member tokens with it.
package hs256

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrParts, ErrAlgorithm and ErrSignature are the ways a token fails before
// its claims are read.
var (
	ErrParts     = errors.New("expected 3 parts in JWT")
	ErrAlgorithm = errors.New("wrong or unsupported encoding algorithm")
	ErrSignature = errors.New("JWT cryptographic operation failed")
)

var enc = base64.RawURLEncoding

// Sign returns the compact JWS of claims under secret.
func Sign(secret []byte, claims map[string]any) string {
	h := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	b, err := json.Marshal(claims)
	if err != nil {
		panic(fmt.Sprintf("hs256: claims: %v", err)) // claims are built by tests from plain values
	}
	signing := h + "." + enc.EncodeToString(b)
	return signing + "." + enc.EncodeToString(mac(secret, signing))
}

func mac(secret []byte, s string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// Verify checks token's signature under secret and returns its claims
// (numbers as json.Number). It does not check exp; callers apply their own
// rules (PostgREST allows 30 s of skew, Realtime none).
func Verify(secret []byte, token string) (map[string]any, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w; got %d", ErrParts, len(parts))
	}
	hb, err := enc.DecodeString(parts[0])
	if err != nil {
		return nil, ErrAlgorithm
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(hb, &h) != nil || h.Alg != "HS256" {
		return nil, ErrAlgorithm
	}
	sig, err := enc.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, mac(secret, parts[0]+"."+parts[1])) {
		return nil, ErrSignature
	}
	pb, err := enc.DecodeString(parts[1])
	if err != nil {
		return nil, ErrSignature
	}
	d := json.NewDecoder(strings.NewReader(string(pb)))
	d.UseNumber()
	var claims map[string]any
	if err := d.Decode(&claims); err != nil || claims == nil {
		return nil, fmt.Errorf("parsing claims failed")
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
