package postgres_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/store/postgres"
)

// TestMembers: the admin API's member management on a database laid out as
// a Supabase project's, as a role without superuser powers: add by user id
// and by email (any case; an unknown email is invited), list with emails
// and invitations, the role a member has, remove by user id and by email,
// and each refusal with its code.
func TestMembers(t *testing.T) {
	ctx := context.Background()
	app, admin := supabaseLike(t)
	s, err := postgres.Open(ctx, app, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o, err := s.UpsertOffice(ctx, office.Office{Name: "Members"})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	ann, bob := uuid.NewString(), uuid.NewString()
	if _, err := conn.Exec(ctx, `insert into auth.users (id, email) values ($1, 'Ann@Example.com'), ($2, 'bob@example.com')`, ann, bob); err != nil {
		t.Fatal(err)
	}

	m, err := s.AddMember(ctx, office.Member{OfficeID: o.ID, Email: "ann@example.COM ", Role: office.RoleOwner})
	if err != nil || m.UserID != ann || m.Status != office.MemberJoined || m.Role != office.RoleOwner {
		t.Fatalf("add by email = %+v, %v; want ann added as owner", m, err)
	}
	if m, err = s.AddMember(ctx, office.Member{OfficeID: o.ID, UserID: bob}); err != nil || m.Email != "bob@example.com" || m.Role != office.RoleMember {
		t.Fatalf("add by user id = %+v, %v; want bob as member", m, err)
	}
	if m, err = s.AddMember(ctx, office.Member{OfficeID: o.ID, Email: "carol@example.com"}); err != nil || m.Status != office.MemberInvited || m.UserID != "" {
		t.Fatalf("add an unknown email = %+v, %v; want an invitation", m, err)
	}
	for _, bad := range []struct {
		m    office.Member
		code string
	}{
		{office.Member{OfficeID: o.ID, UserID: bob}, office.ECONFLICT},
		{office.Member{OfficeID: o.ID, Email: "BOB@example.com"}, office.ECONFLICT},
		{office.Member{OfficeID: o.ID, UserID: uuid.NewString()}, office.ENOTFOUND},
		{office.Member{OfficeID: uuid.NewString(), UserID: bob}, office.ENOTFOUND},
		{office.Member{OfficeID: o.ID, Email: "not an email"}, office.EINVALID},
		{office.Member{OfficeID: o.ID, Email: "dan@example.com", Role: "boss"}, office.EINVALID},
		{office.Member{OfficeID: o.ID, UserID: bob, Email: "bob@example.com"}, office.EINVALID},
		{office.Member{OfficeID: o.ID, UserID: "bob"}, office.EINVALID},
	} {
		if _, err := s.AddMember(ctx, bad.m); office.ErrorCode(err) != bad.code || office.ErrorMessage(err) == "" {
			t.Errorf("AddMember(%+v) = %v (%s); want %s with a message", bad.m, err, office.ErrorCode(err), bad.code)
		}
	}

	list, err := s.ListMembers(ctx, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range list {
		got = append(got, m.Email+" "+m.Role+" "+m.Status)
	}
	want := []string{"Ann@Example.com owner member", "bob@example.com member member", "carol@example.com member invited"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("members = %q; want %q", got, want)
	}
	if role, err := s.MemberRole(ctx, o.ID, ann); err != nil || role != office.RoleOwner {
		t.Fatalf("ann's role = %q, %v", role, err)
	}

	removeMembers(t, s, o.ID, ann, bob)
}

// removeMembers: remove by user id and by email (any case), an invitation
// too; the operator may remove the last owner; then no member is left.
func removeMembers(t *testing.T, s *postgres.Store, officeID, ann, bob string) {
	ctx := context.Background()
	if m, err := s.RemoveMember(ctx, officeID, bob, ""); err != nil || m.UserID != bob || m.Role != office.RoleMember {
		t.Fatalf("remove bob = %+v, %v", m, err)
	}
	if _, err := s.MemberRole(ctx, officeID, bob); !office.IsNotFound(err) {
		t.Fatalf("bob's role after removal: %v; want not found", err)
	}
	if _, err := s.RemoveMember(ctx, officeID, bob, ""); !office.IsNotFound(err) {
		t.Fatalf("remove bob again: %v; want not found", err)
	}
	if m, err := s.RemoveMember(ctx, officeID, "", "Carol@example.com"); err != nil || m.Status != office.MemberInvited {
		t.Fatalf("remove carol's invitation = %+v, %v", m, err)
	}
	// The operator may remove the last owner (members may not: the
	// office_keep_an_owner trigger binds them only).
	if m, err := s.RemoveMember(ctx, officeID, "", "ann@example.com"); err != nil || m.UserID != ann {
		t.Fatalf("remove ann by email = %+v, %v", m, err)
	}
	if list, err := s.ListMembers(ctx, officeID); err != nil || len(list) != 0 {
		t.Fatalf("members at the end = %+v, %v; want none", list, err)
	}
	if _, err := s.ListMembers(ctx, uuid.NewString()); !office.IsNotFound(err) {
		t.Fatalf("members of no office: %v; want not found", err)
	}
}
