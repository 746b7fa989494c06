package engine

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/proxy"
)

// memProxy is memStore's office.ProxyWork: requests by ID, tasks by
// office and ID.
type memProxy struct {
	reqs  map[string]office.ProxyRequest
	tasks map[[2]string]office.ProxyTask
}

func (s *memStore) proxyMaps() *memProxy {
	if s.proxy.reqs == nil {
		s.proxy.reqs = map[string]office.ProxyRequest{}
		s.proxy.tasks = map[[2]string]office.ProxyTask{}
	}
	return &s.proxy
}

func (s *memStore) CreateProxyRequest(_ context.Context, r office.ProxyRequest) (office.ProxyRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.proxyMaps()
	if r.ID == "" {
		r.ID = uuid.NewString()
	} else if _, dup := m.reqs[r.ID]; dup {
		return r, office.Errorf(office.ECONFLICT, "duplicate id %s", r.ID)
	}
	if r.Status == "" {
		r.Status = office.ProxyParked
	}
	r.CreatedAt = s.tick()
	r.UpdatedAt = r.CreatedAt
	m.reqs[r.ID] = r
	return r, nil
}

func (s *memStore) GetProxyRequest(_ context.Context, id string) (office.ProxyRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.proxyMaps().reqs[id]
	if !ok {
		return r, notFound("proxy request", id)
	}
	return r, nil
}

func (s *memStore) ListProxyRequests(_ context.Context, f office.ProxyRequestFilter) ([]office.ProxyRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []office.ProxyRequest
	for _, r := range s.proxyMaps().reqs {
		if (f.OfficeID == "" || r.OfficeID == f.OfficeID) && (len(f.Status) == 0 || slices.Contains(f.Status, r.Status)) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b office.ProxyRequest) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

func (s *memStore) TransitionProxyRequest(_ context.Context, id string, from []string, to string, p office.ProxyRequestPatch) (office.ProxyRequest, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.proxyMaps()
	r, ok := m.reqs[id]
	if !ok || !slices.Contains(from, r.Status) {
		return office.ProxyRequest{}, false, nil
	}
	for _, t := range p.Tasks {
		if _, dup := m.tasks[[2]string{r.OfficeID, t.ID}]; dup {
			return office.ProxyRequest{}, false, office.Errorf(office.ECONFLICT, "task %s exists", t.ID)
		}
	}
	r.Status = to
	if p.ProxyAgentID != "" {
		r.ProxyAgentID = p.ProxyAgentID
	}
	if p.Reason != "" {
		r.Reason = p.Reason
	}
	if p.BackupPath != "" {
		r.BackupPath = p.BackupPath
	}
	r.UpdatedAt = s.tick()
	m.reqs[id] = r
	for _, t := range p.Tasks {
		t.OfficeID, t.RequestID, t.RequesterAgentID = r.OfficeID, r.ID, r.RequesterAgentID
		if t.Status == "" {
			t.Status = office.ProxyTaskPending
		}
		if t.Priority == "" {
			t.Priority = "medium"
		}
		t.CreatedAt = s.tick()
		m.tasks[[2]string{t.OfficeID, t.ID}] = t
	}
	return r, true, nil
}

func (s *memStore) ListProxyTasks(_ context.Context, f office.ProxyTaskFilter) ([]office.ProxyTask, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []office.ProxyTask
	for _, t := range s.proxyMaps().tasks {
		if (f.OfficeID == "" || t.OfficeID == f.OfficeID) && (f.ID == "" || t.ID == f.ID) &&
			(f.ProxyAgentID == "" || t.ProxyAgentID == f.ProxyAgentID) && (f.RequestID == "" || t.RequestID == f.RequestID) &&
			(len(f.Status) == 0 || slices.Contains(f.Status, t.Status)) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b office.ProxyTask) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

func (s *memStore) SetProxyTaskStatus(_ context.Context, officeID, id, status string) (office.ProxyTask, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.proxyMaps()
	t, ok := m.tasks[[2]string{officeID, id}]
	if !ok {
		return t, false, nil
	}
	t.Status = status
	t.UpdatedAt = s.tick()
	m.tasks[[2]string{officeID, id}] = t
	return t, true, nil
}

// TestProxyTaskIDTaken: when a task ID the office derives is taken
// already, the tasks are named again and the request still goes through.
func TestProxyTaskIDTaken(t *testing.T) {
	h := newHarness(t, nil,
		office.Agent{Name: "pm", Capabilities: []string{"todowrite", "todoread"}, Priority: 1, MaxLoad: 5},
		office.Agent{Name: "senior-sw-engineer"})
	h.run("pm")
	h.run("senior-sw-engineer")
	ctx := context.Background()
	const chunk = "chunk-taken"
	body := `{"action":"create_plan","requester":"senior-sw-engineer","tasks":[{"content":"API"}]}`
	rowID := source{officeID: h.office.ID, key: chunk + "#0"}.rowID("proxy")
	req, err := proxy.ParseAction([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := proxyTasks(h.agents["senior-sw-engineer"], office.ProxyRequest{ID: rowID}, req, "", 0)
	other, err := h.st.CreateProxyRequest(ctx, office.ProxyRequest{OfficeID: h.office.ID, RequesterAgentID: h.id("senior-sw-engineer"), Action: "create_plan", Payload: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := h.st.TransitionProxyRequest(ctx, other.ID, []string{office.ProxyParked}, office.ProxyAssigned,
		office.ProxyRequestPatch{ProxyAgentID: h.id("pm"), Tasks: []office.ProxyTask{{ID: want[0].ID, ProxyAgentID: h.id("pm"), Content: "x"}}}); !ok || err != nil {
		t.Fatalf("taking the ID: %v %v", ok, err)
	}
	h.sayID("senior-sw-engineer", chunk, "[PROXY_REQUEST]\n"+body+"\n[/PROXY_REQUEST]")
	got := h.typed("senior-sw-engineer", "[PROXY_RESPONSE]")
	if !strings.Contains(got, `"success":true`) || strings.Contains(got, want[0].ID) || !strings.Contains(got, `"task_ids":["sse-`) {
		t.Fatalf("response %q; the taken ID is %s", got, want[0].ID)
	}
}
