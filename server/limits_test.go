package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/office-server/office-server/office"
)

// slowClient connects, sends a request's headers and the start of its
// body, and stalls. It returns how long the server took to answer, and
// whether the server then closed the connection (instead of waiting for
// the rest of the body).
func slowClient(addr, head string, wait time.Duration) (status string, answered time.Duration, closed bool, err error) {
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		return "", 0, false, err
	}
	defer c.Close()
	if _, err := io.WriteString(c, head); err != nil {
		return "", 0, false, err
	}
	_ = c.SetReadDeadline(start.Add(wait))
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		return "", time.Since(start), false, err
	}
	answered = time.Since(start)
	_, err = io.Copy(io.Discard, br) // until the server closes, or the deadline
	return strings.TrimSpace(line), answered, err == nil, nil
}

// TestSlowClientsCannotStopHealthz: 1 000 unauthenticated clients that
// send a POST's headers and part of its body, then stall, each get their
// 401 at once and the connection closed, and /healthz keeps answering
// promptly throughout — on the server's handler and the http.Server the
// command runs (NewHTTPServer).
func TestSlowClientsCannotStopHealthz(t *testing.T) {
	f := newFixture(t, nil)
	addr := f.ts.Listener.Addr().String()
	head := "POST /api/offices/o1/messages HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"agent\":\"po\",\"content\":\"sl"

	stop := make(chan struct{})
	probed, latp, healthErr := probeHealthz(f.ts.URL, stop)

	const n = 1000
	type outcome struct {
		status   string
		answered time.Duration
		closed   bool
		err      error
	}
	out := make([]outcome, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var o outcome
			o.status, o.answered, o.closed, o.err = slowClient(addr, head, 10*time.Second)
			out[i] = o
		}()
	}
	wg.Wait()
	flood := time.Since(start)
	time.Sleep(100 * time.Millisecond)
	close(stop)
	<-probed
	if *healthErr != nil {
		t.Fatalf("/healthz failed during the flood: %v", *healthErr)
	}
	lat := *latp

	var answered []time.Duration
	for i, o := range out {
		switch {
		case o.err != nil:
			t.Fatalf("slow client %d: %v (answered after %v)", i, o.err, o.answered)
		case !strings.Contains(o.status, " 401 "):
			t.Fatalf("slow client %d got %q, want 401", i, o.status)
		case !o.closed:
			t.Fatalf("slow client %d: the connection was not closed after the 401", i)
		}
		answered = append(answered, o.answered)
	}
	if len(lat) == 0 {
		t.Fatal("no /healthz probe ran")
	}
	slices.Sort(lat)
	slices.Sort(answered)
	t.Logf("%d slow clients answered 401 and closed: p50 %v, max %v (all within %v); /healthz during the flood: %d probes, p50 %v, max %v",
		n, answered[n/2], answered[n-1], flood, len(lat), lat[len(lat)/2], lat[len(lat)-1])
	if max := lat[len(lat)-1]; max > 3*time.Second {
		t.Errorf("/healthz took %v during the flood", max)
	}
}

// probeHealthz GETs base's /healthz every 20 ms until stop is closed or
// a GET fails; once probed is closed, *lat holds the latencies and *err
// the failure.
func probeHealthz(base string, stop chan struct{}) (probed chan struct{}, lat *[]time.Duration, err *error) {
	probed, lat, err = make(chan struct{}), new([]time.Duration), new(error)
	go func() {
		defer close(probed)
		client := &http.Client{Timeout: 10 * time.Second}
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			start := time.Now()
			res, e := client.Get(base + "/healthz")
			if e != nil {
				*err = e
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			*lat = append(*lat, time.Since(start))
		}
	}()
	return probed, lat, err
}

// TestSlowAuthenticatedBodyCut: a client with the token that stalls in its
// body is cut off at the server's ReadTimeout.
func TestSlowAuthenticatedBodyCut(t *testing.T) {
	f := newFixtureHTTP(t, nil, func(hs *http.Server) { hs.ReadTimeout = 300 * time.Millisecond })
	addr := f.ts.Listener.Addr().String()
	head := "POST /api/offices/o1/messages HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + testToken +
		"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"agent\":\"po\",\"content\":\"sl"
	status, answered, closed, err := slowClient(addr, head, 5*time.Second)
	if err != nil && !closed {
		// The connection may be closed without an answer.
		if answered == 0 || answered > 3*time.Second {
			t.Fatalf("slow authenticated body: %v after %v", err, answered)
		}
		return
	}
	if answered > 3*time.Second || !closed {
		t.Fatalf("slow authenticated body: %q after %v, closed %v", status, answered, closed)
	}
}

// TestLongLivedPastTimeouts: the event stream and the console WebSocket
// outlive the server's ReadTimeout and WriteTimeout.
func TestLongLivedPastTimeouts(t *testing.T) {
	f := newFixtureHTTP(t, nil, func(hs *http.Server) {
		hs.ReadTimeout, hs.WriteTimeout = 200*time.Millisecond, 200*time.Millisecond
	})
	req, _ := http.NewRequest("GET", f.ts.URL+"/api/offices/o1/events/stream?after_id=0", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	events := make(chan string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				events <- sc.Text()
			}
		}
	}()
	ws := newClient(t, f)
	ws.waitStatus(t, func(ConsoleStatus) bool { return true })

	time.Sleep(800 * time.Millisecond) // four times each timeout
	f.store.appendEvent(office.Event{OfficeID: "o1", Kind: "after-the-timeouts"})
	f.term.write([]byte("still here\r\n"))
	ws.waitOutput(t, "still here")
	select {
	case e, ok := <-events:
		if !ok || !strings.Contains(e, "after-the-timeouts") {
			t.Fatalf("event stream: %q, open %v", e, ok)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the event stream carried nothing after the timeouts")
	}
}
