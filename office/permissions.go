package office

import (
	"regexp"
	"strings"
	"time"
)

// PermissionPolicy is an agent's tool-permission policy. The rules use
// Claude Code's own permission-rule syntax ("Bash", "Bash(npm test:*)",
// "Edit(docs/**)", "WebFetch(domain:example.org)") and are written into the
// agent's Claude Code settings, so Claude Code applies them itself: an
// allowed call runs and a denied one is refused without a question; Ask
// rules are always asked. Everything else that Claude Code would ask
// about becomes a question to the office's people.
type PermissionPolicy struct {
	Allow []string `json:"allow,omitempty" yaml:"allow"`
	Deny  []string `json:"deny,omitempty" yaml:"deny"`
	Ask   []string `json:"ask,omitempty" yaml:"ask"`
	// Timeout is how long a request waits for a person before it is
	// denied; zero: the office's, else the server's default.
	Timeout time.Duration `json:"timeout,omitempty" yaml:"timeout"`
}

// MaxPermissionTimeout bounds PermissionPolicy.Timeout: Claude Code's
// hook must still be waiting when the office answers.
const MaxPermissionTimeout = 24 * time.Hour

var permissionRule = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*(\(.+\))?$`)

// Check reports the first rule that is not a permission rule, or a timeout
// out of range, as an EINVALID error naming it.
func (p *PermissionPolicy) Check() error {
	if p == nil {
		return nil
	}
	for _, l := range []struct {
		name  string
		rules []string
	}{{"allow", p.Allow}, {"deny", p.Deny}, {"ask", p.Ask}} {
		for i, r := range l.rules {
			if !permissionRule.MatchString(strings.TrimSpace(r)) {
				return Errorf(EINVALID, "permissions.%s[%d] %q: not a permission rule (Tool or Tool(specifier), e.g. Bash(npm test:*))", l.name, i, r)
			}
		}
	}
	if p.Timeout < 0 || p.Timeout > MaxPermissionTimeout {
		return Errorf(EINVALID, "permissions.timeout %s: want between 0 and %s", p.Timeout, MaxPermissionTimeout)
	}
	return nil
}

// Merge returns the policy of an agent whose office gives defaults:
// the rules of both (the office's first), the agent's timeout if it has
// one. Either may be nil.
func (p *PermissionPolicy) Merge(defaults *PermissionPolicy) *PermissionPolicy {
	if defaults == nil {
		return p
	}
	if p == nil {
		c := *defaults
		return &c
	}
	out := &PermissionPolicy{
		Allow:   append(append([]string{}, defaults.Allow...), p.Allow...),
		Deny:    append(append([]string{}, defaults.Deny...), p.Deny...),
		Ask:     append(append([]string{}, defaults.Ask...), p.Ask...),
		Timeout: p.Timeout,
	}
	if out.Timeout == 0 {
		out.Timeout = defaults.Timeout
	}
	return out
}
