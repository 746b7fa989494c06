package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/session"
)

// Permission requests (docs/notes/permissions.md). An agent's request to
// use a tool becomes a question row (category permission) that any path
// of answering reaches (a member's UPDATE, the console, the API); the
// answer goes back to the agent's waiting hook as the decision, exactly
// once, and never through the typed "Answer to question" delivery nor the
// expiry notice. One goroutine (permissions, started by Run) decides: it
// looks at the rows of the requests still waiting whenever a change comes
// in, and at every tick.

// DefaultPermissionTimeout is how long a permission request waits for a
// person when neither the agent's policy nor Config says.
const DefaultPermissionTimeout = 10 * time.Minute

// Decider sends decisions to the agents' waiting hooks
// (agents.Sessions). DecidePermission fails when the request no longer
// waits.
type Decider interface {
	DecidePermission(officeID, agentID, id string, d session.PermissionDecision) error
}

// livePerm is a request whose hook waits.
type livePerm struct {
	key          agentKey
	conversation string
	tool         string
	subject      string // the command, file path or URL
	rule         string // what "allow for this session" remembers
	timeout      time.Duration
	via          string // session.PermissionRequest.Via
}

// permissions holds the permission requests waiting for a person. The
// "allow for this session" answers are in the store (permission_grants).
type permissions struct {
	*base
	timers *timers

	mu    sync.Mutex
	live  map[string]livePerm // by question ID
	wakeC chan struct{}       // the decider's
}

func (p *permissions) init() {
	p.live = map[string]livePerm{}
	p.wakeC = make(chan struct{}, 1)
}

// wake makes the decider look at the waiting requests now.
func (pm *permissions) wake() {
	select {
	case pm.wakeC <- struct{}{}:
	default:
	}
}

// timeout is how long a's requests wait.
func (pm *permissions) timeout(a office.Agent) time.Duration {
	if p := a.Launch.Permissions; p != nil && p.Timeout > 0 {
		return p.Timeout
	}
	return pm.cfg.PermissionTimeout
}

// request takes an agent's permission request
// (session.Options.OnPermission; it may block). A request an "allow for
// this session" answer covers is allowed at once; any other becomes a
// permission question, an office event, and waits for its answer. A
// request that cannot be asked (the store fails, the office is not
// served here) is denied with the reason, so the agent never waits in
// vain.
func (pm *permissions) request(req session.PermissionRequest) {
	k := agentKey{req.Key.OfficeID, req.Key.AgentID}
	deny := func(why string) {
		pm.decide(k, req.ID, session.PermissionDecision{Message: why})
	}
	ctx := pm.running()
	if ctx == nil {
		deny("The office server is shutting down; the request was not asked.")
		return
	}
	if !pm.roster.serves(req.Key.OfficeID) {
		deny("This office server does not run the office now; the request was not asked.")
		return
	}
	a, err := pm.store.GetAgent(ctx, req.Key.AgentID)
	if err != nil {
		pm.log.Warn("permission request: get agent", "agent", req.Key.AgentID, "err", err)
		deny("The office could not read this agent's record, so the request was not asked. Try again later.")
		return
	}
	subject := toolSubject(req.Tool, req.Input)
	lp := livePerm{
		key: k, conversation: req.ConversationID, tool: req.Tool, subject: subject,
		rule: sessionRule(req.Tool, subject, req.Suggestions), timeout: pm.timeout(a), via: req.Via,
	}
	if r, allow, ok := officeRule(a, req, subject); !req.RulesApplied() && ok {
		d := session.PermissionDecision{Allow: allow}
		if !allow {
			d.Message = fmt.Sprintf("The office's rule %s denies this. Do not retry it; go on another way or ask the office with an ASK_USER block.", r)
		}
		if pm.decide(k, req.ID, d) {
			kind := map[bool]string{true: "permission.allowed", false: "permission.denied"}[allow]
			pm.events.record(ctx, a.OfficeID, a.ID, kind, map[string]any{
				"request_id": req.ID, "tool": req.Tool, "input": eventInput(req.Input), "by": "office rule", "rule": r, "via": req.Via,
			}, "")
			pm.toldDenied(a, lp, d)
		}
		return
	}
	if r, ok := pm.granted(ctx, k, req.ConversationID, req.Tool, subject); ok {
		if pm.decide(k, req.ID, session.PermissionDecision{Allow: true}) {
			pm.events.record(ctx, a.OfficeID, a.ID, "permission.allowed", map[string]any{
				"request_id": req.ID, "tool": req.Tool, "input": eventInput(req.Input), "by": "session rule", "rule": r, "via": req.Via,
			}, "")
		}
		return
	}
	pm.mu.Lock()
	pm.live[req.ID] = lp
	pm.mu.Unlock()
	question, details := describePermission(a.Name, req.Tool, req.Input)
	if lp.rule != "" {
		details += "\n\n\"" + office.PermissionAllowSession + "\" allows " + lp.rule + " until this session ends."
	}
	details += "\n\nAnswer " + strings.Join(office.PermissionOptions(), ", ") + `, or "deny: <your reason>" (the agent gets the reason).`
	q := office.Question{
		ID: req.ID, QuestionType: office.QuestionSelection, Category: office.QuestionPermission,
		Question: question, Options: office.PermissionOptions(), Context: details, Required: true,
	}
	q.OfficeID, q.AgentID = a.OfficeID, a.ID
	q.SessionID = pm.roster.sessionID(ctx, a.ID)
	q.Status = office.QuestionPending
	q.ExpiresAt = pm.now().Add(lp.timeout)
	if _, err := pm.store.CreateQuestion(ctx, q); err != nil && !office.IsConflict(err) {
		pm.forget(req.ID)
		pm.log.Warn("permission request: create question", "agent", a.Name, "err", err)
		deny("The office could not record this request, so no one was asked. Try again later.")
		return
	}
	pm.timers.questions.note(q.ExpiresAt)
	pm.events.record(ctx, a.OfficeID, a.ID, "permission.requested", map[string]any{
		"question_id": req.ID, "tool": req.Tool, "input": eventInput(req.Input), "question": question,
		"expires_at": q.ExpiresAt, "session_rule": lp.rule, "via": req.Via,
	}, "permission/"+req.ID)
	pm.wake() // answered already?
}

