package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/supabase/supabasetest"
)

// testSecretsKey is OFFICE_SECRETS_KEY of the servers the Supabase tests
// run: members give secrets to the server, which seals them with it.
const testSecretsKey = "6f66666963652d7365727665722d746573742d736563726574732d6b65792121"

// checkSealedSecret checks that the dependency's stored value is sealed
// with AES-256-GCM under testSecretsKey (office.Sealer), opens to want, and
// does not hold it in clear.
func checkSealedSecret(t *testing.T, conn *pgx.Conn, id, want string) {
	t.Helper()
	var sealed []byte
	if err := conn.QueryRow(context.Background(), `select value from public.dependency_requests where id = $1`, id).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if len(sealed) == 0 || sealed[0] != 'E' || strings.Contains(string(sealed), want) {
		t.Fatalf("secret stored as %q; want sealed with the server's key (E…), not in clear", sealed)
	}
	key, _ := hex.DecodeString(testSecretsKey)
	sealer, err := office.NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := sealer.Open(sealed); err != nil || v != want {
		t.Fatalf("stored secret opens to %q, %v; want %q", v, err, want)
	}
}

// officesSeen returns the ids of the offices a member reads over the
// project's REST API with their own token (RLS: their offices only).
func officesSeen(t *testing.T, p *supabasetest.Project, m supabasetest.Member) []string {
	t.Helper()
	var rows []struct {
		ID string `json:"id"`
	}
	restAPI(t, p, p.PublishableKey, m.Token).get("/rest/v1/offices?select=id", &rows)
	ids := make([]string, 0, len(rows))
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	return ids
}

// adminManagesMembers drives the admin API's members endpoints against
// the running server on the stand-in project, and checks each change with
// the member's own token over REST: B (not a member of office A by now)
// is added by email in another case and then reads office A; an unknown
// email is invited; the list has emails, roles and invitations; bad
// requests get 400, 404 and 409; removed, B reads office A no more.
func adminManagesMembers(t *testing.T, r *liveServer, p *supabasetest.Project, officeA string, a, b supabasetest.Member) {
	t.Helper()
	path := "/api/offices/" + officeA + "/members"
	has := func(ids []string, id string) bool {
		for _, x := range ids {
			if x == id {
				return true
			}
		}
		return false
	}
	if has(officesSeen(t, p, b), officeA) {
		t.Fatal("member B reads office A before the admin adds them")
	}
	st, body := r.do(t, "POST", path, `{"email":"B@Example.com"}`)
	var m office.Member
	if err := json.Unmarshal([]byte(body), &m); st != http.StatusCreated || err != nil || m.UserID != b.ID || m.Status != office.MemberJoined || m.Role != office.RoleMember {
		t.Fatalf("admin adds b@example.com: %d %s", st, body)
	}
	if !has(officesSeen(t, p, b), officeA) {
		t.Fatal("member B added by the admin does not read office A")
	}
	for _, c := range []struct {
		body string
		want int
	}{
		{`{"email":"b@example.com"}`, http.StatusConflict},
		{`{"user_id":"` + b.ID + `"}`, http.StatusConflict},
		{`{"user_id":"` + uuid.NewString() + `"}`, http.StatusNotFound},
		{`{"email":"later@example.com","role":"boss"}`, http.StatusBadRequest},
		{`{"email":"not-an-email"}`, http.StatusBadRequest},
		{`{}`, http.StatusBadRequest},
		{`{"email":"x@example.com","user_id":"` + b.ID + `"}`, http.StatusBadRequest},
	} {
		if st, body := r.do(t, "POST", path, c.body); st != c.want || !strings.Contains(body, `"message"`) {
			t.Errorf("POST %s %s = %d %s; want %d with a message", path, c.body, st, body, c.want)
		}
	}
	if st, body := r.do(t, "POST", path, `{"email":"later@example.com","role":"admin"}`); st != http.StatusCreated || !strings.Contains(body, `"status":"invited"`) {
		t.Fatalf("admin adds an email without an account: %d %s; want an invitation", st, body)
	}
	var list []office.Member
	r.get(t, path, &list)
	var got []string
	for _, m := range list {
		got = append(got, m.Email+" "+m.Role+" "+m.Status)
	}
	want := "a@example.com owner member|newcomer@example.com member member|b@example.com member member|later@example.com admin invited" // newcomer joined in check 24
	if strings.Join(got, "|") != want {
		t.Fatalf("GET %s = %q; want %q", path, got, want)
	}
	if st, body := r.do(t, "DELETE", path+"/"+b.ID, ""); st != http.StatusOK || !strings.Contains(body, b.ID) {
		t.Fatalf("admin removes B: %d %s", st, body)
	}
	if has(officesSeen(t, p, b), officeA) {
		t.Fatal("member B removed by the admin still reads office A")
	}
	if st, body := r.do(t, "DELETE", path+"/"+b.ID, ""); st != http.StatusNotFound {
		t.Fatalf("removing B again: %d %s; want 404", st, body)
	}
	if st, body := r.do(t, "DELETE", path+"/later@example.com", ""); st != http.StatusOK || !strings.Contains(body, `"status":"invited"`) {
		t.Fatalf("admin withdraws an invitation: %d %s", st, body)
	}
	if st, _ := r.do(t, "DELETE", path+"/"+a.ID, ""); st != http.StatusOK {
		t.Fatalf("admin removes owner A: %d", st)
	}
	if has(officesSeen(t, p, a), officeA) {
		t.Fatal("member A removed by the admin still reads office A")
	}
}

