package session

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestScreenLinesBoundedWhileConsumerStalls: OnText blocks while a command
// agent prints 30 000 lines (3 MB). The PTY reader keeps draining (a viewer
// sees the end of the output while OnText is still blocked), the session
// holds at most 1 MiB of undispatched lines, and once OnText returns every
// line is either delivered, in order, or counted in Text.Lost. (The agent
// pushes its output off the screen with blank lines at the end: output of a
// program without a prompt pattern that arrives while it is idle is read as
// it scrolls off.)
func TestScreenLinesBoundedWhileConsumerStalls(t *testing.T) {
	checkGoroutines(t)
	const n = 30000
	release := make(chan struct{})
	var mu sync.Mutex
	var got []string
	lost := 0
	first := true
	m := NewManager(Options{StopGrace: 300 * time.Millisecond, OnText: func(tx Text) {
		mu.Lock()
		block := first
		first = false
		mu.Unlock()
		if block {
			<-release
		}
		mu.Lock()
		got = append(got, tx.Lines...)
		lost += tx.Lost
		mu.Unlock()
	}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Close(ctx)
	})
	agent := script(t, `echo start; sleep 0.3
awk 'BEGIN{for(i=0;i<30000;i++) printf "out %06d xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n", i}'
echo the-end; i=0; while [ $i -lt 25 ]; do echo; i=$((i+1)); done; exec sleep 100`)
	s, err := m.Start(context.Background(), Key{"o", "loud"}, Spec{Kind: KindCommand, Command: agent, Quiescence: 200 * time.Millisecond, Cols: 120, Rows: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer waitViewerSees(t, s, "the-end").Close()
	time.Sleep(300 * time.Millisecond)
	s.mu.Lock()
	held := 0
	if d, ok := s.drv.(*commandDriver); ok && d.lines != nil {
		held = d.lines.outBytes
	}
	s.mu.Unlock()
	if held > maxPendingBytes {
		t.Errorf("session holds %d bytes of undispatched lines, bound %d", held, maxPendingBytes)
	}
	close(release)
	wait := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		done := len(got) > 0 && strings.Contains(strings.Join(got[max(0, len(got)-30):], "\n"), "the-end")
		mu.Unlock()
		if done || time.Now().After(wait) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	var outs []string
	for _, l := range got {
		if strings.HasPrefix(l, "out ") {
			outs = append(outs, l)
		}
	}
	if lost == 0 {
		t.Errorf("no line counted lost although %d bytes waited behind a blocked OnText", n*100)
	}
	if len(outs)+lost != n {
		t.Errorf("%d lines delivered + %d lost = %d, want %d", len(outs), lost, len(outs)+lost, n)
	}
	for i := 1; i < len(outs); i++ {
		if outs[i] <= outs[i-1] {
			t.Fatalf("lines out of order: %q after %q", outs[i], outs[i-1])
		}
	}
	if len(outs) == 0 || outs[len(outs)-1][:10] != "out 029999" {
		t.Errorf("the last line was not delivered: %q", outs[max(0, len(outs)-1):])
	}
}

// waitViewerSees attaches a viewer to s and waits up to 60 s for marker
// in what it is sent; it returns the viewer, still attached.
func waitViewerSees(t *testing.T, s *Session, marker string) *Viewer {
	v := s.Attach(1 << 16)
	var seen bytes.Buffer
	deadline := time.After(60 * time.Second)
	for !bytes.Contains(seen.Bytes(), []byte(marker)) {
		select {
		case c, ok := <-v.C():
			if !ok {
				t.Fatal("viewer dropped")
			}
			seen.Write(c)
			if seen.Len() > 1<<10 {
				b := seen.Bytes()[seen.Len()-64:]
				seen.Reset()
				seen.Write(b)
			}
		case <-deadline:
			t.Fatal("the viewer never saw the end of the output while OnText was blocked")
		}
	}
	return v
}
