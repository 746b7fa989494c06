// Package docscheck checks that the docs name only what exists: every Go
// identifier, repository path, environment variable and flag that README.md
// and docs/**/*.md write in backticks, and every relative link they make.
//
// What is checked, by the form of the backticked text:
//
//   - Go identifiers: pkg.Name (pkg one of ours), Type.Member, pkg.Type.Member,
//     and single CamelCase names of two humps or more (TestFoo, UpsertAgent):
//     declared somewhere in the repository's Go files (functions, methods,
//     types, fields, constants, variables), or, for a single name, a string
//     literal in them (a subtest's name).
//   - Paths: text with a / whose first element is in the repository (or next
//     to the page), and, for a deeper path, whose first two are: the file or
//     folder exists (a * is a glob that must match). A bare file name is not
//     checked: the notes cite other projects' files by name as often as ours.
//   - npm packages (@scope/name): in package.json.
//   - Environment variables OFFICE_* and SUPABASE_* (outside code with a
//     call in it): named in a Go, shell or .mjs file of the repository.
//   - Flags (--name): named in a Go, shell or JavaScript file.
//
// Anything else (SQL, JSON keys, shell commands, other programs' files) is
// not checked; the few words that look like one of the above and are not
// ours are listed in ignored, each with its reason.
package docscheck

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/office-server/office-server/internal/testenv"
)

// ignored are backticked words the docs use that look like ours but name
// something outside the repository.
var ignored = map[string]string{
	"--ask-for-approval":              "a Codex flag an operator puts in args",
	"--sandbox":                       "a Codex flag an operator puts in args",
	"--dangerously-bypass-hook-trust": "a Codex flag",
	"--continue":                      "a Claude Code flag the server does not use",
	"--include-all":                   "a Supabase CLI flag (supabase db push)",
	"supabase/migrations/":            "the folder of a Supabase CLI project, not ours",
	"supabase/realtime":               "the GitHub repository whose source the stand-in follows",
}

// generated are the folders that exist once the server, setup.sh or the
// tests ran (testartifacts/: the browser tests' screenshots, written while
// this check may run beside them), not in a clone.
var generated = []string{"bin/", "data/", "work/", "node_modules/", "testartifacts/"}

// TestDocsNameWhatExists runs the check over README.md and docs/.
func TestDocsNameWhatExists(t *testing.T) {
	root := testenv.RepoRoot()
	idx, err := indexRepo(root)
	if err != nil {
		t.Fatal(err)
	}
	pages, err := docPages(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 5 {
		t.Fatalf("found only %d doc pages under %s", len(pages), root)
	}
	var problems []string
	for _, p := range pages {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		problems = append(problems, idx.check(p, b)...)
	}
	for _, p := range problems {
		t.Error(p)
	}
	for word, why := range ignored {
		if why == "" {
			t.Errorf("ignored word %q has no reason", word)
		}
	}
}

// TestDocsCheckCatchesMadeUpNames feeds the check a page that names one made-up
// thing of each kind, and the real ones beside them.
func TestDocsCheckCatchesMadeUpNames(t *testing.T) {
	idx, err := indexRepo(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	page := "docs/made-up.md"
	real := "Real: `engine.New`, `office.Store`, `Router.CatchUp`, `engine.Config.Owns`, `*office.Error`,\n" +
		"`TestVendorMatchesLock`, `UpsertAgent`, `server/web.go`, `docs/notes/`, `migrations/*.sql`,\n" +
		"`notes/cluster.md`, `OFFICE_ADMIN_TOKEN`, `SUPABASE_URL`, `--addr`, `@supabase/supabase-js`,\n" +
		"[the guide](guide.md#setting-up), `Bash(npm test:*)`, `answer_question`, `JSON`, `select 1`.\n" +
		"```\nengine.NoSuchInFence docs/nope-in-fence.md\n```\n"
	if got := idx.check(page, []byte(real)); len(got) != 0 {
		t.Errorf("real names reported:\n%s", strings.Join(got, "\n"))
	}
	made := map[string]string{
		"`engine.NoSuchRouter`":            "engine.NoSuchRouter",
		"`Router.NoSuchMethod`":            "Router.NoSuchMethod",
		"`TestNoSuchTestAnywhere`":         "TestNoSuchTestAnywhere",
		"`server/no-such-file.go`":         "server/no-such-file.go",
		"`migrations/*.nosuch`":            "migrations/*.nosuch",
		"`OFFICE_NO_SUCH_SETTING`":         "OFFICE_NO_SUCH_SETTING",
		"`--no-such-flag`":                 "--no-such-flag",
		"`@scope/no-such-package`":         "@scope/no-such-package",
		"[gone](no-such-page.md)":          "no-such-page.md",
		"[gone](guide.md#no-such-heading)": "guide.md#no-such-heading",
	}
	for text, name := range made {
		got := idx.check(page, []byte("Some text "+text+" in a line.\n"))
		if len(got) != 1 || !strings.Contains(got[0], name) {
			t.Errorf("%s: got %q, want one problem naming %s", text, got, name)
		}
	}
}

// docPages lists README.md and every .md under docs/, relative to root.
func docPages(root string) ([]string, error) {
	pages := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		rel, err := filepath.Rel(root, p)
		pages = append(pages, filepath.ToSlash(rel))
		return err
	})
	return pages, err
}

