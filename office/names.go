package office

import (
	"path/filepath"
	"strings"

	"github.com/google/uuid"
)

// MaxAgentNameLen is the longest agent name.
const MaxAgentNameLen = 63

// ValidateAgentName checks an agent name: 1 to 63 ASCII letters, digits,
// '.', '_' or '-', starting with a letter or digit, and no "..". A name is a
// directory under the data dir (the agent's workspace), a word in every
// agent's system prompt (the roster) and a protocol target
// ([INVOKE:name]); so no separator, no control character, no space. It
// fails with EINVALID naming the rule.
func ValidateAgentName(name string) error {
	if name == "" {
		return Errorf(EINVALID, "agent name is empty")
	}
	if len(name) > MaxAgentNameLen {
		return Errorf(EINVALID, "agent name %.20q… is longer than %d characters", name, MaxAgentNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i == 0 && !alnum || !alnum && c != '.' && c != '_' && c != '-' {
			return Errorf(EINVALID, "agent name %q: use ASCII letters, digits, '.', '_' and '-', starting with a letter or digit", name)
		}
	}
	if strings.Contains(name, "..") {
		return Errorf(EINVALID, "agent name %q: must not contain \"..\"", name)
	}
	return nil
}

// within joins elem onto base and checks that the result, cleaned, stays
// inside base (filepath.Rel after Clean): a name from the store is data, not
// a path.
func within(base string, elem ...string) (string, error) {
	base = filepath.Clean(base)
	p := filepath.Join(append([]string{base}, elem...)...)
	rel, err := filepath.Rel(base, p)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", Errorf(EINVALID, "%q is not a directory inside %s", filepath.Join(elem...), base)
	}
	return p, nil
}

// Workspace returns an agent's working directory: its launch spec's Dir
// (the admin's choice), else DataDir/<office>/<name>, which always stays
// inside DataDir. An agent whose stored name or office ID would not (a row
// written before names were checked, or by another program) gets a
// directory named by a hash of its IDs instead.
func Workspace(dataDir string, a Agent) string {
	if a.Launch.Dir != "" {
		return a.Launch.Dir
	}
	base := dataDir
	if base == "" {
		base = "office-data"
	}
	if ValidateAgentName(a.Name) == nil {
		if dir, err := within(base, a.OfficeID, a.Name); err == nil && filepath.Dir(dir) != filepath.Clean(base) {
			return dir
		}
	}
	return filepath.Join(filepath.Clean(base), "unnamed", uuid.NewSHA1(workspaceNamespace, []byte(a.OfficeID+"\x00"+a.ID)).String())
}

// workspaceNamespace derives the directory names of agents whose name
// cannot be one (Workspace). It must not change: the directories exist.
var workspaceNamespace = uuid.MustParse("6f0b1d8e-4c5a-4f43-9d0e-0ffce5e1a7d1")
