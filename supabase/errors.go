package supabase

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/office-server/office-server/office"
)

// APIError is an error answer from PostgREST: the HTTP status and the JSON
// body PostgREST sends ({"code","message","details","hint"}). The code is a
// PostgreSQL SQLSTATE (23505, 42501, ...) or PostgREST's own (PGRST116, ...).
// Stores return it wrapped in an *office.Error whose Code is derived from it.
type APIError struct {
	Status  int    // HTTP status
	Code    string `json:"code"`
	Message string `json:"message"`
	Details string `json:"details"`
	Hint    string `json:"hint"`
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "postgrest %d", e.Status)
	if e.Code != "" {
		fmt.Fprintf(&b, " %s", e.Code)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.Details != "" {
		fmt.Fprintf(&b, " (%s)", e.Details)
	}
	if e.Hint != "" {
		fmt.Fprintf(&b, " hint: %s", e.Hint)
	}
	return b.String()
}

// parseAPIError decodes an error body. PostgREST sends details and hint as
// strings or null; a body that is not JSON (a proxy's HTML page) is kept as
// the message, shortened.
func parseAPIError(status int, body []byte) *APIError {
	e := &APIError{Status: status}
	var raw struct {
		Code    any `json:"code"`
		Message any `json:"message"`
		Details any `json:"details"`
		Hint    any `json:"hint"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		msg := strings.TrimSpace(string(body))
		if len(msg) > 200 {
			msg = msg[:200]
		}
		if msg == "" {
			msg = http.StatusText(status)
		}
		e.Message = msg
		return e
	}
	e.Code, e.Message, e.Details, e.Hint = str(raw.Code), str(raw.Message), str(raw.Details), str(raw.Hint)
	return e
}

func str(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// officeCode maps a PostgREST answer onto the office error codes. The
// SQLSTATE decides first (it is more precise than the status), then the
// HTTP status as PostgREST assigns it (docs.postgrest.org, "Errors").
func officeCode(e *APIError) string {
	switch {
	case e.Code == "23505": // unique_violation → 409
		return office.ECONFLICT
	case e.Code == "PGRST116", e.Code == "PT404": // .single() with 0 or >1 rows → 406; a function's "not found"
		return office.ENOTFOUND
	case e.Code == "23503", e.Code == "23502", e.Code == "23514", e.Code == "22P02", strings.HasPrefix(e.Code, "22"):
		// foreign key (409), not null, check, bad input syntax (400)
		return office.EINVALID
	case e.Code == "PGRST301", e.Code == "PGRST302", e.Code == "PGRST303":
		return office.EUNAUTHORIZED // JWT invalid, missing or expired
	}
	switch {
	case e.Status == http.StatusUnauthorized:
		return office.EUNAUTHORIZED
	case e.Status == http.StatusForbidden:
		return office.EFORBIDDEN // 42501 for an authenticated role: RLS or grants
	case e.Status == http.StatusConflict:
		return office.ECONFLICT
	case e.Status == http.StatusNotAcceptable:
		return office.ENOTFOUND
	case e.Status >= 500:
		return office.EUNAVAILABLE
	case e.Status == http.StatusBadRequest:
		return office.EINVALID
	}
	return office.EINTERNAL
}

// wrap turns a failed request into an *office.Error: an APIError when
// PostgREST answered, EUNAVAILABLE when it could not be reached.
func wrap(op string, api *APIError, err error) error {
	if api != nil {
		return &office.Error{Code: officeCode(api), Op: op, Err: api}
	}
	// Not reached, timed out or cancelled: errors.Is still finds
	// context.Canceled through the chain.
	return &office.Error{Code: office.EUNAVAILABLE, Op: op, Err: err}
}
