// Package npmpick tests scripts/npm-pick.mjs, which writes the lock file
// scripts/setup.sh installs one CLI (or every package) from: what it picks
// must be package-lock.json's own entries, so that a CLI installed alone is
// the very build the tests use.
package npmpick

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/office-server/office-server/internal/testenv"
)

type lockFile struct {
	LockfileVersion int                        `json:"lockfileVersion"`
	Packages        map[string]json.RawMessage `json:"packages"`
}

type entry struct {
	Version              string            `json:"version"`
	Integrity            string            `json:"integrity"`
	Dependencies         map[string]string `json:"dependencies"`
	OptionalDependencies map[string]string `json:"optionalDependencies"`
}

func readLock(t *testing.T, path string) lockFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var l lockFile
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return l
}

func TestPickIsTheLocksOwn(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node", "apt-get install nodejs npm")
		return
	}
	root := testenv.RepoRoot()
	full := readLock(t, filepath.Join(root, "package-lock.json"))
	for _, pick := range [][]string{
		{"@anthropic-ai/claude-code"}, {"@openai/codex"}, {"@google/gemini-cli"}, {"@qwen-code/qwen-code"}, nil,
	} {
		dir := t.TempDir()
		out, err := exec.Command(node, append([]string{filepath.Join(root, "scripts", "npm-pick.mjs"), dir}, pick...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("npm-pick %v: %v\n%s", pick, err, out)
		}
		got := readLock(t, filepath.Join(dir, "package-lock.json"))
		if got.LockfileVersion != full.LockfileVersion {
			t.Errorf("%v: lockfileVersion %d, want %d", pick, got.LockfileVersion, full.LockfileVersion)
		}
		for _, name := range pick {
			if _, ok := got.Packages["node_modules/"+name]; !ok {
				t.Errorf("%v: %s not picked", pick, name)
			}
		}
		for key, raw := range got.Packages {
			if key == "" {
				continue
			}
			var g, w entry
			_ = json.Unmarshal(raw, &g)
			if err := json.Unmarshal(full.Packages[key], &w); err != nil {
				t.Errorf("%v: %s is not in package-lock.json", pick, key)
				continue
			}
			if g.Version != w.Version || g.Integrity != w.Integrity || !reflect.DeepEqual(g.Dependencies, w.Dependencies) {
				t.Errorf("%v: %s is %s %s, package-lock.json pins %s %s", pick, key, g.Version, g.Integrity, w.Version, w.Integrity)
			}
			// Only optional dependencies the lock lacks may be left out.
			for name := range w.OptionalDependencies {
				if _, kept := g.OptionalDependencies[name]; !kept {
					if _, inLock := full.Packages["node_modules/"+name]; inLock {
						t.Errorf("%v: %s lost its optional dependency %s, which the lock has", pick, key, name)
					}
				}
			}
		}
		if pick == nil && len(got.Packages) != len(full.Packages) {
			t.Errorf("every package: picked %d entries, the lock has %d", len(got.Packages), len(full.Packages))
		}
	}
}
