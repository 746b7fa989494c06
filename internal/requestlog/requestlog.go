// Package requestlog keeps what a scripted model server of the tests
// (anthropictest, openaitest, geminitest) received: its model requests in
// order, and the method and path of any other request.
package requestlog

import (
	"context"
	"fmt"
	"sync"
)

// Request is a model request as a server records it: Main tells the main
// conversation's requests from side ones (titles, classifiers, memory).
type Request interface{ IsMain() bool }

// Log is a server's record. Its zero value is ready; it is safe for
// concurrent use. A server embeds it, which gives the server Requests,
// MainRequests, Unknown and WaitMain.
type Log[R Request] struct {
	mu   sync.Mutex
	reqs []R
	unk  []string
	seen chan struct{} // closed and replaced at every model request
}

// Add records a model request: number gets its place (1-based) and
// returns the request as recorded.
func (l *Log[R]) Add(number func(n int) R) R {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := number(len(l.reqs) + 1)
	l.reqs = append(l.reqs, r)
	if l.seen != nil {
		close(l.seen)
	}
	l.seen = make(chan struct{})
	return r
}

// AddUnknown records a request that is not a model request, as
// "METHOD /path".
func (l *Log[R]) AddUnknown(method, path string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unk = append(l.unk, method+" "+path)
}

// Requests returns the model requests received, in order.
func (l *Log[R]) Requests() []R {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]R(nil), l.reqs...)
}

// MainRequests returns the main requests received, in order.
func (l *Log[R]) MainRequests() []R {
	var out []R
	for _, r := range l.Requests() {
		if r.IsMain() {
			out = append(out, r)
		}
	}
	return out
}

// Unknown returns "METHOD /path" of every other request, in order.
func (l *Log[R]) Unknown() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.unk...)
}

// WaitMain returns the n-th main request (1-based), waiting for it until
// ctx ends.
func (l *Log[R]) WaitMain(ctx context.Context, n int) (R, error) {
	for {
		l.mu.Lock()
		k := 0
		for _, r := range l.reqs {
			if r.IsMain() {
				k++
				if k == n {
					l.mu.Unlock()
					return r, nil
				}
			}
		}
		if l.seen == nil {
			l.seen = make(chan struct{})
		}
		seen := l.seen
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			var zero R
			return zero, fmt.Errorf("main request %d: %w (got %d)", n, ctx.Err(), k)
		case <-seen:
		}
	}
}
