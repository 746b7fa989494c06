-- The office's tables for the embedded store: the same tables, columns and
-- constraints as migrations/20261122000100_office_schema.sql (docs/protocol.md, Tables),
-- in SQLite's terms:
--   * uuid, text[]         → TEXT (arrays as JSON text)
--   * jsonb                → TEXT holding JSON
--   * bytea                → BLOB
--   * timestamptz          → TEXT, UTC, fixed width '2006-01-02T15:04:05.000000Z',
--                            so text order is time order
--   * interval question_ttl → INTEGER microseconds
-- office_members and row-level security have no counterpart: the embedded
-- store has one user, the server.

create table offices (
  id           text primary key,
  name         text not null check (name <> ''),
  question_ttl integer not null default 0 check (question_ttl >= 0),
  created_at   text not null,
  updated_at   text not null,
  constraint offices_name_key unique (name)
);

create table office_agents (
  id              text primary key,
  office_id       text not null references offices (id) on delete cascade,
  name            text not null check (name <> '' and length(name) <= 200),
  role            text not null default '',
  capabilities    text not null default '[]' check (json_type(capabilities) = 'array'),
  priority        integer not null default 0,
  expertise       text not null default '[]' check (json_type(expertise) = 'array'),
  allowed_actions text not null default '[]' check (json_type(allowed_actions) = 'array'),
  max_load        integer not null default 0 check (max_load >= 0),
  launch_spec     text not null default '{}' check (json_type(launch_spec) = 'object'),
  status          text not null default 'idle' check (status in ('idle', 'active', 'disabled', 'failed')),
  created_at      text not null,
  updated_at      text not null,
  constraint office_agents_office_id_id_key unique (office_id, id)
);
-- lower() folds ASCII only in SQLite (Postgres folds all of Unicode).
create unique index office_agents_office_id_lower_name_key on office_agents (office_id, lower(name));

create table agent_sessions (
  id               text primary key,
  office_id        text not null,
  agent_id         text not null,
  node             text not null default '',
  pid              integer not null default 0,
  status           text not null default 'starting'
                   check (status in ('starting', 'ready', 'busy', 'waiting', 'stopped', 'exited', 'crashed', 'failed')),
  agent_session_id text not null default '',
  started_at       text,
  last_output_at   text,
  exit_code        integer,
  created_at       text not null,
  updated_at       text not null,
  constraint agent_sessions_agent_id_key unique (agent_id),
  foreign key (office_id, agent_id) references office_agents (office_id, id) on delete cascade
);
create index agent_sessions_office_id_idx on agent_sessions (office_id);

create table user_questions (
  id             text primary key,
  office_id      text not null,
  agent_id       text not null,
  session_id     text,
  question_type  text not null default 'text' check (question_type in ('text', 'selection', 'confirmation')),
  category       text,
  question       text not null check (question <> ''),
  options        text not null default '[]' check (json_type(options) = 'array'),
  default_answer text,
  context        text,
  required       integer not null default 0 check (required in (0, 1)),
  status         text not null default 'pending'
                 check (status in ('pending', 'answered', 'delivered', 'expired', 'cancelled')),
  response       text check (length(response) <= 65536),
  answered_by    text,
  answered_at    text,
  delivered_at   text,
  expires_at     text not null,
  created_at     text not null,
  updated_at     text not null,
  foreign key (office_id, agent_id) references office_agents (office_id, id) on delete cascade,
  constraint user_questions_answer_check
    check (status not in ('answered', 'delivered') or (response is not null and answered_at is not null)),
  constraint user_questions_delivered_check
    check (status <> 'delivered' or delivered_at is not null)
);
create index user_questions_office_status_idx on user_questions (office_id, status, created_at);
create index user_questions_agent_status_idx on user_questions (agent_id, status);
create index user_questions_pending_expiry_idx on user_questions (expires_at) where status = 'pending';
create index user_questions_answered_idx on user_questions (created_at) where status = 'answered';

create table user_messages (
  id           text primary key,
  office_id    text not null,
  agent_id     text not null,
  user_id      text,
  content      text not null check (content <> '' and length(content) <= 65536),
  status       text not null default 'pending' check (status in ('pending', 'delivered')),
  delivered_at text,
  created_at   text not null,
  updated_at   text not null,
  foreign key (office_id, agent_id) references office_agents (office_id, id) on delete cascade,
  constraint user_messages_delivered_check check (status <> 'delivered' or delivered_at is not null)
);
create index user_messages_office_idx on user_messages (office_id, created_at);
create index user_messages_pending_idx on user_messages (created_at) where status = 'pending';

