-- migrations/20261124000000_due_by_agent.sql in SQLite's terms: each
-- agent's delivery reads its own pending messages through an index.

create index user_messages_agent_pending_idx on user_messages (agent_id, created_at) where status = 'pending';