// maxEventInput bounds the tool input kept in an event (a Write's content
// is in its input).
const maxEventInput = 16 << 10

// eventInput is a tool input as an event keeps it: as it is when short
// and valid, else its start as a string; never a \u0000 (jsonb refuses it).
func eventInput(raw json.RawMessage) any {
	if len(raw) <= maxEventInput && json.Valid(raw) && !bytes.Contains(raw, []byte(`\u0000`)) {
		return raw
	}
	return cutRunes(strings.ToValidUTF8(strings.ReplaceAll(string(raw), `\u0000`, `\ufffd`), "\uFFFD"), maxEventInput/4)
}

// ended is told that a request's hook went away before a
// decision (session.Options.OnPermissionEnd). Answered in the agent's
// terminal: its question is cancelled, so nobody answers it in vain. The
// agent ended (a crash, a stop): the question is left for the sweep of the
// agent's next start (sweepAgentPermissions), which makes it final and
// tells the resumed agent, as after a server restart.
func (pm *permissions) ended(officeID, agentID, id string, answered bool) {
	ctx := pm.running()
	if !pm.waiting(id) || ctx == nil {
		pm.forget(id)
		return
	}
	if !answered {
		pm.forget(id)
		pm.events.record(ctx, officeID, agentID, "permission.hook_gone", map[string]string{"question_id": id}, "")
		return
	}
	// Cancelled before it is forgotten: a person's answer given in the
	// same instant is then not mistaken for one to an interrupted request
	// (deliverAnswers types those).
	ok, err := pm.store.CancelQuestion(ctx, id)
	pm.forget(id)
	if err != nil {
		pm.log.Warn("permission request ended: cancel its question", "question", id, "err", err)
		return
	}
	if ok {
		pm.events.record(ctx, officeID, agentID, "permission.ended", map[string]string{
			"question_id": id, "reason": "answered in the agent's terminal",
		}, "")
	}
}

// waiting reports whether a hook of this server waits for the request.
func (pm *permissions) waiting(id string) bool {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	_, ok := pm.live[id]
	return ok
}

