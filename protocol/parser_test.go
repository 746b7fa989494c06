package protocol

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// ignoreRawLine compares messages by kind, target and payload only.
var ignoreRawLine = cmpopts.IgnoreFields(Message{}, "Raw", "Line")

// ignoreReason compares invalid messages by what they tried to be only;
// reason texts are checked with wantReason.
var ignoreReason = cmpopts.IgnoreFields(Invalid{}, "Reason")

type parseCase struct {
	name string
	in   string
	want []Message
	// wantReason: substrings each INVALID message's reason must contain,
	// in order of the invalid messages.
	wantReason []string
}

func runParseCases(t *testing.T, cases []parseCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseString(tc.in, Options{})
			if diff := cmp.Diff(got, tc.want, ignoreRawLine, ignoreReason, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ParseString(%q) messages (-got +want):\n%s", tc.in, diff)
			}
			var reasons []string
			for _, m := range got {
				if m.Invalid != nil {
					reasons = append(reasons, m.Invalid.Reason)
				}
			}
			if len(reasons) != len(tc.wantReason) {
				t.Fatalf("invalid reasons = %q, want %d matching %q", reasons, len(tc.wantReason), tc.wantReason)
			}
			for i, r := range reasons {
				if !strings.Contains(r, tc.wantReason[i]) {
					t.Errorf("reason %d = %q, want it to contain %q", i, r, tc.wantReason[i])
				}
			}
		})
	}
}

func inv(kind Kind, target string) Message {
	return Message{Kind: KindInvalid, Target: target, Invalid: &Invalid{Kind: kind}}
}

// TestParseSeed000 holds the sources' parser cases for dependency requests
// (docs/protocol.md, Dependency requests).
func TestParseSeed000(t *testing.T) {
	runParseCases(t, []parseCase{
		{
			name: "valid dependency request",
			in: `
[DEPENDENCY_REQUEST]
type: api_key
name: OPENAI_API_KEY
description: Required for AI features
required: true
[/DEPENDENCY_REQUEST]
      `,
			want: []Message{{Kind: KindDependencyRequest, Dependency: &DependencyRequest{
				Type: "api_key", Name: "OPENAI_API_KEY", Description: "Required for AI features", Required: true}}},
		},
		{
			name: "regular text",
			in:   "Just some regular text",
		},
		{
			// The sources' sketch returns null; here the block is reported, not dropped.
			name: "missing required fields",
			in: `
[DEPENDENCY_REQUEST]
type: api_key
name: OPENAI_API_KEY
[/DEPENDENCY_REQUEST]
      `,
			want:       []Message{inv(KindDependencyRequest, "")},
			wantReason: []string{"missing 'description:' line; write `description:"},
		},
		{
			name: "unknown type",
			in:   "[DEPENDENCY_REQUEST]\ntype: api_key | env_variable\nname: X\ndescription: d\nrequired: true\n[/DEPENDENCY_REQUEST]",
			want: []Message{inv(KindDependencyRequest, "")}, wantReason: []string{`unknown type "api_key | env_variable"`},
		},
		{
			name: "optional with default",
			in:   "[DEPENDENCY_REQUEST]\ntype: file\nname: logo.png\ndescription: Company logo for the app\nrequired: false\ndefault: placeholder.png\n[/DEPENDENCY_REQUEST]",
			want: []Message{{Kind: KindDependencyRequest, Dependency: &DependencyRequest{
				Type: "file", Name: "logo.png", Description: "Company logo for the app", Default: "placeholder.png"}}},
		},
		{
			name: "bad default",
			in:   "[DEPENDENCY_REQUEST]\ntype: service\nname: stripe\ndescription: payments\ndefault: ftp://example.com\n[/DEPENDENCY_REQUEST]",
			want: []Message{inv(KindDependencyRequest, "")}, wantReason: []string{"only http and https"},
		},
		{
			name: "bad required",
			in:   "[DEPENDENCY_REQUEST]\ntype: package\nname: @supabase/supabase-js\ndescription: client\nrequired: maybe\n[/DEPENDENCY_REQUEST]",
			want: []Message{inv(KindDependencyRequest, "")}, wantReason: []string{`required must be true or false, not "maybe"`},
		},
	})
}

