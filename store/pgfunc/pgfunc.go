// Package pgfunc calls the office's database functions
// (migrations/20261128100000_office_functions.sql) for the stores that
// reach PostgreSQL: it names their arguments and decodes their JSON
// answers, so that the PostgreSQL store (through pgx) and the Supabase
// store (through PostgREST's rpc) share one definition of each transition.
// See docs/notes/store-functions.md.
package pgfunc

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/office-server/office-server/office"
)

// Function names.
const (
	Due           = "office_due" // migrations/20261128203200_office_notices.sql
	SessionStatus = "office_set_session_status"
	MarkDelivered = "office_mark_delivered" // migrations/20261128203200_office_notices.sql
	Ask           = "office_ask"            // migrations/20261128194000_office_message_events.sql
	DeliverResult = "office_deliver_result" // migrations/20261128194000_office_message_events.sql
	Invoke        = "office_invoke"         // migrations/20261128194000_office_message_events.sql
	OpenWork      = "office_open_work"      // migrations/20261128160000_office_open_work.sql
	AppendEvents  = "office_append_events"  // migrations/20261128194200_office_append_events.sql
	AddNotices    = "office_add_notices"    // migrations/20261128203200_office_notices.sql
)

// DueArgs are office_due's named arguments: typingAt, when not zero,
// appends the typing marker of the row typed first (ListDueTyping).
func DueArgs(officeID, agentID string, typingAt time.Time) map[string]any {
	var at any
	if !typingAt.IsZero() {
		at = typingAt
	}
	return map[string]any{"p_office_id": officeID, "p_agent_id": agentID, "p_typing_at": at}
}

// withMessage adds the named arguments of the agent's message event that
// a transition appends first (office.Ask.Message and the like) to args.
func withMessage(args map[string]any, m office.Event) map[string]any {
	var kind, payload, raw, key any
	if m.Kind != "" {
		kind, raw, key = m.Kind, orNil(m.Raw), orNil(m.DedupeKey)
		if len(m.Payload) > 0 {
			payload = json.RawMessage(m.Payload)
		}
	}
	args["p_message_kind"], args["p_message_payload"], args["p_message_raw"], args["p_message_dedupe_key"] = kind, payload, raw, key
	return args
}

// messageCheck refuses a message event the functions cannot take.
func messageCheck(op string, m office.Event) error {
	if len(m.Payload) > 0 && !json.Valid(m.Payload) {
		return &office.Error{Code: office.EINVALID, Op: op, Message: "message event payload is not valid JSON"}
	}
	return nil
}

// SessionStatusArgs are office_set_session_status's named arguments.
func SessionStatusArgs(c office.SessionStatus) map[string]any {
	var kind, payload any
	if c.EventKind != "" {
		kind = c.EventKind
		if len(c.EventPayload) > 0 {
			payload = json.RawMessage(c.EventPayload)
		}
	}
	return map[string]any{
		"p_office_id": c.OfficeID, "p_agent_id": c.AgentID, "p_status": c.Status,
		"p_detail": office.CutSessionDetail(c.Detail), "p_process": c.Process, "p_pid": c.PID,
		"p_exit_code": c.ExitCode, "p_started_at": c.StartedAt, "p_event_kind": kind, "p_event_payload": payload,
		"p_node": c.Node, "p_agent_session_id": c.AgentSessionID,
	}
}

// SessionStatusCheck refuses a change the function cannot take.
func SessionStatusCheck(c office.SessionStatus) error {
	if c.OfficeID == "" || c.AgentID == "" || (c.Status == "" && (c.Process || c.AgentSessionID == "")) {
		return &office.Error{Code: office.EINVALID, Op: "set session status", Message: "a session status needs an office, an agent and a status (or a conversation)"}
	}
	if len(c.EventPayload) > 0 && !json.Valid(c.EventPayload) {
		return &office.Error{Code: office.EINVALID, Op: "set session status", Message: "event payload is not valid JSON"}
	}
	return nil
}

// MarkDeliveredArgs are office_mark_delivered's named arguments.
func MarkDeliveredArgs(d office.Delivered) map[string]any {
	var kind, payload any
	if d.EventKind != "" {
		kind = d.EventKind
		if len(d.EventPayload) > 0 {
			payload = json.RawMessage(d.EventPayload)
		}
	}
	return map[string]any{
		"p_office_id": d.OfficeID, "p_agent_id": d.AgentID, "p_kind": d.Kind, "p_id": d.ID,
		"p_event_kind": kind, "p_event_payload": payload, "p_busy": d.Busy,
	}
}

