package supabase

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
)

// userAgent is the User-Agent of every request to the project. Supabase's
// gateway refuses a secret key (sb_secret_…) sent with a browser's
// User-Agent; the server's is never one, whatever a library would send.
const userAgent = "office-server"

// isAPIKey reports whether key is one of the new API keys (sb_secret_…,
// sb_publishable_…), which are not JWTs, rather than a legacy JWT key.
func isAPIKey(key string) bool { return strings.HasPrefix(key, "sb_") }

// apiHeaders returns the credentials a request to the project carries: the
// key in apikey, and for a legacy key (a JWT) the same as the bearer
// token. An sb_ key goes in apikey only: the gateway puts its role JWT in
// Authorization, and a "Bearer sb_…" reaching PostgREST is refused as a
// token that is not a JWT (401 PGRST301 "Expected 3 parts in JWT; got 1").
func apiHeaders(key string) map[string]string {
	h := map[string]string{"apikey": key, "User-Agent": userAgent}
	if !isAPIKey(key) {
		h["Authorization"] = "Bearer " + key
	}
	return h
}

// setAPIHeaders sets apiHeaders(key) on h.
func setAPIHeaders(h http.Header, key string) {
	for k, v := range apiHeaders(key) {
		h.Set(k, v)
	}
}

// postgrest-go (v0.0.12) reduces an error answer to "(code) message" and
// drops the HTTP status, details and hint; and it fixes the Prefer header of
// each verb (an upsert always merges). The transport below sits under its
// client (postgrest.Client.Transport.Parent) and, per request, through a
// value in the request's context: records the status and error body of the
// answer, and sets the Prefer header the store asked for.

type callKey struct{}

// call is one request's side channel between the store and the transport.
type call struct {
	prefer string // replaces the Prefer header when set
	status int
	body   []byte // the body of an error answer (status >= 400)
}

func withCall(ctx context.Context, c *call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

type transport struct{ base http.RoundTripper }

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c, _ := req.Context().Value(callKey{}).(*call)
	req = req.Clone(req.Context())
	req.Header.Set("User-Agent", userAgent)
	if c != nil && c.prefer != "" {
		req.Header.Set("Prefer", c.prefer)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || c == nil {
		return resp, err
	}
	c.status = resp.StatusCode
	if resp.StatusCode >= 400 {
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if rerr != nil {
			return nil, rerr
		}
		c.body = body
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	return resp, nil
}