// index is what the repository declares.
type index struct {
	root     string
	pkgs     map[string]map[string]bool // package name → names declared at top level
	members  map[string]map[string]bool // type name → its methods and fields
	names    map[string]bool            // every declared name and identifier-like string literal
	source   []byte                     // every Go, shell and .mjs file, for env vars and flags
	npmDeps  map[string]bool
	topLevel map[string]bool // the repository root's entries
}

func indexRepo(root string) (*index, error) {
	idx := &index{root: root, pkgs: map[string]map[string]bool{}, members: map[string]map[string]bool{},
		names: map[string]bool{}, npmDeps: map[string]bool{}, topLevel: map[string]bool{}}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		idx.topLevel[e.Name()] = true
	}
	var src bytes.Buffer
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (n == "node_modules" || n == "bin" || n == "data" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(p) {
		case ".sh", ".mjs":
			b, err := os.ReadFile(p)
			src.Write(b)
			return err
		case ".go":
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			// This package's own made-up names must stay made up: only its
			// declarations count.
			self := filepath.Base(filepath.Dir(p)) == "docscheck"
			if !self {
				src.Write(b)
			}
			f, err := parser.ParseFile(fset, p, b, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			idx.addFile(f, !self)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	idx.source = src.Bytes()
	return idx, idx.readNPM()
}

func (idx *index) readNPM() error {
	b, err := os.ReadFile(filepath.Join(idx.root, "package-lock.json"))
	if err != nil {
		return err
	}
	for _, m := range regexp.MustCompile(`"node_modules/(@[a-z0-9-]+/[a-z0-9.-]+)"`).FindAllSubmatch(b, -1) {
		idx.npmDeps[string(m[1])] = true
	}
	return nil
}

func (idx *index) member(typ, name string) {
	if idx.members[typ] == nil {
		idx.members[typ] = map[string]bool{}
	}
	idx.members[typ][name] = true
	idx.names[name] = true
}

func (idx *index) addFile(f *ast.File, literals bool) {
	pkg := f.Name.Name
	if idx.pkgs[pkg] == nil {
		idx.pkgs[pkg] = map[string]bool{}
	}
	top := func(name string) { idx.pkgs[pkg][name] = true; idx.names[name] = true }
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				top(d.Name.Name)
				continue
			}
			idx.member(recvType(d.Recv.List[0].Type), d.Name.Name)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					top(s.Name.Name)
					idx.addMembers(s.Name.Name, s.Type)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						top(n.Name)
					}
				}
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && literals {
			if s, err := strconv.Unquote(lit.Value); err == nil && goIdent.MatchString(s) {
				idx.names[s] = true
			}
		}
		return true
	})
}

