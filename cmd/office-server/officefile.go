package main

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/office-server/office-server/agents"
	"github.com/office-server/office-server/internal/demoagent"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/proxy"
	"github.com/office-server/office-server/session"
)

// The office file's rules, defined once: serve, check and the JSON Schema
// (schema.go) all read these tables.

// claudePermissionModes are the values of Claude Code's --permission-mode
// (`claude --help` of the pinned version, package.json).
// and "default", which it accepts too.
var claudePermissionModes = []string{"acceptEdits", "auto", "bypassPermissions", "default", "dontAsk", "manual", "plan"}

// allowedActions are the values of allowed_actions (proxy.DefaultActions
// and "*", everything).
func allowedActions() []string { return append(slices.Clone(proxy.DefaultActions), proxy.ActionAll) }

// launchKinds says which kinds each launch key applies to; a key not
// listed applies to every kind. A key given to a kind it does not apply to
// is an error: the kind would ignore it.
var launchKinds = map[string][]string{
	"command":         {session.KindClaude, session.KindCodex, session.KindGemini, session.KindQwen, session.KindCommand},
	"model":           {session.KindClaude},
	"permission_mode": {session.KindClaude},
	"permissions":     {session.KindClaude, session.KindCodex},
	"prompt_pattern":  {session.KindCommand, session.KindBuiltin},
	"script":          {session.KindBuiltin},
	"user":            {session.KindCodex, session.KindGemini, session.KindQwen, session.KindCommand, session.KindBuiltin},
}

// defaultCommands are the executables of kinds that have one by default.
var defaultCommands = map[string]string{
	session.KindClaude: "claude", session.KindCodex: "codex", session.KindGemini: "gemini", session.KindQwen: "qwen",
}

// envRef matches a reference to the server's environment in an agent's env
// or args: ${NAME}.
var envRef = regexp.MustCompile(`\$\{([^}]*)\}`)

// envName is a valid environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// problem is one thing wrong with an office file: where (line, path) and
// what.
type problem struct {
	Line int
	Path string
	Msg  string
}

func (p problem) String() string {
	s := ""
	if p.Line > 0 {
		s = fmt.Sprintf("line %d: ", p.Line)
	}
	if p.Path != "" {
		s += p.Path + ": "
	}
	return s + p.Msg
}

// problems is the list of an office file's problems.
type problems []problem

func (ps *problems) add(n *yaml.Node, path, format string, args ...any) {
	*ps = append(*ps, problem{Line: line(n), Path: path, Msg: fmt.Sprintf(format, args...)})
}

// err returns the problems as one error, or nil.
func (ps problems) err(name string) error {
	var msgs []string
	for _, p := range ps {
		msgs = append(msgs, name+": "+p.String())
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "\n"))
}

func line(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	return n.Line
}

// node returns the node at path under n (mapping keys and sequence
// indexes), or nil.
func node(n *yaml.Node, path ...any) *yaml.Node {
	for n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for _, p := range path {
		if n == nil {
			return nil
		}
		switch p := p.(type) {
		case string:
			if n.Kind != yaml.MappingNode {
				return nil
			}
			var next *yaml.Node
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					next = n.Content[i+1]
				}
			}
			n = next
		case int:
			if n.Kind != yaml.SequenceNode || p >= len(n.Content) {
				return nil
			}
			n = n.Content[p]
		}
	}
	return n
}

// key returns the key node of path's last element (its line is the key's).
func key(n *yaml.Node, path ...any) *yaml.Node {
	parent := node(n, path[:len(path)-1]...)
	name, _ := path[len(path)-1].(string)
	if parent == nil || parent.Kind != yaml.MappingNode {
		return parent
	}
	for i := 0; i+1 < len(parent.Content); i += 2 {
		if parent.Content[i].Value == name {
			return parent.Content[i]
		}
	}
	return parent
}

// checkOptions are what check adds to serve's checks.
type checkOptions struct {
	// Deep: the commands exist (PATH or a file), the variables the file
	// refers to (${NAME}) are set in getenv.
	Deep   bool
	Getenv func(string) string
}

// parseOfficeFile reads an office file as serve does: an error lists every
// problem with its line.
func parseOfficeFile(name string, b []byte) (office.Office, []office.Agent, error) {
	o, as, ps := checkOfficeFile(b, checkOptions{})
	if err := ps.err(name); err != nil {
		return o, nil, err
	}
	return o, as, nil
}

