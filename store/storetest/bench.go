package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
)

// Bench runs the hot-path benchmarks on s and f, the same for every
// implementation, in an office of their own:
//
//   - CreateQuestion, CreateQuestionParallel: CreateQuestion.
//   - DeliverAnswer, DeliverAnswerParallel: AnswerQuestion then
//     MarkQuestionDelivered on a pending question (created before the timer).
//   - AnswerToFeed: AnswerQuestion, then wait until f reports the answer;
//     reports the latency from the start of the answering call to the
//     change's arrival as p50-ms and p99-ms (for an out-of-process store that
//     is commit → notification → delivery, plus one round trip).
//
// Call it from a benchmark of the implementation's package:
//
//	func BenchmarkStore(b *testing.B) { s := open(b); storetest.Bench(b, s, s) }
func Bench(b *testing.B, s office.Store, f office.ChangeFeed) {
	ctx := b.Context()
	o, err := s.UpsertOffice(ctx, office.Office{Name: "bench " + uuid.NewString()})
	if err != nil {
		b.Fatalf("UpsertOffice: %v", err)
	}
	a, err := s.UpsertAgent(ctx, office.Agent{OfficeID: o.ID, Name: "Dev"})
	if err != nil {
		b.Fatalf("UpsertAgent: %v", err)
	}
	q := office.Question{OfficeID: o.ID, AgentID: a.ID, QuestionType: office.QuestionSelection,
		Question: "Which database should the service use?", Options: []string{"Postgres", "SQLite"},
		Context: "bench", ExpiresAt: time.Now().Add(time.Hour)}
	create := func() (string, error) {
		got, err := s.CreateQuestion(ctx, q)
		return got.ID, err
	}
	deliver := func(id string) error {
		if _, ok, err := s.AnswerQuestion(ctx, id, "Postgres", ""); !ok || err != nil {
			return fmt.Errorf("AnswerQuestion: ok %v err %v", ok, err)
		}
		if ok, err := s.MarkQuestionDelivered(ctx, id); !ok || err != nil {
			return fmt.Errorf("MarkQuestionDelivered: ok %v err %v", ok, err)
		}
		return nil
	}
	pending := func(b *testing.B, n int) chan string {
		ids := make(chan string, n)
		for range n {
			id, err := create()
			if err != nil {
				b.Fatalf("CreateQuestion: %v", err)
			}
			ids <- id
		}
		close(ids)
		return ids
	}

	b.Run("CreateQuestion", func(b *testing.B) {
		for b.Loop() {
			if _, err := create(); err != nil {
				b.Fatalf("CreateQuestion: %v", err)
			}
		}
	})
	b.Run("CreateQuestionParallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := create(); err != nil {
					b.Errorf("CreateQuestion: %v", err)
					return
				}
			}
		})
	})
	b.Run("DeliverAnswer", func(b *testing.B) {
		ids := pending(b, b.N)
		b.ResetTimer()
		for id := range ids {
			if err := deliver(id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DeliverAnswerParallel", func(b *testing.B) {
		ids := pending(b, b.N)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := deliver(<-ids); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("AnswerToFeed", func(b *testing.B) {
		var mu sync.Mutex
		waiting := map[string]chan time.Time{}
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- f.Watch(wctx, []string{o.ID}, func(c office.Change) {
				if c.Table != office.TableQuestions || c.Status != office.QuestionAnswered {
					return
				}
				at := time.Now()
				mu.Lock()
				ch := waiting[c.ID]
				delete(waiting, c.ID)
				mu.Unlock()
				if ch != nil {
					ch <- at
				}
			})
		}()
		defer func() { cancel(); <-done }()
		deadline := time.Now().Add(15 * time.Second)
		for !f.Connected() {
			if time.Now().After(deadline) {
				b.Fatal("feed not connected")
			}
			time.Sleep(time.Millisecond)
		}
		ids := pending(b, b.N)
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for id := range ids {
			ch := make(chan time.Time, 1)
			mu.Lock()
			waiting[id] = ch
			mu.Unlock()
			start := time.Now()
			if _, ok, err := s.AnswerQuestion(ctx, id, "Postgres", ""); !ok || err != nil {
				b.Fatalf("AnswerQuestion: ok %v err %v", ok, err)
			}
			select {
			case at := <-ch:
				lat = append(lat, at.Sub(start))
			case <-time.After(15 * time.Second):
				b.Fatalf("no change for answer %s within 15s", id)
			}
		}
		b.StopTimer()
		slices.Sort(lat)
		pct := func(p float64) float64 {
			return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
		}
		b.ReportMetric(pct(0.50), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
	})
}
