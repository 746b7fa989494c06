package office

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/office-server/office-server/protocol"
)

// SecretDependency reports whether values of a dependency type are secrets:
// an api_key, and an env_variable (it lands in the agent's environment and
// is as likely to hold a token). Their values are only stored encrypted.
func SecretDependency(typ string) bool {
	return typ == protocol.DependencyAPIKey || typ == protocol.DependencyEnvVar
}

// Sealed values start with a version byte so a store's bytes say what they
// are: sealedGCM (AES-256-GCM: 12-byte nonce, ciphertext, tag) or
// sealedPlain (a non-secret value kept as is because no key is configured).
const (
	sealedGCM   byte = 'E'
	sealedPlain byte = 'P'
)

// Sealer encrypts dependency values at rest (AES-256-GCM). The zero Sealer
// has no key: it keeps non-secret values in clear and refuses secrets.
type Sealer struct {
	aead cipher.AEAD
}

// NewSealer returns a Sealer for a 32-byte key; an empty key gives a Sealer
// that refuses secrets.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) == 0 {
		return &Sealer{}, nil
	}
	if len(key) != 32 {
		return nil, Errorf(EINVALID, "secrets key must be 32 bytes (AES-256), got %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// ParseSecretsKey decodes a key given in configuration: 64 hex digits or
// standard base64 of 32 bytes.
func ParseSecretsKey(s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	if b, err := hex.DecodeString(s); err == nil && len(b) == 32 {
		return b, nil
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == 32 {
		return b, nil
	}
	return nil, Errorf(EINVALID, "secrets key must be 64 hex digits or base64 of 32 bytes")
}

// CanSeal reports whether secrets can be stored.
func (s *Sealer) CanSeal() bool { return s != nil && s.aead != nil }

// Seal encrypts v. With no key, it keeps v in clear unless secret is true,
// when it fails: a secret is never written in clear.
func (s *Sealer) Seal(v string, secret bool) ([]byte, error) {
	if !s.CanSeal() {
		if secret {
			return nil, Errorf(EUNAVAILABLE, "no secrets key is configured (set OFFICE_SECRETS_KEY): api_key and env_variable values are not stored in clear")
		}
		return append([]byte{sealedPlain}, v...), nil
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	out := append([]byte{sealedGCM}, nonce...)
	return s.aead.Seal(out, nonce, []byte(v), nil), nil
}

// Open decrypts what Seal returned.
func (s *Sealer) Open(b []byte) (string, error) {
	if len(b) == 0 {
		return "", nil
	}
	switch b[0] {
	case sealedPlain:
		return string(b[1:]), nil
	case sealedGCM:
		if !s.CanSeal() {
			return "", Errorf(EUNAVAILABLE, "no secrets key is configured: cannot decrypt")
		}
		ns := s.aead.NonceSize()
		if len(b) < 1+ns {
			return "", errors.New("open: sealed value too short")
		}
		p, err := s.aead.Open(nil, b[1:1+ns], b[1+ns:], nil)
		if err != nil {
			return "", fmt.Errorf("open: %w", err)
		}
		return string(p), nil
	}
	return "", errors.New("open: unknown sealed value format")
}
