package session

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/protocol"
	"github.com/office-server/office-server/session/screen"
)

// BenchmarkIdleSessions measures the Go heap held per idle session, with
// 200 sessions of a trivial agent (the agents' own processes aside). The
// "command" variant keeps a 200x50 screen model per session; the "claude"
// variant runs the claude-kind machinery (hook settings, signals file,
// transcript follower) around a stand-in program instead of Claude Code.
func BenchmarkIdleSessions(b *testing.B) {
	dir := b.TempDir()
	agent := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(agent, []byte("#!/bin/sh\nprintf '\\033[?2004h\xe2\x9d\xaf '\nexec cat >/dev/null\n"), 0o755); err != nil {
		b.Fatal(err)
	}
	for _, kind := range []string{KindCommand, KindClaude} {
		b.Run(kind, func(b *testing.B) {
			const n = 200
			for range b.N {
				m := NewManager(Options{StopGrace: time.Second})
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				ctx := context.Background()
				for i := range n {
					spec := Spec{Kind: kind, Command: agent, Quiescence: 50 * time.Millisecond, Home: filepath.Join(dir, "home"), Dir: filepath.Join(dir, "work")}
					if _, err := m.Start(ctx, Key{"bench", fmt.Sprint(i)}, spec); err != nil {
						b.Fatal(err)
					}
				}
				t0 := time.Now()
				deadline := time.Now().Add(30 * time.Second)
				for {
					ready := 0
					for _, s := range m.List() {
						if s.Status() == office.SessionReady {
							ready++
						}
					}
					if ready == n {
						break
					}
					if time.Now().After(deadline) {
						b.Fatalf("%d of %d sessions ready", ready, n)
					}
					time.Sleep(50 * time.Millisecond)
				}
				b.Logf("%d sessions ready in %v", n, time.Since(t0))
				// Idle cost: the server's CPU time over 2 s of 200 idle sessions.
				var ru0, ru1 syscall.Rusage
				_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
				time.Sleep(2 * time.Second)
				_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
				cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
				b.ReportMetric(float64(cpu.Microseconds())/2/1000, "idle-cpu-ms/s")
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/session")
				b.ReportMetric(float64(after.StackInuse-before.StackInuse)/n, "stack-B/session")
				b.ReportMetric(float64(runtime.NumGoroutine())/n, "goroutines/session")
				t1 := time.Now()
				if err := m.Close(ctx); err != nil {
					b.Fatal(err)
				}
				b.Logf("closed in %v", time.Since(t1))
			}
		})
	}
}

// BenchmarkScreenPipeline measures the command-agent pipeline: PTY bytes →
// screen → final lines → protocol parser, on recorded captures (from
// session/screen/testdata) and on a synthetic stream of protocol blocks in
// Korean and English at the default 200x50 size.
func BenchmarkScreenPipeline(b *testing.B) {
	type capture struct {
		name       string
		data       []byte
		cols, rows int
	}
	var caps []capture
	for _, c := range []struct {
		name       string
		cols, rows int
	}{{"seq_korean", 30, 8}, {"claude_korean", 120, 40}} {
		data, err := os.ReadFile(filepath.Join("screen", "testdata", c.name+".bin"))
		if err != nil {
			b.Skipf("capture: %v", err)
		}
		caps = append(caps, capture{c.name, data, c.cols, c.rows})
	}
	var syn bytes.Buffer
	for i := 0; syn.Len() < 1<<20; i++ {
		fmt.Fprintf(&syn, "\x1b[32m[ASK_USER]\x1b[0m\r\n질문:\x1b[9G로그인\x1b[16G방식을 골라 주세요 %d\r\n옵션: [OAuth, 비밀번호]\r\n[/ASK_USER]\r\n", i)
		fmt.Fprintf(&syn, "plain output line %d with some words that fill the terminal a little more\r\n", i)
	}
	caps = append(caps, capture{"synthetic_200x50", syn.Bytes(), 200, 50})

	for _, c := range caps {
		for _, parse := range []bool{true, false} {
			name := c.name
			if !parse {
				name += "/screen_only"
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(int64(len(c.data)))
				b.ReportAllocs()
				msgs := 0
				for range b.N {
					x := &screenLines{scr: screen.New(c.cols, c.rows), cols: c.cols}
					p := protocol.NewParser(protocol.Options{})
					feed := func(ls []string) {
						if !parse {
							return
						}
						for _, l := range ls {
							msgs += len(p.Feed(l))
						}
					}
					for off := 0; off < len(c.data); off += 4096 {
						x.write(c.data[off:min(off+4096, len(c.data))])
						feed(first(x.take()))
					}
					x.turnEnd(nil)
					feed(first(x.take()))
					if parse {
						msgs += len(p.Flush())
					}
				}
				b.ReportMetric(float64(msgs)/float64(b.N), "msgs/op")
			})
		}
	}
}

func first(l []string, _ int) []string { return l }