// MarkDeliveredCheck refuses a delivery the function cannot take.
func MarkDeliveredCheck(d office.Delivered) error {
	switch d.Kind {
	case office.DeliveredQuestion, office.DeliveredResult, office.DeliveredTask, office.DeliveredNotice:
	default:
		return &office.Error{Code: office.EINVALID, Op: "mark delivered", Message: fmt.Sprintf("unknown kind of delivery %q", d.Kind)}
	}
	if len(d.EventPayload) > 0 && !json.Valid(d.EventPayload) {
		return &office.Error{Code: office.EINVALID, Op: "mark delivered", Message: "event payload is not valid JSON"}
	}
	return nil
}

// DecodeMarkDelivered decodes office_mark_delivered's answer.
func DecodeMarkDelivered(b []byte) (at time.Time, ev office.Event, ok bool, err error) {
	var v struct {
		OK    bool          `json:"ok"`
		At    time.Time     `json:"at"`
		Event *office.Event `json:"event"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return at, ev, false, fmt.Errorf("%s: %w", MarkDelivered, err)
	}
	if v.Event != nil {
		ev = *v.Event
		if string(ev.Payload) == "null" {
			ev.Payload = nil
		}
	}
	return v.At, ev, v.OK, nil
}

// AskArgs are office_ask's named arguments.
func AskArgs(a office.Ask) map[string]any {
	q := a.Question
	options := json.RawMessage("[]") // JSON text: under the simple protocol pgx would send a slice as an array literal
	if len(q.Options) > 0 {
		options, _ = json.Marshal(q.Options)
	}
	var kind, key, askedAt any
	if !a.At.IsZero() {
		askedAt = a.At
	}
	if a.EventKind != "" {
		kind = a.EventKind
		if a.EventDedupeKey != "" {
			key = a.EventDedupeKey
		}
	}
	return withMessage(map[string]any{
		"p_id": q.ID, "p_office_id": q.OfficeID, "p_agent_id": q.AgentID, "p_question_type": q.QuestionType,
		"p_category": q.Category, "p_question": q.Question, "p_options": options, "p_default_answer": q.DefaultAnswer,
		"p_context": q.Context, "p_required": q.Required, "p_ttl_seconds": a.TTL.Seconds(), "p_asked_at": askedAt,
		"p_event_kind": kind, "p_event_dedupe_key": key,
	}, a.Message)
}

// AskCheck refuses a question the function cannot take.
func AskCheck(a office.Ask) error {
	q := a.Question
	if q.ID == "" || q.OfficeID == "" || q.AgentID == "" || strings.TrimSpace(q.Question) == "" {
		return &office.Error{Code: office.EINVALID, Op: "ask question", Message: "a question needs an id, an office, an agent and its text"}
	}
	if a.TTL <= 0 {
		return &office.Error{Code: office.EINVALID, Op: "ask question", Message: "a question needs a positive TTL"}
	}
	return messageCheck("ask question", a.Message)
}

// DecodeAsk decodes office_ask's answer.
func DecodeAsk(b []byte) (q office.Question, pending []office.Question, events []office.Event, created bool, err error) {
	var v struct {
		Created  bool              `json:"created"`
		Question office.Question   `json:"question"`
		Events   []office.Event    `json:"events"`
		Pending  []office.Question `json:"pending"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return q, nil, nil, false, fmt.Errorf("%s: %w", Ask, err)
	}
	return v.Question, v.Pending, v.Events, v.Created, nil
}

// DeliverResultArgs are office_deliver_result's named arguments.
func DeliverResultArgs(d office.ResultDelivery) map[string]any {
	r := d.Result
	return withMessage(map[string]any{
		"p_id": r.ID, "p_office_id": r.OfficeID, "p_from_agent_id": r.FromAgentID, "p_to_agent_id": r.ToAgentID,
		"p_result_type": r.ResultType, "p_content_type": r.ContentType, "p_content": r.Content, "p_to_name": d.ToName,
		"p_event_kind": orNil(d.EventKind), "p_event_dedupe_key": orNil(d.EventDedupeKey),
		"p_completed_event_kind": orNil(d.CompletedEventKind), "p_completed_dedupe_key": orNil(d.CompletedDedupeKey),
	}, d.Message)
}

func orNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// DeliverResultCheck refuses a result the function cannot take.
func DeliverResultCheck(d office.ResultDelivery) error {
	r := d.Result
	if r.ID == "" || r.OfficeID == "" || r.FromAgentID == "" || r.ToAgentID == "" {
		return &office.Error{Code: office.EINVALID, Op: "deliver result", Message: "a result needs an id, an office, a sender and a recipient"}
	}
	return messageCheck("deliver result", d.Message)
}

