package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/office-server/office-server/office"

	"github.com/office-server/office-server/protocol"
	"github.com/office-server/office-server/proxy"
)

// validAnswer checks an answer fits its question: a selection must be one of
// the options (matched ignoring case and surrounding space; the option's
// own spelling is returned), a confirmation yes or no (y/n, true/false,
// 예/아니오 are accepted and normalised).
func validAnswer(q office.Question) (string, error) {
	a := strings.TrimSpace(q.Response)
	switch q.QuestionType {
	case office.QuestionSelection:
		if len(q.Options) == 0 {
			return a, nil
		}
		for _, opt := range q.Options {
			if strings.EqualFold(strings.TrimSpace(opt), a) {
				return opt, nil
			}
		}
		return "", office.Errorf(office.EINVALID, "%q is not one of the options (%s)", a, strings.Join(q.Options, ", "))
	case office.QuestionConfirmation:
		switch strings.ToLower(a) {
		case "yes", "y", "true", "예", "네":
			return "yes", nil
		case "no", "n", "false", "아니오", "아니요":
			return "no", nil
		}
		// A confirmation written with options ("Yes", "No, use …") accepts them.
		for _, opt := range q.Options {
			if strings.EqualFold(strings.TrimSpace(opt), a) {
				return opt, nil
			}
		}
		return "", office.Errorf(office.EINVALID, "%q is not yes or no", a)
	}
	if a == "" && q.Required {
		return "", office.Errorf(office.EINVALID, "the answer is empty")
	}
	return a, nil
}

// AnswerQuestion answers a pending question (the console, or the server on
// behalf of a person) and wakes its agent's delivery. An answer that does
// not fit the question is refused with EINVALID and changes nothing.
func (rt *Router) AnswerQuestion(ctx context.Context, id, response, answeredBy string) (office.Question, error) {
	q, err := rt.store.GetQuestion(ctx, id)
	if err != nil {
		return q, err
	}
	if q.Status != office.QuestionPending {
		return q, office.Errorf(office.ECONFLICT, "question %s is %s, not pending", id, q.Status)
	}
	probe := q
	probe.Response = response
	norm, err := validAnswer(probe)
	if q.Category == office.QuestionPermission {
		// Any text answers a permission question: an option, or a deny
		// with its reason (parsePermissionAnswer).
		norm, err = strings.TrimSpace(response), nil
		if norm == "" {
			err = office.Errorf(office.EINVALID, "the answer is empty: %s, or \"deny: <reason>\"", strings.Join(office.PermissionOptions(), ", "))
		}
	}
	if err != nil {
		return q, err
	}
	q, ok, err := rt.store.AnswerQuestion(ctx, id, norm, answeredBy)
	if err != nil {
		return q, err
	}
	if !ok {
		return q, office.Errorf(office.ECONFLICT, "question %s is no longer pending", id)
	}
	rt.events.record(ctx, q.OfficeID, q.AgentID, "question.answered", map[string]string{"question_id": id, "answered_by": answeredBy}, "")
	if q.Category == office.QuestionPermission {
		rt.perms.wake()
	}
	rt.kick(agentKey{q.OfficeID, q.AgentID})
	return q, nil
}

// SendUserMessage stores a message from a person to an agent; it is typed
// into the agent's terminal when it is ready.
func (rt *Router) SendUserMessage(ctx context.Context, officeID, agentID, userID, content string) (office.UserMessage, error) {
	if strings.TrimSpace(content) == "" {
		return office.UserMessage{}, office.Errorf(office.EINVALID, "the message is empty")
	}
	if err := proxy.ValidateContent(content, rt.cfg.MaxContent); err != nil {
		return office.UserMessage{}, office.Errorf(office.EINVALID, "%s", err)
	}
	a, err := rt.store.GetAgent(ctx, agentID)
	if err != nil {
		return office.UserMessage{}, err
	}
	if a.OfficeID != officeID {
		return office.UserMessage{}, office.Errorf(office.ENOTFOUND, "agent %s is not in office %s", agentID, officeID)
	}
	m, err := rt.store.CreateUserMessage(ctx, office.UserMessage{OfficeID: officeID, AgentID: agentID, UserID: userID, Content: content, Status: office.MessagePending})
	if err != nil {
		return m, err
	}
	rt.kick(agentKey{officeID, agentID})
	return m, nil
}

// ValidateDependencyValue checks a value for a dependency type with the
// protocol's validators (protocol.ValidateDependencyValue), as an EINVALID
// error.
func ValidateDependencyValue(typ, v string) error {
	if err := protocol.ValidateDependencyValue(typ, v); err != nil {
		return &office.Error{Code: office.EINVALID, Message: err.Error()}
	}
	return nil
}

