package main

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// checkKeys walks a decoded YAML document alongside the Go type it is to
// be decoded into and adds to ps every mapping key the type has no field
// for, with its line, where it is, the nearest valid key and the valid
// keys: a typo gets a sentence a person can act on, not the decoder's
// dump of an anonymous struct type.
func checkKeys(n *yaml.Node, t reflect.Type, path string, ps *problems) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.DocumentNode || n.Kind == yaml.AliasNode {
		for _, c := range n.Content {
			checkKeys(c, t, path, ps)
		}
		return
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		checkStructKeys(n, t, path, ps)
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && n.Kind == yaml.SequenceNode:
		for i, c := range n.Content {
			checkKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), ps)
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			checkKeys(n.Content[i+1], t.Elem(), joinPath(path, n.Content[i].Value), ps)
		}
	}
}

func checkStructKeys(n *yaml.Node, t reflect.Type, path string, ps *problems) {
	fields := yamlFields(t)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		f, ok := fields[k.Value]
		if !ok {
			names := make([]string, 0, len(fields))
			for name := range fields {
				names = append(names, name)
			}
			slices.Sort(names)
			where := "at the top level"
			if path != "" {
				where = "in " + path
			}
			msg := fmt.Sprintf("unknown key %q %s", k.Value, where)
			if near := nearest(k.Value, names); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			ps.add(k, "", "%s; valid keys: %s", msg, strings.Join(names, ", "))
			continue
		}
		checkKeys(n.Content[i+1], f, joinPath(path, k.Value), ps)
	}
}

// yamlFields maps a struct's YAML keys to their types (yaml.v3's rules:
// the tag's name, else the lower-cased field name; "-" skipped; inline
// structs merged).
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// nearest returns the candidate closest to s by edit distance, if it is
// close enough to be a likely typo.
func nearest(s string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(s), c); d < bestD {
			best, bestD = c, d
		}
	}
	if bestD <= max(2, len(s)/3) {
		return best
	}
	return ""
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// yamlTypeError rewrites yaml.v3's type errors ("line 3: cannot unmarshal
// !!str `10 min` into time.Duration") into sentences: "line 3: `10 min` is
// not a duration (write it like 30s, 10m or 1h30m)".
func yamlTypeError(err error) error {
	te, ok := err.(*yaml.TypeError)
	if !ok {
		return err
	}
	msgs := make([]string, 0, len(te.Errors))
	for _, e := range te.Errors {
		if m := cannotUnmarshal.FindStringSubmatch(e); m != nil {
			e = fmt.Sprintf("%s%s is not %s", m[1], m[2], yamlWants(m[3]))
		}
		msgs = append(msgs, e)
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}

var cannotUnmarshal = regexp.MustCompile(`^(line \d+: )cannot unmarshal !!\w+ (.*) into (.*)$`)

func yamlWants(goType string) string {
	switch goType {
	case "time.Duration":
		return "a duration (write it like 30s, 10m or 1h30m)"
	case "int", "int64":
		return "a whole number"
	case "bool":
		return "true or false"
	case "string":
		return "a string"
	case "[]string":
		return "a list of strings"
	}
	if strings.HasPrefix(goType, "map[") {
		return "a mapping of keys to values"
	}
	if strings.HasPrefix(goType, "[]") {
		return "a list"
	}
	return "the expected kind of value"
}