// addMembers records a struct's fields (embedded ones by their type's
// name) and an interface's methods.
func (idx *index) addMembers(typ string, e ast.Expr) {
	var fields *ast.FieldList
	switch t := e.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		return
	}
	for _, f := range fields.List {
		for _, n := range f.Names {
			idx.member(typ, n.Name)
		}
		if len(f.Names) == 0 {
			idx.member(typ, recvType(f.Type))
		}
	}
}

// recvType is the name of a receiver's or embedded field's type.
func recvType(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvType(t.X)
	case *ast.IndexExpr:
		return recvType(t.X)
	case *ast.IndexListExpr:
		return recvType(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.Ident:
		return t.Name
	}
	return ""
}

var (
	goIdent   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	goDotted  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$`)
	envVar    = regexp.MustCompile(`\b(?:OFFICE|SUPABASE)_[A-Z0-9_]*[A-Z0-9]\b`)
	flag      = regexp.MustCompile(`^--[a-z][a-z0-9-]*[a-z0-9]$`)
	npmPkg    = regexp.MustCompile(`^@[a-z0-9-]+/[a-z0-9.-]+$`)
	codeSpan  = regexp.MustCompile("`([^`\n]+)`")
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	pathChars = regexp.MustCompile(`^[A-Za-z0-9_./*-]+$`)
	// fileSuffix: a dotted name that is a file's, not a Go selector.
	fileSuffix = regexp.MustCompile(`\.(?:db|js|mjs|json|jsonl|toml|md|yaml|yml|css|html|txt|sql|go|sh|lock|exe|png|ts|tsx|so|bin|log|key|pid|hs|ex|exs|py|rs)$`)
)

// check returns a line per thing page names that does not exist.
func (idx *index) check(page string, text []byte) []string {
	var problems []string
	report := func(line int, what, name string) {
		problems = append(problems, fmt.Sprintf("%s:%d: %s %s does not exist", page, line, what, name))
	}
	inFence := false
	for i, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			if file == "" {
				file = filepath.Base(page)
			}
			switch {
			case !idx.exists(page, file):
				report(i+1, "linked page", file)
			case anchor != "" && strings.HasSuffix(file, ".md") && !idx.hasAnchor(page, file, anchor):
				report(i+1, "heading", target)
			}
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			if what, name := idx.checkSpan(page, strings.TrimSpace(m[1])); what != "" {
				report(i+1, what, name)
			}
		}
	}
	return problems
}

// checkSpan checks one backticked text; it returns what is missing, if
// anything, and its name.
func (idx *index) checkSpan(page, s string) (what, name string) {
	if _, ok := ignored[s]; ok {
		return "", ""
	}
	// A span with a call in it is code (a JavaScript snippet's variables).
	for _, v := range envVar.FindAllString(s, -1) {
		if strings.Contains(s, "(") {
			break
		}
		if _, ok := ignored[v]; !ok && !bytes.Contains(idx.source, []byte(v)) {
			return "environment variable", v
		}
	}
	switch {
	case flag.MatchString(s):
		if !bytes.Contains(idx.source, []byte(`"`+s[2:]+`"`)) && !bytes.Contains(idx.source, []byte(s)) {
			return "flag", s
		}
	case npmPkg.MatchString(s):
		if !idx.npmDeps[s] {
			return "npm package", s
		}
	case idx.isPath(page, s):
		if !idx.exists(page, s) {
			return "path", s
		}
	default:
		return idx.checkIdent(s)
	}
	return "", ""
}

