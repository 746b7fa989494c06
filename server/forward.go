package server

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/office-server/office-server/office"
)

// Owners says which node runs an office, when several servers share the
// database (package cluster).
type Owners interface {
	// Owner returns the internal address (host:port) of the node running
	// officeID, or local when that is this server or no node runs it.
	Owner(ctx context.Context, officeID string) (addr string, local bool)
	// Drain makes this node hand every office over to the others and
	// take no more (POST /api/node/drain): before a planned stop.
	Drain(ctx context.Context) error
}

// drain is POST /api/node/drain.
func (s *Server) drain(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Owners == nil {
		writeError(w, office.Errorf(office.EINVALID, "this server runs alone (no shared PostgreSQL): nothing to hand over"))
		return
	}
	if err := s.cfg.Owners.Drain(r.Context()); err != nil {
		writeError(w, err)
		return
	}
	s.log.Info("draining: offices handed over to the other nodes")
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "draining"})
}

// forwardedHeader marks a request one node passed to another; it is never
// passed on again.
const forwardedHeader = "X-Office-Forwarded"

// forward passes the request to the node that runs officeID, when that is
// another node, and reports whether it did. The request was checked here
// as for a local agent (token, Origin); the owner checks the token again.
// The Origin is the browser's page on this node, which the owner does not
// list: it is replaced by the owner's own origin, after this node allowed
// it.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, officeID string) bool {
	if s.cfg.Owners == nil || r.Header.Get(forwardedHeader) != "" {
		return false
	}
	addr, local := s.cfg.Owners.Owner(r.Context(), officeID)
	if local {
		return false
	}
	target := &url.URL{Scheme: "http", Host: addr}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = addr
			if pr.In.Header.Get("Origin") != "" {
				pr.Out.Header.Set("Origin", target.String())
			}
			pr.Out.Header.Set(forwardedHeader, "1")
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.log.Warn("forward to the office's node", "office", officeID, "node", addr, "err", err)
			writeError(w, office.Errorf(office.EUNAVAILABLE, "the node running this office (%s) does not answer", addr))
		},
	}
	p.ServeHTTP(w, r)
	return true
}

// forwarded wraps an API handler that acts on an agent's session: on a
// node that does not run the office, the request goes to the one that
// does.
func (s *Server) forwarded(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Owners != nil {
			o, err := s.office(r.Context(), r.PathValue("office"))
			if err != nil {
				writeError(w, err)
				return
			}
			if s.forward(w, r, o.ID) {
				return
			}
		}
		h(w, r)
	}
}
