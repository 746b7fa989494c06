package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/protocol"
	"github.com/office-server/office-server/proxy"
)

// The proxy protocol (docs/notes/office.md, "The proxy protocol"): a
// [PROXY_REQUEST] the office accepts is a row (proxy_requests) before
// anything else happens, so a request waiting for its proxy survives a
// restart and times out. Its fallback chain: the preferred proxy, the
// other capable proxies (by task type, priority, load), then a backup
// file under the data dir, then a person. The tasks a proxy takes are
// rows too (proxy_tasks): they count in its load until the proxy or the
// requester closes them with update_status.

func (pw *proxyWork) onProxy(ctx context.Context, src source, self office.Agent, m protocol.Message) error {
	if m.Proxy == nil {
		return pw.refuse(ctx, src, self, "PROXY_REQUEST", "it has no JSON body")
	}
	body := []byte(m.Proxy.Payload)
	req, err := proxy.ParseAction(body)
	if err != nil {
		return pw.refuse(ctx, src, self, "PROXY_REQUEST", err.Error())
	}
	if !strings.EqualFold(req.Requester, self.Name) {
		return pw.refuse(ctx, src, self, "PROXY_REQUEST", fmt.Sprintf("requester is %q but you are %s", req.Requester, self.Name))
	}
	if ok, err := pw.authorize(ctx, src, self, req.Action, "PROXY_REQUEST "+req.Action); !ok {
		return err
	}
	if err := req.Screen(pw.cfg.ContentRules); err != nil {
		return pw.refuse(ctx, src, self, "PROXY_REQUEST", err.Error())
	}
	if req.Action == proxy.ActionUpdateStatus {
		if done, err := pw.updateProxyTask(ctx, src, self, req); done || err != nil {
			return err
		}
		// A task the office does not hold (kept by a proxy before, or by
		// hand): the update goes to a proxy like any request.
	}
	row, err := pw.store.CreateProxyRequest(ctx, office.ProxyRequest{
		ID: src.rowID("proxy"), OfficeID: self.OfficeID, RequesterAgentID: self.ID, Action: req.Action,
		Payload: json.RawMessage(body), Status: office.ProxyParked, ExpiresAt: pw.now().Add(pw.cfg.ProxyWait),
	})
	if office.IsConflict(err) {
		return nil // accepted already (a replayed message); the ticker carries it on
	}
	if err != nil {
		return fmt.Errorf("create proxy request: %w", err)
	}
	pw.timers.parked.more()
	return pw.advanceProxy(ctx, self, row, req, true)
}

