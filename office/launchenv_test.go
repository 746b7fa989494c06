package office_test

import (
	"strings"
	"testing"

	"github.com/office-server/office-server/office"
)

// TestSealLaunchEnv: literal values are sealed and open to themselves;
// values made of ${NAME} references alone are kept; an unchanged value
// keeps its stored ciphertext; another key cannot open it; no key refuses
// a literal and names the way out.
func TestSealLaunchEnv(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	s, err := office.NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	l := office.LaunchSpec{Env: map[string]string{"LIT": "sk-literal", "REF": "${API_KEY}", "TWO": "${A}${B}", "MIX": "Bearer ${T}", "EMPTY": ""}}
	sealed, err := s.SealLaunchEnv(l, office.LaunchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	for k, keep := range map[string]bool{"LIT": false, "REF": true, "TWO": true, "MIX": false, "EMPTY": true} {
		if keep != (sealed.Env[k] == l.Env[k]) || !keep && !strings.HasPrefix(sealed.Env[k], "sealed:") {
			t.Errorf("%s: %q sealed as %q", k, l.Env[k], sealed.Env[k])
		}
	}
	if l.Env["LIT"] != "sk-literal" {
		t.Error("SealLaunchEnv changed its argument")
	}
	opened, err := s.OpenLaunchEnv(sealed)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range l.Env {
		if opened.Env[k] != v {
			t.Errorf("%s opened to %q, want %q", k, opened.Env[k], v)
		}
	}
	again, err := s.SealLaunchEnv(l, sealed)
	if err != nil || again.Env["LIT"] != sealed.Env["LIT"] {
		t.Errorf("an unchanged value was sealed anew: %q → %q (%v)", sealed.Env["LIT"], again.Env["LIT"], err)
	}
	changed := office.LaunchSpec{Env: map[string]string{"LIT": "sk-other"}}
	if c, _ := s.SealLaunchEnv(changed, sealed); c.Env["LIT"] == sealed.Env["LIT"] {
		t.Error("a changed value kept the old ciphertext")
	}
	other, _ := office.NewSealer([]byte(strings.Repeat("o", 32)))
	if _, err := other.OpenLaunchEnv(sealed); err == nil {
		t.Error("another key opened the value")
	}
	none, _ := office.NewSealer(nil)
	if _, err := none.SealLaunchEnv(l, office.LaunchSpec{}); err == nil || !strings.Contains(err.Error(), "OFFICE_SECRETS_KEY") || !strings.Contains(err.Error(), "${") {
		t.Errorf("no key: err %v", err)
	}
	if refs, err := none.SealLaunchEnv(office.LaunchSpec{Env: map[string]string{"REF": "${X}"}}, office.LaunchSpec{}); err != nil || refs.Env["REF"] != "${X}" {
		t.Errorf("no key, references only: %v %v", refs, err)
	}
}

// TestExpandLaunch: ${NAME} in env values and args is the environment's
// value; a name it lacks is an error naming it; other text is kept.
func TestExpandLaunch(t *testing.T) {
	env := map[string]string{"T": "tok", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	l := office.LaunchSpec{Env: map[string]string{"A": "Bearer ${T}", "B": "${EMPTY}", "C": "$T ${ not a ref"}, Args: []string{"--key=${T}", "plain"}}
	got, err := office.ExpandLaunch(l, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if got.Env["A"] != "Bearer tok" || got.Env["B"] != "" || got.Env["C"] != "$T ${ not a ref" || got.Args[0] != "--key=tok" || got.Args[1] != "plain" {
		t.Errorf("expanded %+v", got)
	}
	if l.Env["A"] != "Bearer ${T}" || l.Args[0] != "--key=${T}" {
		t.Error("ExpandLaunch changed its argument")
	}
	if _, err := office.ExpandLaunch(office.LaunchSpec{Args: []string{"${NOPE}"}}, lookup); err == nil || !strings.Contains(err.Error(), "args[0]: ${NOPE} is not set") {
		t.Errorf("missing: err %v", err)
	}
}
