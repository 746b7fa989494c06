package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/office-server/office-server/internal/demoagent"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
)

// The JSON Schema of the office file (draft 2020-12), made from the same
// definitions as check: the Go types of config.go for the keys, the tables
// of officefile.go for the values and the kinds each launch key applies
// to. docs/office-file.schema.json is its output (TestSchemaCurrent);
// editors with a YAML language server use it through the examples' first
// line.

func init() { commands["schema"] = schemaCmd }

const schemaSummary = `usage: office-server schema

Print the JSON Schema of the office file (docs/office-file.schema.json).
`

func schemaCmd(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	s := newSettings("schema", schemaSummary, os.Getenv, stderr)
	if err := s.Parse(args); err != nil {
		return err
	}
	b, err := officeSchema()
	if err != nil {
		return err
	}
	_, err = stdout.Write(b)
	return err
}

// schemaDocs describes the office file's keys by path ([] for a list's
// items), with their allowed values where they are a closed set.
var schemaDocs = map[string]struct {
	desc string
	enum func() []string
}{
	"office":                          {desc: "The office: its name and defaults."},
	"office.name":                     {desc: "The office's name; the office file is synced into the office of this name."},
	"office.question_ttl":             {desc: "How long a question to a person waits before it expires (default 5m)."},
	"office.hibernate_after":          {desc: "How long an agent whose CLI resumes its conversation (claude, codex, gemini, qwen) may be idle before its process is stopped and its session hibernated; any work for it wakes it with its conversation resumed. 0s (default): never."},
	"office.permissions":              {desc: "Every agent's default tool-permission policy: an agent's own rules are added, its own timeout wins."},
	"agents":                          {desc: "The office's agents."},
	"agents[].name":                   {desc: "Unique in the office (case-insensitive): ASCII letters, digits, '.', '_', '-'."},
	"agents[].role":                   {desc: "What the agent does, told to the other agents."},
	"agents[].capabilities":           {desc: "Free-form words the router matches tasks against."},
	"agents[].priority":               {desc: "Higher is preferred among agents that can take a task."},
	"agents[].expertise":              {desc: "Free-form words told to the other agents."},
	"agents[].allowed_actions":        {desc: "What the agent may do; empty: the whole protocol.", enum: allowedActions},
	"agents[].max_load":               {desc: "Most tasks the agent holds at once; 0: no limit."},
	"agents[].hibernate_after":        {desc: "The agent's own idle time before it hibernates, in place of the office's; 0s: never. A command or builtin agent hibernates only with its own (a plain program loses its state when stopped)."},
	"agents[].disabled":               {desc: "Declared but not started."},
	"agents[].launch":                 {desc: "How the agent's process is started."},
	"agents[].launch.kind":            {desc: "The kind of agent (default claude).", enum: session.Kinds},
	"agents[].launch.command":         {desc: "The executable (default: the kind's CLI on PATH)."},
	"agents[].launch.args":            {desc: "Extra arguments; ${NAME} is taken from the server's environment at start."},
	"agents[].launch.env":             {desc: "Extra environment; ${NAME} in a value is taken from the server's environment at start and never stored; other values are stored encrypted."},
	"agents[].launch.dir":             {desc: "Working directory (default: a workspace in the data directory); created if missing."},
	"agents[].launch.prompt_pattern":  {desc: "Regular expression on the screen's last non-empty line that means the agent is ready."},
	"agents[].launch.model":           {desc: "Claude Code's --model."},
	"agents[].launch.permission_mode": {desc: "Claude Code's --permission-mode.", enum: func() []string { return claudePermissionModes }},
	"agents[].launch.script":          {desc: "The built-in scripted agent to run.", enum: func() []string { return demoagent.Scripts }},
	"agents[].launch.user":            {desc: "The OS user (name or uid) the agent runs as; the server needs CAP_SETUID and CAP_SETGID."},
	"agents[].launch.permissions":     {desc: "The agent's tool-permission policy, added to the office's."},
	"permissions.allow":               {desc: "Rules (Tool or Tool(specifier)) allowed without asking."},
	"permissions.deny":                {desc: "Rules refused without asking."},
	"permissions.ask":                 {desc: "Rules always asked."},
	"permissions.timeout":             {desc: fmt.Sprintf("How long a request waits for a person before it is denied (at most %s).", office.MaxPermissionTimeout)},
}

// officeSchema returns the JSON Schema of the office file, indented.
func officeSchema() ([]byte, error) {
	root := typeSchema(reflect.TypeOf(officeFile{}), "")
	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["title"] = "office-server office file"
	root["required"] = []string{"office"}
	office := root["properties"].(map[string]any)["office"].(map[string]any)
	office["required"] = []string{"name"}
	agent := root["properties"].(map[string]any)["agents"].(map[string]any)["items"].(map[string]any)
	agent["required"] = []string{"name"}
	launch := agent["properties"].(map[string]any)["launch"].(map[string]any)
	launch["allOf"] = kindRules()
	b, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("office file schema: %w", err)
	}
	return append(b, '\n'), nil
}

// kindRules are launchKinds as schema rules: a key is not allowed with a
// kind it does not apply to (an absent kind is claude).
func kindRules() []any {
	var rules []any
	for _, k := range slices.Sorted(maps.Keys(launchKinds)) {
		kinds := launchKinds[k]
		var cond map[string]any
		if slices.Contains(kinds, session.KindClaude) {
			cond = map[string]any{"required": []string{"kind"}, "properties": map[string]any{"kind": map[string]any{"not": map[string]any{"enum": kinds}}}}
		} else {
			cond = map[string]any{"not": map[string]any{"required": []string{"kind"}, "properties": map[string]any{"kind": map[string]any{"enum": kinds}}}}
		}
		rules = append(rules, map[string]any{
			"if":   cond,
			"then": map[string]any{"not": map[string]any{"required": []string{k}}, "description": fmt.Sprintf("%s applies to %s only", k, strings.Join(kinds, ", "))},
		})
	}
	return rules
}

// typeSchema is the schema of Go type t decoded from YAML at path.
func typeSchema(t reflect.Type, path string) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s := map[string]any{}
	doc, ok := schemaDocs[path]
	if !ok && strings.Contains(path, "permissions.") {
		doc = schemaDocs["permissions."+path[strings.LastIndex(path, ".")+1:]]
	}
	if doc.desc != "" {
		s["description"] = doc.desc
	}
	switch {
	case t == reflect.TypeOf(time.Duration(0)):
		s["type"] = "string"
		s["pattern"] = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	case t.Kind() == reflect.Struct:
		s["type"] = "object"
		s["additionalProperties"] = false
		props := map[string]any{}
		for name, ft := range yamlFields(t) {
			props[name] = typeSchema(ft, joinPath(path, name))
		}
		s["properties"] = props
	case t.Kind() == reflect.Slice:
		s["type"] = "array"
		s["items"] = typeSchema(t.Elem(), path+"[]")
	case t.Kind() == reflect.Map:
		s["type"] = "object"
		s["propertyNames"] = map[string]any{"pattern": envName.String()}
		s["additionalProperties"] = typeSchema(t.Elem(), path+".*")
	case t.Kind() == reflect.String:
		s["type"] = "string"
	case t.Kind() == reflect.Int:
		s["type"] = "integer"
		s["minimum"] = 0
	case t.Kind() == reflect.Bool:
		s["type"] = "boolean"
	}
	if doc.enum != nil {
		if items, ok := s["items"].(map[string]any); ok {
			items["enum"] = doc.enum()
		} else {
			s["enum"] = doc.enum()
		}
	}
	return s
}
