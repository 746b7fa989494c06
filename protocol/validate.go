package protocol

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// The value validators of docs/protocol.md, Dependency requests: what a person provides for a
// [DEPENDENCY_REQUEST] is checked by its type before it is handed to the
// agent. Each returns nil or an error whose text can be shown as is.

// ErrEmptyValue is returned for an empty or all-blank value.
var ErrEmptyValue = errors.New("value cannot be empty")

// ValidateDependencyValue checks value for a dependency of type typ
// (api_key, env_variable, service, file, permission, package).
func ValidateDependencyValue(typ, value string) error {
	if strings.TrimSpace(value) == "" {
		return ErrEmptyValue
	}
	switch typ {
	case DependencyAPIKey:
		return ValidateAPIKey(value)
	case DependencyEnvVar:
		return ValidateEnvValue(value)
	case DependencyService:
		return ValidateServiceURL(value)
	case DependencyFile:
		return ValidateFilePath(value)
	case DependencyPermission:
		return ValidatePermission(value)
	case DependencyPackage:
		return ValidatePackageName(value)
	}
	return fmt.Errorf("unknown dependency type %q", typ)
}

// ValidateAPIKey accepts letters, digits, '_' and '-', at least 8 of them.
func ValidateAPIKey(v string) error {
	if v == "" {
		return ErrEmptyValue
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return errors.New("invalid API key format: only letters, digits, '_' and '-' are allowed")
		}
	}
	if len(v) < 8 {
		return errors.New("API key too short: at least 8 characters")
	}
	return nil
}

// MaxEnvValueBytes is the longest environment value ValidateEnvValue accepts.
const MaxEnvValueBytes = 10000

// ValidateEnvValue accepts any value up to MaxEnvValueBytes, except one with
// a NUL byte, which no environment can hold.
func ValidateEnvValue(v string) error {
	if len(v) > MaxEnvValueBytes {
		return fmt.Errorf("environment variable too long: %d bytes, at most %d", len(v), MaxEnvValueBytes)
	}
	if strings.IndexByte(v, 0) >= 0 {
		return errors.New("environment variable contains a NUL byte")
	}
	return nil
}

// ValidateServiceURL accepts an absolute http or https URL with a host.
func ValidateServiceURL(v string) error {
	u, err := url.Parse(strings.TrimSpace(v))
	if err != nil {
		return errors.New("invalid URL format")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("only http and https URLs are allowed")
	}
	if u.Host == "" {
		return errors.New("invalid URL format: no host")
	}
	return nil
}

// MaxFilePathBytes is the longest path ValidateFilePath accepts.
const MaxFilePathBytes = 500

// ValidateFilePath accepts a relative or absolute path of at most
// MaxFilePathBytes with no ".." element. The sources' sketch rejects any "..",
// also inside a name ("notes..txt"); here only a ".." path element counts as
// traversal, with '/' and '\' both taken as separators.
func ValidateFilePath(v string) error {
	if v == "" {
		return ErrEmptyValue
	}
	if len(v) > MaxFilePathBytes {
		return fmt.Errorf("file path too long: %d bytes, at most %d", len(v), MaxFilePathBytes)
	}
	if strings.IndexByte(v, 0) >= 0 {
		return errors.New("file path contains a NUL byte")
	}
	for _, el := range strings.FieldsFunc(v, func(r rune) bool { return r == '/' || r == '\\' }) {
		if el == ".." {
			return errors.New("path traversal detected: '..' is not allowed")
		}
	}
	return nil
}

// ValidatePermission accepts true, false, yes or no, in any case.
func ValidatePermission(v string) error {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "false", "yes", "no":
		return nil
	}
	return errors.New("permission must be true/false or yes/no")
}

// ValidatePackageName accepts an npm package name, "name" or "@scope/name":
// lower case letters, digits, '-', '.', '_' and '~', not starting with '.'
// or '_', at most 214 characters (npm's rules; the sources' sketch allows only
// letters, digits and '-', which rejects real packages such as socket.io).
func ValidatePackageName(v string) error {
	if v == "" {
		return ErrEmptyValue
	}
	if len(v) > 214 {
		return errors.New("invalid package name format: longer than 214 characters")
	}
	name := v
	if strings.HasPrefix(v, "@") {
		scope, rest, ok := strings.Cut(v[1:], "/")
		if !ok || !validNamePart(scope) {
			return errors.New("invalid package name format: want @scope/name")
		}
		name = rest
	}
	if !validNamePart(name) {
		return errors.New("invalid package name format: lower case letters, digits, '-', '.', '_' and '~' only")
	}
	return nil
}

// validNamePart checks one part of an npm name (scope or name).
func validNamePart(s string) bool {
	if s == "" || s[0] == '.' || s[0] == '_' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return false
		}
	}
	return true
}
