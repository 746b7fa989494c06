package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/office-server/office-server/supabase/supabasetest"
)

// apiClient calls the JSON API of a server run by a test (the office API,
// or a stand-in project's PostgREST with header set) as one bearer.
type apiClient struct {
	t           *testing.T
	base, token string      // token: sent as "Authorization: Bearer"; none when empty
	header      http.Header // sent as well (PostgREST's apikey)
}

// restAPI calls project p's REST API (PostgREST) as supabase-js does:
// key as the apikey, token as the bearer.
func restAPI(t *testing.T, p *supabasetest.Project, key, token string) apiClient {
	return apiClient{t: t, base: p.URL, token: token, header: http.Header{"Apikey": {key}}}
}

// send sends method path with body: nil sends none, a string or []byte
// goes as it is (a test's literal JSON, or JSON the server must refuse),
// anything else as JSON. A 2xx answer is decoded into v unless v is nil,
// and the test fails, with the answer, when it does not decode. It returns
// the response (its body read and closed) and the body, or the error when
// the server could not be reached.
func (c apiClient) send(method, path string, body, v any) (*http.Response, []byte, error) {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(body)
		if err != nil {
			c.t.Fatalf("%s %s: body %T: %v", method, path, body, err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range c.header {
		req.Header[k] = vs
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, nil, err
	}
	if v != nil && res.StatusCode < 300 {
		if err := json.Unmarshal(b, v); err != nil {
			c.t.Fatalf("%s %s = %d: decoding into %T: %v: %s", method, path, res.StatusCode, v, err, b)
		}
	}
	return res, b, nil
}

// do is send that fails the test when the server cannot be reached; it
// returns the status.
func (c apiClient) do(method, path string, body, v any) int {
	c.t.Helper()
	res, _, err := c.send(method, path, body, v)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return res.StatusCode
}

// try is send for a test that polls a server that may be down: it
// returns the status, 0 when the server could not be reached.
func (c apiClient) try(method, path string, body, v any) int {
	c.t.Helper()
	res, _, err := c.send(method, path, body, v)
	if err != nil {
		return 0
	}
	return res.StatusCode
}

// text is do for a test that checks what the server said: it returns the
// status and the answer's body.
func (c apiClient) text(method, path string, body any) (int, string) {
	c.t.Helper()
	res, b, err := c.send(method, path, body, nil)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return res.StatusCode, string(b)
}

// get GETs path, which must answer 200, into v.
func (c apiClient) get(path string, v any) {
	c.t.Helper()
	res, b, err := c.send(http.MethodGet, path, nil, v)
	if err != nil {
		c.t.Fatalf("GET %s: %v", path, err)
	}
	if res.StatusCode != http.StatusOK {
		c.t.Fatalf("GET %s = %d %s", path, res.StatusCode, b)
	}
}
