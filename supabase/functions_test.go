package supabase

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/supabase/supabasetest"
)

// The office's functions (migrations/20261128100000_office_functions.sql
// and the office_* migrations after it) are the server's: over the REST
// API a member of the office and anon are refused (EXECUTE is granted to
// service_role only), and the server's key is served.
func TestOfficeFunctionsGrants(t *testing.T) {
	p := supabasetest.New(t)
	ctx := context.Background()
	st, err := New(p.URL, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	off, err := st.UpsertOffice(ctx, office.Office{Name: "grants"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := st.UpsertAgent(ctx, office.Agent{OfficeID: off.ID, Name: "po"})
	if err != nil {
		t.Fatal(err)
	}
	member := p.MemberOf(t, off.ID, "member@example.com")
	call := func(fn string, args map[string]any, token string) (int, string) { return rpcAs(t, p, fn, args, token) }
	due := map[string]any{"p_office_id": off.ID, "p_agent_id": a.ID}
	status := map[string]any{"p_office_id": off.ID, "p_agent_id": a.ID, "p_status": "busy", "p_detail": "",
		"p_process": false, "p_pid": 0, "p_exit_code": nil, "p_started_at": nil, "p_event_kind": nil, "p_event_payload": nil, "p_node": "",
		"p_agent_session_id": ""}
	mark := map[string]any{"p_office_id": off.ID, "p_agent_id": a.ID, "p_kind": "question", "p_id": a.ID,
		"p_event_kind": "question.delivered", "p_event_payload": nil, "p_busy": true}
	ask := map[string]any{"p_id": "8a4cbd6e-3f6a-4b8e-9c1d-2f3e4a5b6c7d", "p_office_id": off.ID, "p_agent_id": a.ID,
		"p_question_type": "text", "p_category": "", "p_question": "Which?", "p_options": []string{}, "p_default_answer": "",
		"p_context": "", "p_required": false, "p_ttl_seconds": 60, "p_asked_at": nil, "p_event_kind": nil, "p_event_dedupe_key": nil}
	result := map[string]any{"p_id": "9b5dce7f-4a7b-4c9f-8d2e-3a4b5c6d7e8f", "p_office_id": off.ID, "p_from_agent_id": a.ID,
		"p_to_agent_id": a.ID, "p_result_type": "message", "p_content_type": "text/plain", "p_content": "done", "p_to_name": "po",
		"p_event_kind": nil, "p_event_dedupe_key": nil, "p_completed_event_kind": nil, "p_completed_dedupe_key": nil}
	invoke := map[string]any{"p_id": "7c6bde8f-5b8c-4d0f-9e3f-4b5c6d7e8f90", "p_office_id": off.ID, "p_caller_agent_id": a.ID,
		"p_callee_agent_id": a.ID, "p_parent_invocation_id": nil, "p_depth": 1, "p_reason": "task", "p_context": "",
		"p_event_kind": nil, "p_event_payload": nil, "p_event_dedupe_key": nil}
	events := map[string]any{"p_events": []map[string]any{{"office_id": off.ID, "agent_id": a.ID, "kind": "message.step", "dedupe_key": "chunk#0"}}}
	notices := map[string]any{"p_office_id": off.ID, "p_agent_id": a.ID, "p_texts": []string{"[OFFICE] hello"}, "p_max": 20}
	// Every function: a member is refused (403), the anon key without a
	// token is not signed in (401), the server's key may (200); the
	// server's calls last, in this order.
	open := map[string]any{"p_office_id": off.ID}
	fns := []struct {
		fn   string
		args map[string]any
	}{
		{"office_add_notices", notices}, {"office_open_work", open}, {"office_append_events", events},
		{"office_due", due}, {"office_mark_delivered", mark}, {"office_ask", ask},
		{"office_deliver_result", result}, {"office_invoke", invoke}, {"office_set_session_status", status},
	}
	for _, who := range []struct {
		name, token string
		want        int
	}{{"member", member.Token, http.StatusForbidden}, {"anon", "", http.StatusUnauthorized}, {"server", p.Key, http.StatusOK}} {
		for _, f := range fns {
			if got, body := call(f.fn, f.args, who.token); got != who.want {
				t.Errorf("%s calls %s: %d %s; want %d", who.name, f.fn, got, body, who.want)
			}
		}
	}
	if rec, err := st.GetSessionByAgent(ctx, a.ID); err != nil || rec.Status != office.SessionBusy {
		t.Errorf("after the server's calls the session is %+v, %v; want busy", rec, err)
	}
	checkMemberReadsNoNotices(t, p, member.Token)
	if w, err := st.ListDue(ctx, off.ID, a.ID); err != nil || len(w.Notices) != 1 {
		t.Errorf("after the server's office_add_notices: %d notices due, %v; want 1", len(w.Notices), err)
	}
	if q, err := st.GetQuestion(ctx, ask["p_id"].(string)); err != nil || q.Question != "Which?" {
		t.Errorf("after the server's office_ask the question is %+v, %v; want it stored", q, err)
	}
}

// checkMemberReadsNoNotices: the notices are the server's own, a member
// reads none of them.
func checkMemberReadsNoNotices(t *testing.T, p *supabasetest.Project, token string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, p.URL+"/rest/v1/office_notices?select=text", nil)
	req.Header.Set("apikey", p.AnonKey)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("a member reads office_notices: %d %s; want 403", res.StatusCode, b)
	}
}

// rpcAs calls the function fn over the project's REST API with the anon
// key and token (none when empty); it returns the status and body.
func rpcAs(t *testing.T, p *supabasetest.Project, fn string, args map[string]any, token string) (int, string) {
	body, _ := json.Marshal(args)
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/rest/v1/rpc/"+fn, bytes.NewReader(body))
	req.Header.Set("apikey", p.AnonKey)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}