create table agent_invocations (
  id                   text primary key,
  office_id            text not null,
  caller_agent_id      text not null,
  callee_agent_id      text not null,
  parent_invocation_id text references agent_invocations (id) on delete set null,
  depth                integer not null default 0 check (depth >= 0),
  reason               text not null check (reason <> ''),
  context              text,
  status               text not null default 'pending'
                       check (status in ('pending', 'in_progress', 'completed', 'failed', 'cancelled', 'rejected')),
  result_id            text, -- agent_results.id; no foreign key: results reference invocations
  error                text,
  started_at           text,
  completed_at         text,
  created_at           text not null,
  updated_at           text not null,
  foreign key (office_id, caller_agent_id) references office_agents (office_id, id) on delete cascade,
  foreign key (office_id, callee_agent_id) references office_agents (office_id, id) on delete cascade
);
create index agent_invocations_office_idx on agent_invocations (office_id, created_at);
create index agent_invocations_open_idx on agent_invocations (caller_agent_id, callee_agent_id, created_at)
  where status in ('pending', 'in_progress');
create index agent_invocations_callee_idx on agent_invocations (callee_agent_id, status);
create index agent_invocations_parent_idx on agent_invocations (parent_invocation_id);

create table agent_results (
  id            text primary key,
  office_id     text not null,
  invocation_id text references agent_invocations (id) on delete set null,
  from_agent_id text not null,
  to_agent_id   text not null,
  result_type   text not null default 'message' check (result_type <> ''),
  content_type  text not null default 'text/plain',
  content       text not null,
  status        text not null default 'pending' check (status in ('pending', 'delivered')),
  delivered_at  text,
  created_at    text not null,
  updated_at    text not null,
  foreign key (office_id, from_agent_id) references office_agents (office_id, id) on delete cascade,
  foreign key (office_id, to_agent_id) references office_agents (office_id, id) on delete cascade,
  constraint agent_results_delivered_check check (status <> 'delivered' or delivered_at is not null)
);
create index agent_results_office_idx on agent_results (office_id, created_at);
create index agent_results_to_agent_idx on agent_results (to_agent_id, status, created_at);
create index agent_results_invocation_idx on agent_results (invocation_id);

create table dependency_requests (
  id               text primary key,
  office_id        text not null,
  agent_id         text not null,
  session_id       text,
  type             text not null check (type <> ''),
  name             text not null check (name <> ''),
  description      text,
  required         integer not null default 0 check (required in (0, 1)),
  "default"        text,
  status           text not null default 'pending' check (status in ('pending', 'provided', 'rejected', 'expired')),
  value            blob, -- encrypted by the office for secret types; opaque here
  rejection_reason text,
  expires_at       text not null,
  provided_at      text,
  delivered_at     text,
  created_at       text not null,
  updated_at       text not null,
  foreign key (office_id, agent_id) references office_agents (office_id, id) on delete cascade,
  constraint dependency_requests_provided_check check (status <> 'provided' or provided_at is not null),
  constraint dependency_requests_delivered_check check (delivered_at is null or status <> 'pending')
);
create index dependency_requests_office_status_idx on dependency_requests (office_id, status, created_at);
create index dependency_requests_agent_idx on dependency_requests (agent_id, status);
create index dependency_requests_pending_expiry_idx on dependency_requests (expires_at) where status = 'pending';
create index dependency_requests_undelivered_idx on dependency_requests (created_at)
  where status in ('provided', 'rejected', 'expired') and delivered_at is null;

create table office_events (
  id         integer primary key autoincrement, -- increasing, never reused
  office_id  text not null references offices (id) on delete cascade,
  agent_id   text, -- no foreign key: the audit log outlives deleted agents
  session_id text,
  kind       text not null check (kind <> ''),
  payload    text check (payload is null or json_valid(payload)),
  raw        text,
  dedupe_key text,
  created_at text not null
);
create unique index office_events_dedupe_key on office_events (office_id, dedupe_key) where dedupe_key is not null;
create index office_events_office_idx on office_events (office_id, id);
create index office_events_agent_idx on office_events (agent_id, id);
