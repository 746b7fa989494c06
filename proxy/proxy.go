// Package proxy picks which office agent takes a piece of work when the
// sender did not name one, or the named one cannot take it (docs/protocol.md,
// Proxy requests): a capability registry built from the office's agents,
// three selection strategies (priority, load, expertise), a fallback chain
// that ends in a decision the caller acts on, and the checks that keep requests honest
// (which agent may do which action; what content may carry).
//
// The package is pure: no I/O, no goroutines, no clock. The office builds a
// Registry from a snapshot of its agents and their current load each time it
// needs a decision; snapshots are cheap and never go stale behind its back.
package proxy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// The tools of the capability matrix (docs/protocol.md, Proxy requests). Offices may declare any other
// capability; these are only the ones the proxy actions require.
const (
	ToolTodoWrite = "todowrite"
	ToolTodoRead  = "todoread"
	ToolBash      = "bash"
	ToolWebFetch  = "webfetch"
)

// Agent is what the selector knows about one office agent.
type Agent struct {
	ID   string
	Name string
	Role string
	// Capabilities are the tools the agent can use (case-insensitive).
	Capabilities []string
	// Priority orders proxies: 1 is preferred over 2. Zero or less means the
	// agent has no proxy priority ("N/A" in the capability matrix of docs/protocol.md); such agents
	// still take work addressed to their role or capability, after every
	// agent with a priority.
	Priority int
	// Expertise lists the task types the agent is the expert for
	// ("coding", "research", "planning", …).
	Expertise []string
	// AllowedActions lists what the agent may do (see Authorize). Empty
	// means DefaultActions.
	AllowedActions []string
	// MaxLoad is how many open tasks (invocations in progress plus queued)
	// the agent takes; zero means 1.
	MaxLoad int
	// Load is its open tasks now.
	Load int
	// Down is true when the agent cannot take work at all (disabled by an
	// operator, or failed for good). A stopped agent is not down: the office
	// starts it.
	Down bool
}

// Capacity returns MaxLoad, or 1 when it is unset.
func (a Agent) Capacity() int {
	if a.MaxLoad <= 0 {
		return 1
	}
	return a.MaxLoad
}

// Available reports whether a can take one more task now.
func (a Agent) Available() bool { return !a.Down && a.Load < a.Capacity() }

// Has reports whether a has every capability in tools (case-insensitive).
func (a Agent) Has(tools ...string) bool {
	for _, t := range tools {
		if !slices.ContainsFunc(a.Capabilities, func(c string) bool { return strings.EqualFold(c, t) }) {
			return false
		}
	}
	return true
}

// Expert reports whether a declares expertise in taskType.
func (a Agent) Expert(taskType string) bool {
	return taskType != "" && slices.ContainsFunc(a.Expertise, func(e string) bool { return strings.EqualFold(e, taskType) })
}

// Registry is an immutable snapshot of an office's agents.
type Registry struct {
	agents []Agent // sorted by priority (positive first, ascending), then name
}

// New returns a registry of agents. The slice is copied.
func New(agents []Agent) *Registry {
	r := &Registry{agents: slices.Clone(agents)}
	slices.SortStableFunc(r.agents, byPriority)
	return r
}

func byPriority(a, b Agent) int {
	pa, pb := a.Priority, b.Priority
	switch {
	case pa > 0 && pb <= 0:
		return -1
	case pa <= 0 && pb > 0:
		return 1
	}
	if c := cmp.Compare(pa, pb); c != 0 {
		return c
	}
	return cmp.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name))
}

// Agents returns the agents in priority order.
func (r *Registry) Agents() []Agent { return slices.Clone(r.agents) }

// ByName returns the agent named name (case-insensitive).
func (r *Registry) ByName(name string) (Agent, bool) {
	name = strings.TrimSpace(name)
	for _, a := range r.agents {
		if strings.EqualFold(a.Name, name) {
			return a, true
		}
	}
	return Agent{}, false
}

// ByID returns the agent with id.
func (r *Registry) ByID(id string) (Agent, bool) {
	for _, a := range r.agents {
		if a.ID == id {
			return a, true
		}
	}
	return Agent{}, false
}

// Capable returns, in priority order, the agents having every tool.
func (r *Registry) Capable(tools ...string) []Agent {
	var out []Agent
	for _, a := range r.agents {
		if a.Has(tools...) {
			out = append(out, a)
		}
	}
	return out
}

// Strategy is how Select orders the capable agents.
type Strategy string

const (
	// ByPriority takes the first available capable agent in priority order
	// (docs/protocol.md, Proxy requests: basic selection), whatever the
	// task type.
	ByPriority Strategy = "priority"
	// ByLoad takes the available capable agent with the fewest open tasks
	// relative to its capacity; ties go by priority.
	ByLoad Strategy = "load"
	// ByExpertise is the default order, named: the available capable
	// agent expert in the task type first, then priority (see pick for
	// the tie rule).
	ByExpertise Strategy = "expertise"
)