// TestValidateDependencyValueSeed000 holds the sources' validator cases and
// the edges of each validator.
func TestValidateDependencyValueSeed000(t *testing.T) {
	for _, tc := range []struct {
		typ, value string
		wantErr    string // "" means valid
	}{
		{"api_key", "sk-1234567890abcdef", ""},
		{"api_key", "short", "too short"},
		{"api_key", "sk-abc def123456", "invalid API key format"},
		{"service", "https://api.example.com", ""},
		{"service", "http://localhost:8080/x", ""},
		{"service", "ftp://example.com", "only http and https"},
		{"service", "https://", "no host"},
		{"service", "not a url", "only http and https"},
		{"file", "../../../etc/passwd", "traversal"},
		{"file", `..\secrets`, "traversal"},
		{"file", "docs/notes..txt", ""},
		{"file", "/work/logo.png", ""},
		{"file", strings.Repeat("a", 501), "too long"},
		{"permission", "YES", ""},
		{"permission", "false", ""},
		{"permission", "sure", "true/false or yes/no"},
		{"package", "@supabase/supabase-js", ""},
		{"package", "socket.io", ""},
		{"package", "Express", "invalid package name"},
		{"package", "@scope", "invalid package name"},
		{"package", "_private", "invalid package name"},
		{"env_variable", "postgres://u:p@h/db?x=1 y", ""},
		{"env_variable", strings.Repeat("v", 10001), "too long"},
		{"env_variable", "   ", "cannot be empty"},
		{"unknown", "x", "unknown dependency type"},
	} {
		err := ValidateDependencyValue(tc.typ, tc.value)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("ValidateDependencyValue(%q, %.20q) = %v, want nil", tc.typ, tc.value, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("ValidateDependencyValue(%q, %.20q) = %v, want error containing %q", tc.typ, tc.value, err, tc.wantErr)
		}
	}
}

// TestParseSeed002 holds the sources' parser cases of the web server's view, plus its step and phase
// formats.
func TestParseSeed002(t *testing.T) {
	runParseCases(t, []parseCase{
		{
			name: "question with bracket options",
			in: `
[USER_QUESTION]
category: business
question: What pricing model?
options: [Subscription, Freemium, Ad-based]
default: Freemium
required: false
[/USER_QUESTION]
      `,
			want: []Message{{Kind: KindUserQuestion, Question: &Question{
				Category: "business", Question: "What pricing model?", Type: "selection",
				Options: []string{"Subscription", "Freemium", "Ad-based"}, Default: "Freemium", Required: false}}},
		},
		{
			name: "step slash",
			in:   "Step 3/9: Feature Specification",
			want: []Message{{Kind: KindStep, Step: &Step{Current: 3, Total: 9, Name: "Feature Specification"}}},
		},
		{
			name: "step korean",
			in:   "현재 Step: 3/9: 기능 명세",
			want: []Message{{Kind: KindStep, Step: &Step{Current: 3, Total: 9, Name: "기능 명세"}}},
		},
		{
			name: "step of",
			in:   "step 4 of 9: Screens",
			want: []Message{{Kind: KindStep, Step: &Step{Current: 4, Total: 9, Name: "Screens"}}},
		},
		{
			name: "step decorated",
			in:   "● **Step 5/9: Backend**",
			want: []Message{{Kind: KindStep, Step: &Step{Current: 5, Total: 9, Name: "Backend"}}},
		},
		{
			name: "step out of range",
			in:   "Step 10/9: Too far",
			want: []Message{inv(KindStep, "")}, wantReason: []string{"out of range"},
		},
		{
			name: "step in prose is not an update",
			in:   "As planned in Step 3/9: nothing changes.\nStep 3/9 without a name",
		},
		{
			name: "error finer types",
			in:   "[ERROR]\ntype: missing_file\nmessage: guide not found\ndetails: guide/planning/01_idea.md\n[/ERROR]",
			want: []Message{{Kind: KindError, Error: &AgentError{Type: "missing_file", Message: "guide not found",
				Details: "guide/planning/01_idea.md", Recovery: RecoveryNotifyUser}}},
		},
		{
			name: "phase with completed line and files",
			in:   "=== PHASE 2 COMPLETE ===\nCompleted: Phase 2 (Design)\nFiles created:\n- docs/design/01_arch.md\n- src/app.ts\n\nNext I will rest.",
			want: []Message{{Kind: KindPhaseComplete, Phase: &PhaseComplete{Number: 2, Name: "Design",
				Deliverables: []string{"docs/design/01_arch.md", "src/app.ts"}}}},
		},
	})
}

