package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/office-server/office-server/session"
)

// FuzzParseOfficeFile: any input is either refused with an error or gives
// an office with a name and agents with unique names and known kinds.
func FuzzParseOfficeFile(f *testing.F) {
	f.Add([]byte(testOffice))
	f.Add([]byte("office: {name: x}\nagents: [{name: a, launch: {kind: builtin, script: po}}]"))
	f.Add([]byte("office: {name: x}\nagents: [{name: a}, {name: A}]"))
	f.Add([]byte("agents: 3"))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, agents, err := parseOfficeFile("f.yaml", b)
		if err != nil {
			return
		}
		if strings.TrimSpace(o.Name) == "" {
			t.Fatal("accepted an office without a name")
		}
		seen := map[string]bool{}
		for _, a := range agents {
			n := strings.ToLower(a.Name)
			if strings.TrimSpace(n) == "" || seen[n] {
				t.Fatalf("accepted agent name %q (empty or duplicate)", a.Name)
			}
			seen[n] = true
			if a.Launch.Kind != "" && !slices.Contains(session.Kinds(), a.Launch.Kind) {
				t.Fatalf("accepted launch kind %q", a.Launch.Kind)
			}
			if a.Launch.Kind == session.KindBuiltin && a.Launch.Script == "" {
				t.Fatal("accepted builtin without a script")
			}
			if a.Launch.Kind == session.KindCommand && a.Launch.Command == "" {
				t.Fatal("accepted command without a command")
			}
		}
	})
}