// Request says what work needs an agent.
type Request struct {
	// Target is what the sender wrote: an agent's name, a role or a
	// capability ("INVOKE:planner"). Empty: any capable agent.
	Target string
	// Tools the chosen agent must have.
	Tools []string
	// TaskType puts the agents expert in it first (unless Strategy is
	// ByPriority or ByLoad).
	TaskType string
	Strategy Strategy // default: expertise, then priority (pick)
	// Exclude names agent IDs never to pick (the requester itself, agents
	// already tried).
	Exclude []string
	// NoFallback: when Target names an agent that cannot take the work now,
	// park instead of picking another (fallback_allowed=false, docs/protocol.md).
	NoFallback bool
	// Prefer marks Target as a preference only (preferred_proxy, docs/protocol.md):
	// when it names no usable agent, role or capability, any capable agent
	// will do.
	Prefer bool
}

// Outcome is what the caller must do.
type Outcome string

const (
	// Assign: give the work to Decision.Agent now.
	Assign Outcome = "assign"
	// Park: capable agents exist but none can take it now; keep the request
	// (in the store) and try again when one becomes available.
	Park Outcome = "park"
	// AskUser: no agent in the office can ever take it; ask a person.
	AskUser Outcome = "ask_user"
)

// Decision is the selector's answer.
type Decision struct {
	Outcome Outcome
	Agent   Agent   // Assign: the agent chosen
	Waiting []Agent // Park: the capable agents, any of which may free up
	Reason  string  // why, for people and logs
}

func (d Decision) String() string {
	if d.Outcome == Assign {
		return fmt.Sprintf("assign %s: %s", d.Agent.Name, d.Reason)
	}
	return fmt.Sprintf("%s: %s", d.Outcome, d.Reason)
}

// Select walks the fallback chain for req: the named agent when it can take
// the work; else the agents matching Target by role, then by capability,
// then every agent, filtered by Tools, ordered by Strategy; the first
// available one is assigned. When capable agents exist but none is
// available, the request is parked; when none exists, a person is asked.
// Select never assigns an agent lacking a tool of req.Tools, a down agent,
// an agent at its capacity, or an excluded one.
func (r *Registry) Select(req Request) Decision {
	usable := func(a Agent) bool { return a.Has(req.Tools...) && !slices.Contains(req.Exclude, a.ID) }
	target := strings.TrimSpace(req.Target)

	if target != "" {
		if a, ok := r.ByName(target); ok && usable(a) {
			if a.Available() {
				return Decision{Outcome: Assign, Agent: a, Reason: "named"}
			}
			if req.NoFallback {
				if a.Down {
					return Decision{Outcome: AskUser, Reason: a.Name + " is down and fallback is not allowed"}
				}
				return Decision{Outcome: Park, Waiting: []Agent{a}, Reason: fmt.Sprintf("%s is busy (%d/%d open tasks)", a.Name, a.Load, a.Capacity())}
			}
			// Named but busy or down: fall back to agents like it.
			cands := r.fallbacks(target, req, usable)
			if req.Prefer {
				cands = slices.DeleteFunc(slices.Clone(r.agents), func(b Agent) bool { return !usable(b) })
			}
			cands = slices.DeleteFunc(cands, func(b Agent) bool { return b.ID == a.ID })
			if d, ok := r.pick(cands, req); ok {
				d.Reason = fmt.Sprintf("%s cannot take it now; %s", a.Name, d.Reason)
				return d
			}
			waiting := append([]Agent{a}, cands...)
			waiting = slices.DeleteFunc(waiting, func(b Agent) bool { return b.Down })
			if len(waiting) == 0 {
				return Decision{Outcome: AskUser, Reason: fmt.Sprintf("%s is down and no other agent can take it", a.Name)}
			}
			return Decision{Outcome: Park, Waiting: waiting, Reason: fmt.Sprintf("%s and every agent like it are busy", a.Name)}
		} else if ok {
			if !a.Has(req.Tools...) {
				return r.chain(req, usable, fmt.Sprintf("%s lacks %s", a.Name, strings.Join(missing(a, req.Tools), ", ")))
			}
			return r.chain(req, usable, fmt.Sprintf("%s is excluded", a.Name))
		}
	}
	return r.chain(req, usable, "")
}

// fallbacks are the agents similar to target: same role as the named agent
// or target, or having target as a capability; with none, every agent.
func (r *Registry) fallbacks(target string, req Request, usable func(Agent) bool) []Agent {
	role := target
	if a, ok := r.ByName(target); ok && a.Role != "" {
		role = a.Role
	}
	var out []Agent
	for _, a := range r.agents {
		if usable(a) && (strings.EqualFold(a.Role, role) || strings.EqualFold(a.Role, target) || a.Has(target)) {
			out = append(out, a)
		}
	}
	return out
}