// ProvideDependency validates value for the request's type, seals it
// (api_key and env_variable values are encrypted with AES-256-GCM; without
// a key they are refused with EUNAVAILABLE, never stored in clear) and
// stores it; the agent gets [DEPENDENCY_PROVIDED], and for
// api_key and env_variable its session is restarted with the variable in
// its environment and the conversation resumed. The value is never logged
// nor put in an event.
func (rt *Router) ProvideDependency(ctx context.Context, id, value string) (office.DependencyRequest, error) {
	d, err := rt.store.GetDependency(ctx, id)
	if err != nil {
		return d, err
	}
	if d.Status != office.DependencyPending {
		return d, office.Errorf(office.ECONFLICT, "dependency %s is %s, not pending", id, d.Status)
	}
	if err := ValidateDependencyValue(d.Type, value); err != nil {
		return d, err
	}
	sealed, err := rt.delivery.sealer.Seal(value, office.SecretDependency(d.Type))
	if err != nil {
		return d, err
	}
	d, ok, err := rt.store.ProvideDependency(ctx, id, sealed)
	if err != nil {
		return d, err
	}
	if !ok {
		return d, office.Errorf(office.ECONFLICT, "dependency %s is no longer pending", id)
	}
	rt.events.record(ctx, d.OfficeID, d.AgentID, "dependency.provided", map[string]string{"dependency_id": id, "name": d.Name, "value": "[redacted]"}, "")
	rt.kick(agentKey{d.OfficeID, d.AgentID})
	return d, nil
}

// RejectDependency rejects a pending request with a reason: a required one
// fails the agent's open tasks; an optional one resumes it with the
// default (or an empty value).
func (rt *Router) RejectDependency(ctx context.Context, id, reason string) (office.DependencyRequest, error) {
	d, ok, err := rt.store.RejectDependency(ctx, id, reason)
	if err != nil {
		return d, err
	}
	if !ok {
		return d, office.Errorf(office.ECONFLICT, "dependency %s is not pending", id)
	}
	rt.events.record(ctx, d.OfficeID, d.AgentID, "dependency.rejected", map[string]string{"dependency_id": id, "reason": reason}, "")
	rt.kick(agentKey{d.OfficeID, d.AgentID})
	return d, nil
}

// StartAgent starts an agent's session (resuming its conversation).
func (rt *Router) StartAgent(ctx context.Context, agentID string) error {
	a, err := rt.store.GetAgent(ctx, agentID)
	if err != nil {
		return err
	}
	if a.Status == office.AgentDisabled {
		return office.Errorf(office.EFORBIDDEN, "agent %s is disabled", a.Name)
	}
	if a.Status == office.AgentFailed {
		if err := rt.store.SetAgentStatus(ctx, a.ID, office.AgentIdle); err != nil {
			return fmt.Errorf("clear failed status: %w", err)
		}
		a.Status = office.AgentIdle
	}
	release, err := rt.hib.startSlot(ctx, agentKey{a.OfficeID, a.ID}) // --max-live holds it as a wake-up
	if err != nil {
		return err
	}
	err = rt.delivery.startSession(ctx, a, false)
	release()
	if err != nil {
		return err
	}
	rt.kick(agentKey{a.OfficeID, a.ID})
	return nil
}

// StopAgent stops an agent's session and makes the agent idle (not started
// again at the server's next start). What is due to it stays in the store
// and is delivered when it runs again.
func (rt *Router) StopAgent(ctx context.Context, agentID string) error {
	a, err := rt.store.GetAgent(ctx, agentID)
	if err != nil {
		return err
	}
	if !rt.roster.serves(a.OfficeID) {
		return office.Errorf(office.EUNAVAILABLE, "office %s is run by another server", a.OfficeID)
	}
	if err := rt.sess.Stop(ctx, a.OfficeID, a.ID); err != nil {
		return err
	}
	rt.hib.stoppedOnRequest(ctx, a)
	return rt.status.stopped(ctx, a)
}

// RestartAgent restarts an agent's session with a fresh spec (instructions,
// environment), resuming its conversation.
func (rt *Router) RestartAgent(ctx context.Context, agentID string) error {
	a, err := rt.store.GetAgent(ctx, agentID)
	if err != nil {
		return err
	}
	if err := rt.delivery.startSession(ctx, a, true); err != nil {
		return err
	}
	rt.kick(agentKey{a.OfficeID, a.ID})
	return nil
}

