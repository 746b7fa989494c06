package protocol_test

import (
	"fmt"

	"github.com/office-server/office-server/protocol"
)

// A session feeds the agent's lines as they come and flushes at the end of
// its turn; each message comes out once, when it is complete.
func ExampleParser() {
	p := protocol.NewParser(protocol.Options{})
	lines := []string{
		"● I need a decision first.",
		"",
		"● [ASK_USER]",
		"  질문: 로그인 방식을 선택해주세요",
		"  타입: selection",
		"  옵션: ['이메일', '소셜', 'SSO']",
		"[INVOKE:PO]",
		"요구사항 분석을 진행해주세요.",
		"컨텍스트: 로그인 기능 구현",
	}
	for _, l := range lines {
		for _, m := range p.Feed(l) {
			fmt.Printf("line %d: %s %q %q\n", m.Line, m.Kind, m.Question.Question, m.Question.Options)
		}
	}
	for _, m := range p.Flush() { // the turn ended: the unclosed INVOKE is complete
		fmt.Printf("line %d: %s to %s: %q (context %q)\n", m.Line, m.Kind, m.Target, m.Invoke.Task, m.Invoke.Context)
	}
	// Output:
	// line 3: ASK_USER "로그인 방식을 선택해주세요" ["이메일" "소셜" "SSO"]
	// line 7: INVOKE to PO: "요구사항 분석을 진행해주세요." (context "로그인 기능 구현")
}

// An invalid block is not dropped: it says what was wrong, for the agent.
func ExampleParseString_invalid() {
	for _, m := range protocol.ParseString("[DEPENDENCY_REQUEST]\ntype: api_key\nname: OPENAI_API_KEY\n[/DEPENDENCY_REQUEST]", protocol.Options{}) {
		fmt.Println(m.Kind, m.Invalid.Kind)
		fmt.Println(m.Invalid.Reason)
	}
	// Output:
	// INVALID DEPENDENCY_REQUEST
	// DEPENDENCY_REQUEST: missing 'description:' line; write `description: <what it is for>`
}

func ExampleValidateDependencyValue() {
	fmt.Println(protocol.ValidateDependencyValue("service", "https://api.example.com"))
	fmt.Println(protocol.ValidateDependencyValue("file", "../../../etc/passwd"))
	// Output:
	// <nil>
	// path traversal detected: '..' is not allowed
}