// TestParseSeed003 holds the sources' parser cases of the protocol layer (Korean keys, no closing
// tags).
func TestParseSeed003(t *testing.T) {
	runParseCases(t, []parseCase{
		{
			name: "ASK_USER",
			in: `[ASK_USER]
질문: 로그인 방식을 선택해주세요
타입: selection
옵션: ['이메일', '소셜', 'SSO']`,
			want: []Message{{Kind: KindAskUser, Question: &Question{Question: "로그인 방식을 선택해주세요",
				Type: "selection", Options: []string{"이메일", "소셜", "SSO"}, Required: true}}},
		},
		{
			name: "INVOKE",
			in: `[INVOKE:PO]
요구사항 분석을 진행해주세요.
컨텍스트: 로그인 기능 구현`,
			want: []Message{{Kind: KindInvoke, Target: "PO", Invoke: &Invoke{Task: "요구사항 분석을 진행해주세요.", Context: "로그인 기능 구현"}}},
		},
		{
			name: "ASK_USER handler example",
			in:   "[ASK_USER]\n질문: Test?",
			want: []Message{{Kind: KindAskUser, Question: &Question{Question: "Test?", Type: "text", Required: true}}},
		},
		{
			name: "DELIVER_RESULT Korean keys",
			in:   "[DELIVER_RESULT:PM]\n타입: markdown\n내용: # 요구사항\n- 로그인\n- 가입",
			want: []Message{{Kind: KindDeliverResult, Target: "PM", Result: &DeliverResult{Type: "markdown",
				Content: "# 요구사항\n- 로그인\n- 가입", ContentType: "text/markdown"}}},
		},
		{
			name: "DELIVER_RESULT whole body is content",
			in:   "[DELIVER_RESULT:Dev]\nThe API is done.\ntype: this line is content\n[/DELIVER_RESULT]",
			want: []Message{{Kind: KindDeliverResult, Target: "Dev", Result: &DeliverResult{Type: "message",
				Content: "The API is done.\ntype: this line is content", ContentType: "text/plain"}}},
		},
		{
			name: "three unclosed blocks in a row",
			in:   "[ASK_USER]\n질문: A?\n[INVOKE:PO]\nDo it\n[DELIVER_RESULT:PM]\n내용: done",
			want: []Message{
				{Kind: KindAskUser, Question: &Question{Question: "A?", Type: "text", Required: true}},
				{Kind: KindInvoke, Target: "PO", Invoke: &Invoke{Task: "Do it"}},
				{Kind: KindDeliverResult, Target: "PM", Result: &DeliverResult{Type: "message", Content: "done", ContentType: "text/plain"}},
			},
		},
		{
			name: "STEP_COMPLETE",
			in:   "[STEP_COMPLETE]\nstep: Design\nAll screens drawn.\n[/STEP_COMPLETE]\n[STEP_COMPLETE][/STEP_COMPLETE]",
			want: []Message{
				{Kind: KindStepComplete, StepComplete: &StepComplete{Name: "Design", Summary: "All screens drawn."}},
				{Kind: KindStepComplete, StepComplete: &StepComplete{}},
			},
		},
	})
}