// advanceProxy walks a parked request's fallback chain once: to the proxy
// the selector picks (assigned), or to the backup file and a person when no
// proxy can ever take it; else it stays parked, and on the first attempt
// the requester is told it waits and until when.
func (pw *proxyWork) advanceProxy(ctx context.Context, requester office.Agent, row office.ProxyRequest, req proxy.ActionRequest, first bool) error {
	reg, _, err := pw.roster.registry(ctx, row.OfficeID)
	if err != nil {
		return err
	}
	sreq := req.Request(requester.ID)
	d := reg.Select(sreq)
	for d.Outcome == proxy.Assign && !d.Agent.Allowed(proxy.ActionProxy) { // a proxy must be allowed to act as one
		sreq.Exclude = append(sreq.Exclude, d.Agent.ID)
		d = reg.Select(sreq)
	}
	switch d.Outcome {
	case proxy.AskUser:
		return pw.backupProxy(ctx, requester, row, req, office.ProxyBackedUp, "no proxy can take it: "+d.Reason)
	case proxy.Park:
		if !first {
			return nil // still waiting
		}
		waitFor := d.Waiting[0]
		row, ok, err := pw.store.TransitionProxyRequest(ctx, row.ID, []string{office.ProxyParked}, office.ProxyParked,
			office.ProxyRequestPatch{ProxyAgentID: waitFor.ID, Reason: d.Reason})
		if err != nil || !ok {
			return err
		}
		pw.respondProxy(requester, row, proxy.Response{Status: office.ProxyParked, Proxy: waitFor.Name, ExpiresAt: row.ExpiresAt.UTC().Format(time.RFC3339),
			Error:   "no proxy can take it now: " + d.Reason,
			Message: fmt.Sprintf("Your request %s waits for a proxy (%s). The office hands it over as soon as one is free, or at %s tells you it timed out.", row.ID, d.Reason, row.ExpiresAt.UTC().Format(time.RFC3339))})
		_, err = pw.events.event(ctx, row.OfficeID, requester.ID, "proxy.parked", map[string]string{"request_id": row.ID, "action": req.Action, "waiting_for": waitFor.Name, "reason": d.Reason, "expires_at": row.ExpiresAt.UTC().Format(time.RFC3339)}, "", "")
		return err
	}

	proxyAgent, err := pw.store.GetAgent(ctx, d.Agent.ID)
	if err != nil {
		return err
	}
	var (
		tasks []office.ProxyTask
		lines []string
		ok    bool
	)
	for salt := 0; ; salt++ {
		tasks, lines = proxyTasks(requester, row, req, proxyAgent.ID, salt)
		var claimed office.ProxyRequest
		claimed, ok, err = pw.store.TransitionProxyRequest(ctx, row.ID, []string{office.ProxyParked}, office.ProxyAssigned,
			office.ProxyRequestPatch{ProxyAgentID: proxyAgent.ID, Reason: d.String(), Tasks: tasks})
		if office.IsConflict(err) && salt < maxTaskIDSalt {
			continue // a task ID taken in the office already: name the tasks again
		}
		row = claimed
		break
	}
	if err != nil || !ok {
		return err // !ok: another attempt (the ticker, another server) took it
	}
	pw.delivery.ensureStarted(ctx, proxyAgent) // the request is typed when it is ready
	resp := proxy.Response{Success: true, Proxy: proxyAgent.Name, Status: office.ProxyAssigned}
	for _, t := range tasks {
		resp.TaskIDs = append(resp.TaskIDs, t.ID)
	}
	resp.TasksCreated = len(tasks)
	pw.notify(proxyAgent, fmt.Sprintf("Proxy request from %s (%s, request %s). Record these in your todo list with your todo tools:\n%s\n"+
		"They count as your work until they are closed: when one is done, print a PROXY_REQUEST block with "+
		`{"action": "update_status", "requester": "%s", "task_id": "<id>", "status": "completed"}.`,
		requester.Name, req.Action, row.ID, quote(strings.Join(lines, "\n")), proxyAgent.Name))
	pw.respondProxy(requester, row, resp)
	_, err = pw.events.event(ctx, row.OfficeID, requester.ID, "proxy.handled", map[string]any{"request_id": row.ID, "proxy": proxyAgent.Name, "task_ids": resp.TaskIDs, "selection": d.String()}, "", "")
	return err
}

// proxyTasks returns the tasks of a create_plan held by proxyID ("" for
// the backup file), and the lines that tell a proxy what to record. Task
// IDs are "<requester initials>-<hex>", the hex derived from the request's
// ID and the task's place: every attempt at a request (the first, the
// ticker's, another server's) names its tasks alike, so whichever wins,
// the backup file and the response agree. Six hex digits collide now and
// then in a busy office: a taken ID makes the caller try again with the
// next salt (at most maxTaskIDSalt times).
func proxyTasks(requester office.Agent, row office.ProxyRequest, req proxy.ActionRequest, proxyID string, salt int) ([]office.ProxyTask, []string) {
	var tasks []office.ProxyTask
	var lines []string
	switch req.Action {
	case proxy.ActionCreatePlan:
		prefix := initials(requester.Name)
		for i, t := range req.Tasks {
			pr := strings.ToLower(t.Priority)
			if pr == "" {
				pr = "medium"
			}
			id := prefix + "-" + uuid.NewSHA1(rowNamespace, fmt.Appendf(nil, "%s\x00task\x00%d\x00%d", row.ID, i, salt)).String()[:6]
			tasks = append(tasks, office.ProxyTask{ID: id, ProxyAgentID: proxyID, Content: t.Content, Priority: pr, Status: office.ProxyTaskPending})
			line := fmt.Sprintf("- %s (priority %s): %s", id, pr, t.Content)
			if t.EstimatedTime != "" {
				line += " [estimated " + t.EstimatedTime + "]"
			}
			if len(t.Dependencies) > 0 {
				line += " [after " + strings.Join(t.Dependencies, ", ") + "]"
			}
			lines = append(lines, line)
		}
	case proxy.ActionUpdateStatus:
		lines = append(lines, fmt.Sprintf("- %s → %s", req.TaskID, req.Status))
		if len(req.Metadata) > 0 {
			lines = append(lines, "  metadata: "+string(req.Metadata))
		}
	}
	return tasks, lines
}