// TestMembersSQLite: with the embedded store there are no members (they
// are Supabase users): the members endpoints and the member endpoints
// answer 501 and say why, rather than 404 or an empty list.
func TestMembersSQLite(t *testing.T) {
	t.Setenv("SUPABASE_JWT_SECRET", "")
	r := startMain(t, "--no-autostart")
	oid := r.officeID(t)
	if st, body := r.do(t, "GET", "/api/offices/"+oid+"/members", ""); st != http.StatusNotImplemented || !strings.Contains(body, "SQLite") {
		t.Errorf("GET members on SQLite = %d %s; want 501 saying why", st, body)
	}
	if st, body := r.do(t, "POST", "/api/offices/"+oid+"/members", `{"email":"a@example.com"}`); st != http.StatusNotImplemented {
		t.Errorf("POST members on SQLite = %d %s; want 501", st, body)
	}
	member := apiClient{t: t, base: r.base, token: supabasetest.Sign(map[string]any{"sub": uuid.NewString(), "role": "authenticated", "exp": 4102444800})}
	if st, b := member.text("POST", "/api/member/dependencies/"+uuid.NewString()+"/provide", `{"value":"x"}`); st != http.StatusNotImplemented || !strings.Contains(b, "SUPABASE_JWT_SECRET") {
		t.Errorf("member endpoint without a JWT secret = %d %s; want 501 naming SUPABASE_JWT_SECRET", st, b)
	}
}

// TestConsoleMembers drives the console's members panel in the real
// headless Chromium, with the server on the stand-in Supabase project: the
// operator adds a user by email (who then reads the office with their own
// token), invites an email without an account, and removes the member
// (who then reads nothing).
func TestConsoleMembers(t *testing.T) {
	bin := testenv.Chromium(t)
	p := supabasetest.New(t)
	r := startSupabaseMain(t, p)
	r.waitReady(t, "at start")
	officeID := r.officeID(t)
	user := p.NewMember(t, "console@example.com")

	ctx := chromeContext(t, bin, 90*time.Second)
	defer func() {
		if t.Failed() {
			saveScreenshot(t, ctx, "console-members-failed.png")
		}
	}()
	// Typed into the box and entered, as a person does: a click at the
	// button's position could land elsewhere when the sections above it
	// re-render and move it (seen once under load: no request was made).
	add := func(who string) {
		t.Helper()
		if err := chromedp.Do(ctx,
			chromedp.SendKeys(chromedp.CSS(`#memberwho`), who+"\r"), // empty: cleared after each add
		); err != nil {
			t.Fatalf("add %s: %v", who, err)
		}
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(r.base+"/?token="+r.token),
		chromedp.WaitVisible(chromedp.CSS(`body[data-ready="yes"] #memberadd`)),
	); err != nil {
		t.Fatalf("open console: %v", err)
	}
	add("Console@Example.com")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#members tr[data-email="console@example.com"][data-status="member"]`))); err != nil {
		t.Fatalf("the added member in the panel: %v", err)
	}
	if ids := officesSeen(t, p, user); len(ids) != 1 || ids[0] != officeID {
		t.Fatalf("the member added in the console reads offices %v; want [%s]", ids, officeID)
	}
	add("someone-new@example.com")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#members tr[data-email="someone-new@example.com"][data-status="invited"]`))); err != nil {
		t.Fatalf("the invitation in the panel: %v", err)
	}
	note, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#membersnote').textContent`))
	if err != nil || !strings.Contains(note, "invited") {
		t.Fatalf("note after inviting: %q, %v", note, err)
	}
	// Remove asks to be confirmed: the first click arms it, the second removes.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#members tr[data-email="console@example.com"] button.remove`)),
		chromedp.WaitVisible(chromedp.CSS(`#members tr[data-email="console@example.com"] button.remove[data-armed="yes"]`)),
		chromedp.Click(chromedp.CSS(`#members tr[data-email="console@example.com"] button.remove`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#members tr[data-email="console@example.com"]`)),
	); err != nil {
		t.Fatalf("remove the member in the panel: %v", err)
	}
	if ids := officesSeen(t, p, user); len(ids) != 0 {
		t.Fatalf("the removed member still reads offices %v", ids)
	}
}
