package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
)

// MemberTokens learns who a member is from their Supabase access token
// (supabase.MemberTokens: the project's JWKS, or the legacy JWT secret).
type MemberTokens interface {
	// UserID returns the token's user id; EUNAUTHORIZED or EFORBIDDEN
	// when it is not a valid member's token, EUNAVAILABLE when it cannot
	// be checked now.
	UserID(ctx context.Context, token string) (string, error)
}

// codeNotImplemented answers what this server is not set up for (501).
const codeNotImplemented = "not_implemented"

// memberRoutes registers the members' part of the API: the operator's
// member management (admin token) and the endpoints members call with
// their own Supabase access token (docs/frontend.md, "Secrets go through
// the server").
func (s *Server) memberRoutes(api func(string, http.HandlerFunc)) {
	api("GET /api/offices/{office}/members", s.listMembers)
	api("POST /api/offices/{office}/members", s.addMember)
	api("DELETE /api/offices/{office}/members/{member}", s.removeMember)

	s.mux.HandleFunc("OPTIONS /api/member/", memberPreflight)
	s.mux.HandleFunc("POST /api/member/dependencies/{id}/provide", s.memberDependency("provide"))
	s.mux.HandleFunc("POST /api/member/dependencies/{id}/reject", s.memberDependency("reject"))
	s.mux.HandleFunc("/api/member/", func(w http.ResponseWriter, r *http.Request) {
		allowAnyOrigin(w)
		writeError(w, office.Errorf(office.ENOTFOUND, "no such endpoint: %s %s", r.Method, r.URL.Path))
	})
}

// members returns the store's members, or a 501 saying why there are none.
func (s *Server) members() (office.Members, error) {
	if s.cfg.Members == nil {
		return nil, &office.Error{Code: codeNotImplemented, Message: "this server's store has no members: members are Supabase users, kept with PostgreSQL (DATABASE_URL) or Supabase (SUPABASE_URL), not SQLite"}
	}
	return s.cfg.Members, nil
}

func (s *Server) listMembers(w http.ResponseWriter, r *http.Request) {
	ms, err := s.members()
	if err != nil {
		writeError(w, err)
		return
	}
	o, err := s.office(r.Context(), r.PathValue("office"))
	if err != nil {
		writeError(w, err)
		return
	}
	list, err := ms.ListMembers(r.Context(), o.ID)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, nonNil(list))
}