// TestParseSeed001 parses every example of the sources' catalogue
// (docs/protocol.md, Blocks).
func TestParseSeed001(t *testing.T) {
	runParseCases(t, []parseCase{
		{
			name: "user question dash list",
			in: `[USER_QUESTION]
category: business
question: What is your preferred revenue model?
options:
  - Subscription (monthly/yearly)
  - Freemium (free + paid tiers)
  - One-time purchase
  - Ad-supported
default: Subscription (monthly/yearly)
required: true
[/USER_QUESTION]`,
			want: []Message{{Kind: KindUserQuestion, Question: &Question{Category: "business",
				Question: "What is your preferred revenue model?", Type: "selection",
				Options: []string{"Subscription (monthly/yearly)", "Freemium (free + paid tiers)", "One-time purchase", "Ad-supported"},
				Default: "Subscription (monthly/yearly)", Required: true}}},
		},
		{
			name: "confirmation",
			in:   "[USER_QUESTION]\ncategory: confirmation\nquestion: Proceed with generating authentication system using Supabase Auth?\noptions:\n  - Yes\n  - No, use a different auth system\ndefault: Yes\nrequired: true\n[/USER_QUESTION]",
			want: []Message{{Kind: KindUserQuestion, Question: &Question{Category: "confirmation",
				Question: "Proceed with generating authentication system using Supabase Auth?", Type: "selection",
				Options: []string{"Yes", "No, use a different auth system"}, Default: "Yes", Required: true}}},
		},
		{
			name: "phase detailed",
			in:   "=== PHASE 1 COMPLETE ===\nPhase: Planning\nDocuments created:\n- docs/planning/01_idea.md\n- docs/planning/02_market.md",
			want: []Message{{Kind: KindPhaseComplete, Phase: &PhaseComplete{Number: 1, Name: "Planning",
				Deliverables: []string{"docs/planning/01_idea.md", "docs/planning/02_market.md"}}}},
		},
		{
			name: "phase short",
			in:   "=== PHASE 3 COMPLETE ===\nMoving on.",
			want: []Message{{Kind: KindPhaseComplete, Phase: &PhaseComplete{Number: 3}}},
		},
		{
			name: "error recoverable",
			in:   "[ERROR]\ntype: recoverable\nmessage: Rate limit exceeded\ndetails: API rate limit hit, will retry after cooldown\nrecovery: pause_and_retry\n[/ERROR]",
			want: []Message{{Kind: KindError, Error: &AgentError{Type: "recoverable", Message: "Rate limit exceeded",
				Details: "API rate limit hit, will retry after cooldown", Recovery: "pause_and_retry"}}},
		},
		{
			name: "error fatal multi-line details",
			in:   "[ERROR]\ntype: fatal\nmessage: Invalid guide document structure\ndetails: guide/planning/01_idea.md is missing\n  required sections\nrecovery: checkpoint_and_fail\n[/ERROR]",
			want: []Message{{Kind: KindError, Error: &AgentError{Type: "fatal", Message: "Invalid guide document structure",
				Details: "guide/planning/01_idea.md is missing\nrequired sections", Recovery: "checkpoint_and_fail"}}},
		},
		{
			name: "error bad recovery",
			in:   "[ERROR]\ntype: fatal\nmessage: x\nrecovery: pray\n[/ERROR]",
			want: []Message{inv(KindError, "")}, wantReason: []string{`unknown recovery "pray"`},
		},
		{
			name: "dependency types",
			in: strings.Join([]string{
				"[DEPENDENCY_REQUEST]\ntype: env_variable\nname: DATABASE_URL\ndescription: PostgreSQL connection string\nrequired: true\n[/DEPENDENCY_REQUEST]",
				"[DEPENDENCY_REQUEST]\ntype: permission\nname: file_system_write\ndescription: Permission to write files to disk\nrequired: true\n[/DEPENDENCY_REQUEST]",
			}, "\n"),
			want: []Message{
				{Kind: KindDependencyRequest, Dependency: &DependencyRequest{Type: "env_variable", Name: "DATABASE_URL", Description: "PostgreSQL connection string", Required: true}},
				{Kind: KindDependencyRequest, Dependency: &DependencyRequest{Type: "permission", Name: "file_system_write", Description: "Permission to write files to disk", Required: true}},
			},
		},
	})
}

// TestParseForms covers docs/protocol.md's forms beyond the sources' examples.
func TestParseForms(t *testing.T) {
	runParseCases(t, parseFormCases)
}

// askQ is the ASK_USER message of question, a selection of opts or, with
// none, a text question; required.
func askQ(question string, opts ...string) Message {
	typ := "text"
	if len(opts) > 0 {
		typ = "selection"
	}
	return Message{Kind: KindAskUser, Question: &Question{Question: question, Type: typ, Options: opts, Required: true}}
}

