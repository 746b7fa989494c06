package session

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// longLine appends an unterminated line of size bytes to a transcript (a
// sparse extension: zeros, no newline, nothing written to disk) in steps of
// step bytes, polling the follower until it has caught up after each, then
// ends the line and appends one more entry. It returns the follower's texts
// after the long line, and the peak heap in use and the bytes allocated
// while it was read.
func longLine(tb testing.TB, size, step int64, limit uint64) (texts []Text, tr *transcript, peak, alloc uint64) {
	tb.Helper()
	key := Key{"o", "a"}
	path := filepath.Join(tb.TempDir(), "conv.jsonl")
	entry := func(id, text string) string {
		return `{"type":"assistant","uuid":"` + id + `","message":{"role":"assistant","content":[{"type":"text","text":"` + text + `"}],"stop_reason":"end_turn"}}` + "\n"
	}
	first, last := entry("a1", "before"), entry("a2", "after")
	if err := os.WriteFile(path, []byte(first), 0o600); err != nil {
		tb.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	tr = newTranscript(path, "")
	if got, err := tr.poll(key); err != nil || len(got) != 1 {
		tb.Fatalf("first entry: %v, %v", got, err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseHeap, baseAlloc := ms.HeapAlloc, ms.TotalAlloc
	end := int64(len(first))
	sample := func() {
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > baseHeap {
			peak = max(peak, ms.HeapAlloc-baseHeap)
		}
		alloc = ms.TotalAlloc - baseAlloc
		if peak > limit || alloc > 4*limit {
			tb.Fatalf("after %d MiB of one line: heap grew by %d MiB and %d MiB were allocated (limit %d MiB)", (end-int64(len(first)))>>20, peak>>20, alloc>>20, limit>>20)
		}
	}
	for end < int64(len(first))+size {
		end += step
		if err := f.Truncate(end); err != nil {
			tb.Fatal(err)
		}
		for {
			got, err := tr.poll(key)
			if err != nil || len(got) != 0 {
				tb.Fatalf("poll inside the long line: %v, %v", got, err)
			}
			sample()
			if !tr.more {
				break
			}
		}
	}
	if _, err := f.WriteAt([]byte("\n"+last), end); err != nil {
		tb.Fatal(err)
	}
	for {
		got, err := tr.poll(key)
		if err != nil {
			tb.Fatal(err)
		}
		texts = append(texts, got...)
		sample()
		if !tr.more {
			break
		}
	}
	return texts, tr, peak, alloc
}

// TestTranscriptUnterminatedLineBounded: a 300 MB line without a newline,
// appended while the follower polls, keeps the follower's heap within a few
// times maxTranscriptLine and its allocations linear (no recopying of the
// partial line on every read); the line is skipped and counted, and the
// entry after it is read.
func TestTranscriptUnterminatedLineBounded(t *testing.T) {
	const limit = 4 * maxTranscriptLine
	texts, tr, peak, alloc := longLine(t, 300<<20, 4<<20, limit)
	if len(texts) != 1 || texts[0].ID != "a2" || tr.long != 1 || len(tr.partial) != 0 {
		t.Fatalf("after the long line: texts %v, long %d, partial %d bytes", texts, tr.long, len(tr.partial))
	}
	t.Logf("300 MB unterminated line: peak heap +%.1f MiB, %.1f MiB allocated", float64(peak)/(1<<20), float64(alloc)/(1<<20))
}

// BenchmarkTranscriptUnterminatedLine reports the follower's peak heap and
// allocations while a 300 MB line without a newline is appended.
func BenchmarkTranscriptUnterminatedLine(b *testing.B) {
	var peak, alloc uint64
	for b.Loop() {
		_, _, p, a := longLine(b, 300<<20, 4<<20, 1<<40)
		peak, alloc = max(peak, p), max(alloc, a)
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(alloc)/(1<<20), "alloc-MiB")
	b.SetBytes(300 << 20)
}
