package office_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/office-server/office-server/office"
)

func TestCutSessionDetail(t *testing.T) {
	const max = office.MaxSessionDetail
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"short", "Do you trust the files in this folder?\n❯ 1. Yes", "Do you trust the files in this folder?\n❯ 1. Yes"},
		{"ASCII at the cap", strings.Repeat("a", max), strings.Repeat("a", max)},
		{"ASCII over the cap", strings.Repeat("a", max+1), strings.Repeat("a", max)},
		// 3-byte runes: 1333 of them are 3999 bytes; the 1334th would cross the cap.
		{"Korean over the cap", strings.Repeat("가", max), strings.Repeat("가", max/3)},
		{"rune ending at the cap", "a" + strings.Repeat("가", max/3) + "b", "a" + strings.Repeat("가", max/3)},
		{"4-byte rune across the cap", strings.Repeat("a", max-2) + "😀", strings.Repeat("a", max-2)},
		{"invalid UTF-8 is cut at the cap", strings.Repeat("\x80", max+10), strings.Repeat("\x80", max)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := office.CutSessionDetail(tt.in)
			if got != tt.want {
				t.Errorf("CutSessionDetail: got %d bytes, want %d bytes (%q…)", len(got), len(tt.want), tt.want[:min(len(tt.want), 20)])
			}
			if len(got) > max {
				t.Errorf("CutSessionDetail kept %d bytes, over the cap %d", len(got), max)
			}
			if utf8.ValidString(tt.in) && !utf8.ValidString(got) {
				t.Errorf("CutSessionDetail made valid UTF-8 invalid")
			}
		})
	}
}
