package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/office-server/office-server/internal/geminitest"
	"github.com/office-server/office-server/internal/testenv"
	"github.com/office-server/office-server/office"
)

// TestGeminiAuthDialog starts the real Gemini CLI (0.61.0) from a HOME
// where its key is in the environment but no auth type was ever chosen, as
// on a new machine: the CLI asks "How would you like to authenticate",
// which the office does not answer for a person. The agent shows
// needs_attention with the dialog's text; a message sent meanwhile waits;
// once a person answers with keys (Enter takes the highlighted "Use Gemini
// API Key", then the key box filled in from the environment, which is a
// dialog too), the agent becomes ready and the message reaches the model
// exactly once.
func TestGeminiAuthDialog(t *testing.T) {
	bin := testenv.CLIBin(t, "gemini")
	checkGoroutines(t)
	srv := geminitest.New(t)
	srv.Enqueue(geminitest.Response{Text: "Hello after sign-in."})
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "work")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := geminitest.PrepareAuth(home, ""); err != nil {
		t.Fatal(err)
	}
	r := newRecorder()
	m := newTestManager(t, r, Options{StopGrace: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	key := Key{"office", "gemini-auth"}
	s, err := m.Start(ctx, key, Spec{Kind: KindGemini, Command: bin, Dir: dir, Home: home, Env: srv.Env(home), Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("info %+v; screen:\n%s", s.Info(), strings.Join(s.Screen(), "\n"))
		}
	}()
	r.waitFor(t, "needs_attention", 60*time.Second, func(st []Status, _ []Text) bool {
		return lastStatus(st) == office.SessionNeedsAttention
	})
	info := s.Info()
	for _, want := range []string{"How would you like to authenticate", "Use Gemini API Key"} {
		if !strings.Contains(info.Detail, want) {
			t.Errorf("detail lacks %q:\n%s", want, info.Detail)
		}
	}
	sent := make(chan error, 1)
	go func() { sent <- s.Send(ctx, "MESSAGE-WHILE-DIALOG: 안녕하세요") }()
	time.Sleep(2 * time.Second)
	if st, _ := r.snapshot(); lastStatus(st) != office.SessionNeedsAttention || len(srv.MainRequests()) != 0 {
		t.Fatalf("while the dialog is up: status %s, %d requests; want needs_attention, none", lastStatus(st), len(srv.MainRequests()))
	}
	if err := s.Input([]byte("\r")); err != nil {
		t.Fatal(err)
	}
	// Then it asks for the key, the one from the environment filled in.
	waitDetail(t, s, "Enter Gemini API Key", 30*time.Second)
	if err := s.Input([]byte("\r")); err != nil {
		t.Fatal(err)
	}
	if err := <-sent; err != nil {
		t.Fatalf("send after the dialog was answered: %v", err)
	}
	if _, err := srv.WaitMain(ctx, 1); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "the reply", 60*time.Second, func(st []Status, ts []Text) bool {
		return len(turns(ts)) >= 1 && lastStatus(st) == office.SessionReady
	})
	time.Sleep(time.Second)
	n := 0
	for _, q := range srv.MainRequests() {
		if strings.Contains(q.LastUserText(), "MESSAGE-WHILE-DIALOG") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the model got the message sent during the dialog %d times, want once", n)
	}
	if d := s.Info().Detail; d != "" {
		t.Errorf("detail after the dialog: %q, want none", d)
	}
	if err := m.Stop(ctx, key); err != nil {
		t.Fatal(err)
	}
}

