package engine_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// parts are the engine's parts (engine/parts.go, docs/notes/engine.md):
// the types whose fields make its call graph.
var parts = []string{"Router", "base", "eventLog", "roster", "timers", "dispatcher", "asks", "work",
	"proxyWork", "deliverer", "statusWriter", "permissions", "sweeper", "hibernation"}

// partGraph reads the engine's source (not its tests) and returns, for
// each part, the parts its struct holds: a field or an embedded field of
// the part's type, by pointer or not; and, for each part, the parts it
// embeds.
func partGraph(t *testing.T) (graph, embeds map[string][]string) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	isPart := map[string]bool{}
	for _, p := range parts {
		isPart[p] = true
	}
	graph, embeds = map[string][]string{}, map[string][]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || !isPart[ts.Name.Name] {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				t.Errorf("part %s is not a struct", ts.Name.Name)
				return false
			}
			graph[ts.Name.Name] = []string{}
			for _, fld := range st.Fields.List {
				typ := fld.Type
				if star, ok := typ.(*ast.StarExpr); ok {
					typ = star.X
				}
				id, ok := typ.(*ast.Ident)
				if !ok || !isPart[id.Name] {
					continue
				}
				if !slices.Contains(graph[ts.Name.Name], id.Name) {
					graph[ts.Name.Name] = append(graph[ts.Name.Name], id.Name)
				}
				if len(fld.Names) == 0 {
					embeds[ts.Name.Name] = append(embeds[ts.Name.Name], id.Name)
				}
			}
			return false
		})
	}
	for _, p := range parts {
		if _, ok := graph[p]; !ok {
			t.Errorf("part %s not found in the engine's source", p)
		}
	}
	return graph, embeds
}

// TestPartsCallOneWay: the engine's parts form a graph without cycles: no
// part holds a part that holds it, directly or through others. A state
// change goes the other way by a narrow interface (statusWriter.failer) or
// a message (timers), never by a pointer back.
//
// No part embeds another but *base, and base embeds none: an embedded
// part would give every part that holds it all its methods.
func TestPartsCallOneWay(t *testing.T) {
	graph, embeds := partGraph(t)
	for _, p := range parts {
		for _, e := range embeds[p] {
			if e != "base" || p == "base" {
				t.Errorf("part %s embeds %s: hold it in a named field, calling only what it needs", p, e)
			}
		}
	}
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(p string)
	visit = func(p string) {
		switch state[p] {
		case onPath:
			i := slices.Index(path, p)
			t.Errorf("parts point back: %s → %s", strings.Join(path[i:], " → "), p)
			return
		case done:
			return
		}
		state[p] = onPath
		path = append(path, p)
		for _, q := range graph[p] {
			visit(q)
		}
		path = path[:len(path)-1]
		state[p] = done
	}
	for _, p := range parts {
		visit(p)
	}
	if testing.Verbose() {
		for _, p := range parts {
			t.Logf("%s → %s", p, strings.Join(graph[p], ", "))
		}
	}
}
