package storetest

import (
	"testing"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
)

// testPermissionGrants checks office.PermissionGrants: a grant reads back
// for its agent's conversation only, the same rule twice is ECONFLICT, a
// grant without a rule is EINVALID, and ending an agent's grants deletes
// all of them and no other agent's.
func testPermissionGrants(t *testing.T, fx *fixture) {
	qid := uuid.NewString()
	add := func(a office.Agent, conv, rule, q string) error {
		return fx.s.AddPermissionGrant(fx.ctx, office.PermissionGrant{OfficeID: fx.office.ID, AgentID: a.ID, ConversationID: conv, Rule: rule, QuestionID: q})
	}
	for _, g := range []struct {
		a          office.Agent
		conv, rule string
		q          string
	}{{fx.a, "conv-1", "Bash(npm test:*)", qid}, {fx.a, "conv-1", "Edit(/w/a.go)", ""}, {fx.a, "conv-2", "Bash(npm test:*)", ""}, {fx.b, "conv-1", "Bash", ""}} {
		if err := add(g.a, g.conv, g.rule, g.q); err != nil {
			t.Fatalf("AddPermissionGrant(%s, %s, %s): %v", g.a.Name, g.conv, g.rule, err)
		}
	}
	if err := add(fx.a, "conv-1", "Bash(npm test:*)", ""); office.ErrorCode(err) != office.ECONFLICT {
		t.Errorf("the same grant twice: %v, want ECONFLICT", err)
	}
	if err := add(fx.a, "conv-1", "", ""); office.ErrorCode(err) != office.EINVALID {
		t.Errorf("a grant without a rule: %v, want EINVALID", err)
	}
	gs, err := fx.s.ListPermissionGrants(fx.ctx, fx.a.ID, "conv-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 2 || gs[0].Rule != "Bash(npm test:*)" || gs[0].QuestionID != qid || gs[0].ConversationID != "conv-1" ||
		gs[0].OfficeID != fx.office.ID || gs[0].AgentID != fx.a.ID || gs[0].CreatedAt.IsZero() || gs[1].Rule != "Edit(/w/a.go)" || gs[1].QuestionID != "" {
		t.Errorf("grants of Dev's conv-1: %+v; want Bash(npm test:*) (with its question) then Edit(/w/a.go)", gs)
	}
	if gs, _ := fx.s.ListPermissionGrants(fx.ctx, fx.a.ID, "conv-3"); len(gs) != 0 {
		t.Errorf("grants of a conversation with none: %+v", gs)
	}
	n, err := fx.s.EndPermissionGrants(fx.ctx, fx.a.ID)
	if err != nil || n != 3 {
		t.Errorf("EndPermissionGrants(Dev) = %d, %v; want 3", n, err)
	}
	for _, conv := range []string{"conv-1", "conv-2"} {
		if gs, _ := fx.s.ListPermissionGrants(fx.ctx, fx.a.ID, conv); len(gs) != 0 {
			t.Errorf("Dev's %s grants after the end: %+v", conv, gs)
		}
	}
	if gs, _ := fx.s.ListPermissionGrants(fx.ctx, fx.b.ID, "conv-1"); len(gs) != 1 || gs[0].Rule != "Bash" {
		t.Errorf("Reviewer's grants after Dev's end: %+v; want Bash", gs)
	}
	if n, err := fx.s.EndPermissionGrants(fx.ctx, fx.a.ID); err != nil || n != 0 {
		t.Errorf("EndPermissionGrants again = %d, %v; want 0", n, err)
	}
}
