package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/proxy"
)

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
	other, err := h.st.CreateProxyRequest(ctx, office.ProxyRequest{OfficeID: h.office.ID, RequesterAgentID: h.id("senior-sw-engineer"), Action: "create_plan", Payload: []byte(body), Status: office.ProxyParked, ExpiresAt: time.Now().Add(time.Hour)})
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
