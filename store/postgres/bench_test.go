package postgres_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/store/postgres"
)

// benchOffice returns a store on a fresh database with one office and agent.
func benchOffice(b *testing.B) (*postgres.Store, office.Office, office.Agent) {
	b.Helper()
	s, _ := open(b, postgres.Options{MaxConns: 16})
	ctx := context.Background()
	o, err := s.UpsertOffice(ctx, office.Office{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	a, err := s.UpsertAgent(ctx, office.Agent{OfficeID: o.ID, Name: "Dev"})
	if err != nil {
		b.Fatal(err)
	}
	return s, o, a
}

func questions(b *testing.B, s *postgres.Store, o office.Office, a office.Agent, n int, answer bool) []string {
	b.Helper()
	ctx := context.Background()
	ids := make([]string, n)
	for i := range ids {
		q, err := s.CreateQuestion(ctx, office.Question{OfficeID: o.ID, AgentID: a.ID, Question: "Which database?",
			ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			b.Fatal(err)
		}
		if answer {
			if _, ok, err := s.AnswerQuestion(ctx, q.ID, "Postgres", ""); !ok || err != nil {
				b.Fatalf("AnswerQuestion: %v %v", ok, err)
			}
		}
		ids[i] = q.ID
	}
	return ids
}

// BenchmarkFeedLatency measures, one answer at a time, from sending the
// answering UPDATE (autocommit) to the feed's callback receiving its
// change: an upper bound of commit → received. Reports p50, p99 and max.
func BenchmarkFeedLatency(b *testing.B) {
	s, o, a := benchOffice(b)
	ids := questions(b, s, o, a, b.N, false)
	got := make(chan string, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		s.Watch(ctx, []string{o.ID}, func(c office.Change) {
			if c.Op == office.OpUpdate {
				got <- c.ID
			}
		})
	})
	defer func() { cancel(); wg.Wait() }()
	for !s.Connected() {
		time.Sleep(time.Millisecond)
	}
	lat := make([]time.Duration, 0, b.N)   // UPDATE sent → change received
	upd := make([]time.Duration, 0, b.N)   // UPDATE sent → UPDATE returned (committed)
	after := make([]time.Duration, 0, b.N) // UPDATE returned → change received (0 if before)
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if _, ok, err := s.AnswerQuestion(ctx, ids[i], "yes", ""); !ok || err != nil {
			b.Fatalf("AnswerQuestion: %v %v", ok, err)
		}
		t1 := time.Now()
		select {
		case id := <-got:
			if id != ids[i] {
				b.Fatalf("change for %s; want %s", id, ids[i])
			}
		case <-time.After(10 * time.Second):
			b.Fatal("no change within 10s")
		}
		t2 := time.Now()
		lat = append(lat, t2.Sub(t0))
		upd = append(upd, t1.Sub(t0))
		after = append(after, max(0, t2.Sub(t1)))
	}
	b.StopTimer()
	reportPercentiles(b, "", lat)
	reportPercentiles(b, "update-", upd)
	reportPercentiles(b, "after-commit-", after)
}

// reportPercentiles reports p50, p99 and max of lat in milliseconds, as
// metrics named prefix+"p50-ms" etc.
func reportPercentiles(b *testing.B, prefix string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	at := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	b.ReportMetric(ms(at(0.50)), prefix+"p50-ms")
	b.ReportMetric(ms(at(0.99)), prefix+"p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), prefix+"max-ms")
}

func opsPerSecond(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkCreateQuestion: one caller inserting questions.
func BenchmarkCreateQuestion(b *testing.B) {
	s, o, a := benchOffice(b)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := s.CreateQuestion(ctx, office.Question{OfficeID: o.ID, AgentID: a.ID, Question: "Which database?",
			Options: []string{"Postgres", "SQLite"}, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
			b.Fatal(err)
		}
	}
	opsPerSecond(b)
}

// BenchmarkCreateQuestionParallel: 8 callers per CPU inserting questions.
func BenchmarkCreateQuestionParallel(b *testing.B) {
	s, o, a := benchOffice(b)
	ctx := context.Background()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.CreateQuestion(ctx, office.Question{OfficeID: o.ID, AgentID: a.ID, Question: "Which database?",
				Options: []string{"Postgres", "SQLite"}, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	opsPerSecond(b)
}

// BenchmarkDeliverAnswer: the conditional answered → delivered transition
// (MarkQuestionDelivered) on answered questions, one caller.
func BenchmarkDeliverAnswer(b *testing.B) {
	s, o, a := benchOffice(b)
	ids := questions(b, s, o, a, b.N, true)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if ok, err := s.MarkQuestionDelivered(ctx, ids[i]); !ok || err != nil {
			b.Fatalf("MarkQuestionDelivered: %v %v", ok, err)
		}
	}
	opsPerSecond(b)
}

// BenchmarkAnswerQuestion: the conditional pending → answered transition,
// one caller (it also fires the NOTIFY trigger).
func BenchmarkAnswerQuestion(b *testing.B) {
	s, o, a := benchOffice(b)
	ids := questions(b, s, o, a, b.N, false)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if _, ok, err := s.AnswerQuestion(ctx, ids[i], "Postgres", ""); !ok || err != nil {
			b.Fatalf("AnswerQuestion: %v %v", ok, err)
		}
	}
	opsPerSecond(b)
}
