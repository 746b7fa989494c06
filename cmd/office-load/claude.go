package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/office-server/office-server/internal/anthropictest"
)

// claudeRun times INVOKE → task with a real Claude Code agent as the
// caller: its model (a scripted Messages API server in this process)
// answers every prompt with an [INVOKE:a00001] block; the target is an idle
// load agent, which reports its task's Enter and delivers a result, and
// the result is Claude Code's next prompt. "Printed" is the timestamp
// Claude Code gives the reply's line in its transcript (milliseconds; set
// before the line is written, so the figure can only be too high).
type claudeRun struct {
	c       config
	bin     string // the claude binary
	n       int    // INVOKEs timed
	reports <-chan report
}

// claudeVersion is what bin --version prints.
func claudeVersion(bin string) string {
	out, err := osexec.Command(bin, "--version").Output()
	if err != nil {
		return "version unknown: " + err.Error()
	}
	return strings.TrimSpace(string(out))
}

// claudeResult is the run's figures.
type claudeResult struct {
	Version   string
	Invoke    [2]time.Duration // p50, p99 transcript line's timestamp → task Enter
	FromWrite [2]time.Duration // p50, p99 the line in the file (seen within 2 ms) → task Enter
	N         int
}

// taskLine marks the k-th task in the caller's reply and in the target's
// input.
var taskLine = regexp.MustCompile(`load task (\d+):`)

// driverTB is what the scripted model server needs of a test.
type driverTB struct {
	cleanups []func()
	log      io.Writer
}

func (t *driverTB) Helper()                      {}
func (t *driverTB) Cleanup(f func())             { t.cleanups = append(t.cleanups, f) }
func (t *driverTB) Logf(format string, a ...any) { fmt.Fprintf(t.log, format+"\n", a...) }
func (t *driverTB) close() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

