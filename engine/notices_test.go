package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

// TestNoticeSurvivesRestart: notices queued while their agents could not
// take them (a proxy's response to its requester, the proxy request told
// to the proxy) are in the store when the server stops; the next server
// types each exactly once, and the one after it types nothing again.
func TestNoticeSurvivesRestart(t *testing.T) {
	proxyStores(t, func(t *testing.T, open func(*testing.T) office.Store) {
		st := open(t)
		p := newProxyOffice(t, st, seed004Agents())
		p.ss.down.Store(true)
		p.request("senior-sw-engineer", plan("senior-sw-engineer", "API", `{"preferred_proxy": "pm"}`))
		ctx := context.Background()
		waitFor(t, "the response and the proxy's notice stored", 10*time.Second, func() bool {
			a, _ := st.ListDue(ctx, p.office.ID, p.ids["senior-sw-engineer"])
			b, _ := st.ListDue(ctx, p.office.ID, p.ids["pm"])
			return len(a.Notices) == 1 && len(b.Notices) == 1
		})
		p.stop()
		if got := p.ss.all(p.ids["senior-sw-engineer"], "[PROXY_RESPONSE]"); len(got) != 0 {
			t.Fatalf("typed into a session that was down: %q", got)
		}
		for life := 2; life <= 3; life++ {
			p.ss = &typedSessions{}
			p.start()
			want := 0
			if life == 2 {
				want = 1
				p.response("senior-sw-engineer", 1)
				waitFor(t, "pm told", 10*time.Second, func() bool { return len(p.ss.all(p.ids["pm"], "Proxy request")) == 1 })
				waitFor(t, "the notices marked delivered", 10*time.Second, func() bool {
					a, _ := st.ListDue(ctx, p.office.ID, p.ids["senior-sw-engineer"])
					b, _ := st.ListDue(ctx, p.office.ID, p.ids["pm"])
					return len(a.Notices)+len(b.Notices) == 0
				})
			}
			time.Sleep(300 * time.Millisecond) // rounds of this life have run
			if got := p.ss.all(p.ids["senior-sw-engineer"], "[PROXY_RESPONSE]"); len(got) != want {
				t.Errorf("life %d: %d responses typed; want %d", life, len(got), want)
			}
			if got := p.ss.all(p.ids["pm"], "Proxy request"); len(got) != want {
				t.Errorf("life %d: pm told %d times; want %d", life, len(got), want)
			}
			p.stop()
		}
	})
}
