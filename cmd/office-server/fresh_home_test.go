package main

import (
	"encoding/json"
	"os"
	"testing"
)

// The end-to-end tests start each CLI from a new user's HOME: only what a
// person sets to use it with their provider (the model server's address,
// the key, the model; for Gemini CLI the auth type, which it otherwise asks
// for) and privacy settings. Whatever else keeps a first-run dialog away
// is the server's to do (docs/notes/clis.md), and these check it wrote
// nothing into the person's files.

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
