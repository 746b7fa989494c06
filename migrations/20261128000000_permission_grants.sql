-- "Allow for this session" answers to permission requests
-- (docs/notes/permissions.md): a rule an agent's conversation may use
-- without asking. A row, not the server's memory, so that a restart of the
-- server (or of the agent's process), which resumes the conversation,
-- keeps it; the server deletes an agent's rows when its conversation
-- starts afresh.

-- +goose Up
create table public.permission_grants (
  office_id       uuid not null,
  agent_id        uuid not null,
  conversation_id text not null check (conversation_id <> ''),
  rule            text not null check (rule <> '' and length(rule) <= 4000),
  question_id     uuid,
  created_at      timestamptz not null default now(),
  primary key (agent_id, conversation_id, rule),
  foreign key (office_id, agent_id) references public.office_agents (office_id, id) on delete cascade
);

-- The server's own state: the server (service_role) reads and writes it;
-- members see the grant in the answered question and its event, not here.
alter table public.permission_grants enable row level security;
revoke all on table public.permission_grants from anon, authenticated;
grant all on table public.permission_grants to service_role;
