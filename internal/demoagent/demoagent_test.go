package demoagent

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuf is a bytes.Buffer safe for the script's writes and the test's reads.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func waitFor(t *testing.T, out *syncBuf, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("output never held %q; got:\n%s", want, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func start(t *testing.T, script string) (io.Writer, *syncBuf) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	out := &syncBuf{}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, script, pr, out, Options{Step: time.Millisecond, Quiet: 20 * time.Millisecond})
	}()
	t.Cleanup(func() {
		cancel()
		pw.Close()
		if err := <-done; err != nil && err != context.Canceled {
			t.Errorf("Run: %v", err)
		}
	})
	return pw, out
}

func TestPO(t *testing.T) {
	in, out := start(t, "po")
	waitFor(t, out, "[ASK_USER]\nquestion: Which feature should the team build first?\ntype: selection\noptions: [Login page, Search, Dark mode]")
	// A result that nobody asked for is not the person's choice.
	io.WriteString(in, "[OFFICE] Result from dev (message):\n> Done: Login page\n")
	waitFor(t, out, "po: noted (result, not what I wait for: the answer to my question): Done: Login page")
	io.WriteString(in, "\x1b[200~[OFFICE] Answer to question q1 (\"Which?\"):\n> Search\x1b[201~\n")
	waitFor(t, out, "[INVOKE:dev]\nBuild the feature the user chose: Search\n")
	// A notice or a stray answer is not the result.
	io.WriteString(in, "[OFFICE] Answer to question q0 (\"Old?\"):\n> Dark mode\n")
	waitFor(t, out, "po: noted (answer, not what I wait for: the result from dev): Dark mode")
	if strings.Contains(out.String(), "PHASE 1 COMPLETE") {
		t.Fatal("po completed the phase on an answer")
	}
	io.WriteString(in, "[OFFICE] Result from dev for task t1 (markdown):\n> Done: it works\n")
	waitFor(t, out, "po: result received from dev: Done: it works")
	waitFor(t, out, "=== PHASE 1 COMPLETE ===")
	waitFor(t, out, "planning round 2")
}

func TestDev(t *testing.T) {
	in, out := start(t, "dev")
	waitFor(t, out, "> ")
	io.WriteString(in, "[OFFICE] Task 1234 from boss:\n> Build the feature the user chose: Search\nWhen you are done, deliver the result to boss.\n")
	waitFor(t, out, "Step 3/3: running the tests\n[DELIVER_RESULT:boss]\ntype: markdown\ncontent: Done: Build the feature the user chose: Search.")
	// Words that are not a task get a sentence, not a result.
	io.WriteString(in, "[OFFICE] Message from a person in the office:\n> hello dev\n")
	waitFor(t, out, "dev: I work on tasks other agents give me")
	io.WriteString(in, "just typing here\n")
	waitFor(t, out, "noted: just typing here")
	time.Sleep(50 * time.Millisecond)
	if n := strings.Count(out.String(), "[DELIVER_RESULT:"); n != 1 {
		t.Fatalf("dev delivered %d results for one task:\n%s", n, out.String())
	}
}

func TestEcho(t *testing.T) {
	in, out := start(t, "echo")
	io.WriteString(in, "hello\n")
	waitFor(t, out, "echo: hello\n")
}

func TestUnknownScript(t *testing.T) {
	err := Run(context.Background(), "nope", strings.NewReader(""), io.Discard, Options{})
	if err == nil || !strings.Contains(err.Error(), `unknown script "nope"`) {
		t.Fatalf("Run(nope) = %v, want unknown script", err)
	}
}
