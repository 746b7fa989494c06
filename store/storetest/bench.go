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
	qb := &questionBench{ctx: ctx, s: s, f: f, q: office.Question{OfficeID: o.ID, AgentID: a.ID, QuestionType: office.QuestionSelection,
		Question: "Which database should the service use?", Options: []string{"Postgres", "SQLite"},
		Context: "bench", ExpiresAt: time.Now().Add(time.Hour)}}

	b.Run("CreateQuestion", func(b *testing.B) {
		for b.Loop() {
			if _, err := qb.create(); err != nil {
				b.Fatalf("CreateQuestion: %v", err)
			}
		}
	})
	b.Run("CreateQuestionParallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := qb.create(); err != nil {
					b.Errorf("CreateQuestion: %v", err)
					return
				}
			}
		})
	})
	b.Run("DeliverAnswer", func(b *testing.B) {
		ids := qb.pending(b, b.N)
		b.ResetTimer()
		for id := range ids {
			if err := qb.deliver(id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DeliverAnswerParallel", func(b *testing.B) {
		ids := qb.pending(b, b.N)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := qb.deliver(<-ids); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("AnswerToFeed", qb.answerToFeed)
}

// questionBench is what Bench's benchmarks share: the store and its feed,
// and the question q they create, in an office of their own.
type questionBench struct {
	ctx context.Context
	s   office.Store
	f   office.ChangeFeed
	q   office.Question
}

// create creates one pending question like q and returns its ID.
func (qb *questionBench) create() (string, error) {
	got, err := qb.s.CreateQuestion(qb.ctx, qb.q)
	return got.ID, err
}

// deliver answers the pending question id and marks the answer delivered;
// it fails if either step errs or does not happen.
func (qb *questionBench) deliver(id string) error {
	if _, ok, err := qb.s.AnswerQuestion(qb.ctx, id, "Postgres", ""); !ok || err != nil {
		return fmt.Errorf("AnswerQuestion: ok %v err %v", ok, err)
	}
	if ok, err := qb.s.MarkQuestionDelivered(qb.ctx, id); !ok || err != nil {
		return fmt.Errorf("MarkQuestionDelivered: ok %v err %v", ok, err)
	}
	return nil
}

// pending creates n pending questions and returns their IDs on a closed
// channel; it stops b if one cannot be created.
func (qb *questionBench) pending(b *testing.B, n int) chan string {
	ids := make(chan string, n)
	for range n {
		id, err := qb.create()
		if err != nil {
			b.Fatalf("CreateQuestion: %v", err)
		}
		ids <- id
	}
	close(ids)
	return ids
}

// answerToFeed answers pending questions one at a time and waits for each
// answer to arrive on the feed; it reports the latencies' p50-ms and p99-ms
// and stops b if an answer fails or does not arrive within 15s.
func (qb *questionBench) answerToFeed(b *testing.B) {
	expect, stop := qb.watchAnswers(b)
	defer stop()
	ids := qb.pending(b, b.N)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for id := range ids {
		ch := expect(id)
		start := time.Now()
		if _, ok, err := qb.s.AnswerQuestion(qb.ctx, id, "Postgres", ""); !ok || err != nil {
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
}

// watchAnswers watches the office's changes on the feed and waits until the
// feed is connected (stopping b after 15s). expect(id) returns a channel
// that receives the time the change answering id arrived; stop cancels the
// watch and waits for it to end.
func (qb *questionBench) watchAnswers(b *testing.B) (expect func(id string) chan time.Time, stop func()) {
	var mu sync.Mutex
	waiting := map[string]chan time.Time{}
	wctx, cancel := context.WithCancel(qb.ctx)
	done := make(chan error, 1)
	go func() {
		done <- qb.f.Watch(wctx, []string{qb.q.OfficeID}, func(c office.Change) {
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
	stop = func() { cancel(); <-done }
	deadline := time.Now().Add(15 * time.Second)
	for !qb.f.Connected() {
		if time.Now().After(deadline) {
			stop()
			b.Fatal("feed not connected")
		}
		time.Sleep(time.Millisecond)
	}
	expect = func(id string) chan time.Time {
		ch := make(chan time.Time, 1)
		mu.Lock()
		waiting[id] = ch
		mu.Unlock()
		return ch
	}
	return expect, stop
}
