package server

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/office-server/office-server/internal/testenv"
)

// vendorFiles are the console's third-party files in web/static/vendor/:
// for each, the npm package it comes from and its path in that package.
// The versions are package-lock.json's.
var vendorFiles = []struct{ name, pkg, path string }{
	{"xterm.js", "@xterm/xterm", "lib/xterm.js"},
	{"xterm.css", "@xterm/xterm", "css/xterm.css"},
	{"LICENSE.xterm", "@xterm/xterm", "LICENSE"},
	{"addon-fit.js", "@xterm/addon-fit", "lib/addon-fit.js"},
	{"LICENSE.addon-fit", "@xterm/addon-fit", "LICENSE"},
}

// TestVendorMatchesLock checks the committed xterm.js files byte for byte
// against the packages package-lock.json pins, as npm installed them into
// node_modules (npm checks each tarball against the lock's integrity, and
// records what it installed in node_modules/.package-lock.json). It also
// checks that the embedded folder holds nothing else, and that the binary
// embeds every file.
func TestVendorMatchesLock(t *testing.T) {
	root := testenv.RepoRoot()
	lock := readLock(t, filepath.Join(root, "package-lock.json"))
	for _, pkg := range []string{"@xterm/xterm", "@xterm/addon-fit"} {
		if lock["node_modules/"+pkg].Version == "" {
			t.Fatalf("package-lock.json pins no %s", pkg)
		}
	}
	installedLock := filepath.Join(root, "node_modules", ".package-lock.json")
	if _, err := os.Stat(installedLock); err != nil {
		testenv.Missing(t, "node_modules (the npm packages of package-lock.json)", "run scripts/setup.sh --npm")
		return
	}
	installed := readLock(t, installedLock)
	for _, f := range vendorFiles {
		want, got := lock["node_modules/"+f.pkg], installed["node_modules/"+f.pkg]
		if got.Version != want.Version || got.Integrity != want.Integrity {
			t.Fatalf("node_modules has %s %s (%s), package-lock.json pins %s (%s): run scripts/setup.sh --npm",
				f.pkg, got.Version, got.Integrity, want.Version, want.Integrity)
		}
		pinned, err := os.ReadFile(filepath.Join(root, "node_modules", filepath.FromSlash(f.pkg), filepath.FromSlash(f.path)))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(filepath.Join(root, "server", "web", "static", "vendor", f.name))
		if err != nil {
			t.Fatalf("%v: copy %s/%s %s there", err, f.pkg, f.path, want.Version)
		}
		if !bytes.Equal(committed, pinned) {
			t.Errorf("server/web/static/vendor/%s differs from %s %s's %s: copy it from node_modules", f.name, f.pkg, want.Version, f.path)
		}
		embedded, err := web.ReadFile("web/static/vendor/" + f.name)
		if err != nil || !bytes.Equal(embedded, pinned) {
			t.Errorf("the binary does not embed vendor/%s as committed (%v)", f.name, err)
		}
	}
	entries, err := fs.ReadDir(web, "web/static/vendor")
	if err != nil {
		t.Fatal(err)
	}
	var names, known []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	for _, f := range vendorFiles {
		known = append(known, f.name)
	}
	sort.Strings(known)
	if len(names) != len(known) {
		t.Errorf("web/static/vendor holds %v, want exactly %v", names, known)
	}
}

type lockEntry struct {
	Version   string `json:"version"`
	Integrity string `json:"integrity"`
}

func readLock(t *testing.T, path string) map[string]lockEntry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Packages map[string]lockEntry `json:"packages"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return l.Packages
}
