package server

import (
	"log/slog"
	"net/http"
	"time"
)

// The limits of the HTTP server NewHTTPServer builds. Requests are small
// JSON (bodies up to 1 MiB, see maxBody), so a client gets ReadTimeout to
// send a whole request and WriteTimeout to take its answer. The two
// long-lived handlers outlive them: the console WebSocket's connection is
// hijacked (its reads and writes set their own deadlines), and the event
// stream sets a write deadline per write (http.ResponseController), while
// net/http clears the read deadline once a bodiless request is read.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 30 * time.Second
	WriteTimeout      = 60 * time.Second
	IdleTimeout       = 2 * time.Minute
	MaxHeaderBytes    = 64 << 10
)

// NewHTTPServer returns the http.Server that serves h, as the office-server
// command runs it: bounded header and body reads, bounded writes, idle
// connections closed, server errors logged at warn level to log (nil: not
// logged).
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
	if log != nil {
		hs.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	}
	return hs
}
