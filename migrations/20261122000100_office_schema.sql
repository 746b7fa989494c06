-- The office's tables (docs/protocol.md, Tables). Table and column names are
-- the web frontend's contract and match office/model.go.
--
-- Every agent-owned row carries office_id and agent_id and references
-- office_agents by the pair (office_id, id), so a row can never claim one
-- office and an agent of another; row-level security relies on that.

-- +goose Up
-- +goose StatementBegin
create function public.office_set_updated_at() returns trigger
language plpgsql
as $$
begin
  new.updated_at := now();
  return new;
end
$$;
-- +goose StatementEnd

create table public.offices (
  id           uuid primary key default gen_random_uuid(),
  name         text not null check (name <> ''),
  -- how long an ASK_USER question waits; 0: the server's default
  question_ttl interval not null default interval '0' check (question_ttl >= interval '0'),
  created_at   timestamptz not null default now(),
  updated_at   timestamptz not null default now(),
  constraint offices_name_key unique (name)
);

create table public.office_members (
  office_id  uuid not null references public.offices (id) on delete cascade,
  user_id    uuid not null references auth.users (id) on delete cascade,
  role       text not null default 'member' check (role in ('owner', 'admin', 'member')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (office_id, user_id)
);
create index office_members_user_id_idx on public.office_members (user_id);

create table public.office_agents (
  id              uuid primary key default gen_random_uuid(),
  office_id       uuid not null references public.offices (id) on delete cascade,
  name            text not null check (name <> '' and length(name) <= 200),
  role            text not null default '',
  capabilities    text[] not null default '{}',
  priority        integer not null default 0,
  expertise       text[] not null default '{}',
  allowed_actions text[] not null default '{}',
  max_load        integer not null default 0 check (max_load >= 0),
  launch_spec     jsonb not null default '{}' check (jsonb_typeof(launch_spec) = 'object'),
  status          text not null default 'idle' check (status in ('idle', 'active', 'disabled', 'failed')),
  created_at      timestamptz not null default now(),
  updated_at      timestamptz not null default now(),
  -- the target of the (office_id, agent_id) foreign keys below
  constraint office_agents_office_id_id_key unique (office_id, id)
);
create unique index office_agents_office_id_lower_name_key on public.office_agents (office_id, lower(name));

create table public.agent_sessions (
  id               uuid primary key default gen_random_uuid(),
  office_id        uuid not null,
  agent_id         uuid not null,
  node             text not null default '',
  pid              integer not null default 0,
  status           text not null default 'starting'
                   check (status in ('starting', 'ready', 'busy', 'waiting', 'stopped', 'exited', 'crashed', 'failed')),
  agent_session_id text not null default '', -- Claude Code's conversation id, resumed after a restart
  started_at       timestamptz,
  last_output_at   timestamptz,
  exit_code        integer,
  created_at       timestamptz not null default now(),
  updated_at       timestamptz not null default now(),
  constraint agent_sessions_agent_id_key unique (agent_id),
  foreign key (office_id, agent_id) references public.office_agents (office_id, id) on delete cascade
);
create index agent_sessions_office_id_idx on public.agent_sessions (office_id);

create table public.user_questions (
  id             uuid primary key default gen_random_uuid(),
  office_id      uuid not null,
  agent_id       uuid not null,
  session_id     text,
  question_type  text not null default 'text' check (question_type in ('text', 'selection', 'confirmation')),
  category       text,
  question       text not null check (question <> ''),
  options        jsonb not null default '[]' check (jsonb_typeof(options) = 'array'),
  default_answer text,
  context        text,
  required       boolean not null default false,
  status         text not null default 'pending'
                 check (status in ('pending', 'answered', 'delivered', 'expired', 'cancelled')),
  response       text check (length(response) <= 65536),
  answered_by    text, -- auth.users id of the member, or null/'' for the console
  answered_at    timestamptz,
  delivered_at   timestamptz,
  expires_at     timestamptz not null,
  created_at     timestamptz not null default now(),
  updated_at     timestamptz not null default now(),
  foreign key (office_id, agent_id) references public.office_agents (office_id, id) on delete cascade,
  -- an answered or delivered question has its answer
  constraint user_questions_answer_check
    check (status not in ('answered', 'delivered') or (response is not null and answered_at is not null)),
  constraint user_questions_delivered_check
    check (status <> 'delivered' or delivered_at is not null)
);
create index user_questions_office_status_idx on public.user_questions (office_id, status, created_at);
create index user_questions_agent_status_idx on public.user_questions (agent_id, status);
create index user_questions_pending_expiry_idx on public.user_questions (expires_at) where status = 'pending';
create index user_questions_answered_idx on public.user_questions (created_at) where status = 'answered';

create table public.user_messages (
  id           uuid primary key default gen_random_uuid(),
  office_id    uuid not null,
  agent_id     uuid not null,
  user_id      text, -- auth.users id of the member who wrote it
  content      text not null check (content <> '' and length(content) <= 65536),
  status       text not null default 'pending' check (status in ('pending', 'delivered')),
  delivered_at timestamptz,
  created_at   timestamptz not null default now(),
  updated_at   timestamptz not null default now(),
  foreign key (office_id, agent_id) references public.office_agents (office_id, id) on delete cascade,
  constraint user_messages_delivered_check check (status <> 'delivered' or delivered_at is not null)
);
create index user_messages_office_idx on public.user_messages (office_id, created_at);
create index user_messages_pending_idx on public.user_messages (created_at) where status = 'pending';

create table public.agent_invocations (
  id                   uuid primary key default gen_random_uuid(),
  office_id            uuid not null,
  caller_agent_id      uuid not null,
  callee_agent_id      uuid not null,
  parent_invocation_id uuid references public.agent_invocations (id) on delete set null,
  depth                integer not null default 0 check (depth >= 0),
  reason               text not null check (reason <> ''),
  context              text,
  status               text not null default 'pending'
                       check (status in ('pending', 'in_progress', 'completed', 'failed', 'cancelled', 'rejected')),
  result_id            uuid, -- agent_results.id; no foreign key: results reference invocations
  error                text,
  started_at           timestamptz,
  completed_at         timestamptz,
  created_at           timestamptz not null default now(),
  updated_at           timestamptz not null default now(),
  foreign key (office_id, caller_agent_id) references public.office_agents (office_id, id) on delete cascade,
  foreign key (office_id, callee_agent_id) references public.office_agents (office_id, id) on delete cascade
);
create index agent_invocations_office_idx on public.agent_invocations (office_id, created_at);
create index agent_invocations_open_idx on public.agent_invocations (caller_agent_id, callee_agent_id, created_at)
  where status in ('pending', 'in_progress');
create index agent_invocations_callee_idx on public.agent_invocations (callee_agent_id, status);
create index agent_invocations_parent_idx on public.agent_invocations (parent_invocation_id);

create table public.agent_results (
  id            uuid primary key default gen_random_uuid(),
  office_id     uuid not null,
  invocation_id uuid references public.agent_invocations (id) on delete set null,
  from_agent_id uuid not null,
  to_agent_id   uuid not null,
  result_type   text not null default 'message' check (result_type <> ''),
  content_type  text not null default 'text/plain',
  content       text not null,
  status        text not null default 'pending' check (status in ('pending', 'delivered')),
  delivered_at  timestamptz,
  created_at    timestamptz not null default now(),
  updated_at    timestamptz not null default now(),
  foreign key (office_id, from_agent_id) references public.office_agents (office_id, id) on delete cascade,
  foreign key (office_id, to_agent_id) references public.office_agents (office_id, id) on delete cascade,
  constraint agent_results_delivered_check check (status <> 'delivered' or delivered_at is not null)
);
create index agent_results_office_idx on public.agent_results (office_id, created_at);
create index agent_results_to_agent_idx on public.agent_results (to_agent_id, status, created_at);
create index agent_results_invocation_idx on public.agent_results (invocation_id);

create table public.dependency_requests (
  id               uuid primary key default gen_random_uuid(),
  office_id        uuid not null,
  agent_id         uuid not null,
  session_id       text,
  type             text not null check (type <> ''),
  name             text not null check (name <> ''),
  description      text,
  required         boolean not null default false,
  "default"        text,
  status           text not null default 'pending' check (status in ('pending', 'provided', 'rejected', 'expired')),
  value            bytea, -- encrypted by the office for secret types; opaque here
  rejection_reason text,
  expires_at       timestamptz not null,
  provided_at      timestamptz,
  delivered_at     timestamptz,
  created_at       timestamptz not null default now(),
  updated_at       timestamptz not null default now(),
  foreign key (office_id, agent_id) references public.office_agents (office_id, id) on delete cascade,
  constraint dependency_requests_provided_check check (status <> 'provided' or provided_at is not null),
  constraint dependency_requests_delivered_check check (delivered_at is null or status <> 'pending')
);
create index dependency_requests_office_status_idx on public.dependency_requests (office_id, status, created_at);
create index dependency_requests_agent_idx on public.dependency_requests (agent_id, status);
create index dependency_requests_pending_expiry_idx on public.dependency_requests (expires_at) where status = 'pending';
create index dependency_requests_undelivered_idx on public.dependency_requests (created_at)
  where status in ('provided', 'rejected', 'expired') and delivered_at is null;

create table public.office_events (
  id         bigserial primary key,
  office_id  uuid not null references public.offices (id) on delete cascade,
  agent_id   uuid, -- no foreign key: the audit log outlives deleted agents
  session_id text,
  kind       text not null check (kind <> ''),
  payload    jsonb,
  raw        text,
  dedupe_key text,
  created_at timestamptz not null default now()
);
create unique index office_events_dedupe_key on public.office_events (office_id, dedupe_key) where dedupe_key is not null;
create index office_events_office_idx on public.office_events (office_id, id);
create index office_events_agent_idx on public.office_events (agent_id, id);

create trigger offices_updated_at before update on public.offices
  for each row execute function public.office_set_updated_at();
create trigger office_members_updated_at before update on public.office_members
  for each row execute function public.office_set_updated_at();
create trigger office_agents_updated_at before update on public.office_agents
  for each row execute function public.office_set_updated_at();
create trigger agent_sessions_updated_at before update on public.agent_sessions
  for each row execute function public.office_set_updated_at();
create trigger user_questions_updated_at before update on public.user_questions
  for each row execute function public.office_set_updated_at();
create trigger user_messages_updated_at before update on public.user_messages
  for each row execute function public.office_set_updated_at();
create trigger agent_invocations_updated_at before update on public.agent_invocations
  for each row execute function public.office_set_updated_at();
create trigger agent_results_updated_at before update on public.agent_results
  for each row execute function public.office_set_updated_at();
create trigger dependency_requests_updated_at before update on public.dependency_requests
  for each row execute function public.office_set_updated_at();
