package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
)

// routes registers every endpoint. The API is under /api, the console
// WebSocket under /ws, the page at /.
func (s *Server) routes() {
	m := s.mux
	api := func(pattern string, h http.HandlerFunc) { m.HandleFunc(pattern, s.requireToken(h)) }

	api("GET /api/offices", s.listOffices)
	api("POST /api/offices", s.saveOffice)
	api("GET /api/offices/{office}", s.getOffice)

	api("GET /api/offices/{office}/agents", s.listAgents)
	api("POST /api/offices/{office}/agents", s.saveAgent)
	api("PUT /api/offices/{office}/agents/{agent}", s.saveAgent)
	api("PATCH /api/offices/{office}/agents/{agent}", s.patchAgent)
	api("GET /api/offices/{office}/agents/{agent}", s.getAgent)
	api("DELETE /api/offices/{office}/agents/{agent}", s.deleteAgent)

	api("GET /api/offices/{office}/sessions", s.listSessions)
	api("POST /api/offices/{office}/agents/{agent}/start", s.forwarded(s.sessionAction("start")))
	api("POST /api/offices/{office}/agents/{agent}/stop", s.forwarded(s.sessionAction("stop")))
	api("POST /api/offices/{office}/agents/{agent}/restart", s.forwarded(s.sessionAction("restart")))
	api("POST /api/offices/{office}/agents/{agent}/input", s.forwarded(s.sendInput))

	api("GET /api/offices/{office}/questions", s.listQuestions)
	api("GET /api/questions/{id}", s.getQuestion)
	api("POST /api/questions/{id}/answer", s.answerQuestion)
	api("POST /api/offices/{office}/messages", s.createMessage)

	api("GET /api/offices/{office}/invocations", s.listInvocations)
	api("GET /api/invocations/{id}", s.getInvocation)
	api("GET /api/results/{id}", s.getResult)
	api("GET /api/offices/{office}/callgraph", s.callGraph)
	api("GET /api/offices/{office}/results", s.listResults)

	api("GET /api/offices/{office}/dependencies", s.listDependencies)
	api("GET /api/dependencies/{id}", s.getDependency)
	api("POST /api/dependencies/{id}/provide", s.provideDependency)
	api("POST /api/dependencies/{id}/reject", s.rejectDependency)

	s.memberRoutes(api)

	api("GET /api/offices/{office}/events", s.listEvents)
	api("GET /api/offices/{office}/events/stream", s.streamEvents)

	api("POST /api/node/drain", s.drain)

	// Go's profiles (CPU, heap, goroutines…), for the load driver and
	// operators: behind the admin token like the API.
	api("GET /debug/pprof/", pprof.Index)
	api("GET /debug/pprof/profile", pprof.Profile)

	m.HandleFunc("GET /ws/offices/{office}/agents/{agent}", s.console)
	m.HandleFunc("GET /ws/offices/{office}/previews", s.previews)

	m.HandleFunc("GET /healthz", s.healthz)
	m.HandleFunc("GET /readyz", s.readyz)
	m.Handle("GET /metrics", s.metrics.handler())
	m.HandleFunc("/api/", s.noRoute)
	s.webRoutes()
}

