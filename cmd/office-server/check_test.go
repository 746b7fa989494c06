package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/office-server/office-server/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite docs/office-file.schema.json")

// badOffices are office files check must reject, each with what its
// message must say. The first four are the ones issue 27 names.
var badOffices = []struct {
	name, yaml string
	want       []string // in check's output
	schemaOK   bool     // the schema cannot tell (needs the environment or Go's rules)
}{
	{name: "empty file", yaml: "", want: []string{"office.yaml: the file is empty: an office file needs at least"}},
	{name: "only a comment", yaml: "# nothing yet\n", want: []string{"the file is empty"}},
	{name: "allowed action typo", yaml: "office: {name: x}\nagents:\n  - name: a\n    allowed_actions: [invoke, ask_usr]\n",
		want: []string{`office.yaml:4: agents[0] (a).allowed_actions: unknown action "ask_usr" (did you mean "ask_user"?); valid: ask_user, invoke,`}},
	{name: "unknown script", yaml: "office: {name: x}\nagents:\n  - name: a\n    launch:\n      kind: builtin\n      script: nope\n",
		want: []string{`office.yaml:6: agents[0] (a).launch.script: unknown script "nope"; the built-in scripts are po, dev, echo`}},
	{name: "permission_mode on codex", yaml: "office: {name: x}\nagents:\n  - name: a\n    launch:\n      kind: codex\n      command: /bin/true\n      permission_mode: plan\n",
		want: []string{`office.yaml:7: agents[0] (a).launch.permission_mode: does not apply to kind codex (it applies to claude): the agent would ignore it`}},
	{name: "script typo", yaml: "office: {name: x}\nagents:\n  - name: a\n    launch: {kind: builtin, script: dve}\n",
		want: []string{`unknown script "dve" (did you mean "dev"?)`}},
	{name: "kind typo", yaml: "office: {name: x}\nagents:\n  - name: a\n    launch:\n      kind: codx\n",
		want: []string{`office.yaml:5: agents[0] (a).launch.kind: unknown kind "codx" (did you mean "codex"?)`}},
	{name: "permission mode typo", yaml: "office: {name: x}\nagents:\n  - name: a\n    launch:\n      command: /bin/true\n      permission_mode: acceptEdit\n",
		want: []string{`unknown mode "acceptEdit" (did you mean "acceptEdits"?)`}},
	{name: "bad duration", yaml: "office:\n  name: x\n  question_ttl: 10 min\n",
		want: []string{"office.yaml: line 3: `10 min` is not a duration (write it like 30s, 10m or 1h30m)"}},
	{name: "command not found", yaml: "office: {name: x}\nagents:\n  - name: a\n    launch:\n      kind: command\n      command: no-such-agent-cli\n",
		want: []string{`office.yaml:6: agents[0] (a).launch.command: "no-such-agent-cli" is not an executable here`}, schemaOK: true},
	{name: "variable not set", yaml: "office: {name: x}\nagents:\n  - name: a\n    launch:\n      kind: command\n      command: /bin/true\n      env: {KEY: \"${OFFICE_TEST_UNSET_VAR}\"}\n",
		want: []string{`office.yaml:7: agents[0] (a).launch.env.KEY: ${OFFICE_TEST_UNSET_VAR} is not set in this environment`}, schemaOK: true},
	{name: "negative hibernate_after", yaml: "office:\n  name: x\n  hibernate_after: -5s\n",
		want: []string{"office.yaml:3: office.hibernate_after: hibernate_after -5s: want between 0 (never) and 720h0m0s"}},
	{name: "hibernate_after too long", yaml: "office: {name: x}\nagents:\n  - name: a\n    hibernate_after: 1000h\n",
		want: []string{"office.yaml:4: agents[0] (a).hibernate_after: hibernate_after 1000h0m0s: want between 0 (never) and 720h0m0s"}, schemaOK: true},
	{name: "two unknown keys", yaml: "office: {name: x, colour: red}\nagents:\n  - name: a\n    rol: x\n",
		want: []string{`office.yaml:1: unknown key "colour" in office`, `office.yaml:4: unknown key "rol" in agents[0] (did you mean "role"?)`}},
}