// parseFormCases are the forms agents write blocks in, and the blocks
// that are refused with the reason.
var parseFormCases = []parseCase{
	{name: "english keys any case", in: "[ask_user]\nQUESTION: Which DB?\nType: Selection\nOptions: [\"Postgres\", \"SQLite\"]\n[/ASK_USER]",
		want: []Message{askQ("Which DB?", "Postgres", "SQLite")}},
	{name: "json options with quotes inside", in: `[ASK_USER]` + "\n" + `question: Pick
options: ["it's \"fine\"", 'don\'t', plain]`,
		want: []Message{askQ("Pick", `it's "fine"`, "don't", "plain")}},
	{name: "multi-line json options", in: "[ASK_USER]\nquestion: Pick\noptions: [\n  \"a\",\n  \"b\"\n]\n[/ASK_USER]",
		want: []Message{askQ("Pick", "a", "b")}},
	{name: "dash list at margin", in: "[ASK_USER]\nquestion: Pick\noptions:\n- a\n- b\n* c\n[/ASK_USER]",
		want: []Message{askQ("Pick", "a", "b", "c")}},
	{name: "comma options", in: "[ASK_USER]\nquestion: Pick\noptions: a, b",
		want: []Message{askQ("Pick", "a", "b")}},
	{name: "continued value", in: "[ASK_USER]\nquestion: Which login method\n  should we build first?\ncontext: the MVP\n  has one week\n[/ASK_USER]",
		want: []Message{{Kind: KindAskUser, Question: &Question{Question: "Which login method\nshould we build first?",
			Context: "the MVP\nhas one week", Type: "text", Required: true}}}},
	{name: "bold keys", in: "[ASK_USER]\n**question**: Why?\n**required:** false\n[/ASK_USER]",
		want: []Message{{Kind: KindAskUser, Question: &Question{Question: "Why?", Type: "text"}}}},
	{name: "free text question", in: "[ASK_USER]\nWhich login method?\noptions: [a, b]\n[/ASK_USER]",
		want: []Message{askQ("Which login method?", "a", "b")}},
	{name: "claude code reply", in: "● I need to ask first.\n\n● [ASK_USER]\n  질문: 로그인 방식을\n    선택해주세요\n  타입: selection\n  옵션: ['이메일', '소셜']\n  [/ASK_USER]\n\n  Step 2/5: Waiting",
		want: []Message{askQ("로그인 방식을\n선택해주세요", "이메일", "소셜"),
			{Kind: KindStep, Step: &Step{Current: 2, Total: 5, Name: "Waiting"}}}},
	{name: "gemini cli reply opens with the tag", in: "✦ [ASK_USER]\n  질문: 계속할까요?\n  [/ASK_USER]",
		want: []Message{askQ("계속할까요?")}},
	{name: "qwen code reply opens with the tag", in: "  \u25c6\ufe0e [ASK_USER]\n    질문: 계속할까요?\n    [/ASK_USER]",
		want: []Message{askQ("계속할까요?")}},
	{name: "qwen code scroll bar after the tags", in: "    [ASK_USER]          █\n    질문: 계속할까요?\n    [/ASK_USER]         │",
		want: []Message{askQ("계속할까요?")}},
	{name: "codex reply opens with the tag", in: "• [ASK_USER]\n  질문: 계속할까요?\n  [/ASK_USER]",
		want: []Message{askQ("계속할까요?")}},
	{name: "qwen code step line opens a reply", in: "\u25c6\ufe0e Step 1/3: 분석",
		want: []Message{{Kind: KindStep, Step: &Step{Current: 1, Total: 3, Name: "분석"}}}},
	{name: "stripped screen lost some indentation", in: "●[ASK_USER]\n  질문: 로그인 방식을\n  골라 주세요\n타입:selection\n옵션:[\"a\",\"b\"]\n[/ASK_USER]",
		want: []Message{askQ("로그인 방식을\n골라 주세요", "a", "b")}},
	{name: "closing tag drawn inside a table's box", in: "● [DELIVER_RESULT:PM]\n  type: markdown\n  content:\n  ┌──────┬──────┐\n  │ 화면 │ 상태 │\n  └──────┴──────┘\n  │ [/DELIVER_RESULT] │      │\nStep 1/2: x",
		want: []Message{{Kind: KindDeliverResult, Target: "PM", Result: &DeliverResult{Type: "markdown", ContentType: "text/markdown",
			Content: "┌──────┬──────┐\n│ 화면 │ 상태 │\n└──────┴──────┘"}},
			{Kind: KindStep, Step: &Step{Current: 1, Total: 2, Name: "x"}}}},
	{name: "tag line rest", in: "[INVOKE:Dev] Build the login page\ncontext: see docs/login.md\n[/INVOKE]",
		want: []Message{{Kind: KindInvoke, Target: "Dev", Invoke: &Invoke{Task: "Build the login page", Context: "see docs/login.md"}}}},
	{name: "one-line block", in: "[ASK_USER] question: Ready? [/ASK_USER] and more",
		want: []Message{askQ("Ready? [/ASK_USER] and more")}},
	{name: "inline closing", in: "[ASK_USER]\nquestion: Ready? [/ASK_USER]\nStep 1/2: x",
		want: []Message{askQ("Ready?"), {Kind: KindStep, Step: &Step{Current: 1, Total: 2, Name: "x"}}}},
	{name: "boxed", in: "╭──────────────────────╮\n│ [ASK_USER]           │\n│ question: Boxed?     │\n│ [/ASK_USER]          │\n╰──────────────────────╯",
		want: []Message{askQ("Boxed?")}},
	{name: "stray closing tags", in: "[/ASK_USER]\n[/INVOKE:PO]\n[ASK_USER]\nquestion: Still here?\n[/ASK_USER]\n[/ASK_USER]",
		want: []Message{askQ("Still here?")}},
	{name: "mismatched closing ends the block", in: "[ASK_USER]\nquestion: A?\n[/INVOKE]\nStep 1/3: next",
		want: []Message{askQ("A?"), {Kind: KindStep, Step: &Step{Current: 1, Total: 3, Name: "next"}}}},
	{name: "unclosed key-value block ends at prose after blank", in: "[ASK_USER]\nquestion: A?\n\nLet me know!\nStep 1/3: next",
		want: []Message{askQ("A?"), {Kind: KindStep, Step: &Step{Current: 1, Total: 3, Name: "next"}}}},
	{name: "blank line inside key-value block", in: "[USER_QUESTION]\ncategory: choice\nquestion: DB?\n\noptions:\n  - a\n\n  - b\nrequired: false\n[/USER_QUESTION]",
		want: []Message{{Kind: KindUserQuestion, Question: &Question{Category: "choice", Question: "DB?", Type: "selection", Options: []string{"a", "b"}}}}},
	{name: "unclosed invoke runs to flush", in: "[INVOKE:PO]\nPlan it.\n\nStep 1/2: not a step here",
		want: []Message{{Kind: KindInvoke, Target: "PO", Invoke: &Invoke{Task: "Plan it.\n\nStep 1/2: not a step here"}}}},
	{name: "invoke without target", in: "[INVOKE]\ntask: Review the PR\n  carefully\n[/INVOKE]",
		want: []Message{{Kind: KindInvoke, Invoke: &Invoke{Task: "Review the PR\ncarefully"}}}},
	{name: "code fences around fields", in: "[ASK_USER]\n```\nquestion: Fenced?\n```\n[/ASK_USER]",
		want: []Message{askQ("Fenced?")}},
	{name: "fenced block without closing tag", in: "```\n[ASK_USER]\nquestion: Fenced?\n```\nMore prose.\nStep 1/2: x",
		want: []Message{askQ("Fenced?"), {Kind: KindStep, Step: &Step{Current: 1, Total: 2, Name: "x"}}}},
	{name: "fenced json without closing tag", in: "[PROXY_REQUEST]\n```json\n{\"action\": \"update_status\", \"task_id\": \"t1\", \"status\": \"done\"}\n```\nThanks.",
		want: []Message{{Kind: KindProxyRequest, Proxy: &ProxyRequest{Action: "update_status", TaskID: "t1", Status: "done",
			Payload: []byte(`{"action": "update_status", "task_id": "t1", "status": "done"}`)}}}},
	{name: "CRLF", in: "[ASK_USER]\r\nquestion: CRLF?\r\noptions: [a, b]\r\n[/ASK_USER]\r\n",
		want: []Message{askQ("CRLF?", "a", "b")}},
	{name: "ask missing question", in: "[ASK_USER]\ntype: selection\noptions: [a, b]\n[/ASK_USER]",
		want: []Message{inv(KindAskUser, "")}, wantReason: []string{"ASK_USER: missing 'question:' line; write `question: <text>`"}},
	{name: "selection needs options", in: "[ASK_USER]\nquestion: Pick\ntype: selection\n[/ASK_USER]",
		want: []Message{inv(KindAskUser, "")}, wantReason: []string{"at least two options"}},
	{name: "bad options", in: "[ASK_USER]\nquestion: Pick\noptions: ['a', 'b'\n[/ASK_USER]",
		want: []Message{inv(KindAskUser, "")}, wantReason: []string{"missing ']'"}},
	{name: "unknown question type", in: "[ASK_USER]\nquestion: Pick\ntype: essay\n[/ASK_USER]",
		want: []Message{inv(KindAskUser, "")}, wantReason: []string{`unknown type "essay"`}},
	{name: "user question needs category", in: "[USER_QUESTION]\nquestion: Why?\n[/USER_QUESTION]",
		want: []Message{inv(KindUserQuestion, "")}, wantReason: []string{"missing 'category:'"}},
	{name: "result json", in: "[DELIVER_RESULT:PM]\ntype: json\ncontent:\n```json\n{\"ok\": true}\n```\n[/DELIVER_RESULT]",
		want: []Message{{Kind: KindDeliverResult, Target: "PM", Result: &DeliverResult{Type: "json", Content: `{"ok": true}`, ContentType: "application/json"}}}},
	{name: "result bad json", in: "[DELIVER_RESULT:PM]\ntype: json\ncontent: {ok}\n[/DELIVER_RESULT]",
		want: []Message{inv(KindDeliverResult, "PM")}, wantReason: []string{"not valid JSON"}},
	{name: "result file traversal", in: "[DELIVER_RESULT:PM]\ntype: file_path\ncontent: ../../etc/passwd\n[/DELIVER_RESULT]",
		want: []Message{inv(KindDeliverResult, "PM")}, wantReason: []string{"traversal"}},
	{name: "result unknown type", in: "[DELIVER_RESULT:PM]\ntype: pdf\ncontent: x\n[/DELIVER_RESULT]",
		want: []Message{inv(KindDeliverResult, "PM")}, wantReason: []string{`unknown type "pdf"`}},
	{name: "result empty", in: "[DELIVER_RESULT:PM]\ntype: markdown\n[/DELIVER_RESULT]",
		want: []Message{inv(KindDeliverResult, "PM")}, wantReason: []string{"empty content"}},
	{name: "result keeps indentation of content", in: "[DELIVER_RESULT:PM]\ntype: markdown\ncontent:\n  # Title\n    code\n[/DELIVER_RESULT]",
		want: []Message{{Kind: KindDeliverResult, Target: "PM", Result: &DeliverResult{Type: "markdown", Content: "# Title\n  code", ContentType: "text/markdown"}}}},
	{name: "invoke empty", in: "[INVOKE:PO]\n[/INVOKE]",
		want: []Message{inv(KindInvoke, "PO")}, wantReason: []string{"INVOKE: no task"}},
	{name: "error missing type", in: "[ERROR]\nmessage: boom\n[/ERROR]",
		want: []Message{inv(KindError, "")}, wantReason: []string{"missing 'type:'"}},
	{name: "proxy create_plan", in: "[PROXY_REQUEST]\n```json\n{\"action\": \"create_plan\", \"requester\": \"senior-sw-engineer\",\n \"tasks\": [{\"content\": \"API 엔드포인트 구현\", \"priority\": \"high\", \"estimated_time\": \"2h\", \"dependencies\": []}],\n \"preferences\": {\"preferred_proxy\": \"pm\", \"fallback_allowed\": true}}\n```\n[/PROXY_REQUEST]",
		want: []Message{{Kind: KindProxyRequest, Proxy: &ProxyRequest{Action: "create_plan", Requester: "senior-sw-engineer",
			Tasks:       []ProxyTask{{Content: "API 엔드포인트 구현", Priority: "high", EstimatedTime: "2h", Dependencies: []string{}}},
			Preferences: &ProxyPreferences{PreferredProxy: "pm", FallbackAllowed: ptr(true)},
			Payload:     []byte("{\"action\": \"create_plan\", \"requester\": \"senior-sw-engineer\",\n \"tasks\": [{\"content\": \"API 엔드포인트 구현\", \"priority\": \"high\", \"estimated_time\": \"2h\", \"dependencies\": []}],\n \"preferences\": {\"preferred_proxy\": \"pm\", \"fallback_allowed\": true}}")}}}},
	{name: "proxy update_status", in: "[PROXY_REQUEST]\n{\"action\":\"update_status\",\"requester\":\"py-code-reviewer\",\"task_id\":\"pyr-abc123\",\"status\":\"completed\",\"metadata\":{\"issues_found\":3}}\n[/PROXY_REQUEST]",
		want: []Message{{Kind: KindProxyRequest, Proxy: &ProxyRequest{Action: "update_status", Requester: "py-code-reviewer",
			TaskID: "pyr-abc123", Status: "completed", Metadata: []byte(`{"issues_found":3}`),
			Payload: []byte(`{"action":"update_status","requester":"py-code-reviewer","task_id":"pyr-abc123","status":"completed","metadata":{"issues_found":3}}`)}}}},
	{name: "proxy bad", in: "[PROXY_REQUEST]\n{\"action\": \"delete_all\"}\n[/PROXY_REQUEST]\n[PROXY_REQUEST]\nnot json\n[/PROXY_REQUEST]",
		want:       []Message{inv(KindProxyRequest, ""), inv(KindProxyRequest, "")},
		wantReason: []string{`unknown action "delete_all"`, "not a valid JSON request"}},
	{name: "unknown tags and inline mentions are prose", in: "[PROXY_RESPONSE]\n[작업 요청 from PO]\nI will use [ASK_USER] later.\n[link](http://x)"},
	{name: "phase decorated", in: "● **=== PHASE 4 COMPLETE ===**\n  Phase: Testing\n\n  Deliverables:\n  - `test-report.md`\n[ASK_USER]\nquestion: ok?",
		want: []Message{{Kind: KindPhaseComplete, Phase: &PhaseComplete{Number: 4, Name: "Testing", Deliverables: []string{"test-report.md"}}}, askQ("ok?")}},
}

