package storetest

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
)

// testProxyWork checks office.ProxyWork: a parked request is a row that
// reads back as written, its transition happens once (and creates its
// tasks with it), tasks are listed by proxy and status (a proxy's load),
// and a task's status changes by (office, id).
func testProxyWork(t *testing.T, fx *fixture) {
	payload := json.RawMessage(`{"action":"create_plan","requester":"Dev","tasks":[{"content":"API 엔드포인트 구현"}]}`)
	exp := now().Add(time.Hour)
	r, err := fx.s.CreateProxyRequest(fx.ctx, office.ProxyRequest{OfficeID: fx.office.ID, RequesterAgentID: fx.a.ID,
		ProxyAgentID: fx.b.ID, Action: "create_plan", Payload: payload, Reason: "Reviewer is busy", ExpiresAt: exp})
	if err != nil {
		t.Fatalf("CreateProxyRequest: %v", err)
	}
	if r.ID == "" || r.Status != office.ProxyParked || r.ProxyAgentID != fx.b.ID || r.Reason != "Reviewer is busy" {
		t.Fatalf("created %+v; want an ID, parked, waiting for Reviewer", r)
	}
	if !jsonEqual(r.Payload, payload) {
		t.Fatalf("payload read back %s, want %s", r.Payload, payload)
	}
	if _, err := fx.s.CreateProxyRequest(fx.ctx, office.ProxyRequest{ID: r.ID, OfficeID: fx.office.ID, RequesterAgentID: fx.a.ID,
		Action: "create_plan", Payload: payload, ExpiresAt: exp}); office.ErrorCode(err) != office.ECONFLICT {
		t.Fatalf("CreateProxyRequest with an existing ID: %v, want ECONFLICT", err)
	}
	if _, err := fx.s.CreateProxyRequest(fx.ctx, office.ProxyRequest{OfficeID: fx.office.ID, RequesterAgentID: fx.a.ID,
		Action: "create_plan", Payload: payload}); office.ErrorCode(err) != office.EINVALID {
		t.Fatalf("CreateProxyRequest without expiry: %v, want EINVALID", err)
	}
	got, err := fx.s.GetProxyRequest(fx.ctx, r.ID)
	if err != nil || got.ID != r.ID || !got.ExpiresAt.Round(time.Second).Equal(exp.Round(time.Second)) {
		t.Fatalf("GetProxyRequest = %+v, %v", got, err)
	}
	if _, err := fx.s.GetProxyRequest(fx.ctx, uuid.NewString()); office.ErrorCode(err) != office.ENOTFOUND {
		t.Fatalf("GetProxyRequest(unknown): %v, want ENOTFOUND", err)
	}
	parked, err := fx.s.ListProxyRequests(fx.ctx, office.ProxyRequestFilter{Status: []string{office.ProxyParked}})
	if err != nil || len(parked) != 1 || parked[0].ID != r.ID {
		t.Fatalf("ListProxyRequests(parked) = %+v, %v", parked, err)
	}

	testProxyRace(t, fx, r)
	testProxyTaskStatus(t, fx, r)
	testProxyBackedUp(t, fx, payload, exp)
	testProxyTaskConflict(t, fx, payload, exp)
}

// testProxyRace: of eight racing transitions of the parked request r to
// assigned exactly one wins, and the request keeps its reason.
func testProxyRace(t *testing.T, fx *fixture, r office.ProxyRequest) {
	// Racing transitions: exactly one wins, and the tasks are created once.
	tasks := []office.ProxyTask{
		{ID: "d-aaa111", ProxyAgentID: fx.b.ID, Content: "API 엔드포인트 구현", Priority: "high"},
		{ID: "d-bbb222", ProxyAgentID: fx.b.ID, Content: "tests"},
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ok, err := fx.s.TransitionProxyRequest(fx.ctx, r.ID, []string{office.ProxyParked}, office.ProxyAssigned,
				office.ProxyRequestPatch{ProxyAgentID: fx.b.ID, Tasks: tasks})
			if err != nil {
				t.Errorf("TransitionProxyRequest: %v", err)
			}
			if ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d transitions won, want 1", wins)
	}
	got, _ := fx.s.GetProxyRequest(fx.ctx, r.ID)
	if got.Status != office.ProxyAssigned || got.Reason != "Reviewer is busy" {
		t.Fatalf("after transition: %+v", got)
	}
}

