package server

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/office-server/office-server/office"
)

// tokenCookie holds the admin token in the browser after the console page
// was opened with ?token=. HttpOnly and SameSite=Strict: page scripts cannot
// read it and other sites cannot send it.
const tokenCookie = "office_token"

// authorized reports whether r carries the admin token, as a Bearer header
// or the cookie. The comparison is constant-time.
func (s *Server) authorized(r *http.Request) (ok, viaCookie bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		tok, found := strings.CutPrefix(h, "Bearer ")
		return found && s.tokenEqual(strings.TrimSpace(tok)), false
	}
	if c, err := r.Cookie(tokenCookie); err == nil {
		return s.tokenEqual(c.Value), true
	}
	return false, false
}

func (s *Server) tokenEqual(got string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Token)) == 1
}

// requireToken wraps an API handler: no or a wrong token → 401, sent at
// once without reading the body. A write authenticated by the cookie must
// also come from an allowed Origin, so a page on another site cannot drive
// the API with the operator's cookie.
func (s *Server) requireToken(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ok, viaCookie := s.authorized(r)
		if !ok {
			refuseUnread(w, r, office.Errorf(office.EUNAUTHORIZED, "missing or wrong admin token (send Authorization: Bearer <token>)"))
			return
		}
		if viaCookie && r.Method != http.MethodGet && r.Method != http.MethodHead {
			if o := r.Header.Get("Origin"); o != "" && !s.originAllowed(o) {
				refuseUnread(w, r, office.Errorf(office.EFORBIDDEN, "origin %q is not allowed", o))
				return
			}
			// A cross-site form cannot send JSON without a CORS preflight.
			if ct := r.Header.Get("Content-Type"); r.ContentLength != 0 && !strings.HasPrefix(ct, "application/json") {
				refuseUnread(w, r, office.Errorf(office.EINVALID, "content type %q: want application/json", ct))
				return
			}
		}
		h(w, r)
	}
}

// refuseUnread answers a request whose body is not going to be read, and
// closes the connection right after the answer. Otherwise net/http reads
// what is left of the body (up to 256 KiB) to reuse the connection, before
// the answer (unless it says Connection: close) and again when the handler
// returns (unless the read fails): a client sending its body slowly, or
// not at all, would hold the connection until ReadTimeout.
func refuseUnread(w http.ResponseWriter, r *http.Request, err error) {
	if r.ContentLength == 0 {
		writeError(w, err)
		return
	}
	w.Header().Set("Connection", "close")
	writeError(w, err)
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// httpStatus maps an office error code to an HTTP status.
func httpStatus(code string) int {
	switch code {
	case office.EINVALID:
		return http.StatusBadRequest
	case office.ENOTFOUND:
		return http.StatusNotFound
	case office.ECONFLICT:
		return http.StatusConflict
	case office.EUNAUTHORIZED:
		return http.StatusUnauthorized
	case office.EFORBIDDEN:
		return http.StatusForbidden
	case office.EUNAVAILABLE:
		return http.StatusServiceUnavailable
	case codeTooLarge:
		return http.StatusRequestEntityTooLarge
	case codeGone:
		return http.StatusGone
	case codeNotImplemented:
		return http.StatusNotImplemented
	default:
		return http.StatusInternalServerError
	}
}

// codeTooLarge is the API's own code for a request body over the limit.
const codeTooLarge = "too_large"

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeError writes err as {"error":{"code","message"}} with the status of
// its code. Internal errors get a generic message: their text may hold
// details (SQL, paths) that are for the log, not the client.
func writeError(w http.ResponseWriter, err error) {
	code := office.ErrorCode(err)
	var body errorBody
	body.Error.Code = code
	body.Error.Message = office.ErrorMessage(err)
	if code == office.EINTERNAL {
		body.Error.Message = "internal error"
	}
	writeJSON(w, httpStatus(code), body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// maxBody is the largest JSON request body the API reads.
const maxBody = 1 << 20

// decodeJSON reads exactly one JSON object into v: unknown fields, trailing
// data and bodies over maxBody are errors that say what was wrong.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &tooBig):
			return &office.Error{Code: codeTooLarge, Message: fmt.Sprintf("request body over %d bytes", maxBody)}
		case errors.Is(err, io.EOF):
			return office.Errorf(office.EINVALID, "empty request body: want a JSON object")
		case errors.As(err, &syn):
			return office.Errorf(office.EINVALID, "bad JSON at byte %d: %v", syn.Offset, err)
		case errors.As(err, &typ):
			return office.Errorf(office.EINVALID, "field %q: want %s, got JSON %s", typ.Field, typ.Type, typ.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field"):
			return office.Errorf(office.EINVALID, "%s", strings.TrimPrefix(err.Error(), "json: "))
		default:
			return office.Errorf(office.EINVALID, "bad JSON: %v", err)
		}
	}
	if dec.More() {
		return office.Errorf(office.EINVALID, "trailing data after the JSON object")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &office.Error{Code: codeTooLarge, Message: fmt.Sprintf("request body over %d bytes", maxBody)}
		}
		return office.Errorf(office.EINVALID, "trailing data after the JSON object")
	}
	return nil
}
