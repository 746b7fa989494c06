-- The proxy protocol's requests and the tasks proxies hold
-- (docs/notes/office.md, "The proxy protocol"). A request waiting for its
-- proxy (fallback_allowed: false, or every proxy busy) is a row, so it
-- survives a restart and times out at expires_at; a proxy's open tasks
-- count in its load until the proxy or the requester closes them with
-- update_status.

-- +goose Up
create table public.proxy_requests (
  id                 uuid primary key default gen_random_uuid(),
  office_id          uuid not null,
  requester_agent_id uuid not null,
  proxy_agent_id     uuid, -- no foreign key: the history outlives a deleted proxy
  action             text not null check (action in ('create_plan', 'update_status')),
  payload            jsonb not null,
  status             text not null default 'parked' check (status in ('parked', 'assigned', 'backed_up', 'timed_out')),
  reason             text,
  backup_path        text,
  expires_at         timestamptz not null,
  created_at         timestamptz not null default now(),
  updated_at         timestamptz not null default now(),
  foreign key (office_id, requester_agent_id) references public.office_agents (office_id, id) on delete cascade
);
create index proxy_requests_parked_idx on public.proxy_requests (created_at) where status = 'parked';
create index proxy_requests_office_idx on public.proxy_requests (office_id, status, created_at);

create table public.proxy_tasks (
  office_id          uuid not null references public.offices (id) on delete cascade,
  id                 text not null check (id <> ''),
  request_id         uuid not null references public.proxy_requests (id) on delete cascade,
  requester_agent_id uuid not null,
  proxy_agent_id     uuid,
  content            text not null,
  priority           text not null default 'medium',
  status             text not null default 'pending'
                     check (status in ('pending', 'in_progress', 'completed', 'failed', 'cancelled', 'blocked')),
  created_at         timestamptz not null default now(),
  updated_at         timestamptz not null default now(),
  primary key (office_id, id)
);
create index proxy_tasks_open_idx on public.proxy_tasks (office_id, proxy_agent_id)
  where status in ('pending', 'in_progress', 'blocked');
create index proxy_tasks_request_idx on public.proxy_tasks (request_id);

create trigger proxy_requests_updated_at before update on public.proxy_requests
  for each row execute function public.office_set_updated_at();
create trigger proxy_tasks_updated_at before update on public.proxy_tasks
  for each row execute function public.office_set_updated_at();

-- As every office table: members read their office's rows, the server
-- (service_role) writes, anon reads nothing.
alter table public.proxy_requests enable row level security;
alter table public.proxy_tasks    enable row level security;
revoke all on table public.proxy_requests, public.proxy_tasks from anon, authenticated;
grant all on table public.proxy_requests, public.proxy_tasks to service_role;
grant select on table public.proxy_requests, public.proxy_tasks to authenticated;
create policy proxy_requests_member_read on public.proxy_requests
  for select to authenticated using (public.office_is_member(office_id));
create policy proxy_tasks_member_read on public.proxy_tasks
  for select to authenticated using (public.office_is_member(office_id));