func ptr[T any](v T) *T { return &v }

// TestParseLimit checks that an oversized block is reported once, at once,
// and that the parser holds no more than the limit while skipping it.
func TestParseLimit(t *testing.T) {
	p := NewParser(Options{MaxBlockBytes: 100})
	var got []Message
	got = append(got, p.Feed("[INVOKE:PO]")...)
	for i := 0; i < 1000; i++ {
		got = append(got, p.Feed("0123456789 0123456789")...)
		if i == 10 && len(got) != 1 {
			t.Fatalf("after %d lines: %d messages, want the invalid one already", i+1, len(got))
		}
		if p.blk != nil && len(p.blk.raw) > 10 {
			t.Fatalf("parser holds %d lines of an oversized block", len(p.blk.raw))
		}
	}
	got = append(got, p.Feed("[/INVOKE]")...)
	got = append(got, p.Feed("Step 1/2: after")...)
	got = append(got, p.Flush()...)
	want := []Message{inv(KindInvoke, "PO"), {Kind: KindStep, Step: &Step{Current: 1, Total: 2, Name: "after"}}}
	if diff := cmp.Diff(got, want, ignoreRawLine, ignoreReason); diff != "" {
		t.Fatalf("messages (-got +want):\n%s", diff)
	}
	if r := got[0].Invalid.Reason; !strings.Contains(r, "larger than 100 bytes") {
		t.Errorf("reason = %q", r)
	}
	if got[0].Line != 1 || got[1].Line != 1003 {
		t.Errorf("lines = %d, %d; want 1, 1003", got[0].Line, got[1].Line)
	}
}