// respondProxy types a [PROXY_RESPONSE] into the requester: the response
// JSON of docs/protocol.md "Proxy requests" with the office's additions
// (proxy.Response).
func (pw *proxyWork) respondProxy(requester office.Agent, row office.ProxyRequest, resp proxy.Response) {
	resp.Requester, resp.RequestID = requester.Name, row.ID
	if resp.TaskIDs == nil {
		resp.TaskIDs = []string{}
	}
	resp.ExecutionTime = fmt.Sprintf("%.1fs", pw.now().Sub(row.CreatedAt).Seconds())
	pw.notify(requester, "[PROXY_RESPONSE]\n"+mustJSON(resp)+"\n[/PROXY_RESPONSE]")
}

// backupProxy is the end of the fallback chain: the request is written to
// its backup file, marked status (backed_up, or timed_out for a parked
// request that waited too long), a person is asked to handle it by hand,
// and the requester is told where the file is.
func (pw *proxyWork) backupProxy(ctx context.Context, requester office.Agent, row office.ProxyRequest, req proxy.ActionRequest, status, why string) error {
	var (
		tasks []office.ProxyTask
		path  string
		ok    bool
		err   error
	)
	for salt := 0; ; salt++ {
		tasks, _ = proxyTasks(requester, row, req, "", salt)
		reason := why
		var werr error
		path, werr = pw.writeProxyBackup(requester, row, tasks, status, why)
		if werr != nil {
			// The row keeps the request whatever happens to the file; the
			// person is still asked.
			pw.log.Error("write proxy backup", "request", row.ID, "err", werr)
			reason += "; the backup file could not be written"
		}
		var claimed office.ProxyRequest
		claimed, ok, err = pw.store.TransitionProxyRequest(ctx, row.ID, []string{office.ProxyParked}, status,
			office.ProxyRequestPatch{Reason: reason, BackupPath: path, Tasks: tasks})
		if office.IsConflict(err) && salt < maxTaskIDSalt {
			continue
		}
		row, why = claimed, reason
		break
	}
	if err != nil || !ok {
		return err
	}
	resp := proxy.Response{Status: status, BackupFile: path, Error: why, TasksCreated: len(tasks)}
	for _, t := range tasks {
		resp.TaskIDs = append(resp.TaskIDs, t.ID)
	}
	where := "the request is kept in the office's records"
	if path != "" {
		where = "the request was written to " + path
	}
	resp.Message = fmt.Sprintf("No proxy took request %s; %s and a person was asked to handle it by hand.", row.ID, where)
	q := office.Question{
		ID:           uuid.NewSHA1(rowNamespace, []byte(row.ID+"\x00proxy-backup")).String(),
		QuestionType: office.QuestionText, Category: "proxy", Required: false,
		Question: fmt.Sprintf("%s asked for %s, but no agent could act as its proxy (%s). Please handle it by hand; %s.", requester.Name, req.Action, why, where),
		Context:  string(row.Payload),
	}
	_, err = pw.asks.ask(ctx, source{}, requester, q)
	pw.respondProxy(requester, row, resp) // the row says what became of it, even if the question failed
	if err != nil {
		return err
	}
	_, err = pw.events.event(ctx, row.OfficeID, requester.ID, "proxy."+status, map[string]any{"request_id": row.ID, "action": req.Action, "reason": why, "backup_file": path, "task_ids": resp.TaskIDs}, "", "")
	return err
}

// proxyBackup is the content of a backup file: the request (docs/protocol.md,
// "Proxy requests") as the requester sent it, and why it is here.
type proxyBackup struct {
	RequestID string          `json:"request_id"`
	OfficeID  string          `json:"office_id"`
	Requester string          `json:"requester"`
	Status    string          `json:"status"`
	Reason    string          `json:"reason"`
	WrittenAt time.Time       `json:"written_at"`
	Request   json.RawMessage `json:"request"`
	Tasks     []backupTask    `json:"tasks,omitempty"`
}

// backupTask is a task as the backup file lists it.
type backupTask struct {
	ID       string `json:"id"`
	Content  string `json:"content"`
	Priority string `json:"priority"`
	Status   string `json:"status"`
}