// chain resolves a target that names no usable agent: by role, then by
// capability, then (no target) any capable agent.
func (r *Registry) chain(req Request, usable func(Agent) bool, why string) Decision {
	target := strings.TrimSpace(req.Target)
	var cands []Agent
	via := "capable"
	if target != "" {
		for _, a := range r.agents {
			if usable(a) && strings.EqualFold(a.Role, target) {
				cands = append(cands, a)
			}
		}
		via = "role " + target
		if len(cands) == 0 {
			for _, a := range r.agents {
				if usable(a) && a.Has(target) {
					cands = append(cands, a)
				}
			}
			via = "capability " + target
		}
		if len(cands) == 0 && req.Prefer {
			alt := req
			alt.Target = ""
			return r.chain(alt, usable, join(why, fmt.Sprintf("preferred %q cannot take it", target)))
		}
		if len(cands) == 0 {
			if _, named := r.ByName(target); !named {
				why = join(why, fmt.Sprintf("no agent, role or capability is named %q", target))
			}
			return Decision{Outcome: AskUser, Reason: join(why, "no agent can take it")}
		}
	} else {
		for _, a := range r.agents {
			if usable(a) {
				cands = append(cands, a)
			}
		}
	}
	if d, ok := r.pick(cands, req); ok {
		d.Reason = join(why, via+"; "+d.Reason)
		return d
	}
	live := slices.DeleteFunc(slices.Clone(cands), func(a Agent) bool { return a.Down })
	if len(live) == 0 {
		if len(req.Tools) > 0 {
			why = join(why, "no available agent has "+strings.Join(req.Tools, ", "))
		}
		return Decision{Outcome: AskUser, Reason: join(why, "no agent can take it")}
	}
	return Decision{Outcome: Park, Waiting: live, Reason: join(why, "every capable agent is busy")}
}

// pick orders cands by the strategy and assigns the first available.
//
// With no strategy (or ByExpertise) the order is the one of
// docs/protocol.md, Proxy requests: the expert in req.TaskType first,
// then priority (1 before 2, no priority last); ties between agents of
// the same rank go to the less loaded relative to capacity, then to the
// name in alphabetical order (case-insensitive). ByPriority ignores the
// task type; ByLoad puts the least loaded first.
func (r *Registry) pick(cands []Agent, req Request) (Decision, bool) {
	avail := slices.DeleteFunc(slices.Clone(cands), func(a Agent) bool { return !a.Available() })
	if len(avail) == 0 {
		return Decision{}, false
	}
	switch req.Strategy {
	case ByLoad:
		slices.SortStableFunc(avail, func(a, b Agent) int {
			if c := byLoad(a, b); c != 0 {
				return c
			}
			return byPriority(a, b)
		})
		return Decision{Outcome: Assign, Agent: avail[0], Reason: fmt.Sprintf("least loaded (%d/%d)", avail[0].Load, avail[0].Capacity())}, true
	case ByPriority:
		return Decision{Outcome: Assign, Agent: avail[0], Reason: fmt.Sprintf("priority %d", avail[0].Priority)}, true
	}
	slices.SortStableFunc(avail, func(a, b Agent) int {
		if ea, eb := a.Expert(req.TaskType), b.Expert(req.TaskType); ea != eb {
			if ea {
				return -1
			}
			return 1
		}
		return byRank(a, b)
	})
	if a := avail[0]; a.Expert(req.TaskType) {
		return Decision{Outcome: Assign, Agent: a, Reason: fmt.Sprintf("expert in %s (priority %d, %d/%d open tasks)", req.TaskType, a.Priority, a.Load, a.Capacity())}, true
	}
	return Decision{Outcome: Assign, Agent: avail[0], Reason: fmt.Sprintf("priority %d (%d/%d open tasks)", avail[0].Priority, avail[0].Load, avail[0].Capacity())}, true
}

// byLoad compares open tasks relative to capacity (a.Load/a.Cap against
// b.Load/b.Cap without division).
func byLoad(a, b Agent) int {
	return cmp.Compare(a.Load*b.Capacity(), b.Load*a.Capacity())
}

// byRank is the default order's tie rule: priority, then load, then name.
func byRank(a, b Agent) int {
	pa, pb := a.Priority, b.Priority
	switch {
	case pa > 0 && pb <= 0:
		return -1
	case pa <= 0 && pb > 0:
		return 1
	}
	if c := cmp.Compare(pa, pb); c != 0 {
		return c
	}
	if c := byLoad(a, b); c != 0 {
		return c
	}
	return cmp.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name))
}

func missing(a Agent, tools []string) []string {
	var out []string
	for _, t := range tools {
		if !a.Has(t) {
			out = append(out, t)
		}
	}
	return out
}

func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