func (r *claudeRun) run(ctx context.Context, stderr io.Writer) (res claudeResult, err error) {
	tb := &driverTB{log: io.Discard}
	defer tb.close()
	model := anthropictest.New(tb)
	k := 0
	model.Reply(func(anthropictest.Request) anthropictest.Response {
		k++
		return anthropictest.Response{Text: fmt.Sprintf("[INVOKE:%s]\nload task %d: deliver a result to c0.\n[/INVOKE]", agentName(0), k)}
	})
	res.Version = claudeVersion(r.bin)
	dir, err := os.MkdirTemp(r.c.Dir, "office-load-claude-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	reports, sock, closeSock, err := listenReports(filepath.Join(dir, "r.sock"), 1)
	if err != nil {
		return res, err
	}
	defer closeSock()
	r.reports = reports
	dataDir := filepath.Join(dir, "data")
	officeFile, env, err := r.prepare(dir, sock, model)
	if err != nil {
		return res, err
	}
	logFile := ""
	if r.c.Logs != "" {
		if err := os.MkdirAll(r.c.Logs, 0o755); err != nil {
			return res, err
		}
		logFile = filepath.Join(r.c.Logs, "claude.log")
	}
	srv, err := startServer(r.c.Server, officeFile, dataDir, logFile, env)
	if err != nil {
		return res, err
	}
	defer srv.stop(60 * time.Second)
	if err := srv.waitHealthy(ctx, 60*time.Second); err != nil {
		return res, err
	}
	id, err := srv.officeID(ctx)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(stderr, "office-load: Claude Code caller (%s), %d INVOKEs…\n", res.Version, r.n)
	if err := srv.post(ctx, "/api/offices/"+id+"/messages", map[string]string{"agent": "c0", "content": "Start giving tasks."}); err != nil {
		return res, err
	}
	seen := watchTranscripts(ctx, dataDir)
	entered, err := r.awaitTasks(ctx, srv)
	if err != nil {
		return res, err
	}
	written := seen()
	printed, err := transcriptTasks(dataDir)
	if err != nil {
		return res, err
	}
	return r.timings(res, entered, written, printed)
}

// prepare writes the office file (one load agent, and c0, the Claude Code
// caller) into dir and returns it with the server's environment.
func (r *claudeRun) prepare(dir, sock string, model *anthropictest.Server) (string, []string, error) {
	home := filepath.Join(dir, "home")
	for _, d := range []string{home, filepath.Join(dir, "c0")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", nil, err
		}
	}
	officeFile := filepath.Join(dir, "office.yaml")
	if err := writeOffice(officeFile, 1, r.c.AgentBin, "", "echo", sock); err != nil {
		return "", nil, err
	}
	f, err := os.OpenFile(officeFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(f, "  - name: c0\n    role: Caller\n    allowed_actions: [invoke, ask_user]\n    launch: {kind: claude, command: %q, dir: %q}\n", r.bin, filepath.Join(dir, "c0"))
	if err := f.Close(); err != nil {
		return "", nil, err
	}
	return officeFile, append([]string{"DATABASE_URL=", "SUPABASE_URL="}, model.Env(home)...), nil
}

// timings pairs each task's Enter with its line's timestamp and with when
// the line was in the file.
func (r *claudeRun) timings(res claudeResult, entered, written, printed map[int]time.Time) (claudeResult, error) {
	var took, fromWrite []time.Duration
	for k, at := range entered {
		p, ok1 := printed[k]
		w, ok2 := written[k]
		if ok1 && ok2 {
			took = append(took, at.Sub(p))
			fromWrite = append(fromWrite, at.Sub(w))
		}
	}
	if len(took) < len(entered) {
		return res, fmt.Errorf("%d tasks entered, %d of them found in c0's transcript", len(entered), len(took))
	}
	res.Invoke, res.FromWrite, res.N = pcts(took), pcts(fromWrite), len(took)
	return res, nil
}

// watchTranscripts reads Claude Code's transcripts under dataDir as they
// grow, every 2 ms, and notes when each "load task k" line was first
// there; the function it returns stops the watch and returns the times.
func watchTranscripts(ctx context.Context, dataDir string) func() map[int]time.Time {
	at := map[int]time.Time{}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		read := map[string]int64{}
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			files, _ := filepath.Glob(filepath.Join(dataDir, "claude", "*", "*", "claude", "projects", "*", "*.jsonl"))
			for _, name := range files {
				b, err := os.ReadFile(name)
				if err != nil || int64(len(b)) <= read[name] {
					continue
				}
				now := time.Now()
				for _, m := range taskLine.FindAllSubmatch(b[read[name]:], -1) {
					k, _ := strconv.Atoi(string(m[1]))
					if _, ok := at[k]; !ok {
						at[k] = now
					}
				}
				read[name] = int64(bytes.LastIndexByte(b, '\n') + 1)
			}
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() map[int]time.Time { close(stop); <-done; return at }
}

// awaitTasks collects the target's task Enters, the k-th task's at k.
func (r *claudeRun) awaitTasks(ctx context.Context, srv *serverProc) (map[int]time.Time, error) {
	entered := map[int]time.Time{}
	deadline := time.After(time.Duration(r.n)*10*time.Second + time.Minute)
	for len(entered) < r.n {
		select {
		case rp := <-r.reports:
			if rp.what == "task" {
				entered[len(entered)+1] = rp.enter
			}
		case <-deadline:
			return nil, fmt.Errorf("%d of %d tasks entered; server log ends: %s", len(entered), r.n, lastLines(srv.logs.String(), 5))
		case <-srv.exited:
			return nil, fmt.Errorf("server exited (%v): %s", srv.err, srv.logs.String())
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return entered, nil
}

// transcriptTasks reads Claude Code's transcripts under the server's data
// directory: when each "load task k" reply was written.
func transcriptTasks(dataDir string) (map[int]time.Time, error) {
	files, err := filepath.Glob(filepath.Join(dataDir, "claude", "*", "*", "claude", "projects", "*", "*.jsonl"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no Claude Code transcript under %s (%v)", dataDir, err)
	}
	at := map[int]time.Time{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var e struct {
				Type      string    `json:"type"`
				Timestamp time.Time `json:"timestamp"`
				Message   struct {
					Content json.RawMessage `json:"content"`
				} `json:"message"`
			}
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.Type != "assistant" {
				continue
			}
			if m := taskLine.FindSubmatch(e.Message.Content); m != nil {
				k, _ := strconv.Atoi(string(m[1]))
				if _, seen := at[k]; !seen {
					at[k] = e.Timestamp
				}
			}
		}
		f.Close()
	}
	return at, nil
}

// post POSTs v as JSON to path with the admin token.
func (p *serverProc) post(ctx context.Context, path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", p.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %d %s", path, res.StatusCode, bytes.TrimSpace(body))
	}
	return nil
}
