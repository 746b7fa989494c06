package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
)

// The end-to-end tests start each CLI from a new user's HOME: only what a
// person sets to use it with their provider (the model server's address,
// the key, the model; for Gemini CLI the auth type, which it otherwise asks
// for) and privacy settings. Whatever else keeps a first-run dialog away
// is the server's to do (docs/notes/clis.md), and these check it wrote
// nothing into the person's files.

// gitCheckout makes dir a git checkout, as an agent's folder often is
// (Codex asks whether to trust a folder only in one).
func gitCheckout(t *testing.T, dir string) {
	t.Helper()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
}

// personFile is a person's own CLI configuration file as it was before the
// office ran.
type personFile struct {
	path   string
	before []byte
}

func readPersonFile(t *testing.T, path string) personFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return personFile{path, b}
}

// same checks the file's bytes are as before (Gemini CLI's settings.json).
func (f personFile) same(t *testing.T) {
	t.Helper()
	if b, err := os.ReadFile(f.path); err != nil || !bytes.Equal(b, f.before) {
		t.Errorf("%s changed (err %v):\nbefore %q\nafter  %q", f.path, err, f.before, b)
	}
}

// kept checks the file still starts with its bytes from before and holds
// none of bad: Codex appends notes of its own to config.toml ("[tui]
// screen_reader_detection_done"), never a trust answer of the office's.
func (f personFile) kept(t *testing.T, bad ...string) {
	t.Helper()
	b, err := os.ReadFile(f.path)
	if err != nil || !bytes.HasPrefix(b, f.before) {
		t.Errorf("%s lost what the person wrote (err %v):\nbefore %q\nafter  %q", f.path, err, f.before, b)
	}
	for _, s := range bad {
		if bytes.Contains(b, []byte(s)) {
			t.Errorf("%s now holds %q:\n%s", f.path, s, b)
		}
	}
}

// noSecurity checks a Qwen Code settings.json has no security section
// (auth type, folder trust): Qwen Code notes things of its own there (its
// Auto mode notice seen), the office nothing.
func noSecurity(t *testing.T, path string) {
	t.Helper()
	var settings map[string]any
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &settings) != nil {
		t.Fatalf("%s: %v: %s", path, err, b)
	}
	if _, ok := settings["security"]; ok {
		t.Errorf("%s holds a security section: %s", path, b)
	}
}

// absent checks the office made no file at path (the person had none).
func absent(t *testing.T, path string) {
	t.Helper()
	if b, err := os.ReadFile(path); err == nil {
		t.Errorf("%s was written:\n%s", path, b)
	}
}