// addMember adds {"user_id"} or {"email"} with an optional "role" (member,
// admin or owner; default member). An email without an account yet is
// invited (status "invited"): it joins once that user signs up and calls
// accept_office_invitations.
func (s *Server) addMember(w http.ResponseWriter, r *http.Request) {
	var in struct {
		UserID string `json:"user_id"`
		Email  string `json:"email"`
		Role   string `json:"role"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		writeError(w, err)
		return
	}
	in.UserID, in.Email, in.Role = strings.TrimSpace(in.UserID), strings.TrimSpace(in.Email), strings.TrimSpace(in.Role)
	if (in.UserID == "") == (in.Email == "") {
		writeError(w, office.Errorf(office.EINVALID, `give either "user_id" or "email"`))
		return
	}
	ms, err := s.members()
	if err != nil {
		writeError(w, err)
		return
	}
	o, err := s.office(r.Context(), r.PathValue("office"))
	if err != nil {
		writeError(w, err)
		return
	}
	m, err := ms.AddMember(r.Context(), office.Member{OfficeID: o.ID, UserID: in.UserID, Email: in.Email, Role: in.Role})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, m)
}

// removeMember removes the member the path names by user id or email, or
// the invitation of an email.
func (s *Server) removeMember(w http.ResponseWriter, r *http.Request) {
	ms, err := s.members()
	if err != nil {
		writeError(w, err)
		return
	}
	o, err := s.office(r.Context(), r.PathValue("office"))
	if err != nil {
		writeError(w, err)
		return
	}
	ref := r.PathValue("member")
	userID, email := ref, ""
	if _, perr := uuid.Parse(ref); perr != nil {
		userID, email = "", ref
	}
	m, err := ms.RemoveMember(r.Context(), o.ID, userID, email)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

// allowAnyOrigin lets a page of any site read the member endpoints'
// answers. They authenticate by the member's token in the Authorization
// header only, never a cookie, so another site's page cannot act for a
// member without the token itself.
func allowAnyOrigin(w http.ResponseWriter) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
}

// memberPreflight answers the CORS preflight of a browser about to call a
// member endpoint with Authorization and a JSON body.
func memberPreflight(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	allowAnyOrigin(w)
	h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "authorization, content-type, apikey, x-client-info")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

// memberCaller returns the user id of the request's member token.
func (s *Server) memberCaller(r *http.Request) (string, error) {
	if s.cfg.MemberTokens == nil {
		return "", &office.Error{Code: codeNotImplemented, Message: "member endpoints verify members' Supabase access tokens: run the server on Supabase (SUPABASE_URL), or set SUPABASE_JWT_SECRET for a project's legacy JWT secret"}
	}
	tok, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found || strings.TrimSpace(tok) == "" {
		return "", office.Errorf(office.EUNAUTHORIZED, "missing access token (send Authorization: Bearer <the member's Supabase access token>)")
	}
	return s.cfg.MemberTokens.UserID(r.Context(), strings.TrimSpace(tok))
}

// memberDependency answers POST /api/member/dependencies/{id}/provide
// ({"value"}) and …/reject ({"reason"}) for a member of the request's
// office. The value is sealed by the office (office.Sealer: AES-256-GCM
// for api_key and env_variable) before any store sees it. Errors as the
// database functions answer them (docs/frontend.md): 401 no or a bad
// token, 404 no such request in the member's offices, 409 not pending,
// 410 expired, 400 a value that does not fit; 503 when the server has no
// secrets key for a secret.
func (s *Server) memberDependency(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		allowAnyOrigin(w)
		uid, err := s.memberCaller(r)
		if err != nil {
			refuseUnread(w, r, err)
			return
		}
		var in struct {
			Value  *string `json:"value"`
			Reason string  `json:"reason"`
		}
		if err := decodeJSON(w, r, &in); err != nil {
			writeError(w, err)
			return
		}
		if action == "provide" && in.Value == nil || action == "reject" && in.Value != nil {
			writeError(w, office.Errorf(office.EINVALID, `%s takes {"%s"}`, action, map[string]string{"provide": "value", "reject": "reason"}[action]))
			return
		}
		d, err := s.memberPendingDependency(r, uid)
		if err != nil {
			writeError(w, err)
			return
		}
		if action == "provide" {
			d, err = s.cfg.Office.ProvideDependency(r.Context(), d.ID, *in.Value)
		} else {
			reason := strings.TrimSpace(in.Reason)
			if reason == "" {
				reason = "rejected by " + uid
			}
			d, err = s.cfg.Office.RejectDependency(r.Context(), d.ID, reason)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		s.log.Info("member dependency", "action", action, "dependency", d.ID, "user", uid)
		writeJSON(w, http.StatusOK, d)
	}
}

// memberPendingDependency returns the request the path names when uid is a
// member of its office and it is pending. Another office's request is "not
// found", as the database functions say it.
func (s *Server) memberPendingDependency(r *http.Request, uid string) (office.DependencyRequest, error) {
	ms, err := s.members()
	if err != nil {
		return office.DependencyRequest{}, err
	}
	id := r.PathValue("id")
	notFound := office.Errorf(office.ENOTFOUND, "dependency request %s not found (or not in one of your offices)", id)
	d, err := s.cfg.Store.GetDependency(r.Context(), id)
	if office.IsNotFound(err) {
		return d, notFound
	}
	if err != nil {
		return d, err
	}
	if _, err := ms.MemberRole(r.Context(), d.OfficeID, uid); office.IsNotFound(err) {
		return d, notFound
	} else if err != nil {
		return d, err
	}
	if d.Status == office.DependencyExpired || d.Status == office.DependencyPending && !d.ExpiresAt.After(time.Now()) {
		return d, &office.Error{Code: codeGone, Message: "dependency request " + id + " expired at " + d.ExpiresAt.UTC().Format(time.RFC3339)}
	}
	if d.Status != office.DependencyPending {
		return d, office.Errorf(office.ECONFLICT, "dependency request %s is %s: only a pending request can be provided or rejected", id, d.Status)
	}
	return d, nil
}

// codeGone answers a request that expired (410), as the database functions
// answer PT410.
const codeGone = "expired"
