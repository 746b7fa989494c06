package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/geminitest"
	"github.com/office-server/office-server/internal/openaitest"
	"github.com/office-server/office-server/internal/testenv"
)

// TestCLIsHibernate runs the built server (embedded store) with a real
// Codex agent, a real Qwen Code agent and a real Gemini CLI agent, all
// with the office's hibernate_after: 3s, against a scripted
// OpenAI-compatible model and a scripted Gemini API. Each
// hibernates when idle; a message wakes it and reaches its model once; a
// second message after it slept again reaches the model once, in a
// request that carries the first (its conversation was resumed).
func TestCLIsHibernate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs Codex and Qwen Code")
	}
	codex, qwen, gemini := testenv.CLIBin(t, "codex"), testenv.CLIBin(t, "qwen"), testenv.CLIBin(t, "gemini")
	bin := buildServer(t)
	srv, gsrv := openaitest.New(t), geminitest.New(t)
	srv.Side(openaitest.QwenSide)
	srv.Reply(func(openaitest.Request) openaitest.Response { return openaitest.Response{Text: "OK"} })
	gsrv.Reply(func(geminitest.Request) geminitest.Response { return geminitest.Response{Text: "OK"} })
	work := t.TempDir()
	dirs := []string{filepath.Join(work, "po"), filepath.Join(work, "dev"), filepath.Join(work, "qa")}
	codexHome, qwenHome, geminiHome := t.TempDir(), t.TempDir(), t.TempDir()
	if err := srv.PrepareCodex(codexHome); err != nil {
		t.Fatal(err)
	}
	if err := openaitest.PrepareQwen(qwenHome); err != nil {
		t.Fatal(err)
	}
	if err := geminitest.Prepare(geminiHome); err != nil {
		t.Fatal(err)
	}
	testenv.GitInit(t, dirs[0])
	officeFile := sleepyCLIOffice(t, []string{codex, qwen, gemini}, dirs, []string{codexHome, qwenHome, geminiHome}, srv, gsrv)
	const token = "clis-hibernate-token-0123456789ab"
	p := launchServer(t, bin, []string{"HOME=" + t.TempDir(), "LANG=C.UTF-8", "OFFICE_ADMIN_TOKEN=" + token, "OFFICE_SECRETS_KEY=" + e2eSecretsKey},
		"--office", officeFile, "--data-dir", t.TempDir())
	p.waitHealthy(t)
	t.Cleanup(func() { p.stop(t) })
	defer func() {
		if t.Failed() {
			t.Logf("server log:\n%s", p.stderr.String())
		}
	}()
	c := apiClient{t: t, base: p.base, token: token}
	var offices []struct{ ID string }
	c.wait("the office", 30*time.Second, func() bool { return c.do("GET", "/api/offices", "", &offices) == 200 && len(offices) == 1 })
	officeID := offices[0].ID
	status := func(name string) string {
		var ss []hibSession
		c.do("GET", "/api/offices/"+officeID+"/sessions", "", &ss)
		for _, s := range ss {
			if s.AgentName == name {
				return s.Status
			}
		}
		return ""
	}
	last := func(name, tok, has string) (int, bool) { return lastCarries(srv, gsrv, name, tok, has) }
	for _, name := range []string{"po", "dev", "qa"} {
		c.wait(name+" hibernated", 120*time.Second, func() bool { return status(name) == "hibernated" })
		first, second := "first-"+name+"-4d1", "second-"+name+"-9e2"
		post(t, c, "/api/offices/"+officeID+"/messages", fmt.Sprintf(`{"agent":%q,"content":"Note %s."}`, name, first))
		c.wait(first+" at the model", 120*time.Second, func() bool { n, _ := last(name, first, ""); return n >= 1 })
		c.wait(name+" hibernated again", 120*time.Second, func() bool { return status(name) == "hibernated" })
		post(t, c, "/api/offices/"+officeID+"/messages", fmt.Sprintf(`{"agent":%q,"content":"Note %s."}`, name, second))
		c.wait(second+" at the model", 120*time.Second, func() bool { n, _ := last(name, second, ""); return n >= 1 })
		time.Sleep(2 * time.Second) // a second typing would show by now
		n1, _ := last(name, first, "")
		n2, resumed := last(name, second, first)
		if n1 != 1 || n2 != 1 {
			t.Errorf("%s: the model got the first message %d times and the second %d times, want 1 and 1", name, n1, n2)
		}
		if !resumed {
			t.Errorf("%s: the request after the second wake does not carry the first message: its conversation was not resumed", name)
		}
	}
}

// sleepyCLIOffice writes the office of po (Codex), dev (Qwen Code) and
// qa (Gemini CLI), bins and homes in that order, hibernating after 3 s,
// and returns its path.
func sleepyCLIOffice(t *testing.T, bins, dirs, homes []string, srv *openaitest.Server, gsrv *geminitest.Server) string {
	officeFile := filepath.Join(t.TempDir(), "office.yaml")
	yaml := fmt.Sprintf(`office:
  name: Sleepy CLI office
  hibernate_after: 3s
agents:
  - name: po
    launch: {kind: codex, command: %q, dir: %q, env: {CODEX_HOME: %q, OPENAITEST_KEY: %q}}
  - name: dev
    launch:
      kind: qwen
      command: %q
      dir: %q
      env: {HOME: %q, OPENAI_API_KEY: %q, OPENAI_BASE_URL: %q, OPENAI_MODEL: %q}
  - name: qa
    launch: {kind: gemini, command: %q, dir: %q, env: {HOME: %q, GOOGLE_GEMINI_BASE_URL: %q, GEMINI_API_KEY: %q}}
`, bins[0], dirs[0], filepath.Join(homes[0], ".codex"), srv.Key, bins[1], dirs[1], homes[1], srv.Key, srv.URL, openaitest.Model,
		bins[2], dirs[2], homes[2], gsrv.URL, gsrv.Key)
	if err := os.WriteFile(officeFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return officeFile
}

// lastCarries counts the requests of name's model whose last user text
// holds tok, and reports whether the last of them also carries has.
func lastCarries(srv *openaitest.Server, gsrv *geminitest.Server, name, tok, has string) (n int, carries bool) {
	if name == "qa" {
		for _, q := range gsrv.MainRequests() {
			if strings.Contains(q.LastUserText(), tok) {
				n, carries = n+1, q.Has(has)
			}
		}
		return n, carries
	}
	for _, q := range srv.MainRequests() {
		if strings.Contains(q.LastUserText(), tok) {
			n, carries = n+1, q.Has(has)
		}
	}
	return n, carries
}