func (s *Server) listOffices(w http.ResponseWriter, r *http.Request) {
	offices, err := s.cfg.Store.ListOffices(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]officeJSON, 0, len(offices))
	for _, o := range offices {
		out = append(out, officeOut(o))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getOffice(w http.ResponseWriter, r *http.Request) {
	o, err := s.office(r.Context(), r.PathValue("office"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, officeOut(o))
}

// office resolves an office by ID, or else by name.
func (s *Server) office(ctx context.Context, ref string) (office.Office, error) {
	o, err := s.cfg.Store.GetOffice(ctx, ref)
	if err == nil || !office.IsNotFound(err) && office.ErrorCode(err) != office.EINVALID {
		return o, err
	}
	all, lerr := s.cfg.Store.ListOffices(ctx)
	if lerr != nil {
		return office.Office{}, lerr
	}
	for _, o := range all {
		if strings.EqualFold(o.Name, ref) {
			return o, nil
		}
	}
	return office.Office{}, office.Errorf(office.ENOTFOUND, "no office %q", ref)
}

// agent resolves an agent of the office by ID, or else by name.
func (s *Server) agent(ctx context.Context, officeRef, ref string) (office.Office, office.Agent, error) {
	o, err := s.office(ctx, officeRef)
	if err != nil {
		return o, office.Agent{}, err
	}
	agents, err := s.cfg.Store.ListAgents(ctx, o.ID)
	if err != nil {
		return o, office.Agent{}, err
	}
	for _, a := range agents {
		if a.ID == ref {
			return o, a, nil
		}
	}
	for _, a := range agents {
		if strings.EqualFold(a.Name, ref) {
			return o, a, nil
		}
	}
	return o, office.Agent{}, office.Errorf(office.ENOTFOUND, "no agent %q in office %q", ref, o.Name)
}

func (s *Server) saveOffice(w http.ResponseWriter, r *http.Request) {
	var in officeJSON
	if err := decodeJSON(w, r, &in); err != nil {
		writeError(w, err)
		return
	}
	if strings.TrimSpace(in.Name) == "" {
		writeError(w, office.Errorf(office.EINVALID, "name is required"))
		return
	}
	o, err := s.cfg.Office.SaveOffice(r.Context(), in.office())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, officeOut(o))
}

// agentView is an agent with its session's status and, when the session
// waits for a person (a dialog) or its process ended, why; with the time
// the status was first seen and the terminal's size.
type agentView struct {
	office.Agent
	Launch  launchJSON `json:"launch"`
	Session string     `json:"session_status"`
	Detail  string     `json:"session_detail,omitempty"`
	Since   *time.Time `json:"session_since,omitempty"`
	Cols    int        `json:"cols,omitempty"`
	Rows    int        `json:"rows,omitempty"`
	// Node is the address of the node that runs the agent's office, when
	// that is another server (several on one database).
	Node string `json:"node,omitempty"`
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	o, err := s.office(r.Context(), r.PathValue("office"))
	if err != nil {
		writeError(w, err)
		return
	}
	agents, err := s.cfg.Store.ListAgents(r.Context(), o.ID)
	if err != nil {
		writeError(w, err)
		return
	}
	recs := s.sessionRecords(r.Context(), o.ID)
	out := make([]agentView, 0, len(agents))
	for _, a := range agents {
		out = append(out, s.agentView(r.Context(), o.ID, a, recs[a.ID]))
	}
	writeJSON(w, http.StatusOK, out)
}

// sessionRecords returns the office's session rows by agent (empty when
// the store cannot list them: the live terminals still answer).
func (s *Server) sessionRecords(ctx context.Context, officeID string) map[string]office.SessionRecord {
	out := map[string]office.SessionRecord{}
	recs, err := s.cfg.Store.ListSessions(ctx, officeID)
	if err != nil {
		s.log.Warn("list sessions", "office", officeID, "err", err)
		return out
	}
	for _, rec := range recs {
		out[rec.AgentID] = rec
	}
	return out
}

// agentView is the agent with its live terminal's status, or, when it has
// none, the last status its session row recorded (crashed, failed, exited
// keep their reason), else stopped.
func (s *Server) agentView(ctx context.Context, officeID string, a office.Agent, rec office.SessionRecord) agentView {
	v := agentView{Agent: a, Launch: launchOut(a.Launch), Session: office.SessionStopped}
	if t, ok := s.cfg.Terminals.Terminal(officeID, a.ID); ok {
		v.Session, v.Detail = t.Status(), t.Detail()
		v.Cols, v.Rows = t.Size()
	} else {
		// Run by another node: its session row says how it is.
		if s.cfg.Owners != nil {
			if addr, local := s.cfg.Owners.Owner(ctx, officeID); !local {
				v.Node = addr
			}
		}
		if rec.Status != "" {
			v.Session, v.Detail = rec.Status, rec.Detail
		}
	}
	since := s.statusSince(officeID+"/"+a.ID, v.Session, rec)
	v.Since = &since
	return v
}

// statusSince is when an agent's session was first seen in its status: the
// server remembers it per session; a status it had not seen yet dates from
// the session row's last update when the row has that status, else now.
type statusSince struct {
	status string
	at     time.Time
}

func (s *Server) statusSince(key, status string, rec office.SessionRecord) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.since[key]; ok && cur.status == status {
		return cur.at
	}
	at := time.Now()
	if rec.Status == status && !rec.UpdatedAt.IsZero() && rec.UpdatedAt.Before(at) {
		at = rec.UpdatedAt
	}
	s.since[key] = statusSince{status, at}
	return at
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) {
	o, a, err := s.agent(r.Context(), r.PathValue("office"), r.PathValue("agent"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.agentView(r.Context(), o.ID, a, s.sessionRecords(r.Context(), o.ID)[a.ID]))
}

// saveAgent creates an agent (POST) or replaces the one the path names
// (PUT: every field of the body, absent ones reset to their zero values;
// PATCH changes only the fields given).
func (s *Server) saveAgent(w http.ResponseWriter, r *http.Request) {
	o, err := s.office(r.Context(), r.PathValue("office"))
	if err != nil {
		writeError(w, err)
		return
	}
	var body agentJSON
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	in := body.agent()
	if ref := r.PathValue("agent"); ref != "" {
		// PUT replaces the agent the path names (renaming it if the body
		// has another name).
		_, cur, err := s.agent(r.Context(), o.ID, ref)
		if err != nil {
			writeError(w, err)
			return
		}
		in.ID = cur.ID
		if in.Name == "" {
			in.Name = cur.Name
		}
	}
	s.storeAgent(w, r, o, in)
}

// patchAgent changes the fields the body gives and keeps the others (in
// launch too: a launch object is merged key by key).
func (s *Server) patchAgent(w http.ResponseWriter, r *http.Request) {
	o, cur, err := s.agent(r.Context(), r.PathValue("office"), r.PathValue("agent"))
	if err != nil {
		writeError(w, err)
		return
	}
	var patch map[string]json.RawMessage
	if err := decodeJSON(w, r, &patch); err != nil {
		writeError(w, err)
		return
	}
	in, err := patched(cur, patch)
	if err != nil {
		writeError(w, err)
		return
	}
	in.ID, in.OfficeID = cur.ID, o.ID
	s.storeAgent(w, r, o, in)
}

// patched applies a JSON merge of patch onto the agent a.
func patched(a office.Agent, patch map[string]json.RawMessage) (office.Agent, error) {
	b, _ := json.Marshal(agentJSON{Agent: a, Launch: launchOut(a.Launch)})
	var merged map[string]json.RawMessage
	_ = json.Unmarshal(b, &merged)
	for k, v := range patch {
		switch k {
		case "id", "office_id", "created_at", "updated_at":
			return a, office.Errorf(office.EINVALID, "%s cannot be changed", k)
		case "launch":
			var cur, add map[string]json.RawMessage
			if json.Unmarshal(merged[k], &cur) == nil && json.Unmarshal(v, &add) == nil && cur != nil && add != nil {
				for lk, lv := range add {
					cur[lk] = lv
				}
				v, _ = json.Marshal(cur)
			}
		}
		merged[k] = v
	}
	b, _ = json.Marshal(merged)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var out agentJSON
	if err := dec.Decode(&out); err != nil {
		return a, office.Errorf(office.EINVALID, "invalid JSON body: %v", err)
	}
	return out.agent(), nil
}

// storeAgent checks and saves an agent of office o: a POST's name must be
// new in the office.
func (s *Server) storeAgent(w http.ResponseWriter, r *http.Request, o office.Office, in office.Agent) {
	if err := office.ValidateAgentName(in.Name); err != nil {
		writeError(w, err)
		return
	}
	if in.OfficeID != "" && in.OfficeID != o.ID {
		writeError(w, office.Errorf(office.EINVALID, "office_id %q does not match the office in the path", in.OfficeID))
		return
	}
	in.OfficeID = o.ID
	if r.Method == http.MethodPost {
		// POST creates: a name (in any case) or an ID already in the
		// office is a conflict, never a replacement. The new agent gets
		// its ID here, so that a concurrent POST of the same name fails
		// in the store (a new ID with a taken name) rather than updating.
		agents, err := s.cfg.Store.ListAgents(r.Context(), o.ID)
		if err != nil {
			writeError(w, err)
			return
		}
		for _, a := range agents {
			if strings.EqualFold(a.Name, in.Name) || in.ID != "" && a.ID == in.ID {
				writeError(w, office.Errorf(office.ECONFLICT, "office %q already has an agent named %q (PUT /api/offices/%s/agents/%s replaces it, PATCH changes some fields)", o.Name, a.Name, o.ID, a.ID))
				return
			}
		}
		if in.ID == "" {
			in.ID = uuid.NewString()
		}
	}
	a, err := s.cfg.Office.SaveAgent(r.Context(), in)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.agentView(r.Context(), o.ID, a, s.sessionRecords(r.Context(), o.ID)[a.ID]))
}

