package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
)

// TestSessionSpecMapping checks that the server's adapter hands the session
// layer everything the office decided: a Claude Code agent's conversation,
// its resume cursor (so a restarted server does not re-read the transcript)
// and its instructions; a builtin agent runs this executable's agent script.
func TestSessionSpecMapping(t *testing.T) {
	a := &officeSessions{agentBin: "/bin/office-server"}
	got, err := a.spec(office.SessionSpec{
		OfficeID: "o", AgentID: "a", Dir: "/w", Home: "/h", Env: []string{"K=v"},
		Launch:         office.LaunchSpec{Kind: "claude", Model: "m", PermissionMode: "acceptEdits", Env: map[string]string{"Z": "1", "A": "2"}},
		SystemPrompt:   "you are po",
		ConversationID: "c-1", Resume: true, TranscriptAfter: "uuid-9",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := session.Spec{
		Kind: session.KindClaude, Command: "", Env: []string{"K=v", "A=2", "Z=1"}, Dir: "/w",
		ConversationID: "c-1", Resume: true, TranscriptAfter: "uuid-9",
		AppendSystemPrompt: "you are po", PermissionMode: "acceptEdits", Model: "m", Home: "/h",
	}
	if d := cmp.Diff(got, want); d != "" {
		t.Errorf("claude spec (-got +want):\n%s", d)
	}

	got, err = a.spec(office.SessionSpec{Launch: office.LaunchSpec{Kind: "builtin", Script: "po", Args: []string{"--step", "1s"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != session.KindCommand || got.Command != "/bin/office-server" ||
		!cmp.Equal(got.Args, []string{"agent", "--script", "po", "--step", "1s"}) || got.PromptPattern != builtinPrompt {
		t.Errorf("builtin spec = %+v", got)
	}
	if _, err := a.spec(office.SessionSpec{Launch: office.LaunchSpec{Kind: "docker"}}); office.ErrorCode(err) != office.EINVALID {
		t.Errorf("unknown kind: err = %v, want EINVALID", err)
	}
}