// forget drops a waiting request; false when it was not waiting.
func (pm *permissions) forget(id string) bool {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	_, ok := pm.live[id]
	delete(pm.live, id)
	return ok
}

// decide sends d to the request's hook; false when it no longer waits.
func (pm *permissions) decide(k agentKey, id string, d session.PermissionDecision) bool {
	if pm.cfg.Decider == nil {
		return false
	}
	if err := pm.cfg.Decider.DecidePermission(k.officeID, k.agentID, id, d); err != nil {
		pm.log.Info("permission decision not delivered", "question", id, "err", err)
		return false
	}
	return true
}

// run is the decider's loop (owned by Run).
func (pm *permissions) run(ctx context.Context) {
	t := time.NewTicker(pm.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-pm.wakeC:
		case <-t.C:
		}
		pm.decideWaiting(ctx)
	}
}

// decideWaiting reads the question of every waiting request and sends the
// decision of those that are final: answered (the answer), expired (a
// deny saying so), cancelled (a deny).
func (pm *permissions) decideWaiting(ctx context.Context) {
	pm.mu.Lock()
	ids := make([]string, 0, len(pm.live))
	for id := range pm.live {
		ids = append(ids, id)
	}
	pm.mu.Unlock()
	for _, id := range ids {
		q, err := pm.store.GetQuestion(ctx, id)
		if office.IsNotFound(err) {
			continue // being created
		}
		if err != nil {
			if ctx.Err() == nil {
				pm.log.Warn("permission: read question", "question", id, "err", err)
			}
			continue
		}
		pm.mu.Lock()
		lp, ok := pm.live[id]
		pm.mu.Unlock()
		if !ok || !pm.roster.serves(q.OfficeID) {
			continue
		}
		switch q.Status {
		case office.QuestionPending:
			if !q.ExpiresAt.IsZero() && !pm.now().Before(q.ExpiresAt) {
				// Due: expire the questions now rather than at the next
				// Sweep, so the timeout holds to the second (the sweeper
				// expires it and expiredPermission tells the agent).
				pm.timers.expireNow()
			}
		case office.QuestionAnswered:
			pm.decideAnswered(ctx, q, lp)
		case office.QuestionExpired:
			pm.forget(id)
			msg := fmt.Sprintf("No one in the office answered this permission request within %s, so it was denied. Do not retry it now; go on without it, or ask the office with an ASK_USER block why you need it.", lp.timeout)
			if d := (session.PermissionDecision{Message: msg}); pm.decide(lp.key, id, d) {
				pm.events.record(ctx, q.OfficeID, q.AgentID, "permission.denied", map[string]any{"question_id": id, "tool": lp.tool, "by": "timeout", "message": msg, "via": lp.via}, "")
				pm.toldDeniedID(ctx, q.AgentID, lp, d)
			}
		default: // cancelled, or delivered by another path
			pm.forget(id)
			if pm.decide(lp.key, id, session.PermissionDecision{Message: "The office withdrew this permission request; it is denied."}) {
				pm.events.record(ctx, q.OfficeID, q.AgentID, "permission.denied", map[string]any{"question_id": id, "tool": lp.tool, "by": q.Status}, "")
			}
		}
	}
}

// decideAnswered sends a person's answer to the hook and marks the
// question delivered.
func (pm *permissions) decideAnswered(ctx context.Context, q office.Question, lp livePerm) {
	choice, reason := parsePermissionAnswer(q.Response)
	d := session.PermissionDecision{Allow: choice != office.PermissionDeny}
	if !d.Allow {
		d.Message = "A person in the office denied this."
		if reason != "" {
			d.Message = "A person in the office denied this: " + reason
		}
		d.Message += " Do not retry it; go on another way or ask the office with an ASK_USER block."
	}
	if choice == office.PermissionAllowSession && lp.rule != "" {
		pm.grant(ctx, lp.key, lp.conversation, lp.rule, q.ID)
	}
	sent := pm.decide(lp.key, q.ID, d)
	if sent {
		pm.toldDeniedID(ctx, q.AgentID, lp, d)
	}
	ok, err := pm.store.MarkQuestionDelivered(ctx, q.ID)
	if err != nil {
		// Kept waiting, so the next round marks it (its decision is sent
		// once: the hook takes one).
		pm.log.Warn("permission: mark question delivered", "question", q.ID, "err", err)
		return
	}
	// Forgotten once final: an answered question no hook waits for is
	// one deliverAnswers tells the agent about.
	pm.forget(q.ID)
	if !ok {
		return
	}
	kind := "permission.allowed"
	if !d.Allow {
		kind = "permission.denied"
	}
	payload := map[string]any{"question_id": q.ID, "tool": lp.tool, "by": q.AnsweredBy, "answer": choice, "sent": sent, "via": lp.via}
	if reason != "" {
		payload["reason"] = reason
	}
	if choice == office.PermissionAllowSession {
		payload["rule"] = lp.rule
	}
	pm.events.record(ctx, q.OfficeID, q.AgentID, kind, payload, "")
}