// OfficeConfig is an office as declared in a configuration file.
type OfficeConfig struct {
	Office office.Office  `json:"office" yaml:"office"`
	Agents []office.Agent `json:"agents" yaml:"agents"`
}

// SyncOffice makes the store match a declared office: the office and its
// agents are upserted (by name); agents no longer declared are disabled, not
// deleted, so their history stays. It returns the office and its agents as
// stored. A name that breaks ValidateAgentName fails the whole sync
// (EINVALID) before anything is written.
func (rt *Router) SyncOffice(ctx context.Context, c OfficeConfig) (office.Office, []office.Agent, error) {
	if strings.TrimSpace(c.Office.Name) == "" && c.Office.ID == "" {
		return office.Office{}, nil, office.Errorf(office.EINVALID, "the office has no name")
	}
	seen := map[string]bool{}
	for _, a := range c.Agents {
		if err := office.ValidateAgentName(a.Name); err != nil {
			return office.Office{}, nil, err
		}
		n := strings.ToLower(a.Name)
		if seen[n] {
			return office.Office{}, nil, office.Errorf(office.EINVALID, "agent %q is declared twice", a.Name)
		}
		seen[n] = true
	}
	off, err := rt.store.UpsertOffice(ctx, c.Office)
	if err != nil {
		return off, nil, fmt.Errorf("upsert office: %w", err)
	}
	existing, err := rt.store.ListAgents(ctx, off.ID)
	if err != nil {
		return off, nil, err
	}
	stored := map[string]office.LaunchSpec{}
	for _, a := range existing {
		stored[strings.ToLower(a.Name)] = a.Launch
	}
	var out []office.Agent
	for _, a := range c.Agents {
		a.OfficeID = off.ID
		if a.Launch, err = rt.delivery.sealer.SealLaunchEnv(a.Launch, stored[strings.ToLower(a.Name)]); err != nil {
			return off, out, fmt.Errorf("agent %s: %w", a.Name, err)
		}
		sa, err := rt.store.UpsertAgent(ctx, a.WithDefaults())
		if err != nil {
			return off, out, fmt.Errorf("upsert agent %s: %w", a.Name, err)
		}
		out = append(out, sa)
	}
	for _, a := range existing {
		if !seen[strings.ToLower(a.Name)] && a.Status != office.AgentDisabled {
			if err := rt.store.SetAgentStatus(ctx, a.ID, office.AgentDisabled); err != nil {
				return off, out, err
			}
		}
	}
	return off, out, nil
}

// SealLaunch returns l as it is stored: its env values sealed
// (office.Sealer.SealLaunchEnv), those of prev that did not change kept.
// With no secrets key, a literal value is an EUNAVAILABLE error.
func (rt *Router) SealLaunch(l, prev office.LaunchSpec) (office.LaunchSpec, error) {
	return rt.delivery.sealer.SealLaunchEnv(l, prev)
}

// Edge is one invocation in the call graph.
type Edge struct {
	InvocationID string `json:"invocation_id"`
	Caller       string `json:"caller"`
	Callee       string `json:"callee"`
	Status       string `json:"status"`
	Depth        int    `json:"depth"`
	Parent       string `json:"parent_invocation_id,omitempty"`
}

// Graph is who called whom in an office.
type Graph struct {
	Agents []string `json:"agents"`
	Edges  []Edge   `json:"edges"`
}

// CallGraph returns the office's invocations (open ones when openOnly) as a
// graph of agent names.
func (rt *Router) CallGraph(ctx context.Context, officeID string, openOnly bool) (Graph, error) {
	as, err := rt.roster.agents(ctx, officeID)
	if err != nil {
		return Graph{}, err
	}
	f := office.InvocationFilter{OfficeID: officeID}
	if openOnly {
		f.Status = []string{office.InvocationPending, office.InvocationInProgress}
	}
	invs, err := rt.store.ListInvocations(ctx, f)
	if err != nil {
		return Graph{}, err
	}
	g := Graph{Agents: []string{}, Edges: []Edge{}}
	name := map[string]string{}
	for _, a := range as {
		g.Agents = append(g.Agents, a.Name)
		name[a.ID] = a.Name
	}
	for _, inv := range invs {
		g.Edges = append(g.Edges, Edge{InvocationID: inv.ID, Caller: name[inv.CallerAgentID], Callee: name[inv.CalleeAgentID], Status: inv.Status, Depth: inv.Depth, Parent: inv.ParentInvocationID})
	}
	return g, nil
}