// DecodeDeliverResult decodes office_deliver_result's answer.
func DecodeDeliverResult(b []byte) (office.ResultStored, error) {
	var v struct {
		Created   bool           `json:"created"`
		Result    office.Result  `json:"result"`
		Completed bool           `json:"completed"`
		Events    []office.Event `json:"events"`
		NextTask  bool           `json:"next_task"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return office.ResultStored{}, fmt.Errorf("%s: %w", DeliverResult, err)
	}
	return office.ResultStored{Result: v.Result, Created: v.Created, Completed: v.Completed, Events: v.Events, NextTask: v.NextTask}, nil
}

// InvokeArgs are office_invoke's named arguments.
func InvokeArgs(i office.Invoke) map[string]any {
	v := i.Invocation
	var payload any
	if len(i.EventPayload) > 0 {
		payload = json.RawMessage(i.EventPayload)
	}
	return withMessage(map[string]any{
		"p_id": v.ID, "p_office_id": v.OfficeID, "p_caller_agent_id": v.CallerAgentID, "p_callee_agent_id": v.CalleeAgentID,
		"p_parent_invocation_id": orNil(v.ParentInvocationID), "p_depth": v.Depth, "p_reason": v.Reason, "p_context": v.Context,
		"p_event_kind": orNil(i.EventKind), "p_event_payload": payload, "p_event_dedupe_key": orNil(i.EventDedupeKey),
	}, i.Message)
}

// InvokeCheck refuses a task the function cannot take.
func InvokeCheck(i office.Invoke) error {
	v := i.Invocation
	if v.ID == "" || v.OfficeID == "" || v.CallerAgentID == "" || v.CalleeAgentID == "" || v.Reason == "" {
		return &office.Error{Code: office.EINVALID, Op: "invoke", Message: "a task needs an id, an office, a caller, a callee and its reason"}
	}
	if len(i.EventPayload) > 0 && !json.Valid(i.EventPayload) {
		return &office.Error{Code: office.EINVALID, Op: "invoke", Message: "event payload is not valid JSON"}
	}
	return messageCheck("invoke", i.Message)
}

// DecodeInvoke decodes office_invoke's answer.
func DecodeInvoke(b []byte) (inv office.Invocation, events []office.Event, created bool, err error) {
	var v struct {
		Created    bool              `json:"created"`
		Invocation office.Invocation `json:"invocation"`
		Events     []office.Event    `json:"events"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return inv, nil, false, fmt.Errorf("%s: %w", Invoke, err)
	}
	return v.Invocation, v.Events, v.Created, nil
}

// AppendEventsArgs are office_append_events's named arguments.
func AppendEventsArgs(events []office.Event) map[string]any {
	list := make([]map[string]any, len(events))
	for i, e := range events {
		m := map[string]any{"office_id": e.OfficeID, "kind": e.Kind, "agent_id": orNil(e.AgentID), "session_id": orNil(e.SessionID),
			"raw": orNil(e.Raw), "dedupe_key": orNil(e.DedupeKey)}
		if len(e.Payload) > 0 {
			m["payload"] = json.RawMessage(e.Payload)
		}
		if !e.CreatedAt.IsZero() {
			m["created_at"] = e.CreatedAt
		}
		list[i] = m
	}
	b, _ := json.Marshal(list) // JSON text: under the simple protocol pgx would send a slice as an array literal
	return map[string]any{"p_events": json.RawMessage(b)}
}

// AppendEventsCheck refuses events the function cannot take.
func AppendEventsCheck(events []office.Event) error {
	for _, e := range events {
		if e.OfficeID == "" || e.Kind == "" {
			return &office.Error{Code: office.EINVALID, Op: "append events", Message: "an event needs an office and a kind"}
		}
		if len(e.Payload) > 0 && !json.Valid(e.Payload) {
			return &office.Error{Code: office.EINVALID, Op: "append events", Message: "payload is not JSON"}
		}
	}
	return nil
}

