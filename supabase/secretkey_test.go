package supabase

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/supabase/supabasetest"
)

// syncBuffer is a log sink tests read while the feed writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestSecretKey: the store and the Realtime feed on a project's secret key
// (sb_secret_…), through the stand-in gateway: REST requests carry it in
// apikey and never as a bearer token, the socket URL carries it and the
// join names it as its access_token; when the gateway's short-lived JWT
// behind the socket expires, Realtime shuts the channel and the feed
// reconnects at once, catches up, and delivers again.
func TestSecretKey(t *testing.T) {
	p := supabasetest.New(t)
	p.SetGatewayTokenTTL(3 * time.Second)
	ctx := context.Background()
	s, err := New(p.URL, p.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	o, err := s.UpsertOffice(ctx, office.Office{Name: "Keys"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.UpsertAgent(ctx, office.Agent{OfficeID: o.ID, Name: "Dev"})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	opts := fastOptions()
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	f, err := NewRealtime(p.URL, p.SecretKey, s, opts)
	if err != nil {
		t.Fatal(err)
	}
	w := startWatch(t, f, []string{o.ID}, nil)
	eventually(t, "Connected", 20*time.Second, f.Connected)
	ask := func() office.Question {
		q, err := s.CreateQuestion(ctx, office.Question{OfficeID: o.ID, AgentID: a.ID, Question: "Which?", ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.AnswerQuestion(ctx, q.ID, "this one", ""); !ok || err != nil {
			t.Fatal(ok, err)
		}
		return q
	}
	q1 := ask()
	w.waitFor(t, office.Change{Table: office.TableQuestions, Op: office.OpUpdate, ID: q1.ID, OfficeID: o.ID, AgentID: a.ID, Status: office.QuestionAnswered})

	// The gateway's JWT (3 s) expires: the channel is shut, the feed
	// reconnects without backoff.
	joins := p.Realtime.Joins()
	eventually(t, "a rejoin after the gateway token expired", 20*time.Second, func() bool { return p.Realtime.Joins() > joins })
	eventually(t, "Connected again", 20*time.Second, f.Connected)
	if !strings.Contains(logs.String(), "gateway token expired; reconnecting") {
		t.Errorf("no reconnect for the expired gateway token in the log:\n%s", logs)
	}
	q2 := ask()
	w.waitFor(t, office.Change{Table: office.TableQuestions, Op: office.OpUpdate, ID: q2.ID, OfficeID: o.ID, AgentID: a.ID, Status: office.QuestionAnswered})

	for _, tok := range p.Realtime.JoinTokens() {
		if tok != p.SecretKey {
			t.Errorf("joined with access_token %.12s…; want the secret key", tok)
		}
	}
	got := p.GatewayRequests()
	if got["sb_secret"] < 4 || got["bearer sb_"] != 0 || got["legacy"] != 0 || got["browser secret"] != 0 {
		t.Errorf("gateway saw %v; want only sb_secret requests, none with the key as bearer", got)
	}
}