// checkOfficeFile decodes an office file and returns its office, its
// agents and every problem found (with opt.Deep, in the environment too).
func checkOfficeFile(b []byte, opt checkOptions) (office.Office, []office.Agent, problems) {
	var ps problems
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		ps = append(ps, problem{Msg: strings.TrimPrefix(err.Error(), "yaml: ")})
		return office.Office{}, nil, ps
	}
	if doc.Kind == 0 || len(doc.Content) == 0 || doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].Tag == "!!null" {
		ps = append(ps, problem{Msg: "the file is empty: an office file needs at least\n  office:\n    name: My office\n  agents: [...]"})
		return office.Office{}, nil, ps
	}
	var f officeFile
	checkKeys(&doc, reflect.TypeOf(f), "", &ps)
	if len(ps) > 0 {
		return office.Office{}, nil, ps
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		ps = append(ps, problem{Msg: yamlTypeError(err).Error()})
		return office.Office{}, nil, ps
	}
	if strings.TrimSpace(f.Office.Name) == "" {
		ps.add(key(&doc, "office"), "office.name", "required")
	}
	o := office.Office{Name: f.Office.Name, QuestionTTL: f.Office.QuestionTTL}
	if f.Office.QuestionTTL < 0 {
		ps.add(node(&doc, "office", "question_ttl"), "office.question_ttl", "%s is negative", f.Office.QuestionTTL)
	}
	if err := office.CheckHibernateAfter(f.Office.HibernateAfter); err != nil {
		ps.add(node(&doc, "office", "hibernate_after"), "office.hibernate_after", "%s", office.ErrorMessage(err))
	}
	if err := f.Office.Permissions.Check(); err != nil {
		ps.add(node(&doc, "office", "permissions"), "", "office.%s", office.ErrorMessage(err))
	}
	seen := map[string]bool{}
	var list []office.Agent
	for i, a := range f.Agents {
		ag := checkAgent(&doc, i, a, f.Office.Permissions, seen, opt, &ps)
		ag.Launch.HibernateAfter = hibernateAfter(&doc, i, a, ag.Launch.Kind, f.Office.HibernateAfter, &ps)
		list = append(list, ag)
	}
	return o, list, ps
}

// checkAgent checks agent i of the file (defaults: the office's
// permission policy; seen: the names so far, lower-cased) and returns it
// as stored.
func checkAgent(doc *yaml.Node, i int, a agentFile, defaults *office.PermissionPolicy, seen map[string]bool, opt checkOptions, ps *problems) office.Agent {
	path := fmt.Sprintf("agents[%d]", i)
	an := node(doc, "agents", i)
	if a.Name != "" {
		path = fmt.Sprintf("agents[%d] (%s)", i, a.Name)
	}
	switch {
	case strings.TrimSpace(a.Name) == "":
		ps.add(an, path, "name is required")
	case seen[strings.ToLower(a.Name)]:
		ps.add(node(doc, "agents", i, "name"), path, "agent %q declared twice", a.Name)
	default:
		if err := office.ValidateAgentName(a.Name); err != nil {
			ps.add(node(doc, "agents", i, "name"), path, "%s", office.ErrorMessage(err))
		}
	}
	seen[strings.ToLower(a.Name)] = true
	for j, act := range a.AllowedActions {
		if !slices.ContainsFunc(allowedActions(), func(s string) bool { return strings.EqualFold(s, act) }) {
			ps.add(node(doc, "agents", i, "allowed_actions", j), path+".allowed_actions", "unknown action %q%s; valid: %s",
				act, didYouMean(act, allowedActions()), strings.Join(allowedActions(), ", "))
		}
	}
	if a.Priority < 0 {
		ps.add(node(doc, "agents", i, "priority"), path+".priority", "%d is negative", a.Priority)
	}
	if a.MaxLoad < 0 {
		ps.add(node(doc, "agents", i, "max_load"), path+".max_load", "%d is negative", a.MaxLoad)
	}
	launch := office.LaunchSpec{
		Kind: a.Launch.Kind, Command: a.Launch.Command, Args: a.Launch.Args, Env: a.Launch.Env,
		Dir: a.Launch.Dir, PromptPattern: a.Launch.PromptPattern, Model: a.Launch.Model,
		PermissionMode: a.Launch.PermissionMode, Script: a.Launch.Script, User: a.Launch.User,
		Permissions: a.Launch.Permissions.Merge(defaults),
	}
	checkLaunch(doc, i, path+".launch", a.Launch, launch, opt, ps)
	status := office.AgentIdle
	if a.Disabled {
		status = office.AgentDisabled
	}
	return office.Agent{
		Name: a.Name, Role: a.Role, Capabilities: a.Capabilities, Priority: a.Priority,
		Expertise: a.Expertise, AllowedActions: a.AllowedActions, MaxLoad: a.MaxLoad, Status: status,
		Launch: launch,
	}
}

// hibernateAfter returns agent i's idle time before it hibernates: its
// own hibernate_after when given, else the office's for a kind that
// resumes its conversation (office.ResumingKinds). An agent of another
// kind loses its state when stopped, so only its own setting says it may.
func hibernateAfter(doc *yaml.Node, i int, a agentFile, kind string, def time.Duration, ps *problems) time.Duration {
	if a.HibernateAfter == nil {
		if slices.Contains(office.ResumingKinds, kind) {
			return def
		}
		return 0
	}
	if err := office.CheckHibernateAfter(*a.HibernateAfter); err != nil {
		path := fmt.Sprintf("agents[%d]", i)
		if a.Name != "" {
			path = fmt.Sprintf("agents[%d] (%s)", i, a.Name)
		}
		ps.add(node(doc, "agents", i, "hibernate_after"), path+".hibernate_after", "%s", office.ErrorMessage(err))
	}
	return *a.HibernateAfter
}

