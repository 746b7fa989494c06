package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/protocol"
	"github.com/office-server/office-server/proxy"
)

func (o *asks) onQuestion(ctx context.Context, src source, self office.Agent, m protocol.Message) error {
	if ok, err := o.authorize(ctx, src, self, proxy.ActionAskUser, "question"); !ok {
		return err
	}
	q := m.Question
	if q == nil || strings.TrimSpace(q.Question) == "" {
		return o.refuse(ctx, src, self, "question", "it has no question")
	}
	_, err := o.ask(ctx, src, self, office.Question{
		QuestionType: q.Type, Category: q.Category, Question: q.Question, Options: q.Options,
		DefaultAnswer: q.Default, Context: q.Context, Required: q.Required,
	})
	return err
}

// ask stores a question from agent a and marks its session waiting.
func (o *asks) ask(ctx context.Context, src source, a office.Agent, q office.Question) (office.Question, error) {
	if q.QuestionType == "" {
		q.QuestionType = office.QuestionText
		if len(q.Options) > 0 {
			q.QuestionType = office.QuestionSelection
		}
	}
	q.OfficeID, q.AgentID = a.OfficeID, a.ID
	q.SessionID = o.sessionID(ctx, a.ID)
	q.Status = office.QuestionPending
	q.ExpiresAt = o.now().Add(o.ttl(ctx, a.OfficeID))
	if q.Options == nil {
		q.Options = []string{}
	}
	if q.ID == "" {
		q.ID = src.rowID("question/" + q.Category)
	}
	id := q.ID
	q, err := o.store.CreateQuestion(ctx, q)
	if office.IsConflict(err) {
		// Asked already (a replayed message): what it superseded may not
		// have been cancelled yet (a crash in between).
		if was, err := o.store.GetQuestion(ctx, id); err == nil {
			o.supersede(ctx, src, a, was)
		}
		return q, nil
	}
	if err != nil {
		return q, fmt.Errorf("create question: %w", err)
	}
	o.timers.questions.note(q.ExpiresAt)
	o.setSessionStatus(ctx, a, office.SessionWaiting, "", nil)
	_, err = o.event(ctx, a.OfficeID, a.ID, "question.created", map[string]any{"question_id": q.ID, "question": q.Question, "type": q.QuestionType, "options": q.Options, "expires_at": q.ExpiresAt}, "", src.subKey("question/"+q.Category))
	o.supersede(ctx, src, a, q)
	return q, err
}

// supersede cancels the questions still pending that agent a asked before
// q with the same words: an agent that asks again waits for the new
// question only (a restarted agent that starts over asks its first
// question again), so a person sees it once, and no answer goes to a
// question nobody waits for. An answered question keeps its answer and is
// delivered as usual. Each cancelled question gets a question.cancelled
// event with the reason.
func (o *asks) supersede(ctx context.Context, src source, a office.Agent, q office.Question) {
	qs, err := o.store.ListQuestions(ctx, office.QuestionFilter{OfficeID: a.OfficeID, AgentID: a.ID, Status: []string{office.QuestionPending}})
	if err != nil {
		o.log.Warn("list questions asked before", "agent", a.Name, "err", err)
		return
	}
	for _, old := range qs {
		if old.ID == q.ID || old.Category != q.Category || old.CreatedAt.After(q.CreatedAt) ||
			strings.TrimSpace(old.Question) != strings.TrimSpace(q.Question) {
			continue
		}
		ok, err := o.store.CancelPendingQuestion(ctx, old.ID)
		if err != nil {
			o.log.Warn("cancel superseded question", "question", old.ID, "err", err)
			continue
		}
		if ok {
			o.record(ctx, a.OfficeID, a.ID, "question.cancelled", map[string]string{
				"question_id": old.ID, "question": old.Question, "superseded_by": q.ID,
				"reason": fmt.Sprintf("%s asked the same question again (question %s); only the new one is waited for", a.Name, q.ID),
			}, src.subKey("supersede/"+old.ID))
		}
	}
}

func (o *asks) onDependency(ctx context.Context, src source, self office.Agent, m protocol.Message) error {
	if ok, err := o.authorize(ctx, src, self, proxy.ActionDependency, "DEPENDENCY_REQUEST"); !ok {
		return err
	}
	d := m.Dependency
	if d == nil || d.Name == "" {
		return o.refuse(ctx, src, self, "DEPENDENCY_REQUEST", "it has no name")
	}
	dep, err := o.store.CreateDependency(ctx, office.DependencyRequest{
		ID: src.rowID("dependency"), OfficeID: self.OfficeID, AgentID: self.ID, SessionID: o.sessionID(ctx, self.ID),
		Type: d.Type, Name: d.Name, Description: d.Description, Required: d.Required, Default: d.Default,
		Status: office.DependencyPending, ExpiresAt: o.now().Add(o.cfg.DependencyTTL),
	})
	if office.IsConflict(err) {
		return nil // requested already (a replayed message)
	}
	if err != nil {
		return fmt.Errorf("create dependency: %w", err)
	}
	o.timers.dependencies.note(dep.ExpiresAt)
	o.setSessionStatus(ctx, self, office.SessionWaiting, "", nil)
	_, err = o.event(ctx, self.OfficeID, self.ID, "dependency.requested", map[string]any{"dependency_id": dep.ID, "type": dep.Type, "name": dep.Name, "required": dep.Required}, "", src.subKey("dependency"))
	return err
}
