package server

import (
	"embed"
	"io/fs"
	"net/http"
	"time"
)

// web holds the console page. web/static/vendor/ (xterm.js, its CSS and
// the fit addon) is copied from node_modules by scripts/setup.sh and is not
// committed; "all:" keeps the embed valid when it is empty, and the page
// falls back to a plain text view when xterm.js is missing.
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
			SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
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