// testProxyTaskStatus: the assigned request r's two tasks were created once,
// open for the proxy; a task's status changes by (office, id) only, and the
// proxy's open tasks and a task by ID are listed.
func testProxyTaskStatus(t *testing.T, fx *fixture, r office.ProxyRequest) {
	open, err := fx.s.ListProxyTasks(fx.ctx, office.ProxyTaskFilter{OfficeID: fx.office.ID, ProxyAgentID: fx.b.ID, Status: office.ProxyTaskOpen})
	if err != nil || len(open) != 2 {
		t.Fatalf("open tasks of the proxy = %+v, %v; want 2", open, err)
	}
	for _, tk := range open {
		if tk.RequestID != r.ID || tk.RequesterAgentID != fx.a.ID || tk.Status != office.ProxyTaskPending || tk.Priority == "" {
			t.Errorf("task %+v", tk)
		}
	}
	tk, ok, err := fx.s.SetProxyTaskStatus(fx.ctx, fx.office.ID, "d-aaa111", office.ProxyTaskCompleted)
	if err != nil || !ok || tk.Status != office.ProxyTaskCompleted || tk.Content != "API 엔드포인트 구현" {
		t.Fatalf("SetProxyTaskStatus = %+v %v %v", tk, ok, err)
	}
	if _, ok, err := fx.s.SetProxyTaskStatus(fx.ctx, fx.office.ID, "nope", office.ProxyTaskCompleted); ok || err != nil {
		t.Fatalf("SetProxyTaskStatus(unknown) = %v %v; want not ok, no error", ok, err)
	}
	other := fx.mkOffice(t, "Other "+uuid.NewString()[:8])
	if _, ok, err := fx.s.SetProxyTaskStatus(fx.ctx, other.ID, "d-bbb222", office.ProxyTaskCompleted); ok || err != nil {
		t.Fatalf("SetProxyTaskStatus(other office) = %v %v; want not ok", ok, err)
	}
	open, _ = fx.s.ListProxyTasks(fx.ctx, office.ProxyTaskFilter{OfficeID: fx.office.ID, ProxyAgentID: fx.b.ID, Status: office.ProxyTaskOpen})
	if len(open) != 1 || open[0].ID != "d-bbb222" {
		t.Fatalf("open tasks after one closed = %+v", open)
	}
	byID, err := fx.s.ListProxyTasks(fx.ctx, office.ProxyTaskFilter{OfficeID: fx.office.ID, ID: "d-aaa111"})
	if err != nil || len(byID) != 1 {
		t.Fatalf("ListProxyTasks(ID) = %+v, %v", byID, err)
	}
}

// testProxyBackedUp: a request with no proxy moves from parked to backed up
// with its file, once, leaving nothing parked in the office.
func testProxyBackedUp(t *testing.T, fx *fixture, payload json.RawMessage, exp time.Time) {
	// A backed-up request: no proxy, a file.
	r2, err := fx.s.CreateProxyRequest(fx.ctx, office.ProxyRequest{OfficeID: fx.office.ID, RequesterAgentID: fx.a.ID,
		Action: "create_plan", Payload: payload, ExpiresAt: exp})
	if err != nil {
		t.Fatal(err)
	}
	b, ok, err := fx.s.TransitionProxyRequest(fx.ctx, r2.ID, []string{office.ProxyParked}, office.ProxyBackedUp,
		office.ProxyRequestPatch{Reason: "no proxy", BackupPath: "/data/x.json", Tasks: []office.ProxyTask{{ID: "d-ccc333", Content: "c"}}})
	if err != nil || !ok || b.BackupPath != "/data/x.json" || b.ProxyAgentID != "" || b.Status != office.ProxyBackedUp {
		t.Fatalf("backed up: %+v %v %v", b, ok, err)
	}
	if _, ok, _ := fx.s.TransitionProxyRequest(fx.ctx, r2.ID, []string{office.ProxyParked}, office.ProxyAssigned, office.ProxyRequestPatch{}); ok {
		t.Fatal("a backed-up request moved again from parked")
	}
	if parked, _ := fx.s.ListProxyRequests(fx.ctx, office.ProxyRequestFilter{OfficeID: fx.office.ID, Status: []string{office.ProxyParked}}); len(parked) != 0 {
		t.Fatalf("parked left: %+v", parked)
	}
}

// testProxyTaskConflict: a transition whose tasks reuse a task ID taken in
// the office is ECONFLICT; the request stays parked with no task of its own.
func testProxyTaskConflict(t *testing.T, fx *fixture, payload json.RawMessage, exp time.Time) {
	// A task ID taken in the office: ECONFLICT, and the request stays
	// where it was, with no task of its own.
	r3, err := fx.s.CreateProxyRequest(fx.ctx, office.ProxyRequest{OfficeID: fx.office.ID, RequesterAgentID: fx.a.ID,
		Action: "create_plan", Payload: payload, ExpiresAt: exp})
	if err != nil {
		t.Fatal(err)
	}
	_, ok, err := fx.s.TransitionProxyRequest(fx.ctx, r3.ID, []string{office.ProxyParked}, office.ProxyAssigned,
		office.ProxyRequestPatch{ProxyAgentID: fx.b.ID, Tasks: []office.ProxyTask{{ID: "d-new444", ProxyAgentID: fx.b.ID, Content: "n"}, {ID: "d-bbb222", ProxyAgentID: fx.b.ID, Content: "dup"}}})
	if office.ErrorCode(err) != office.ECONFLICT || ok {
		t.Fatalf("transition with a taken task ID: ok %v, err %v; want ECONFLICT", ok, err)
	}
	if got, _ := fx.s.GetProxyRequest(fx.ctx, r3.ID); got.Status != office.ProxyParked {
		t.Fatalf("after a refused transition the request is %s, want parked", got.Status)
	}
	if ts, _ := fx.s.ListProxyTasks(fx.ctx, office.ProxyTaskFilter{RequestID: r3.ID}); len(ts) != 0 {
		t.Fatalf("a refused transition created tasks %+v", ts)
	}
}
