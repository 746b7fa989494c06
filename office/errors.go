package office

import (
	"errors"
	"fmt"
)

// Error codes shared by every layer. The server maps them to HTTP statuses at
// the edge (see server/); stores map their drivers' errors onto them.
const (
	EINVALID      = "invalid"      // bad input: a person or agent can fix it and try again
	ENOTFOUND     = "not_found"    // no such row
	ECONFLICT     = "conflict"     // a unique key exists, or a conditional transition lost its race
	EUNAUTHORIZED = "unauthorized" // no or bad credentials
	EFORBIDDEN    = "forbidden"    // credentials fine, action not allowed
	EUNAVAILABLE  = "unavailable"  // a dependency (database, feed, session) is down; retry later
	EINTERNAL     = "internal"     // a bug or an unexpected failure
)

// Error is the domain error: a code for machines, a message for people, the
// operation that failed and the cause.
type Error struct {
	Code    string
	Op      string
	Message string
	Err     error
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	} else if e.Err != nil {
		msg = msg + ": " + e.Err.Error()
	}
	if e.Op != "" {
		return e.Op + ": " + msg
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, "" for nil
// and EINTERNAL for any other error.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the human message of err: the *Error's Message when
// there is one, else err.Error().
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Message != "" {
		return e.Message
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// IsNotFound reports whether err carries ENOTFOUND.
func IsNotFound(err error) bool { return ErrorCode(err) == ENOTFOUND }

// IsConflict reports whether err carries ECONFLICT.
func IsConflict(err error) bool { return ErrorCode(err) == ECONFLICT }