// DecodeAppendEvents decodes office_append_events's answer.
func DecodeAppendEvents(b []byte) (stored []office.Event, inserted []bool, err error) {
	var v struct {
		Events []struct {
			Event    office.Event `json:"event"`
			Inserted bool         `json:"inserted"`
		} `json:"events"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", AppendEvents, err)
	}
	for _, e := range v.Events {
		if string(e.Event.Payload) == "null" {
			e.Event.Payload = nil
		}
		stored, inserted = append(stored, e.Event), append(inserted, e.Inserted)
	}
	return stored, inserted, nil
}

// OpenWorkArgs are office_open_work's named arguments.
func OpenWorkArgs(officeID string) map[string]any {
	return map[string]any{"p_office_id": officeID}
}

// DecodeOpenWork decodes office_open_work's answer.
func DecodeOpenWork(b []byte) (office.OpenWork, error) {
	var v struct {
		Invocations []office.Invocation `json:"invocations"`
		ProxyTasks  []office.ProxyTask  `json:"proxy_tasks"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return office.OpenWork{}, fmt.Errorf("%s: %w", OpenWork, err)
	}
	return office.OpenWork{Invocations: v.Invocations, ProxyTasks: v.ProxyTasks}, nil
}

type dependencyRow struct {
	office.DependencyRequest
	Value *string `json:"value"`
}

// DecodeDue decodes office_due's answer.
func DecodeDue(b []byte) (office.DueWork, error) {
	var v struct {
		Notices      []office.Notice      `json:"notices"`
		Dependencies []dependencyRow      `json:"dependencies"`
		Answers      []office.Question    `json:"answers"`
		Results      []office.Result      `json:"results"`
		Messages     []office.UserMessage `json:"messages"`
		Tasks        []office.Invocation  `json:"tasks"`
		Typing       *struct {
			Row      string       `json:"row"`
			Event    office.Event `json:"event"`
			Inserted bool         `json:"inserted"`
		} `json:"typing"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return office.DueWork{}, fmt.Errorf("%s: %w", Due, err)
	}
	w := office.DueWork{Notices: v.Notices, Answers: v.Answers, Results: v.Results, Messages: v.Messages, Tasks: v.Tasks}
	if v.Typing != nil {
		w.Typing = office.Typing{Row: v.Typing.Row, Event: v.Typing.Event, Inserted: v.Typing.Inserted}
	}
	for _, r := range v.Dependencies {
		d := r.DependencyRequest
		if r.Value != nil {
			hx, ok := strings.CutPrefix(*r.Value, `\x`)
			if !ok {
				return office.DueWork{}, fmt.Errorf("%s: dependency %s: value not in hex form", Due, d.ID)
			}
			val, err := hex.DecodeString(hx)
			if err != nil {
				return office.DueWork{}, fmt.Errorf("%s: dependency %s: %w", Due, d.ID, err)
			}
			d.Value = val
		}
		w.Dependencies = append(w.Dependencies, d)
	}
	return w, nil
}

// DecodeSessionStatus decodes office_set_session_status's answer: the
// row written (ok=false when none was) and the event appended (zero when
// none was).
func DecodeSessionStatus(b []byte) (rec office.SessionRecord, ev office.Event, ok bool, err error) {
	var v struct {
		Session *office.SessionRecord `json:"session"`
		Event   *office.Event         `json:"event"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return rec, ev, false, fmt.Errorf("%s: %w", SessionStatus, err)
	}
	if v.Event != nil {
		ev = *v.Event
		if string(ev.Payload) == "null" {
			ev.Payload = nil
		}
	}
	if v.Session == nil {
		return rec, ev, false, nil
	}
	return *v.Session, ev, true, nil
}

// SQL is the statement that calls fn with args by name (as PostgREST's rpc
// passes them), for pgx: select public.fn(a => $1, b => $2, ...).
func SQL(fn string, args map[string]any) (string, []any) {
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	vals := make([]any, len(names))
	b.WriteString("select public." + fn + "(")
	for i, k := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s => $%d", k, i+1)
		vals[i] = args[k]
	}
	b.WriteString(")")
	return b.String(), vals
}

// AddNoticesArgs are office_add_notices's named arguments.
func AddNoticesArgs(officeID, agentID string, texts []string, limit int) map[string]any {
	b, _ := json.Marshal(texts) // JSON text, as AskArgs's options
	return map[string]any{"p_office_id": officeID, "p_agent_id": agentID, "p_texts": json.RawMessage(b), "p_max": limit}
}

// AddNoticesCheck refuses notices the function cannot take.
func AddNoticesCheck(texts []string) error {
	for _, t := range texts {
		if t == "" || strings.ContainsRune(t, 0) {
			return &office.Error{Code: office.EINVALID, Op: "add notices", Message: "a notice needs a text without NUL bytes"}
		}
	}
	return nil
}

// DecodeAddNotices decodes office_add_notices's answer.
func DecodeAddNotices(b []byte) (int, error) {
	var v struct {
		Added int `json:"added"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return 0, fmt.Errorf("%s: %w", AddNotices, err)
	}
	return v.Added, nil
}