// TestChoiceText reads the start-up dialogs measured on the pinned CLIs
// (docs/notes/clis.md) and leaves alone screens that only look alike: a
// ready composer, a model's numbered list.
func TestChoiceText(t *testing.T) {
	codexTrust := []string{
		"", "  Folder access", "  /tmp/f/work/repo", "",
		"  Trust this folder? Codex can read, edit, and run files here, subject to your permission",
		"  settings.", "", "› 1. Trust and continue", "  2. Back to Agent Command Center", "", "  enter continue · esc back",
	}
	codexSignIn := []string{
		"  Welcome to Codex, OpenAI's command-line coding agent", "", "  Choose how you want to use Codex.", "",
		"> 1. Sign in with ChatGPT", "     Usage included with Plus, Pro, Business, and Enterprise plans", "",
		"  2. Sign in with Device Code", "", "  3. Sign in another way", "     Use an API key or another provider", "", "  Press enter to continue",
	}
	geminiAuth := []string{
		"Tips for getting started:", "1. Create GEMINI.md files to customize your interactions", "2. /help for more information", "",
		"╭──────────────────────────────╮", "│ ? Get started                │",
		"│   How would you like to authenticate for this project?  │", "│                              │",
		"│     1. Sign in with Google   │", "│   ● 2. Use Gemini API Key    │", "│     3. Vertex AI             │",
		"│   (Use Enter to select)      │", "╰──────────────────────────────╯",
	}
	geminiTrust := []string{
		" ╭────────────╮", " │ Do you trust the files in this folder? │",
		" │ ● 1. Trust folder (qa) │", " │   2. Trust parent folder (work) │", " │   3. Don't trust │", " ╰────────────╯",
	}
	ready := []string{"  >_ OpenAI Codex (v0.169.0)", "", "› Ask Codex to do anything", "", "  test-model default"}
	list := []string{"✦ Steps:", "1. Build it", "2. Test it", "", " >   Type your message or @path/to/file"}
	for _, c := range []struct {
		name string
		rows []string
		want []string // lines the text holds; none: no dialog
		not  string   // a line it must not hold
	}{
		{"codex trust", codexTrust, []string{"Trust this folder? Codex can read, edit, and run files here, subject to your permission", "› 1. Trust and continue", "2. Back to Agent Command Center"}, ""},
		{"codex sign-in", codexSignIn, []string{"Choose how you want to use Codex.", "> 1. Sign in with ChatGPT", "3. Sign in another way"}, ""},
		{"gemini auth", geminiAuth, []string{"How would you like to authenticate for this project?", "● 2. Use Gemini API Key"}, "Tips for getting started:"},
		{"gemini trust", geminiTrust, []string{"Do you trust the files in this folder?", "● 1. Trust folder (qa)", "3. Don't trust"}, ""},
		{"ready", ready, nil, ""},
		{"list", list, nil, ""},
	} {
		got := choiceText(c.rows)
		if (got == "") != (len(c.want) == 0) {
			t.Errorf("%s: %q", c.name, got)
			continue
		}
		lines := strings.Split(got, "\n")
		for _, w := range c.want {
			if !containsLine(lines, w) {
				t.Errorf("%s: text lacks %q:\n%s", c.name, w, got)
			}
		}
		if c.not != "" && strings.Contains(got, c.not) {
			t.Errorf("%s: text holds %q from outside the dialog:\n%s", c.name, c.not, got)
		}
	}
}

func containsLine(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}

// TestCodexPrepare checks the overrides the codex kind passes: the
// agent's folder and its git checkout's root trusted, no update check.
func TestCodexPrepare(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	testenv.GitInit(t, root)
	dir := filepath.Join(root, "sub")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(codexPrepare(dir), " ")
	want := `-c projects={"` + dir + `"={trust_level="trusted"},"` + root + `"={trust_level="trusted"}} -c check_for_update_on_startup=false`
	if got != want {
		t.Errorf("codexPrepare:\n got %s\nwant %s", got, want)
	}
}

// waitDetail waits for the session to need attention with want in its
// detail.
func waitDetail(t *testing.T, s *Session, want string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if i := s.Info(); i.Status == office.SessionNeedsAttention && strings.Contains(i.Detail, want) {
			return
		}
	}
	t.Fatalf("no needs_attention with %q: %+v", want, s.Info())
}

// TestCodexSignIn starts the real Codex CLI (0.169.0) from an empty HOME:
// no provider and no login, so it shows its sign-in screen, which the
// office does not answer for a person. The agent shows needs_attention
// with the screen's text, and nothing is typed into it.
func TestCodexSignIn(t *testing.T) {
	bin := testenv.CLIBin(t, "codex")
	checkGoroutines(t)
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "work")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := newRecorder()
	m := newTestManager(t, r, Options{StopGrace: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := Key{"office", "codex-sign-in"}
	s, err := m.Start(ctx, key, Spec{Kind: KindCodex, Command: bin, Dir: dir, Home: home, Env: []string{"HOME=" + home}, Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("info %+v; screen:\n%s", s.Info(), strings.Join(s.Screen(), "\n"))
		}
	}()
	r.waitFor(t, "needs_attention", 40*time.Second, func(st []Status, _ []Text) bool {
		return lastStatus(st) == office.SessionNeedsAttention
	})
	for _, want := range []string{"Sign in with ChatGPT", "Sign in another way"} {
		if d := s.Info().Detail; !strings.Contains(d, want) {
			t.Errorf("detail lacks %q:\n%s", want, d)
		}
	}
	sent := make(chan error, 1)
	sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
	defer scancel()
	go func() { sent <- s.Send(sctx, "NOT-TYPED") }()
	if err := <-sent; err == nil {
		t.Error("a message was typed into the sign-in screen")
	}
	for _, row := range s.Screen() {
		if strings.Contains(row, "NOT-TYPED") {
			t.Errorf("the message shows on the sign-in screen: %q", row)
		}
	}
	if st := s.Info().Status; st != office.SessionNeedsAttention {
		t.Errorf("status %s after the message, want needs_attention", st)
	}
	if err := m.Stop(ctx, key); err != nil {
		t.Fatal(err)
	}
}

// cliDirs makes a CLI agent's HOME, set up by prepare with what a person
// sets to use the CLI with their provider, and its working folder.
func cliDirs(t *testing.T, prepare func(home string) error) (home, dir string) {
	t.Helper()
	home = t.TempDir()
	dir = filepath.Join(t.TempDir(), "work")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := prepare(home); err != nil {
		t.Fatal(err)
	}
	return home, dir
}