// toldDenied tells agent a the reason of a deny sent to a dialog on its
// screen (session.ViaScreen): the dialog's "No" cancels the call without a word
// to the model, so the reason follows as a notice. A hook passes it
// itself.
func (pm *permissions) toldDenied(a office.Agent, lp livePerm, d session.PermissionDecision) {
	if d.Allow || lp.via != session.ViaScreen {
		return
	}
	what := lp.tool
	if lp.subject != "" {
		what += " (" + cutRunes(lp.subject, 200) + ")"
	}
	pm.notify(a, fmt.Sprintf("Your request to use %s was not approved. %s", what, d.Message))
}

// toldDeniedID is toldDenied for the agent of that id.
func (pm *permissions) toldDeniedID(ctx context.Context, agentID string, lp livePerm, d session.PermissionDecision) {
	if d.Allow || lp.via != session.ViaScreen {
		return
	}
	a, err := pm.store.GetAgent(ctx, agentID)
	if err != nil {
		pm.log.Warn("permission: get agent to tell the deny", "agent", agentID, "err", err)
		return
	}
	pm.toldDenied(a, lp, d)
}

// cliToolNames are the tools of Gemini CLI and Qwen Code (and their dialog
// titles) under the Claude Code name the office's permission rules may
// use for all kinds ("Bash(git push:*)" denies it to every agent).
var cliToolNames = map[string]string{
	"run_shell_command": "Bash", "Shell": "Bash", "shell": "Bash",
	"write_file": "Write", "WriteFile": "Write",
	"replace": "Edit", "edit": "Edit", "Edit": "Edit",
	"web_fetch": "WebFetch", "WebFetch": "WebFetch",
}

// officeRule applies agent a's permission rules (the office's and its
// own, office.PermissionPolicy) to request req on subject: deny rules
// first, then ask rules (asked), then allow rules. ok false: no rule
// settles it.
func officeRule(a office.Agent, req session.PermissionRequest, subject string) (rule string, allow, ok bool) {
	p, tool := a.Launch.Permissions, req.Tool
	if p == nil {
		return "", false, false
	}
	covers := func(rules []string) (string, bool) {
		for _, r := range rules {
			r = strings.TrimSpace(r)
			if ruleCovers(r, tool, subject) || (cliToolNames[tool] != "" && ruleCovers(r, cliToolNames[tool], subject)) {
				return r, true
			}
		}
		return "", false
	}
	if r, hit := covers(p.Deny); hit {
		return r, false, true
	}
	if _, hit := covers(p.Ask); hit {
		return "", false, false
	}
	if r, hit := covers(p.Allow); hit {
		return r, true, true
	}
	return "", false, false
}

// parsePermissionAnswer reads an answer: one of the options, "yes"/"no",
// or a deny with a reason ("deny: not on Fridays"). Any other text is a
// deny whose reason is the text: when in doubt, nothing runs.
func parsePermissionAnswer(response string) (choice, reason string) {
	a := strings.TrimSpace(response)
	l := strings.ToLower(a)
	switch l {
	case office.PermissionAllowOnce, "allow", "yes", "y", "예", "네", "허용":
		return office.PermissionAllowOnce, ""
	case office.PermissionAllowSession, "always", "allow always":
		return office.PermissionAllowSession, ""
	}
	for _, p := range []string{office.PermissionDeny, "no", "아니오", "거부"} {
		if rest, ok := cutPrefixFold(a, p); ok && (rest == "" || strings.ContainsRune(" :-—,.", rune(rest[0])) || strings.HasPrefix(rest, "—")) {
			return office.PermissionDeny, strings.TrimSpace(strings.TrimLeft(rest, " :-—,."))
		}
	}
	return office.PermissionDeny, a
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return "", false
}

