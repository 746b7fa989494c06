package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

// TestNoThreadPerSession: 100 running sessions hold no OS thread each (the
// PTY read and the wait for the process park on the runtime's poller);
// with a blocking read and a blocking wait they held two each. Then every
// session still reads its agent, takes a resize and sees its exit.
func TestNoThreadPerSession(t *testing.T) {
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(agent, []byte("#!/bin/sh\nprintf 'hello\\n'\nexec cat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := threads(t)
	m := NewManager(Options{StopGrace: time.Second})
	ctx := context.Background()
	defer m.Close(ctx)
	const n = 100
	var ss []*Session
	for i := range n {
		s, err := m.Start(ctx, Key{"threads", fmt.Sprint(i)}, Spec{Kind: KindCommand, Command: agent, Quiescence: 50 * time.Millisecond, Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, s := range ss {
		for s.Status() != office.SessionReady {
			if time.Now().After(deadline) {
				t.Fatalf("session %s: %s", s.key, s.Status())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if got := threads(t); got-before > 30 {
		t.Errorf("%d threads with %d sessions (%d before): a thread per session", got, n, before)
	}
	s := ss[0]
	if err := s.Resize(100, 30); err != nil {
		t.Fatalf("resize: %v", err)
	}
	if err := s.Send(ctx, "ping-after-resize"); err != nil {
		t.Fatalf("send: %v", err)
	}
	for !strings.Contains(strings.Join(s.Screen(), "\n"), "ping-after-resize") {
		if time.Now().After(deadline) {
			t.Fatalf("the agent's echo was not read: %q", s.Screen())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// threads is this process's OS thread count.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatal("no Threads in /proc/self/status")
	return 0
}
