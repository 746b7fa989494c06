package sqlite

import (
	"testing"
	"time"
)

// FuzzTimestamp: every stored time reads back as the same instant, and text
// order is time order (the SQL compares timestamps as text).
func FuzzTimestamp(f *testing.F) {
	f.Add(int64(0), int64(1))
	f.Add(int64(1763776800123456), int64(-1))
	f.Add(int64(-62135596800000000), int64(253402300799999999))
	f.Fuzz(func(t *testing.T, a, b int64) {
		const lo, hi = -62135596800000000, 253402300799999999 // years 1..9999 in µs
		if a < lo || a > hi || b < lo || b > hi {
			t.Skip()
		}
		ta, tb := time.UnixMicro(a), time.UnixMicro(b)
		sa, sb := ts(ta), ts(tb)
		got, err := parseTS(sa)
		if err != nil || !got.Equal(ta) {
			t.Fatalf("parseTS(ts(%v)) = %v, %v", ta, got, err)
		}
		if (sa < sb) != ta.Before(tb) {
			t.Fatalf("text order of %q and %q differs from time order", sa, sb)
		}
	})
}

// FuzzParseTimestamp: foreign text never panics, and what parses re-stores
// as the same instant.
func FuzzParseTimestamp(f *testing.F) {
	for _, s := range []string{"2026-11-22T02:33:12.345678Z", "2026-11-22 02:33:12", "2026-11-22T02:33:12+09:00", "", "garbage"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseTS(s)
		if err != nil {
			return
		}
		again, err := parseTS(ts(got))
		if err != nil || !again.Equal(got.Truncate(time.Microsecond)) {
			t.Fatalf("parseTS(%q) = %v; re-stored and parsed: %v, %v", s, got, again, err)
		}
	})
}