// checkLaunch checks agent i's launch spec: its kind, the keys that apply
// to it, their values; with opt.Deep, its command and variables.
func checkLaunch(doc *yaml.Node, i int, path string, lf launchFile, l office.LaunchSpec, opt checkOptions, ps *problems) {
	at := func(k ...any) *yaml.Node { return node(doc, append([]any{"agents", i, "launch"}, k...)...) }
	kind := l.Kind
	if kind == "" {
		kind = session.KindClaude
	}
	if !slices.Contains(session.Kinds(), kind) {
		ps.add(at("kind"), path+".kind", "unknown kind %q%s; valid: %s", l.Kind, didYouMean(l.Kind, session.Kinds()), strings.Join(session.Kinds(), ", "))
		return
	}
	given := map[string]bool{
		"command": lf.Command != "", "model": lf.Model != "", "permission_mode": lf.PermissionMode != "",
		"permissions": lf.Permissions != nil, "prompt_pattern": lf.PromptPattern != "", "script": lf.Script != "", "user": lf.User != "",
	}
	for _, k := range slices.Sorted(maps.Keys(launchKinds)) {
		if given[k] && !slices.Contains(launchKinds[k], kind) {
			ps.add(node(doc, "agents", i, "launch", k), path+"."+k, "does not apply to kind %s (it applies to %s): the agent would ignore it; remove it",
				kind, strings.Join(launchKinds[k], ", "))
		}
	}
	if lf.PermissionMode != "" && kind == session.KindClaude && !slices.Contains(claudePermissionModes, lf.PermissionMode) {
		ps.add(at("permission_mode"), path+".permission_mode", "unknown mode %q%s; valid: %s",
			lf.PermissionMode, didYouMean(lf.PermissionMode, claudePermissionModes), strings.Join(claudePermissionModes, ", "))
	}
	if kind == session.KindBuiltin && lf.Script != "" && !slices.Contains(demoagent.Scripts, lf.Script) {
		ps.add(at("script"), path+".script", "unknown script %q%s; the built-in scripts are %s",
			lf.Script, didYouMean(lf.Script, demoagent.Scripts), strings.Join(demoagent.Scripts, ", "))
	}
	if err := agents.CheckLaunch(l); err != nil {
		ps.add(at(), path, "%s", office.ErrorMessage(err))
	}
	for _, k := range slices.Sorted(maps.Keys(lf.Env)) {
		if !envName.MatchString(k) {
			ps.add(at("env"), path+".env", "%q is not a variable name", k)
		}
		checkRefs(at("env", k), path+".env."+k, lf.Env[k], opt, ps)
	}
	for j, a := range lf.Args {
		checkRefs(at("args", j), fmt.Sprintf("%s.args[%d]", path, j), a, opt, ps)
	}
	if !opt.Deep {
		return
	}
	cmd := lf.Command
	if cmd == "" {
		cmd = defaultCommands[kind]
	}
	if cmd != "" && kind != session.KindBuiltin {
		if _, err := exec.LookPath(absCommand(cmd)); err != nil {
			n := at("command")
			if n == nil {
				n = at()
			}
			ps.add(n, path+".command", "%q is not an executable here (%v): install it or name it with launch.command", cmd, errors.Unwrap(err))
		}
	}
}

// checkRefs checks the ${NAME} references in v: with opt.Deep, set in
// the environment. Anything else in ${...} is not a reference and is
// passed as written (a shell script's "${x##*/}" in args), as the server
// does (office.ExpandLaunch).
func checkRefs(n *yaml.Node, path, v string, opt checkOptions, ps *problems) {
	for _, m := range envRef.FindAllStringSubmatch(v, -1) {
		switch {
		case !envName.MatchString(m[1]):
			continue
		case opt.Deep && opt.Getenv(m[1]) == "":
			ps.add(n, path, "%s is not set in this environment: the agent would not start", m[0])
		}
	}
}

// absCommand resolves a command with a directory in it from the working
// directory, as the server does (agents.absCommand).
func absCommand(c string) string {
	if strings.ContainsRune(c, filepath.Separator) && !filepath.IsAbs(c) {
		if abs, err := filepath.Abs(c); err == nil {
			return abs
		}
	}
	return c
}

// didYouMean returns ` (did you mean "x"?)` for the nearest of valid, or "".
func didYouMean(s string, valid []string) string {
	if near := nearest(s, valid); near != "" && near != s {
		return fmt.Sprintf(" (did you mean %q?)", near)
	}
	return ""
}

// officeFileLine formats a problem for check's output: FILE:LINE: text.
func officeFileLine(name string, p problem) string {
	s := name
	if p.Line > 0 {
		s += ":" + strconv.Itoa(p.Line)
	}
	q := p
	q.Line = 0
	return s + ": " + q.String()
}