// grant stores an "allow for this session" answer: it holds for the
// conversation until the agent starts a fresh one (endGrants), across
// restarts of the server and of the agent's process, which resume it.
func (pm *permissions) grant(ctx context.Context, k agentKey, conversation, rule, questionID string) {
	if conversation == "" {
		return // a hook that did not say its conversation: the answer allows this call only
	}
	err := pm.store.AddPermissionGrant(ctx, office.PermissionGrant{OfficeID: k.officeID, AgentID: k.agentID, ConversationID: conversation, Rule: rule, QuestionID: questionID})
	if err != nil && !office.IsConflict(err) {
		pm.log.Warn("permission: store the session grant", "agent", k.agentID, "rule", rule, "err", err)
	}
}

// granted returns the rule of an "allow for this session" answer that
// covers the call. A store that cannot be read grants nothing: the call is
// asked.
func (pm *permissions) granted(ctx context.Context, k agentKey, conversation, tool, subject string) (string, bool) {
	if conversation == "" {
		return "", false
	}
	gs, err := pm.store.ListPermissionGrants(ctx, k.agentID, conversation)
	if err != nil {
		pm.log.Warn("permission: read session grants", "agent", k.agentID, "err", err)
		return "", false
	}
	for _, g := range gs {
		if ruleCovers(g.Rule, tool, subject) {
			return g.Rule, true
		}
	}
	return "", false
}

// endGrants deletes the "allow for this session" answers of an agent
// whose conversation ended: its process started without resuming it.
func (pm *permissions) endGrants(ctx context.Context, k agentKey) {
	n, err := pm.store.EndPermissionGrants(ctx, k.agentID)
	if err != nil {
		pm.log.Warn("permission: end session grants", "agent", k.agentID, "err", err)
		return
	}
	if n > 0 {
		pm.events.record(ctx, k.officeID, k.agentID, "permission.grants_ended", map[string]any{"grants": n, "reason": "a fresh conversation"}, "")
	}
}

// ruleCovers reports whether a permission rule ("Bash", "Bash(npm
// test:*)", "Edit(/work/src/a.go)") covers a call of tool on subject: the
// tool alone covers every call; "prefix:*" a subject that starts with
// prefix; anything else the subject exactly.
func ruleCovers(rule, tool, subject string) bool {
	name, spec, hasSpec := strings.Cut(rule, "(")
	if name != tool {
		return false
	}
	if !hasSpec {
		return true
	}
	spec = strings.TrimSuffix(spec, ")")
	if prefix, ok := strings.CutSuffix(spec, ":*"); ok {
		return subject == prefix || strings.HasPrefix(subject, prefix+" ")
	}
	return subject == spec
}

// sessionRule is the rule an "allow for this session" answer remembers:
// the one Claude Code suggests for the call (its permission_suggestions,
// e.g. Bash(npm test:*)) when it has one for this tool, else the tool on
// exactly this subject.
func sessionRule(tool, subject string, suggestions json.RawMessage) string {
	var sug []struct {
		Type     string `json:"type"`
		Behavior string `json:"behavior"`
		Rules    []struct {
			ToolName    string `json:"toolName"`
			RuleContent string `json:"ruleContent"`
		} `json:"rules"`
	}
	_ = json.Unmarshal(suggestions, &sug) // absent or another shape: no suggestion
	for _, s := range sug {
		if s.Type != "addRules" || s.Behavior != "allow" {
			continue
		}
		for _, r := range s.Rules {
			if r.ToolName == tool && r.RuleContent != "" && ruleCovers(tool+"("+r.RuleContent+")", tool, subject) {
				return tool + "(" + r.RuleContent + ")"
			}
		}
	}
	if subject == "" {
		return tool
	}
	return tool + "(" + subject + ")"
}

