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
	q, err := o.store.CreateQuestion(ctx, q)
	if office.IsConflict(err) {
		return q, nil // asked already (a replayed message)
	}
	if err != nil {
		return q, fmt.Errorf("create question: %w", err)
	}
	o.sweep.questions.note(q.ExpiresAt)
	o.setSessionStatus(ctx, a, office.SessionWaiting)
	_, err = o.event(ctx, a.OfficeID, a.ID, "question.created", map[string]any{"question_id": q.ID, "question": q.Question, "type": q.QuestionType, "options": q.Options, "expires_at": q.ExpiresAt}, "", src.subKey("question/"+q.Category))
	return q, err
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
	o.sweep.dependencies.note(dep.ExpiresAt)
	o.setSessionStatus(ctx, self, office.SessionWaiting)
	_, err = o.event(ctx, self.OfficeID, self.ID, "dependency.requested", map[string]any{"dependency_id": dep.ID, "type": dep.Type, "name": dep.Name, "required": dep.Required}, "", src.subKey("dependency"))
	return err
}
