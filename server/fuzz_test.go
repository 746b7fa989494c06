package server

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/office-server/office-server/office"
)

// FuzzDecodeJSON: any body is decoded or refused with an invalid or
// too_large error, never a panic or an internal error.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"response":"A"}`, `{"response":`, `{"x":1}`, `{} {}`, ``, `[]`, `{"response":1}`, "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		w := httptest.NewRecorder()
		var v struct {
			Response string `json:"response"`
		}
		err := decodeJSON(w, r, &v)
		if err == nil {
			return
		}
		if c := office.ErrorCode(err); c != office.EINVALID && c != codeTooLarge {
			t.Fatalf("decode %q: code %q (%v)", body, c, err)
		}
		if office.ErrorMessage(err) == "" {
			t.Fatalf("decode %q: empty message", body)
		}
	})
}