// toolSubject is what a call acts on, in words: a command, a file path,
// a URL, a search pattern; else its input as compact JSON.
func toolSubject(tool string, input json.RawMessage) string {
	var in map[string]any
	_ = json.Unmarshal(input, &in)
	for _, k := range []string{"command", "file_path", "notebook_path", "url", "path", "pattern", "query"} {
		if v, ok := in[k].(string); ok && v != "" {
			return v
		}
	}
	if len(in) == 0 {
		return ""
	}
	b, _ := json.Marshal(in)
	return cutRunes(string(b), 500)
}

// describePermission returns the question for a call in words a person
// reads, and its details (the context column): the description the agent
// gave, and for edits a short diff.
func describePermission(agent, tool string, input json.RawMessage) (question, details string) {
	var in struct {
		Command     string `json:"command"`
		Description string `json:"description"`
		FilePath    string `json:"file_path"`
		OldString   string `json:"old_string"`
		NewString   string `json:"new_string"`
		Content     string `json:"content"`
		URL         string `json:"url"`
		Edits       []struct {
			OldString string `json:"old_string"`
			NewString string `json:"new_string"`
		} `json:"edits"`
	}
	_ = json.Unmarshal(input, &in)
	var d []string
	if in.Description != "" {
		d = append(d, "Why: "+cutRunes(in.Description, 500))
	}
	kind := tool
	if n := cliToolNames[tool]; n != "" {
		kind = n // the same question for every CLI's shell, write, edit, fetch
	}
	switch {
	case kind == "Bash" && in.Command != "":
		question = fmt.Sprintf("%s wants to run a command: %s", agent, cutRunes(in.Command, 2000))
	case (kind == "Edit" || kind == "MultiEdit") && in.FilePath != "":
		question = fmt.Sprintf("%s wants to edit %s", agent, in.FilePath)
		edits := in.Edits
		if in.OldString != "" || in.NewString != "" {
			edits = append(edits, struct {
				OldString string `json:"old_string"`
				NewString string `json:"new_string"`
			}{in.OldString, in.NewString})
		}
		var diff []string
		for _, e := range edits {
			diff = append(diff, shortDiff(e.OldString, e.NewString)...)
		}
		if len(diff) > 40 {
			diff = append(diff[:40], fmt.Sprintf("… (%d more lines)", len(diff)-40))
		}
		d = append(d, "--- "+in.FilePath+"\n+++ "+in.FilePath+"\n"+strings.Join(diff, "\n"))
	case kind == "Write" && in.FilePath != "":
		n := strings.Count(in.Content, "\n")
		if in.Content != "" && !strings.HasSuffix(in.Content, "\n") {
			n++
		}
		question = fmt.Sprintf("%s wants to write %s (%d lines)", agent, in.FilePath, n)
		lines := strings.Split(in.Content, "\n")
		if len(lines) > 20 {
			lines = append(lines[:20], fmt.Sprintf("… (%d more lines)", len(lines)-20))
		}
		d = append(d, "+ "+strings.Join(lines, "\n+ "))
	case kind == "WebFetch" && in.URL != "":
		question = fmt.Sprintf("%s wants to fetch %s", agent, in.URL)
	case in.FilePath != "":
		question = fmt.Sprintf("%s wants to use %s on %s", agent, tool, filepath.Clean(in.FilePath))
	default:
		question = fmt.Sprintf("%s wants to use %s", agent, tool)
		if s := toolSubject(tool, input); s != "" {
			question += ": " + s
		}
	}
	d = append(d, "Tool: "+tool)
	// Text columns hold no NUL (PostgreSQL refuses it).
	noNUL := strings.NewReplacer("\x00", "\uFFFD")
	return noNUL.Replace(question), noNUL.Replace(cutRunes(strings.Join(d, "\n\n"), 8000))
}

// shortDiff shows an edit as removed and added lines (no context lines:
// the edit's own strings are all the request has).
func shortDiff(old, new string) []string {
	var out []string
	if old != "" {
		for _, l := range strings.Split(old, "\n") {
			out = append(out, "- "+l)
		}
	}
	if new != "" {
		for _, l := range strings.Split(new, "\n") {
			out = append(out, "+ "+l)
		}
	}
	return out
}