// isPath says whether s reads as a path in the repository.
func (idx *index) isPath(page, s string) bool {
	if !pathChars.MatchString(s) || strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") || strings.HasPrefix(s, "*") {
		return false
	}
	for _, g := range generated {
		if strings.HasPrefix(s, g) {
			return false
		}
	}
	segs := strings.Split(strings.TrimSuffix(s, "/"), "/")
	if len(segs) < 2 {
		return false // a bare file name: often another project's, cited
	}
	dir := filepath.Join(idx.root, filepath.Dir(page))
	if !idx.topLevel[segs[0]] && !exists(filepath.Join(dir, segs[0])) {
		return false // another module's path: charmbracelet/x/ansi
	}
	// A deeper path is ours when its first two elements are: internal/api/jwks.go
	// is supabase/auth's, cited; internal/testenv/… is ours.
	if len(segs) > 2 {
		two := filepath.Join(segs[0], segs[1])
		return exists(filepath.Join(idx.root, two)) || exists(filepath.Join(dir, two))
	}
	return true
}

// exists reports whether p, relative to the repository's root or to the
// page's folder, names a file or folder; a * in p is a glob that must match.
func (idx *index) exists(page, p string) bool {
	p = strings.TrimSuffix(p, "/")
	for _, base := range []string{idx.root, filepath.Join(idx.root, filepath.Dir(page))} {
		if exists(filepath.Join(base, filepath.FromSlash(p))) {
			return true
		}
	}
	return false
}

// hasAnchor reports whether the page file (relative to page's folder, or
// to the root) has a heading whose GitHub anchor is anchor: lower case,
// punctuation but - and _ dropped, spaces made -.
func (idx *index) hasAnchor(page, file, anchor string) bool {
	for _, base := range []string{filepath.Join(idx.root, filepath.Dir(page)), idx.root} {
		b, err := os.ReadFile(filepath.Join(base, filepath.FromSlash(file)))
		if err != nil {
			continue
		}
		inFence := false
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inFence = !inFence
			}
			if !inFence && strings.HasPrefix(line, "#") && slug(strings.TrimLeft(line, "#")) == anchor {
				return true
			}
		}
		return false
	}
	return false
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func exists(p string) bool {
	if strings.Contains(p, "*") {
		m, err := filepath.Glob(p)
		return err == nil && len(m) > 0
	}
	_, err := os.Stat(p)
	return err == nil
}

// checkIdent checks a Go identifier: pkg.Name and pkg.Type.Member with
// pkg one of ours, Type.Member with Type one of ours, and the names of
// tests, benchmarks, fuzz tests and examples. Other single names are not
// checked: the notes name other projects' types (a TypeScript type, a
// Realtime error) as often as ours.
func (idx *index) checkIdent(s string) (what, name string) {
	s = strings.TrimSuffix(strings.TrimLeft(s, "*&"), "()")
	if goIdent.MatchString(s) {
		if testFunc(s) && !idx.names[s] {
			return "test", s
		}
		return "", ""
	}
	if !goDotted.MatchString(s) || fileSuffix.MatchString(s) {
		return "", "" // not an identifier, or a file name: office.db, xterm.js
	}
	parts := strings.Split(s, ".")
	if decl, ok := idx.pkgs[parts[0]]; ok && !isStdlib(parts[0]) {
		if !startsUpper(parts[1]) {
			return "", "" // an event kind or a key: session.crashed, office.permissions
		}
		if !decl[parts[1]] {
			return "Go identifier", s
		}
		parts = parts[1:]
	}
	if len(parts) < 2 || !startsUpper(parts[0]) || idx.members[parts[0]] == nil {
		return "", "" // another module's type, or a variable's field
	}
	if !idx.members[parts[0]][parts[1]] {
		return "Go identifier", s
	}
	return "", ""
}

// isStdlib names the standard library's packages the docs cite beside ours
// whose names one of ours shares (none today: keep the list honest).
func isStdlib(pkg string) bool {
	switch pkg {
	case "http", "os", "io", "sql", "json", "time", "context", "slog", "pprof", "exec", "syscall":
		return true
	}
	return false
}

func startsUpper(s string) bool { return s != "" && s[0] >= 'A' && s[0] <= 'Z' }

func testFunc(s string) bool {
	for _, p := range []string{"Test", "Benchmark", "Fuzz", "Example"} {
		if strings.HasPrefix(s, p) && len(s) > len(p) && startsUpper(s[len(p):]) {
			return true
		}
	}
	return false
}