// noRoute answers a request no route takes: 405 with Allow when the path
// exists for other methods, else 404.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/api/" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		writeError(w, office.Errorf(office.ENOTFOUND, "no such endpoint: %s %s", r.Method, r.URL.Path))
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	var body errorBody
	body.Error.Code = "method_not_allowed"
	body.Error.Message = fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", "))
	writeJSON(w, http.StatusMethodNotAllowed, body)
}

func (s *Server) deleteAgent(w http.ResponseWriter, r *http.Request) {
	o, a, err := s.agent(r.Context(), r.PathValue("office"), r.PathValue("agent"))
	if err != nil {
		writeError(w, err)
		return
	}
	if err := s.cfg.Office.DeleteAgent(r.Context(), o.ID, a.ID); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// sessionView is a session row with the live status of its terminal.
type sessionView struct {
	office.SessionRecord
	AgentName string `json:"agent_name"`
	Live      bool   `json:"live"`
	// NodeAddr is where the node running it answers, when it is another
	// (SessionRecord.Node names the node).
	NodeAddr string `json:"node_addr,omitempty"`
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	o, err := s.office(r.Context(), r.PathValue("office"))
	if err != nil {
		writeError(w, err)
		return
	}
	recs, err := s.cfg.Store.ListSessions(r.Context(), o.ID)
	if err != nil {
		writeError(w, err)
		return
	}
	agents, err := s.cfg.Store.ListAgents(r.Context(), o.ID)
	if err != nil {
		writeError(w, err)
		return
	}
	names := map[string]string{}
	for _, a := range agents {
		names[a.ID] = a.Name
	}
	var remote string
	if s.cfg.Owners != nil {
		if addr, local := s.cfg.Owners.Owner(r.Context(), o.ID); !local {
			remote = addr
		}
	}
	out := make([]sessionView, 0, len(recs))
	for _, rec := range recs {
		v := sessionView{SessionRecord: rec, AgentName: names[rec.AgentID], NodeAddr: remote}
		if t, ok := s.cfg.Terminals.Terminal(o.ID, rec.AgentID); ok {
			v.Live, v.Status, v.Detail = true, t.Status(), t.Detail()
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) sessionAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		o, a, err := s.agent(r.Context(), r.PathValue("office"), r.PathValue("agent"))
		if err != nil {
			writeError(w, err)
			return
		}
		switch action {
		case "start":
			err = s.cfg.Office.StartAgent(r.Context(), o.ID, a.ID)
		case "stop":
			err = s.cfg.Office.StopAgent(r.Context(), o.ID, a.ID)
		case "restart":
			err = s.cfg.Office.RestartAgent(r.Context(), o.ID, a.ID)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]string{"agent_id": a.ID, "action": action})
	}
}

