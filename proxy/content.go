package proxy

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Rule is one content rule: text it matches is refused (docs/notes/office.md,
// "Content rules").
type Rule struct {
	// Name is "<class>.<name>"; the class (command, credential, personal,
	// toxic) says what the refusal calls the content.
	Name    string
	Pattern *regexp.Regexp
}

// Class returns the rule's class: the part of its name before the first
// dot.
func (r Rule) Class() string {
	c, _, _ := strings.Cut(r.Name, ".")
	return c
}

// what names the rule's class for the requester.
func (r Rule) what() string {
	switch r.Class() {
	case "command":
		return "a destructive command"
	case "credential":
		return "a credential"
	case "personal":
		return "personal data"
	case "toxic":
		return "toxic content"
	}
	return "content the office refuses"
}

//go:embed content_rules.txt
var defaultRulesText string

// DefaultRules returns the built-in rules, read from content_rules.txt.
// They are compiled on first use, not at start: the keeper (`keeper
// exec` before each agent, and the watchdog) is this program too, and
// compiled at init they were a tenth of its private memory (issue 17).
func DefaultRules() []Rule { return defaultRules() }

var defaultRules = sync.OnceValue(func() []Rule { return mustRules(defaultRulesText) })

func mustRules(text string) []Rule {
	rs, err := ParseRules(nil, text)
	if err != nil {
		panic("proxy: content_rules.txt: " + err.Error())
	}
	return rs
}

// ParseRules reads rules in the form of content_rules.txt — one
// "<class>.<name> <regexp>" a line, '#' comments, "!<name>" to turn a rule
// off — over base: a rule named as one of base replaces it, a new one is
// added. It fails naming the line of the first bad rule.
func ParseRules(base []Rule, text string) ([]Rule, error) {
	out := append([]Rule(nil), base...)
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if name, ok := strings.CutPrefix(line, "!"); ok {
			name = strings.TrimSpace(name)
			n := len(out)
			out = deleteRule(out, name)
			if len(out) == n {
				return nil, fmt.Errorf("line %d: no rule %q to turn off", i+1, name)
			}
			continue
		}
		name, expr, ok := strings.Cut(line, " ")
		if !ok {
			name, expr, ok = strings.Cut(line, "\t")
		}
		expr = strings.TrimSpace(expr)
		if !ok || expr == "" {
			return nil, fmt.Errorf("line %d: want \"<class>.<name> <regular expression>\"", i+1)
		}
		if c, n, _ := strings.Cut(name, "."); c == "" || n == "" {
			return nil, fmt.Errorf("line %d: rule name %q: want <class>.<name>", i+1, name)
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, fmt.Errorf("line %d: rule %s: %w", i+1, name, err)
		}
		out = append(deleteRule(out, name), Rule{Name: name, Pattern: re})
	}
	return out, nil
}

func deleteRule(rs []Rule, name string) []Rule {
	var out []Rule
	for _, r := range rs {
		if r.Name != name {
			out = append(out, r)
		}
	}
	return out
}

// ContentError is a refusal by a content rule. Its message names the rule
// and where it matched, never the text, which may be a secret.
type ContentError struct {
	Rule  Rule
	Where string // "task 2", "metadata"
}

func (e *ContentError) Error() string {
	return fmt.Sprintf("%s looks like it holds %s (rule %s); remove it and send the request again", e.Where, e.Rule.what(), e.Rule.Name)
}

// Unwrap makes a ContentError match ErrContent.
func (e *ContentError) Unwrap() error { return ErrContent }

// CheckContent returns a *ContentError for the first rule s matches, nil
// when none does. where names s in the error.
func CheckContent(s, where string, rules []Rule) error {
	for _, r := range rules {
		if r.Pattern.MatchString(s) {
			return &ContentError{Rule: r, Where: where}
		}
	}
	return nil
}

// Screen checks every text of r the proxy would record or forward (each
// task's content, estimated time and dependencies, the task ID, the
// status metadata) against rules; nil rules mean DefaultRules.
func (r ActionRequest) Screen(rules []Rule) error {
	if rules == nil {
		rules = DefaultRules()
	}
	for i, t := range r.Tasks {
		text := strings.Join(append([]string{t.Content, t.EstimatedTime}, t.Dependencies...), "\n")
		if err := CheckContent(text, fmt.Sprintf("task %d", i+1), rules); err != nil {
			return err
		}
	}
	if err := CheckContent(r.TaskID, "task_id", rules); err != nil {
		return err
	}
	return CheckContent(string(r.Metadata), "metadata", rules)
}
