package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// GitInit makes dir a git checkout, as an agent's folder often is (Codex
// asks whether to trust a folder only in one).
func GitInit(t testing.TB, dir string) {
	t.Helper()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
}

// PersonFile is a file of a person's own CLI configuration, read before
// an agent runs, to check afterwards that the office wrote nothing into it.
type PersonFile struct {
	Path   string
	before []byte
}

// ReadPersonFile reads path as it is now.
func ReadPersonFile(t testing.TB, path string) PersonFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return PersonFile{path, b}
}

// Same checks the file's bytes are as before (Gemini CLI's settings.json).
func (f PersonFile) Same(t testing.TB) {
	t.Helper()
	if b, err := os.ReadFile(f.Path); err != nil || !bytes.Equal(b, f.before) {
		t.Errorf("%s changed (err %v):\nbefore %q\nafter  %q", f.Path, err, f.before, b)
	}
}

// Kept checks the file still starts with its bytes from before and holds
// none of bad: for a CLI that appends notes of its own to it (Codex adds
// "[tui] screen_reader_detection_done" to config.toml), never an answer of
// the office's.
func (f PersonFile) Kept(t testing.TB, bad ...string) {
	t.Helper()
	b, err := os.ReadFile(f.Path)
	if err != nil || !bytes.HasPrefix(b, f.before) {
		t.Errorf("%s lost what the person wrote (err %v):\nbefore %q\nafter  %q", f.Path, err, f.before, b)
	}
	for _, s := range bad {
		if bytes.Contains(b, []byte(s)) {
			t.Errorf("%s now holds %q:\n%s", f.Path, s, b)
		}
	}
}
