package office

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if diff := cmp.Diff(got, string(want)); diff != "" {
		t.Errorf("%s mismatch (-got +want):\n%s", name, diff)
	}
}

func TestInstructions(t *testing.T) {
	o := Office{ID: "o1", Name: "Acme"}
	roster := []Agent{
		{ID: "a2", Name: "DEV", Role: "developer", Capabilities: []string{"bash"}, Expertise: []string{"coding"}},
		{ID: "a1", Name: "PO", Role: "product owner", Capabilities: []string{"todowrite", "todoread"}, Priority: 1},
		{ID: "a3", Name: "reviewer", AllowedActions: []string{"deliver_result", "ask_user"}},
	}
	golden(t, "instructions_po.golden", Instructions(o, roster[1], roster))
	golden(t, "instructions_reviewer.golden", Instructions(o, roster[2], roster))
}
