package supabase

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// A bytea column travels through PostgREST as text: PostgREST reads it with
// PostgreSQL's output function, which (bytea_output = hex, the default since
// 9.0) gives "\x" followed by two hex digits a byte; and it writes JSON text
// into the column with the input function, which takes the same form. So
// the store sends and expects "\x..." strings. nil is NULL; an empty value
// is "\x".

func encodeBytea(b []byte) any {
	if b == nil {
		return nil
	}
	return `\x` + hex.EncodeToString(b)
}

func decodeBytea(s string) ([]byte, error) {
	if !strings.HasPrefix(s, `\x`) {
		return nil, fmt.Errorf("bytea %.10q...: not in hex form (is bytea_output escape?)", s)
	}
	return hex.DecodeString(s[2:])
}
