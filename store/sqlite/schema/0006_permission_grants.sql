-- migrations/20261128000000_permission_grants.sql in SQLite's terms:
-- "allow for this session" answers, kept across restarts.

create table permission_grants (
  office_id       text not null,
  agent_id        text not null,
  conversation_id text not null check (conversation_id <> ''),
  rule            text not null check (rule <> '' and length(rule) <= 4000),
  question_id     text,
  created_at      text not null,
  primary key (agent_id, conversation_id, rule),
  foreign key (office_id, agent_id) references office_agents (office_id, id) on delete cascade
);
