-- Each agent's delivery reads what is due to it alone (office.Due with an
-- agent: docs/notes/engine.md), so the pending messages are indexed by
-- agent. Questions (user_questions_agent_status_idx), dependency requests
-- (dependency_requests_agent_idx), results (agent_results_to_agent_idx)
-- and tasks (agent_invocations_callee_idx) have such an index already.

-- +goose Up
create index user_messages_agent_pending_idx on public.user_messages (agent_id, created_at) where status = 'pending';