// TestFeedMultiLine checks that a "line" holding newlines is read as the
// lines it holds.
func TestFeedMultiLine(t *testing.T) {
	p := NewParser(Options{})
	got := p.Feed("[ASK_USER]\r\nquestion: A?\n[/ASK_USER]\nStep 1/2: x")
	want := []Message{
		{Kind: KindAskUser, Line: 1, Raw: "[ASK_USER]\nquestion: A?\n[/ASK_USER]", Question: &Question{Question: "A?", Type: "text", Required: true}},
		{Kind: KindStep, Line: 4, Raw: "Step 1/2: x", Step: &Step{Current: 1, Total: 2, Name: "x"}},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Fatalf("(-got +want):\n%s", diff)
	}
}

// TestParseLimitOneLine checks the limit on a single long tag or phase line.
func TestParseLimitOneLine(t *testing.T) {
	p := NewParser(Options{MaxBlockBytes: 64})
	long := strings.Repeat("x", 100)
	var got []Message
	for _, l := range []string{"[INVOKE:PO] " + long, "more", "[/INVOKE]", "[ASK_USER] question: " + long + " [/ASK_USER]", "=== PHASE 2 COMPLETE ===" + strings.Repeat("=", 100), "- a.md"} {
		got = append(got, p.Feed(l)...)
		if p.blk != nil && p.blk.size > 64 || p.phase != nil && p.phase.size > 64 {
			t.Fatalf("after %.20q the parser holds more than the limit", l)
		}
	}
	got = append(got, p.Flush()...)
	want := []Message{inv(KindInvoke, "PO"), inv(KindAskUser, ""),
		{Kind: KindPhaseComplete, Phase: &PhaseComplete{Number: 2, Deliverables: []string{"a.md"}}}}
	if diff := cmp.Diff(got, want, ignoreRawLine, ignoreReason); diff != "" {
		t.Fatalf("(-got +want):\n%s", diff)
	}
}

// TestParseLinesAndRaw checks Line numbers and Raw text across Flush.
func TestParseLinesAndRaw(t *testing.T) {
	p := NewParser(Options{})
	var got []Message
	for _, l := range []string{"hello", "● [ASK_USER]", "  question: A?", "", "Step 1/2: x\r"} {
		got = append(got, p.Feed(l)...)
	}
	got = append(got, p.Flush()...)
	got = append(got, p.Feed("[STEP_COMPLETE]")...)
	got = append(got, p.Flush()...)
	type lr struct {
		Kind Kind
		Line int
		Raw  string
	}
	var gotLR []lr
	for _, m := range got {
		gotLR = append(gotLR, lr{m.Kind, m.Line, m.Raw})
	}
	want := []lr{
		{KindAskUser, 2, "● [ASK_USER]\n  question: A?"},
		{KindStep, 5, "Step 1/2: x"},
		{KindStepComplete, 6, "[STEP_COMPLETE]"},
	}
	if diff := cmp.Diff(gotLR, want); diff != "" {
		t.Fatalf("(-got +want):\n%s", diff)
	}
}
