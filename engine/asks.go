package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/office-server/office-server/office"
	"github.com/office-server/office-server/protocol"
	"github.com/office-server/office-server/proxy"
)

func (as *asks) onQuestion(ctx context.Context, src source, self office.Agent, m protocol.Message) error {
	if ok, err := as.authorize(ctx, src, self, proxy.ActionAskUser, "question"); !ok {
		return err
	}
	q := m.Question
	if q == nil || strings.TrimSpace(q.Question) == "" {
		return as.refuse(ctx, src, self, "question", "it has no question")
	}
	_, err := as.ask(ctx, src, self, office.Question{
		QuestionType: q.Type, Category: q.Category, Question: q.Question, Options: q.Options,
		DefaultAnswer: q.Default, Context: q.Context, Required: q.Required,
	})
	return err
}

// ask stores a question from agent a, marks its session waiting and
// records question.created, after the event of the message that asked it
// (src.message), in one write (office.Store AskQuestion), and cancels the
// questions it supersedes.
func (as *asks) ask(ctx context.Context, src source, a office.Agent, q office.Question) (office.Question, error) {
	if q.QuestionType == "" {
		q.QuestionType = office.QuestionText
		if len(q.Options) > 0 {
			q.QuestionType = office.QuestionSelection
		}
	}
	q.OfficeID, q.AgentID = a.OfficeID, a.ID
	if q.Options == nil {
		q.Options = []string{}
	}
	if q.ID == "" {
		q.ID = src.rowID("question/" + q.Category)
	}
	if q.ID == "" {
		q.ID = uuid.NewString() // not from a message (a question asked again after an invalid answer)
	}
	q, pending, events, created, err := as.store.AskQuestion(ctx, office.Ask{Question: q, TTL: as.cfg.QuestionTTL, At: as.now(),
		EventKind: "question.created", EventDedupeKey: src.subKey("question/" + q.Category), Message: src.message()})
	if err != nil {
		return q, fmt.Errorf("ask question: %w", err)
	}
	src.carried(events)
	for _, ev := range events {
		as.events.publish(ev)
	}
	if created {
		as.timers.questions.note(q.ExpiresAt)
	}
	// Asked already (a replayed message): what it superseded may not have
	// been cancelled yet (a crash in between).
	as.supersede(ctx, src, a, q, pending)
	return q, nil
}

// supersede cancels the questions still pending (of pending, the agent's)
// that agent a asked before q with the same words: an agent that asks
// again waits for the new question only (a restarted agent that starts
// over asks its first question again), so a person sees it once, and no
// answer goes to a question nobody waits for. An answered question keeps
// its answer and is delivered as usual. Each cancelled question gets a
// question.cancelled event with the reason.
func (as *asks) supersede(ctx context.Context, src source, a office.Agent, q office.Question, pending []office.Question) {
	for _, old := range pending {
		if old.ID == q.ID || old.Category != q.Category || old.CreatedAt.After(q.CreatedAt) ||
			strings.TrimSpace(old.Question) != strings.TrimSpace(q.Question) {
			continue
		}
		ok, err := as.store.CancelPendingQuestion(ctx, old.ID)
		if err != nil {
			as.log.Warn("cancel superseded question", "question", old.ID, "err", err)
			continue
		}
		if ok {
			as.events.record(ctx, a.OfficeID, a.ID, "question.cancelled", map[string]string{
				"question_id": old.ID, "question": old.Question, "superseded_by": q.ID,
				"reason": fmt.Sprintf("%s asked the same question again (question %s); only the new one is waited for", a.Name, q.ID),
			}, src.subKey("supersede/"+old.ID))
		}
	}
}

func (as *asks) onDependency(ctx context.Context, src source, self office.Agent, m protocol.Message) error {
	if ok, err := as.authorize(ctx, src, self, proxy.ActionDependency, "DEPENDENCY_REQUEST"); !ok {
		return err
	}
	d := m.Dependency
	if d == nil || d.Name == "" {
		return as.refuse(ctx, src, self, "DEPENDENCY_REQUEST", "it has no name")
	}
	dep, err := as.store.CreateDependency(ctx, office.DependencyRequest{
		ID: src.rowID("dependency"), OfficeID: self.OfficeID, AgentID: self.ID, SessionID: as.roster.sessionID(ctx, self.ID),
		Type: d.Type, Name: d.Name, Description: d.Description, Required: d.Required, Default: d.Default,
		Status: office.DependencyPending, ExpiresAt: as.now().Add(as.cfg.DependencyTTL),
	})
	if office.IsConflict(err) {
		return nil // requested already (a replayed message)
	}
	if err != nil {
		return fmt.Errorf("create dependency: %w", err)
	}
	as.timers.dependencies.note(dep.ExpiresAt)
	as.setSessionStatus(ctx, self, office.SessionWaiting, "", nil)
	_, err = as.events.event(ctx, self.OfficeID, self.ID, "dependency.requested", map[string]any{"dependency_id": dep.ID, "type": dep.Type, "name": dep.Name, "required": dep.Required}, "", src.subKey("dependency"))
	return err
}
