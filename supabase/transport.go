package supabase

import (
	"bytes"
	"context"
	"io"
	"net/http"
)

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
	if c != nil && c.prefer != "" {
		req = req.Clone(req.Context())
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