// TestCheckRejects: check exits 1 on each bad office file and says what
// is wrong, where, and what was likely meant.
func TestCheckRejects(t *testing.T) {
	for _, tc := range badOffices {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "office.yaml"), []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Chdir(dir)
			var out, errb strings.Builder
			code := run(context.Background(), []string{"check", "office.yaml"}, nil, &out, &errb)
			if code != 1 {
				t.Errorf("exit %d, want 1; stderr %q", code, errb.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errb.String())
				}
			}
		})
	}
}

// TestCheckExamples: the example offices pass check (with the CLIs they
// name on PATH), and serve reads them the same way.
func TestCheckExamples(t *testing.T) {
	root := testenv.RepoRoot()
	t.Setenv("PATH", filepath.Join(root, "node_modules", ".bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Chdir(root)
	for _, name := range []string{"examples/demo-office.yaml", "examples/claude-office.yaml"} {
		var out, errb strings.Builder
		if code := run(context.Background(), []string{"check", name}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), ": ok") {
			t.Errorf("check %s: exit %d\n%s%s", name, code, out.String(), errb.String())
		}
	}
}

// TestSchemaCurrent: docs/office-file.schema.json is what `office-server
// schema` prints (go test -run TestSchemaCurrent -update rewrites it).
func TestSchemaCurrent(t *testing.T) {
	path := filepath.Join(testenv.RepoRoot(), "docs", "office-file.schema.json")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"schema"}, nil, &out, &errb); code != 0 {
		t.Fatalf("schema: exit %d: %s", code, errb.String())
	}
	if *update {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, out.Bytes()) {
		t.Errorf("%s is not current: run go test ./cmd/office-server -run TestSchemaCurrent -update", path)
	}
}

// TestSchemaValidates: a JSON Schema validator (santhosh-tekuri/jsonschema,
// draft 2020-12) given the schema accepts the example offices, which name
// it on their first line for editors, and refuses the bad files whose
// mistake is in the file itself.
func TestSchemaValidates(t *testing.T) {
	root := testenv.RepoRoot()
	c := jsonschema.NewCompiler()
	sch, err := c.Compile(filepath.Join(root, "docs", "office-file.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	decode := func(b []byte) any {
		var v any
		if err := yaml.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, name := range []string{"demo-office.yaml", "claude-office.yaml"} {
		b, err := os.ReadFile(filepath.Join(root, "examples", name))
		if err != nil {
			t.Fatal(err)
		}
		if first, _, _ := strings.Cut(string(b), "\n"); first != "# yaml-language-server: $schema=../docs/office-file.schema.json" {
			t.Errorf("%s: first line %q does not name the schema", name, first)
		}
		if err := sch.Validate(decode(b)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, tc := range badOffices {
		if tc.schemaOK {
			continue
		}
		if err := sch.Validate(decode([]byte(tc.yaml))); err == nil {
			t.Errorf("%s: the schema accepts it", tc.name)
		}
	}
}

// TestHibernateAfterInherited: the office's hibernate_after goes to the
// agents whose kind resumes its conversation; a command agent hibernates
// only with its own; an agent's own wins, 0s included.
func TestHibernateAfterInherited(t *testing.T) {
	_, as, err := parseOfficeFile("office.yaml", []byte(`office: {name: x, hibernate_after: 10m}
agents:
  - name: claude
  - name: codex
    launch: {kind: codex}
  - name: cmd
    launch: {kind: command, command: /bin/cat}
  - name: cmd-own
    hibernate_after: 1h
    launch: {kind: command, command: /bin/cat}
  - name: never
    hibernate_after: 0s
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{"claude": 10 * time.Minute, "codex": 10 * time.Minute, "cmd": 0, "cmd-own": time.Hour, "never": 0}
	for _, a := range as {
		if got := a.Launch.HibernateAfter; got != want[a.Name] {
			t.Errorf("%s: hibernate_after %s, want %s", a.Name, got, want[a.Name])
		}
	}
}
