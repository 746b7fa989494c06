package agents_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/office-server/office-server/agents"
	"github.com/office-server/office-server/engine"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
)

// TestSpec checks that the one wiring hands the session layer everything
// the office decided: a Claude Code agent's conversation, its resume cursor
// and instructions, and the configuration directory the server prepares
// for it (under the state dir, never the user's own); a builtin agent runs
// the server's executable; a relative command is made absolute.
func TestSpec(t *testing.T) {
	state := t.TempDir()
	a := agents.NewSessionsForTest(agents.Options{AgentBin: "/bin/office-server", StateDir: state, CredentialsDir: "/u/.claude", ClaudeBin: "claude"})
	got, err := a.Spec(engine.SessionSpec{
		OfficeID: "o", AgentID: "a", Dir: "/w", Env: []string{"K=v"},
		Launch:         office.LaunchSpec{Kind: "claude", Model: "m", PermissionMode: "acceptEdits", Env: map[string]string{"Z": "1", "A": "2"}},
		SystemPrompt:   "you are po",
		ConversationID: "c-1", Resume: true, TranscriptAfter: "uuid-9",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := session.Spec{
		Kind: session.KindClaude, Command: "claude", Env: []string{"K=v", "A=2", "Z=1"}, Dir: "/w",
		ConversationID: "c-1", Resume: true, TranscriptAfter: "uuid-9",
		AppendSystemPrompt: "you are po", PermissionMode: "acceptEdits", Model: "m",
		ConfigDir: filepath.Join(state, "o", "a", "claude"), CredentialsDir: "/u/.claude",
		Home: agents.AgentHome(state, "o", "a"), // a HOME of its own
	}
	if d := cmp.Diff(got, want); d != "" {
		t.Errorf("claude spec (-got +want):\n%s", d)
	}

	specPermissions(t, a)

	got, err = a.Spec(engine.SessionSpec{Launch: office.LaunchSpec{Kind: "builtin", Script: "po", Args: []string{"--step", "1s"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != session.KindBuiltin || got.Command != "/bin/office-server" || got.Script != "po" ||
		strings.Join(got.Args, " ") != "--step 1s" {
		t.Errorf("builtin spec = %+v", got)
	}
	// A Codex agent keeps its conversation and cursor and is taught the
	// protocol; a command agent is taught it too (its CLI's instruction
	// file, when the session knows one).
	got, err = a.Spec(engine.SessionSpec{OfficeID: "o", AgentID: "c", Launch: office.LaunchSpec{Kind: "codex"}, SystemPrompt: "you are dev",
		ConversationID: "c-2", Resume: true, TranscriptAfter: "rollout-x:120"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != session.KindCodex || got.AppendSystemPrompt != "you are dev" || got.ConversationID != "c-2" || !got.Resume ||
		got.TranscriptAfter != "rollout-x:120" || got.Home != agents.AgentHome(state, "o", "c") {
		t.Errorf("codex spec = %+v", got)
	}
	got, err = a.Spec(engine.SessionSpec{Launch: office.LaunchSpec{Kind: "command", Command: "qwen"}, SystemPrompt: "you are qa"})
	if err != nil || got.AppendSystemPrompt != "you are qa" {
		t.Errorf("command spec = %+v, %v", got, err)
	}
	got, err = a.Spec(engine.SessionSpec{Launch: office.LaunchSpec{Kind: "claude", Command: "node_modules/.bin/claude"}})
	if err != nil || !filepath.IsAbs(got.Command) {
		t.Errorf("relative claude command not made absolute: %q %v", got.Command, err)
	}
	// Every agent has a HOME of its own, private, unless its launch env names
	// one; a user: is passed on.
	got, err = a.Spec(engine.SessionSpec{OfficeID: "o", AgentID: "b", Launch: office.LaunchSpec{Kind: "command", Command: "/bin/sh", User: "nobody"}})
	if st, serr := os.Stat(got.Home); err != nil || serr != nil || got.Home != agents.AgentHome(state, "o", "b") || st.Mode().Perm() != 0o700 || got.User != "nobody" {
		t.Errorf("command spec: home %q (%v, %v), user %q", got.Home, err, serr, got.User)
	}
	got, err = a.Spec(engine.SessionSpec{OfficeID: "o", AgentID: "c", Launch: office.LaunchSpec{Kind: "command", Command: "/bin/sh", Env: map[string]string{"HOME": "/srv/c"}}})
	if err != nil || got.Home != "" {
		t.Errorf("a launch env HOME: spec home %q (%v), want it left to the env", got.Home, err)
	}
	for _, l := range []office.LaunchSpec{{Kind: "docker"}, {Kind: "builtin"}, {Kind: "command"}, {Kind: "command", Command: "sh", PromptPattern: "("}} {
		if _, err := a.Spec(engine.SessionSpec{Launch: l}); office.ErrorCode(err) != office.EINVALID {
			t.Errorf("Spec(%+v): err = %v, want EINVALID", l, err)
		}
	}
}

// TestCheckLaunch: what a session cannot run is refused before it is saved,
// with the reason; every kind the session layer knows is accepted.
func TestCheckLaunch(t *testing.T) {
	tests := []struct {
		l   office.LaunchSpec
		err string
	}{
		{office.LaunchSpec{}, ""},
		{office.LaunchSpec{Kind: session.KindClaude}, ""},
		{office.LaunchSpec{Kind: session.KindCommand, Command: "aider"}, ""},
		{office.LaunchSpec{Kind: session.KindBuiltin, Script: "po"}, ""},
		{office.LaunchSpec{Kind: session.KindCodex}, ""},
		{office.LaunchSpec{Kind: "docker"}, `unknown kind "docker"`},
		{office.LaunchSpec{Kind: session.KindCommand}, "kind command needs a command"},
		{office.LaunchSpec{Kind: session.KindBuiltin}, "kind builtin needs a script"},
		{office.LaunchSpec{Kind: session.KindCommand, Command: "sh", PromptPattern: "("}, "prompt pattern"},
	}
	for _, tt := range tests {
		err := agents.CheckLaunch(tt.l)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("CheckLaunch(%+v) = %v, want nil", tt.l, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || office.ErrorCode(err) != office.EINVALID):
			t.Errorf("CheckLaunch(%+v) = %v, want EINVALID %q", tt.l, err, tt.err)
		}
	}
}

// specPermissions: the permission policy becomes Claude Code's rules; its
// hook waits a minute longer than the office, so that the office answers
// first; a bad rule is refused.
func specPermissions(t *testing.T, a *agents.Sessions) {
	got, err := a.Spec(engine.SessionSpec{OfficeID: "o", AgentID: "a", PermissionTimeout: 5 * time.Minute,
		Launch: office.LaunchSpec{Kind: "claude", Permissions: &office.PermissionPolicy{Allow: []string{"Bash(go test:*)"}, Deny: []string{"WebFetch"}, Ask: []string{"Edit"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(got.Permissions, session.PermissionRules{Allow: []string{"Bash(go test:*)"}, Deny: []string{"WebFetch"}, Ask: []string{"Edit"}}); d != "" || got.PermissionHookTimeout != 6*time.Minute {
		t.Errorf("permission rules (-got +want):\n%s\nhook timeout %s, want 6m", d, got.PermissionHookTimeout)
	}
	if err := agents.CheckLaunch(office.LaunchSpec{Permissions: &office.PermissionPolicy{Allow: []string{"go test"}}}); office.ErrorCode(err) != office.EINVALID {
		t.Errorf("a launch spec with a bad permission rule: err = %v, want EINVALID", err)
	}
}