func (s *Server) sendInput(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Text string `json:"text"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		writeError(w, err)
		return
	}
	if strings.TrimSpace(in.Text) == "" {
		writeError(w, office.Errorf(office.EINVALID, "text is required"))
		return
	}
	o, a, err := s.agent(r.Context(), r.PathValue("office"), r.PathValue("agent"))
	if err != nil {
		writeError(w, err)
		return
	}
	if err := s.cfg.Office.SendInput(r.Context(), o.ID, a.ID, in.Text); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"agent_id": a.ID})
}

// statusFilter reads ?status=a,b.
func statusFilter(r *http.Request) []string {
	v := r.URL.Query().Get("status")
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

func limitParam(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 10000 {
		return 0, office.Errorf(office.EINVALID, "limit %q: want an integer from 0 to 10000", v)
	}
	return n, nil
}

// agentFilter resolves the optional ?agent= (ID or name) of an office.
func (s *Server) agentFilter(r *http.Request, officeID string) (string, error) {
	ref := r.URL.Query().Get("agent")
	if ref == "" {
		return "", nil
	}
	_, a, err := s.agent(r.Context(), officeID, ref)
	return a.ID, err
}

// listQuery resolves the office, ?agent, ?status and ?limit shared by lists.
func (s *Server) listQuery(r *http.Request) (o office.Office, agentID string, status []string, limit int, err error) {
	if o, err = s.office(r.Context(), r.PathValue("office")); err != nil {
		return
	}
	if agentID, err = s.agentFilter(r, o.ID); err != nil {
		return
	}
	limit, err = limitParam(r)
	return o, agentID, statusFilter(r), limit, err
}

func (s *Server) listQuestions(w http.ResponseWriter, r *http.Request) {
	o, agentID, status, limit, err := s.listQuery(r)
	if err != nil {
		writeError(w, err)
		return
	}
	qs, err := s.cfg.Store.ListQuestions(r.Context(), office.QuestionFilter{OfficeID: o.ID, AgentID: agentID, Status: status, Limit: limit})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, nonNil(qs))
}

func (s *Server) getQuestion(w http.ResponseWriter, r *http.Request) {
	q, err := s.cfg.Store.GetQuestion(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, q)
}

// getInvocation and getResult read one row: the console updates a call or
// a result by its row when an event names it.
func (s *Server) getInvocation(w http.ResponseWriter, r *http.Request) {
	inv, err := s.cfg.Store.GetInvocation(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, inv)
}

func (s *Server) getResult(w http.ResponseWriter, r *http.Request) {
	res, err := s.cfg.Store.GetResult(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) getDependency(w http.ResponseWriter, r *http.Request) {
	d, err := s.cfg.Store.GetDependency(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) answerQuestion(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Response   string `json:"response"`
		AnsweredBy string `json:"answered_by"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		writeError(w, err)
		return
	}
	if strings.TrimSpace(in.Response) == "" {
		writeError(w, office.Errorf(office.EINVALID, "response is required"))
		return
	}
	q, err := s.cfg.Office.AnswerQuestion(r.Context(), r.PathValue("id"), in.Response, in.AnsweredBy)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, q)
}

