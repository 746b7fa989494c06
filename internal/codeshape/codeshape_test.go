// Package codeshape checks the shape rules of CONVENTIONS and issue 11 on
// the whole repository: no function outside tests longer than 80 lines
// (one big switch table excepted, by name), no interface with more than 12
// methods.
package codeshape

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/office-server/office-server/internal/testenv"
)

const (
	maxFuncLines    = 80
	maxIfaceMethods = 12
	// maxTestFuncLines bounds test functions as maxFuncLines bounds the
	// rest: a longer test becomes table-driven cases or named helpers
	// (docs/notes/house.md). longTests names the few left over it.
	maxTestFuncLines = 80
)

// longTests are the test functions still over maxTestFuncLines, each with
// why it waits; one that is no longer over must leave the list.
var longTests = map[string]string{}

// switchTables are the functions that are one big switch over escape
// sequences: splitting them would scatter a table that reads best whole.
var switchTables = map[string]bool{
	"protocol/ansistrip/ansistrip.go sequence": true,
	"session/screen/csi.go csi":                true,
}

func TestShape(t *testing.T) {
	walkGo(t, false, checkFile)
}

// TestTestShape: no test function is over maxTestFuncLines but those
// longTests names, and each of those still is; with -v it logs how many
// are over maxFuncLines and the longest.
func TestTestShape(t *testing.T) {
	var over int
	longest, where := 0, ""
	seen := map[string]bool{}
	walkGo(t, true, func(t *testing.T, fset *token.FileSet, rel string, f *ast.File) {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			l := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if l > maxFuncLines {
				over++
			}
			if l > longest {
				longest, where = l, rel+" "+fd.Name.Name
			}
			_, known := longTests[rel+" "+fd.Name.Name]
			seen[rel+" "+fd.Name.Name] = true
			switch {
			case l > maxTestFuncLines && !known:
				t.Errorf("%s: test func %s is %d lines (at most %d): make it table-driven cases or helpers", rel, fd.Name.Name, l, maxTestFuncLines)
			case l <= maxTestFuncLines && known:
				t.Errorf("%s: test func %s is %d lines now: remove it from longTests", rel, fd.Name.Name, l)
			}
		}
	})
	for name := range longTests {
		if !seen[name] {
			t.Errorf("longTests names %s, which is gone: remove it", name)
		}
	}
	t.Logf("test functions over %d lines: %d; the longest: %s, %d lines", maxFuncLines, over, where, longest)
}

// walkGo parses every Go file of the repository, tests or not, and hands
// it to check.
func walkGo(t *testing.T, tests bool, check func(*testing.T, *token.FileSet, string, *ast.File)) {
	t.Helper()
	root := testenv.RepoRoot()
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "node_modules" || n == "testdata" || strings.HasPrefix(n, ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") != tests {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		check(t, fset, filepath.ToSlash(rel), f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkFile reports the file's functions and interfaces over the limits.
func checkFile(t *testing.T, fset *token.FileSet, rel string, f *ast.File) {
	t.Helper()
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.FuncDecl:
			if x.Body == nil || switchTables[rel+" "+x.Name.Name] {
				return true
			}
			if l := fset.Position(x.End()).Line - fset.Position(x.Pos()).Line + 1; l > maxFuncLines {
				t.Errorf("%s: func %s is %d lines (at most %d)", rel, x.Name.Name, l, maxFuncLines)
			}
		case *ast.TypeSpec:
			if it, ok := x.Type.(*ast.InterfaceType); ok && it.Methods.NumFields() > maxIfaceMethods {
				t.Errorf("%s: interface %s has %d methods (at most %d)", rel, x.Name.Name, it.Methods.NumFields(), maxIfaceMethods)
			}
		}
		return true
	})
}
