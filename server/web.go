package server

import (
	"embed"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"time"
)

// web holds the console page. web/static/vendor/ holds the pinned
// xterm.js, its CSS and the fit addon with their licence, committed so that
// a plain `go build` gives a working console (TestVendorMatchesLock
// checks them against package-lock.json). The page falls back to a plain
// text view when xterm.js fails to load.
//
//go:embed all:web
var web embed.FS

func (s *Server) webRoutes() {
	static, _ := fs.Sub(web, "web/static")
	files := http.StripPrefix("/static/", http.FileServerFS(static))
	s.mux.Handle("GET /static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	}))
	s.mux.HandleFunc("GET /{$}", s.page)
}

// page serves the console. Opened as /?token=..., it checks the token, sets
// it as an HttpOnly cookie and redirects to / so the token leaves the
// address bar and the browser history.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	if tok := r.URL.Query().Get("token"); tok != "" {
		if !s.tokenEqual(tok) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte("wrong token: open the console URL the server printed when it first started\n"))
			return
		}
		http.SetCookie(w, &http.Cookie{
			Name: tokenCookie, Value: tok, Path: "/", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: overTLS(r),
			Expires: time.Now().Add(30 * 24 * time.Hour),
		})
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if ok, _ := s.authorized(r); !ok {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte("401: open the console URL the server printed when it first started (http://host:port/?token=...); the token is also in <data-dir>/admin-token\n"))
		return
	}
	b, err := web.ReadFile("web/index.html")
	if err != nil {
		http.Error(w, "console page missing", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:")
	w.Header().Set("X-Frame-Options", "DENY")
	_, _ = w.Write(b)
}

// overTLS reports whether the browser reached the server over HTTPS: the
// request came over TLS, or through a TLS-terminating reverse proxy on this
// machine that says so (X-Forwarded-Proto: https from a loopback address).
// The header is trusted from loopback only, the simple case of a proxy on
// the same machine (a proxy elsewhere would need a list of trusted proxies,
// which the server does not have): from anyone else it proves nothing.
func overTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if !strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
}
