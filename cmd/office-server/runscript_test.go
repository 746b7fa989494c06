package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/testenv"
)

// TestRunScript runs scripts/run.sh as a new user does, in a copy of the
// repository's tracked files: it builds bin/office-server through
// scripts/build.sh (sharing the test run's Go caches, so it compiles only
// what they lack, showing a count if it compiles), the console URL it prints
// answers, and the demo's two agents come up. A second run has nothing to
// compile and prints no build line.
func TestRunScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server with scripts/build.sh's flags")
	}
	dir := t.TempDir()
	files, err := exec.Command("git", "-C", testenv.RepoRoot(), "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		copyFile(t, filepath.Join(testenv.RepoRoot(), f), filepath.Join(dir, f))
	}

	for run := 1; run <= 2; run++ {
		out := runScript(t, dir)
		if run == 1 {
			// A build that compiled shows its count up to the total.
			if m := regexp.MustCompile(`run\.sh: compiling (\d+) packages into bin/office-server`).FindStringSubmatch(out); m != nil &&
				!regexp.MustCompile(`run\.sh: \[`+m[1]+`/`+m[1]+`\] `).MatchString(out) {
				t.Errorf("run.sh said it compiles %s packages but never counted up to them:\n%s", m[1], out)
			}
		} else if strings.Contains(out, "run.sh:") {
			t.Errorf("second run.sh, nothing to compile, printed build lines:\n%s", out)
		}
	}
}

// runScript starts scripts/run.sh in dir on a free port, waits until its
// console URL answers and the demo's agents are ready, stops it and returns
// what it printed.
func runScript(t *testing.T, dir string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "scripts", "run.sh"), "--addr", "127.0.0.1:0")
	cmd.Dir = dir
	var out lockedBuf
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	base, token := runScriptURL(t, dir, &out, done)
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // run.sh execs the server
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("the server did not stop within 30 s of SIGTERM")
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	api := apiClient{t: t, base: strings.TrimSuffix(base, "/"), token: token}
	get := func(path string, v any) int { t.Helper(); return api.do("GET", path, nil, v) }
	if st := get("/?token="+token, nil); st != 200 {
		t.Fatalf("console URL answered %d", st)
	}
	var offices []struct{ ID, Name string }
	if st := get("/api/offices", &offices); st != 200 || len(offices) != 1 || offices[0].Name != "Demo office" {
		t.Fatalf("GET /api/offices = %d %+v; want the demo office", st, offices)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var agents []struct {
			Name          string
			SessionStatus string `json:"session_status"`
		}
		get("/api/offices/"+offices[0].ID+"/agents", &agents)
		ready := 0
		for _, a := range agents {
			if a.SessionStatus == "ready" {
				ready++
			}
		}
		if len(agents) == 2 && ready == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo agents after 30 s: %+v; want po and dev ready\n%s", agents, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return out.String()
}

// runScriptURL waits for run.sh's console URL in out and returns its base
// and token (the first start prints the token; later ones name the file
// it is in); it fails if run.sh ends first.
func runScriptURL(t *testing.T, dir string, out *lockedBuf, done chan error) (base, token string) {
	urlRE := regexp.MustCompile(`office console: (http://127\.0\.0\.1:\d+/)\?token=([0-9a-f]+|<the token in [^>]+>)\n`)
	for base == "" {
		if m := urlRE.FindStringSubmatch(out.String()); m != nil {
			base, token = m[1], m[2]
			if strings.HasPrefix(token, "<") {
				data, err := os.ReadFile(filepath.Join(dir, "data", "admin-token"))
				if err != nil {
					t.Fatal(err)
				}
				token = strings.TrimSpace(string(data))
			}
			break
		}
		select {
		case err := <-done:
			t.Fatalf("run.sh ended (%v) before printing the console URL:\n%s", err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return base, token
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	fi, err := os.Lstat(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		link, err := os.Readlink(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(link, to); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
}