// cutRunes cuts s to at most n runes, marking the cut.
func cutRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// expiredPermission acts on a permission question the ticker expired: a
// waiting request is denied by the decider. One nobody waits for was left
// by a server that stopped (and expired before the office was taken): the
// agent is told, as sweepPermissions does.
func (pm *permissions) expiredPermission(ctx context.Context, q office.Question) {
	pm.mu.Lock()
	_, live := pm.live[q.ID]
	pm.mu.Unlock()
	if live {
		pm.wake()
		return
	}
	pm.events.record(ctx, q.OfficeID, q.AgentID, "permission.expired", map[string]string{"question_id": q.ID}, "")
	if a, err := pm.store.GetAgent(ctx, q.AgentID); err == nil {
		pm.notify(a, interruptedText(a, q))
	}
}

// interruptedText tells agent a that its request q was lost with the
// server.
func interruptedText(a office.Agent, q office.Question) string {
	return fmt.Sprintf("Your permission request (to %s) was interrupted: your session or the office server restarted while it waited, and it was not approved. If you still need it, try it again; the office will be asked again.", strings.TrimPrefix(q.Question, a.Name+" wants to "))
}

// sweepPermissions makes final the pending permission questions of an
// office (of one agent when agentID is set) that no hook of this server
// waits for: a server that stopped while they waited took their agents
// down with it (the keeper's watchdog ends them), and an agent that
// crashed or was stopped took its hook along, so those requests are gone. Called
// when the office is taken, before its agents start, and when an agent's
// session starts. One whose timeout passed meanwhile is expired (the
// sweeper's expiredPermission tells the agent); any other is cancelled, only while still pending (a person's
// answer given in the same instant wins, and is told as below), and the
// agent is told it was not approved: Claude Code, resumed, gives the
// model an "interrupted" result for the call with the next prompt, and
// this notice. An answered one (a person answered while no hook waited)
// is told by deliverAnswers (interruptedAnswer), typed before it is
// marked delivered, so no restart loses it.
func (pm *permissions) sweepPermissions(ctx context.Context, officeID, agentID string) {
	qs, err := pm.store.ListQuestions(ctx, office.QuestionFilter{OfficeID: officeID, AgentID: agentID, Status: []string{office.QuestionPending}})
	if err != nil {
		pm.log.Warn("permission: list open questions", "office", officeID, "err", err)
		return
	}
	due := false
	for _, q := range qs {
		if q.Category != office.QuestionPermission || pm.waiting(q.ID) {
			continue
		}
		if !q.ExpiresAt.IsZero() && !pm.now().Before(q.ExpiresAt) {
			due = true // its timeout passed meanwhile: expired, not cancelled (expiredPermission tells the agent)
			continue
		}
		ok, err := pm.store.CancelPendingQuestion(ctx, q.ID)
		if err != nil {
			pm.log.Warn("permission: cancel interrupted request", "question", q.ID, "err", err)
			continue
		}
		if !ok {
			continue // answered meanwhile (deliverAnswers tells it), or final already
		}
		a, err := pm.store.GetAgent(ctx, q.AgentID)
		if err != nil {
			pm.log.Warn("permission: get agent", "agent", q.AgentID, "err", err)
			continue
		}
		pm.events.record(ctx, a.OfficeID, a.ID, "permission.interrupted", map[string]string{"question_id": q.ID, "reason": "the agent or the office server stopped while the request waited"}, "")
		pm.notify(a, interruptedText(a, q))
	}
	if due {
		pm.timers.expireNow()
	}
}

// interruptedAnswer is what deliverAnswers types for an answered
// permission question whose hook no longer waits (a person answered while
// the agent or the server was down), or "" for one a hook of this server
// still waits for (the decider sends it).
func (pm *permissions) interruptedAnswer(a office.Agent, q office.Question) string {
	if pm.waiting(q.ID) {
		return ""
	}
	what := strings.TrimPrefix(q.Question, a.Name+" wants to ")
	choice, reason := parsePermissionAnswer(q.Response)
	if choice == office.PermissionDeny {
		msg := fmt.Sprintf("[OFFICE] Your permission request (to %s) was interrupted by a restart; meanwhile a person denied it", what)
		if reason != "" {
			msg += ": " + reason
		}
		return msg + ". Do not retry it."
	}
	return fmt.Sprintf("[OFFICE] Your permission request (to %s) was interrupted by a restart; meanwhile a person allowed it (%s). If you still need it, try it again: the office will be asked again.", what, choice)
}
