package session

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSanitize(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "hello 세계", "hello 세계"},
		{"newline and tab kept", "a\n\tb", "a\n\tb"},
		{"CRLF", "a\r\nb\rc", "a\nb\nc"},
		{"ESC sequences", "x\x1b[31mred\x1b[0m\x1b]0;title\x07y", "x[31mred[0m]0;titley"},
		{"ctrl-c and friends", "a\x03b\x04c\x00d\x7fe\x1a", "abcde"},
		{"bracketed paste end", "before\x1b[201~\x1b[200~after", "before[201~[200~after"},
		{"C1 controls", "a\u009b31mb\u0085c", "a31mbc"},
		{"raw 8-bit CSI byte", "a\x9b2Jb", "a\ufffd2Jb"},
		{"invoke tag kept", "[INVOKE:X]", "[INVOKE:X]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Sanitize(tt.in)
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("Sanitize(%q) (-got +want):\n%s", tt.in, diff)
			}
			for _, r := range got {
				if r != '\n' && r != '\t' && isControl(r) {
					t.Errorf("control %U survived", r)
				}
			}
		})
	}
}

func FuzzSanitize(f *testing.F) {
	f.Add("a\x1b[201~b\x03")
	f.Add("\x9b\xc2\x9b")
	f.Fuzz(func(t *testing.T, s string) {
		got := Sanitize(s)
		for _, r := range got {
			if r != '\n' && r != '\t' && isControl(r) {
				t.Fatalf("control %U survived in %q", r, got)
			}
		}
		if strings.Contains(got, "\x1b") {
			t.Fatal("ESC survived")
		}
		if Sanitize(got) != got {
			t.Fatal("not idempotent")
		}
	})
}

func TestModeTracker(t *testing.T) {
	var m modeTracker
	for _, c := range []byte("abc\x1b[?1049;2004h") {
		m.write([]byte{c}) // byte by byte: chunk boundaries anywhere
	}
	if !m.paste {
		t.Fatal("mode 2004 not seen as set")
	}
	m.write([]byte("\x1b[2004l\x1b[?25l"))
	if !m.paste {
		t.Fatal("non-private CSI 2004l must not reset it")
	}
	m.write([]byte("x\x1b[?2004l"))
	if m.paste {
		t.Fatal("mode 2004 not reset")
	}
}

