package supabase

import (
	"context"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

// BenchmarkAnswerDeliver is one answer's round trips through the store:
// AnswerQuestion then MarkQuestionDelivered (two conditional PATCHes with
// return=representation), over pgrest and the real PostgreSQL on loopback.
// It measures the store plus the stand-in, not a hosted PostgREST.
func BenchmarkAnswerDeliver(b *testing.B) {
	e := newTestEnv(b)
	ctx := context.Background()
	o, _ := e.store.UpsertOffice(ctx, office.Office{Name: "Bench"})
	a, _ := e.store.UpsertAgent(ctx, office.Agent{OfficeID: o.ID, Name: "Dev"})
	qs := make([]office.Question, b.N)
	for i := range qs {
		q, err := e.store.CreateQuestion(ctx, office.Question{OfficeID: o.ID, AgentID: a.ID, Question: "Which?", ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			b.Fatal(err)
		}
		qs[i] = q
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok, err := e.store.AnswerQuestion(ctx, qs[i].ID, "yes", ""); !ok || err != nil {
			b.Fatal(ok, err)
		}
		if ok, err := e.store.MarkQuestionDelivered(ctx, qs[i].ID); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkReconnectCatchUp is the time from a dropped socket to the feed
// being Connected again: reconnect (MinBackoff 10 ms, jittered), join,
// "Subscribed to PostgreSQL", and the catch-up of 50 answered questions.
func BenchmarkReconnectCatchUp(b *testing.B) {
	e := newTestEnv(b)
	ctx := context.Background()
	o, _ := e.store.UpsertOffice(ctx, office.Office{Name: "Bench"})
	a, _ := e.store.UpsertAgent(ctx, office.Agent{OfficeID: o.ID, Name: "Dev"})
	for range 50 {
		q, err := e.store.CreateQuestion(ctx, office.Question{OfficeID: o.ID, AgentID: a.ID, Question: "Which?", ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			b.Fatal(err)
		}
		e.store.AnswerQuestion(ctx, q.ID, "yes", "")
	}
	opts := fastOptions()
	opts.Logger = quietLogger()
	f := e.feed(b, opts)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Watch(wctx, []string{o.ID}, func(office.Change) {}) }()
	defer func() { cancel(); <-done }()
	wait := func(joins int) { // a join after joins, and caught up
		deadline := time.Now().Add(10 * time.Second)
		for e.phx.Joins() <= joins || !f.Connected() {
			if time.Now().After(deadline) {
				b.Fatal("not connected")
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	wait(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		joins := e.phx.Joins()
		e.phx.Drop()
		wait(joins)
	}
}
