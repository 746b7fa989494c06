package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/server"
	"github.com/office-server/office-server/session"
	"github.com/office-server/office-server/store/sqlite"
)

// noOffice is a server.Office for benchmarks that never act.
type noOffice struct{ server.Office }

// consoleBench is a real session manager behind a real server (SQLite
// store, PTYs, WebSocket console) with one office and one agent row.
type consoleBench struct {
	mgr    *session.Manager
	ts     *httptest.Server
	srv    *server.Server
	office office.Office
	agent  office.Agent
	token  string

	mu     sync.Mutex
	exited map[session.Key]chan struct{}
}

func newConsoleBench(b *testing.B, viewerRate int) *consoleBench {
	b.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "office.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	o, err := st.UpsertOffice(ctx, office.Office{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	a, err := st.UpsertAgent(ctx, office.Agent{OfficeID: o.ID, Name: "busy", Status: office.AgentIdle, Capabilities: []string{}, Expertise: []string{}, AllowedActions: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	cb := &consoleBench{office: o, agent: a, token: "bench-token", exited: map[session.Key]chan struct{}{}}
	cb.mgr = session.NewManager(session.Options{OnStatus: func(k session.Key, s session.Status, _ session.Info) {
		if s == office.SessionExited || s == office.SessionCrashed {
			cb.mu.Lock()
			if c, ok := cb.exited[k]; ok {
				close(c)
				delete(cb.exited, k)
			}
			cb.mu.Unlock()
		}
	}})
	b.Cleanup(func() { _ = cb.mgr.Close(context.Background()) })
	cb.srv, err = server.New(server.Config{Store: st, Office: noOffice{}, Terminals: terminals{cb.mgr}, Token: cb.token, ViewerQueue: 256, ViewerRate: viewerRate})
	if err != nil {
		b.Fatal(err)
	}
	cb.ts = httptest.NewServer(cb.srv.Handler())
	b.Cleanup(cb.ts.Close)
	b.Cleanup(cb.srv.Close)
	return cb
}

// start runs script in a session of the bench agent, under key's office.
func (cb *consoleBench) start(b *testing.B, script string) (*session.Session, chan struct{}) {
	b.Helper()
	key := session.Key{OfficeID: cb.office.ID, AgentID: cb.agent.ID}
	if _, ok := cb.mgr.Get(key); ok {
		_ = cb.mgr.Stop(context.Background(), key)
		// The manager forgets a stopped session once it has ended.
		for i := 0; i < 200; i++ {
			if _, ok := cb.mgr.Get(key); !ok {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	done := make(chan struct{})
	cb.mu.Lock()
	cb.exited[key] = done
	cb.mu.Unlock()
	s, err := cb.mgr.Start(context.Background(), key, session.Spec{Kind: session.KindCommand, Command: "sh", Args: []string{"-c", script}, Quiescence: 50 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	return s, done
}

// viewer attaches one WebSocket viewer that reads and discards output,
// counting bytes. It returns once the upgrade succeeded.
func (cb *consoleBench) viewer(b *testing.B, got *atomic.Int64, first chan<- time.Time) *websocket.Conn {
	b.Helper()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+cb.token)
	url := "ws" + strings.TrimPrefix(cb.ts.URL, "http") + "/ws/offices/" + cb.office.ID + "/agents/" + cb.agent.ID
	// A reader with a frame-sized buffer, as a browser reads: the harness
	// should cost little next to the server's side.
	d := websocket.Dialer{ReadBufferSize: 128 << 10}
	ws, _, err := d.Dial(url, h)
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		var typ [1]byte
		for {
			_, r, err := ws.NextReader()
			if err != nil {
				return
			}
			if n, _ := io.ReadFull(r, typ[:]); n == 1 && typ[0] == server.FrameOutput {
				if first != nil {
					first <- time.Now()
					first = nil
				}
				n, _ := io.Copy(io.Discard, r)
				got.Add(n)
			}
		}
	}()
	return ws
}

// BenchmarkConsoleThroughput measures the PTY drain rate of one busy
// session (32 MiB of output) with 0, 1 and 50 console viewers attached
// over WebSockets. The bytes/s is what the agent's output is read at: a
// viewer never blocks it, and with the default per-viewer rate (1 MiB/s,
// then skip-ahead) 50 viewers should stay within 10% of none. The
// ",unlimited" cases send every byte to every viewer (ViewerRate -1), to
// show what full delivery costs on this machine.
func BenchmarkConsoleThroughput(b *testing.B) {
	const size = 32 << 20
	for _, bc := range []struct {
		n    int
		rate int
		name string
	}{{0, 0, "viewers=0"}, {1, 0, "viewers=1"}, {50, 0, "viewers=50"}, {1, -1, "viewers=1,unlimited"}, {50, -1, "viewers=50,unlimited"}} {
		n := bc.n
		b.Run(bc.name, func(b *testing.B) {
			cb := newConsoleBench(b, bc.rate)
			var delivered atomic.Int64
			b.SetBytes(size)
			b.StopTimer()
			for range b.N {
				// The script waits for a line, so the viewers are attached
				// before the output starts.
				s, done := cb.start(b, fmt.Sprintf("read x; yes 'the quick brown fox jumps over the lazy dog 0123456789' | head -c %d; exit 0", size))
				var conns []*websocket.Conn
				for range n {
					conns = append(conns, cb.viewer(b, &delivered, nil))
				}
				waitReady(b, s)
				b.StartTimer()
				if err := s.Input([]byte("go\r")); err != nil {
					b.Fatal(err)
				}
				select {
				case <-done:
				case <-time.After(2 * time.Minute):
					b.Fatal("busy session did not finish")
				}
				b.StopTimer()
				for _, c := range conns {
					c.Close()
				}
			}
			if n > 0 {
				b.ReportMetric(float64(delivered.Load())/float64(b.N)/float64(n)/size*100, "%delivered/viewer")
			}
			b.ReportMetric(float64(droppedViewers(b, cb.srv))/float64(b.N), "dropped/op")
		})
	}
}

// droppedViewers reads office_console_viewers_dropped_total.
func droppedViewers(b *testing.B, srv *server.Server) float64 {
	mfs, err := srv.Metrics().Registry().Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "office_console_viewers_dropped_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

func waitReady(b *testing.B, s *session.Session) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Status() != office.SessionReady {
		if time.Now().After(deadline) {
			b.Fatalf("session not ready: %s", s.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkAttachFirstByte measures attach → first byte of the replay: a
// WebSocket dial to the console of a session holding 1 MiB of scrollback,
// until the first OUTPUT frame arrives.
func BenchmarkAttachFirstByte(b *testing.B) {
	cb := newConsoleBench(b, 0)
	s, _ := cb.start(b, "head -c 1048576 /dev/zero | tr '\\0' x; echo; exec cat")
	deadline := time.Now().Add(10 * time.Second)
	for s.Info().LastOutputAt.IsZero() || time.Since(s.Info().LastOutputAt) < 200*time.Millisecond {
		if time.Now().After(deadline) {
			b.Fatal("no output")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var n atomic.Int64
	for b.Loop() {
		first := make(chan time.Time, 1)
		ws := cb.viewer(b, &n, first)
		select {
		case <-first:
		case <-time.After(10 * time.Second):
			b.Fatal("no replay")
		}
		ws.Close()
	}
}