func TestProjectDirName(t *testing.T) {
	tests := map[string]string{
		"/tmp/work_dir.x":  "-tmp-work-dir-x",
		"/home/a/프로젝트":     "-home-a-----",
		"/a/b😀":            "-a-b--",
		"/Users/Me/Code-9": "-Users-Me-Code-9",
	}
	for in, want := range tests {
		if got := ProjectDirName(in); got != want {
			t.Errorf("ProjectDirName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPrepareClaudeConfig(t *testing.T) {
	cfgDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(cfgDir, ".claude.json"), []byte(`{"theme":"dark","projects":{"/other":{"x":1}},"customApiKeyResponses":{"approved":[],"rejected":["ghijklmnopqrstuvwxyz"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// The agent's folder sits inside a git checkout: Claude Code looks the
	// trust up under the checkout's root.
	repo := t.TempDir()
	if err := os.Mkdir(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(repo, "agents", "po")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	key := "sk-ant-0123456789abcdefghijklmnopqrstuvwxyz"
	for range 2 { // idempotent
		if err := PrepareClaudeConfig(cfgDir, work, key, false); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(cfgDir, ".claude.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Theme      string `json:"theme"`
		Onboarding bool   `json:"hasCompletedOnboarding"`
		Keys       struct {
			Approved, Rejected []string
		} `json:"customApiKeyResponses"`
		Projects map[string]struct {
			Trusted bool `json:"hasTrustDialogAccepted"`
		} `json:"projects"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Theme != "dark" || !cfg.Onboarding || len(cfg.Projects) != 3 {
		t.Errorf("settings kept, onboarding done, 3 projects: got %s", b)
	}
	for _, d := range []string{work, repo} {
		if !cfg.Projects[d].Trusted {
			t.Errorf("%s not trusted:\n%s", d, b)
		}
	}
	if !slices.Equal(cfg.Keys.Approved, []string{"ghijklmnopqrstuvwxyz"}) || len(cfg.Keys.Rejected) != 0 {
		t.Errorf("key approved once and no longer rejected: %+v", cfg.Keys)
	}
}

func TestBuildEnv(t *testing.T) {
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
	t.Setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "")
	t.Setenv("SECRET_OF_THE_SERVER", "x")
	t.Setenv("PATH", "/usr/bin:/bin")
	spec := Spec{Home: "/h", Env: []string{"FOO=bar", "TERM=dumb"}}
	claude := envMap(buildEnv(spec, true))
	command := envMap(buildEnv(spec, false))
	for name, env := range map[string]map[string]string{"claude": claude, "command": command} {
		if env["PATH"] != "/usr/bin:/bin" || env["HOME"] != "/h" || env["FOO"] != "bar" {
			t.Errorf("%s: PATH, HOME or Spec.Env missing: %v", name, env)
		}
		if env["TERM"] != "dumb" {
			t.Errorf("%s: Spec.Env does not win over TERM: %v", name, env["TERM"])
		}
		if _, ok := env["SECRET_OF_THE_SERVER"]; ok {
			t.Errorf("%s: the server's environment leaked", name)
		}
	}
	if claude["ANTHROPIC_BASE_URL"] != "http://127.0.0.1:9" || claude["DISABLE_AUTOUPDATER"] != "1" {
		t.Errorf("claude env lacks pass-through or defaults: %v", claude)
	}
	if claude["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] != "" {
		t.Errorf("an explicitly set variable was overridden: %q", claude["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"])
	}
	if _, ok := command["ANTHROPIC_BASE_URL"]; ok {
		t.Error("command agents get the Anthropic variables")
	}
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := m[k]; dup {
			m[k] = "DUPLICATE"
			continue
		}
		m[k] = v
	}
	return m
}

func TestKeyLine(t *testing.T) {
	x := &screenLines{}
	var k keyLine
	if k.feed([]byte("ab\x1b[Dc\x1bOA\x7fd 한"), x) {
		t.Fatal("no Enter yet")
	}
	if !k.feed([]byte("\xea\xb8\x80\r"), x) {
		t.Fatal("Enter not seen")
	}
	k.feed([]byte("junk\x15ok\n"), x)
	if diff := cmp.Diff(x.echo, []string{"abd 한글", "ok"}); diff != "" {
		t.Errorf("typed lines (-got +want):\n%s", diff)
	}
}

// TestScreenLinesCapture runs a recorded capture (bash printing 40 Korean
// lines on a 30x8 terminal) through the screen path in chunks of every
// size, with and without a resize in the middle: every line comes out once,
// in order, whatever the chunking.
func TestScreenLinesCapture(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("screen", "testdata", "seq_korean.bin"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 1; i <= 40; i++ {
		want = append(want, fmt.Sprintf("줄 %d: 한글 텍스트 %d", i, i))
	}
	for _, resize := range []bool{false, true} {
		for size := 1; size <= 64; size++ {
			x := &screenLines{scr: newScreen(30, 8), cols: 30}
			var got []string
			for off := 0; off < len(data); off += size {
				if resize && off >= len(data)/2 && off < len(data)/2+size {
					x.resized(36, 8)
				}
				x.write(data[off:min(off+size, len(data))])
				l, _ := x.take()
				got = append(got, l...)
			}
			x.turnEnd(nil)
			l, _ := x.take()
			got = append(got, l...)
			// A second turn end reads nothing new.
			x.turnEnd(nil)
			l, _ = x.take()
			got = append(got, l...)
			if diff := cmp.Diff(got, want); diff != "" {
				t.Fatalf("resize %v, chunks of %d (-got +want):\n%s", resize, size, diff)
			}
		}
	}
}

// TestCheck covers the registry of kinds: defaults filled in per kind, and
// a clear error for what a kind cannot run.
func TestCheck(t *testing.T) {
	if got, want := Kinds(), []string{KindBuiltin, KindClaude, KindCodex, KindCommand, KindGemini, KindQwen}; !slices.Equal(got, want) {
		t.Errorf("Kinds() = %v, want %v", got, want)
	}
	tests := []struct {
		name string
		spec Spec
		want Spec
		err  string
	}{
		{"empty is claude", Spec{}, Spec{Kind: KindClaude, Command: "claude", Quiescence: 300 * time.Millisecond, Cols: 200, Rows: 50}, ""},
		{"command", Spec{Kind: KindCommand, Command: "sh", Cols: 80, Rows: 24}, Spec{Kind: KindCommand, Command: "sh", Quiescence: 500 * time.Millisecond, Cols: 80, Rows: 24}, ""},
		{"builtin prompt", Spec{Kind: KindBuiltin, Command: "/bin/office-server", Script: "po"}, Spec{Kind: KindBuiltin, Command: "/bin/office-server", Script: "po", PromptPattern: BuiltinPrompt, Quiescence: 500 * time.Millisecond, Cols: 200, Rows: 50}, ""},
		{"codex", Spec{Kind: KindCodex}, Spec{Kind: KindCodex, Command: "codex", Quiescence: 500 * time.Millisecond, Cols: 200, Rows: 50}, ""},
		{"qwen", Spec{Kind: KindQwen}, Spec{Kind: KindQwen, Command: "qwen", Quiescence: 1500 * time.Millisecond, Cols: 200, Rows: 50}, ""},
		{"qwen id", Spec{Kind: KindQwen, ConversationID: "not-a-uuid"}, Spec{}, `conversation id "not-a-uuid": not a UUID`},
		{"unknown kind", Spec{Kind: "docker"}, Spec{}, `unknown kind "docker" (known: builtin, claude, codex, command, gemini, qwen)`},
		{"command without command", Spec{Kind: KindCommand}, Spec{}, "kind command needs a command"},
		{"builtin without script", Spec{Kind: KindBuiltin, Command: "x"}, Spec{}, "kind builtin needs a script"},
		{"builtin without executable", Spec{Kind: KindBuiltin, Script: "po"}, Spec{}, "kind builtin needs the server's executable (Command)"},
		{"bad pattern", Spec{Kind: KindCommand, Command: "sh", PromptPattern: "("}, Spec{}, "prompt pattern: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Check(tt.spec)
			if tt.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(got, tt.want); d != "" {
				t.Errorf("(-got +want):\n%s", d)
			}
		})
	}
}

// TestSamePrompt: a user entry of Claude Code's transcript is the text
// typed even when a long text reached it in two reads and was recorded as
// a pasted piece plus the rest (the closing tag repeats a hex id), split
// inside the first 200 characters that are compared.
func TestSamePrompt(t *testing.T) {
	var words []string
	for i := range 300 {
		words = append(words, fmt.Sprintf("붙여넣기%d", i))
	}
	long := strings.Join(words, " ")
	cut := strings.Index(long, "기1") + len("기") // inside a word: 붙여넣기|1
	split := "\n\n<pasted_content id=\"187f\">\n" + long[:cut] + "\n</pasted_content id=\"187f\">\n\n" + long[cut:]
	cases := []struct {
		name, entry, typed string
		want               bool
	}{
		{"same", "hello there", "hello there", true},
		{"re-indented paste", "a\n  b\n c", "a\nb\nc", true},
		{"split paste", split, long, true},
		{"split paste, other text", split, strings.Replace(long, "붙여넣기0", "붙여넣기x", 1), false},
		{"other text", "hello there", "hello their", false},
		{"markup only", "<pasted_content id=\"1\"></pasted_content id=\"1\">", "x", false},
	}
	for _, c := range cases {
		if got := samePrompt(c.entry, c.typed); got != c.want {
			t.Errorf("%s: samePrompt = %v, want %v", c.name, got, c.want)
		}
	}
}