// proxyBackupPath is where a request's backup file goes:
// <data dir>/<office>/.proxy-backup/<request id>.json. The directory
// starts with a dot, which no agent name does, so it is never an agent's
// workspace.
func (pw *proxyWork) proxyBackupPath(officeID, requestID string) (string, error) {
	base := pw.cfg.DataDir
	if base == "" {
		base = "office-data" // as office.Workspace
	}
	for _, elem := range []string{officeID, requestID} {
		if elem == "" || elem != filepath.Base(elem) || strings.HasPrefix(elem, ".") {
			return "", fmt.Errorf("%q cannot name a file", elem)
		}
	}
	return filepath.Abs(filepath.Join(base, officeID, ".proxy-backup", requestID+".json"))
}

// writeProxyBackup writes the backup file (0600, in a 0700 directory;
// written whole to a temporary file and renamed, so a reader never sees
// half a file) and returns its absolute path.
func (pw *proxyWork) writeProxyBackup(requester office.Agent, row office.ProxyRequest, tasks []office.ProxyTask, status, why string) (string, error) {
	path, err := pw.proxyBackupPath(row.OfficeID, row.ID)
	if err != nil {
		return "", err
	}
	f := proxyBackup{RequestID: row.ID, OfficeID: row.OfficeID, Requester: requester.Name, Status: status,
		Reason: why, WrittenAt: pw.now().UTC(), Request: row.Payload}
	for _, t := range tasks {
		f.Tasks = append(f.Tasks, backupTask{ID: t.ID, Content: t.Content, Priority: t.Priority, Status: t.Status})
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name()) // after a successful rename: nothing to remove
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return path, os.Rename(tmp.Name(), path)
}

// updateProxyTask applies an update_status to a task the office holds:
// only its requester or its proxy may change it; the other one is told.
// done is false when the office holds no task with that ID.
func (pw *proxyWork) updateProxyTask(ctx context.Context, src source, self office.Agent, req proxy.ActionRequest) (done bool, err error) {
	ts, err := pw.store.ListProxyTasks(ctx, office.ProxyTaskFilter{OfficeID: self.OfficeID, ID: req.TaskID})
	if err != nil {
		return true, fmt.Errorf("list proxy tasks: %w", err)
	}
	if len(ts) == 0 {
		return false, nil
	}
	t := ts[0]
	names := func(id string) string {
		if a, err := pw.store.GetAgent(ctx, id); err == nil {
			return a.Name
		}
		return id
	}
	if self.ID != t.RequesterAgentID && self.ID != t.ProxyAgentID {
		why := fmt.Sprintf("task %s belongs to %s", t.ID, names(t.RequesterAgentID))
		if t.ProxyAgentID != "" {
			why += " and is kept by " + names(t.ProxyAgentID)
		}
		return true, pw.refuse(ctx, src, self, "PROXY_REQUEST update_status", why+"; only they may update it")
	}
	t, ok, err := pw.store.SetProxyTaskStatus(ctx, self.OfficeID, t.ID, req.Status)
	if err != nil || !ok || src.replay {
		return true, err // a replay sets the same status again and tells nobody twice
	}
	if t.ProxyAgentID != "" {
		pw.timers.handOver() // its proxy may be free now
	}
	row, err := pw.store.GetProxyRequest(ctx, t.RequestID)
	if err != nil {
		return true, fmt.Errorf("proxy request of task %s: %w", t.ID, err)
	}
	resp := proxy.Response{Success: true, Status: "updated", TaskIDs: []string{t.ID}}
	line := fmt.Sprintf("- %s → %s", t.ID, t.Status)
	if len(req.Metadata) > 0 {
		line += "\n  metadata: " + string(req.Metadata)
	}
	switch {
	case t.ProxyAgentID == "":
		resp.BackupFile = row.BackupPath
		resp.Message = fmt.Sprintf("Task %s is now %s. No proxy keeps it (it is in the backup file).", t.ID, t.Status)
	case self.ID == t.RequesterAgentID:
		p, err := pw.store.GetAgent(ctx, t.ProxyAgentID)
		if err != nil {
			return true, err
		}
		resp.Proxy = p.Name
		resp.Message = fmt.Sprintf("Task %s is now %s; %s was told.", t.ID, t.Status, p.Name)
		pw.notify(p, fmt.Sprintf("Proxy request from %s (update_status). Update your todo list:\n%s", self.Name, quote(line)))
	default: // the proxy reports
		resp.Proxy = self.Name
		resp.Message = fmt.Sprintf("Task %s is now %s; %s was told.", t.ID, t.Status, names(t.RequesterAgentID))
		if r, err := pw.store.GetAgent(ctx, t.RequesterAgentID); err == nil {
			pw.notify(r, fmt.Sprintf("[OFFICE] %s updated a task it keeps for you:\n%s", self.Name, quote(line)))
		}
	}
	pw.respondProxy(self, row, resp)
	_, err = pw.events.event(ctx, self.OfficeID, self.ID, "proxy.task_updated", map[string]string{"task_id": t.ID, "status": t.Status, "request_id": t.RequestID}, "", src.subKey("proxy-task"))
	return true, err
}