func (s *Server) createMessage(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Agent   string `json:"agent"` // ID or name
		Content string `json:"content"`
		UserID  string `json:"user_id"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		writeError(w, err)
		return
	}
	if in.Agent == "" || strings.TrimSpace(in.Content) == "" {
		writeError(w, office.Errorf(office.EINVALID, "agent and content are required"))
		return
	}
	o, a, err := s.agent(r.Context(), r.PathValue("office"), in.Agent)
	if err != nil {
		writeError(w, err)
		return
	}
	m, err := s.cfg.Office.SendUserMessage(r.Context(), office.UserMessage{OfficeID: o.ID, AgentID: a.ID, UserID: in.UserID, Content: in.Content})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, m)
}

func (s *Server) listInvocations(w http.ResponseWriter, r *http.Request) {
	o, agentID, status, limit, err := s.listQuery(r)
	if err != nil {
		writeError(w, err)
		return
	}
	invs, err := s.cfg.Store.ListInvocations(r.Context(), office.InvocationFilter{OfficeID: o.ID, AgentID: agentID, Status: status, Limit: limit})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, nonNil(invs))
}

func (s *Server) callGraph(w http.ResponseWriter, r *http.Request) {
	o, err := s.office(r.Context(), r.PathValue("office"))
	if err != nil {
		writeError(w, err)
		return
	}
	g, err := s.cfg.Office.CallGraph(r.Context(), o.ID)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, g)
}

func (s *Server) listResults(w http.ResponseWriter, r *http.Request) {
	o, agentID, status, limit, err := s.listQuery(r)
	if err != nil {
		writeError(w, err)
		return
	}
	rs, err := s.cfg.Store.ListResults(r.Context(), office.ResultFilter{OfficeID: o.ID, ToAgentID: agentID, InvocationID: r.URL.Query().Get("invocation"), Status: status, Limit: limit})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, nonNil(rs))
}

func (s *Server) listDependencies(w http.ResponseWriter, r *http.Request) {
	o, agentID, status, limit, err := s.listQuery(r)
	if err != nil {
		writeError(w, err)
		return
	}
	ds, err := s.cfg.Store.ListDependencies(r.Context(), office.DependencyFilter{OfficeID: o.ID, AgentID: agentID, Status: status, Limit: limit})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, nonNil(ds))
}

func (s *Server) provideDependency(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Value string `json:"value"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		writeError(w, err)
		return
	}
	d, err := s.cfg.Office.ProvideDependency(r.Context(), r.PathValue("id"), in.Value)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) rejectDependency(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Reason string `json:"reason"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		writeError(w, err)
		return
	}
	d, err := s.cfg.Office.RejectDependency(r.Context(), r.PathValue("id"), in.Reason)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	o, agentID, _, limit, err := s.listQuery(r)
	if err != nil {
		writeError(w, err)
		return
	}
	after, err := afterID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	evs, err := s.cfg.Store.ListEvents(r.Context(), office.EventFilter{OfficeID: o.ID, AgentID: agentID, AfterID: after, Limit: limit})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, nonNil(evs))
}

// afterID reads ?after_id=, or the SSE Last-Event-ID header.
func afterID(r *http.Request) (int64, error) {
	v := r.URL.Query().Get("after_id")
	if v == "" {
		v = r.Header.Get("Last-Event-ID")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, office.Errorf(office.EINVALID, "after_id %q: want a non-negative integer", v)
	}
	return n, nil
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 when the store answers a ping and the change feed (if
// any) is connected and caught up.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3e9)
	defer cancel()
	body := map[string]string{"store": "ok", "feed": "ok"}
	status := http.StatusOK
	if err := s.cfg.Store.Ping(ctx); err != nil {
		body["store"], status = "unreachable", http.StatusServiceUnavailable
		s.log.Warn("readyz: store ping", "err", err)
	}
	if s.cfg.Feed != nil && !s.cfg.Feed.Connected() {
		body["feed"], status = "disconnected", http.StatusServiceUnavailable
	}
	writeJSON(w, status, body)
}

// nonNil turns a nil slice into an empty one so lists encode as [].
func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}