// proxyTick carries every parked request of the offices this server runs
// one step: timed out (backed up, a person asked, the requester told), or
// handed to a proxy that is free now.
func (pw *proxyWork) proxyTick(ctx context.Context, now time.Time) {
	gen, due := pw.timers.parked.check()
	if !due {
		return
	}
	rows, err := pw.store.ListProxyRequests(ctx, office.ProxyRequestFilter{Status: []string{office.ProxyParked}})
	if err != nil {
		if ctx.Err() == nil {
			pw.log.Warn("list parked proxy requests", "err", err)
		}
		return
	}
	if !slices.ContainsFunc(rows, func(r office.ProxyRequest) bool { return pw.roster.serves(r.OfficeID) }) {
		pw.timers.parked.quiet(gen)
		return
	}
	// Oldest first, and a request never overtakes an older one still
	// waiting for the same proxy (a proxy freed in the middle of a pass
	// goes to the one that waited longest).
	waiting := map[string]bool{}
	for _, row := range rows {
		if !pw.roster.serves(row.OfficeID) || (row.ProxyAgentID != "" && waiting[row.ProxyAgentID] && now.Before(row.ExpiresAt)) {
			continue
		}
		if err := pw.proxyStep(ctx, now, row); err != nil && ctx.Err() == nil {
			pw.log.Warn("parked proxy request", "request", row.ID, "err", err)
		}
		if row.ProxyAgentID != "" {
			if cur, err := pw.store.GetProxyRequest(ctx, row.ID); err != nil || cur.Status == office.ProxyParked {
				waiting[row.ProxyAgentID] = true
			}
		}
	}
}

func (pw *proxyWork) proxyStep(ctx context.Context, now time.Time, row office.ProxyRequest) error {
	requester, err := pw.store.GetAgent(ctx, row.RequesterAgentID)
	if err != nil {
		return err
	}
	req, err := proxy.ParseAction(row.Payload)
	if err != nil {
		return pw.backupProxy(ctx, requester, row, req, office.ProxyBackedUp, "the stored request no longer parses: "+err.Error())
	}
	if !now.Before(row.ExpiresAt) {
		why := fmt.Sprintf("timed out after waiting %s for a proxy", row.ExpiresAt.Sub(row.CreatedAt).Round(time.Second))
		if row.Reason != "" {
			why += " (" + row.Reason + ")"
		}
		return pw.backupProxy(ctx, requester, row, req, office.ProxyTimedOut, why)
	}
	return pw.advanceProxy(ctx, requester, row, req, false)
}

const maxTaskIDSalt = 8

// parkHint saves the ticker a store query a tick while nothing is parked
// (an idle server's requests to Supabase are counted): a parked request
// exists only if this server created one (onProxy) or took an office
// (CatchUp) since the last query found none, or it never queried yet.
type parkHint struct {
	gen  atomic.Uint64 // bumped by more
	idle atomic.Uint64 // gen+1 of the last query that found nothing
}

// more says a parked request may exist now.
func (h *parkHint) more() { h.gen.Add(1) }

// check returns the current generation and whether the ticker should look.
func (h *parkHint) check() (gen uint64, due bool) {
	gen = h.gen.Load()
	return gen, h.idle.Load() != gen+1
}

// quiet records that a query begun at generation gen found nothing.
func (h *parkHint) quiet(gen uint64) { h.idle.Store(gen + 1) }

func initials(name string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == '-' || r == '_' || r == ' ' }) {
		b.WriteByte(part[0])
	}
	if b.Len() == 0 {
		return "t"
	}
	return b.String()
}
