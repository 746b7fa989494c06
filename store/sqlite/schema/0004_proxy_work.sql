-- migrations/20261125000000_proxy_work.sql in SQLite's terms: the proxy
-- protocol's requests (a parked one survives a restart) and the tasks
-- proxies hold (their load).

create table proxy_requests (
  id                 text primary key,
  office_id          text not null,
  requester_agent_id text not null,
  proxy_agent_id     text,
  action             text not null check (action in ('create_plan', 'update_status')),
  payload            text not null,
  status             text not null default 'parked' check (status in ('parked', 'assigned', 'backed_up', 'timed_out')),
  reason             text,
  backup_path        text,
  expires_at         text not null,
  created_at         text not null,
  updated_at         text not null,
  foreign key (office_id, requester_agent_id) references office_agents (office_id, id) on delete cascade
);
create index proxy_requests_parked_idx on proxy_requests (created_at) where status = 'parked';
create index proxy_requests_office_idx on proxy_requests (office_id, status, created_at);

create table proxy_tasks (
  office_id          text not null references offices (id) on delete cascade,
  id                 text not null check (id <> ''),
  request_id         text not null references proxy_requests (id) on delete cascade,
  requester_agent_id text not null,
  proxy_agent_id     text,
  content            text not null,
  priority           text not null default 'medium',
  status             text not null default 'pending'
                     check (status in ('pending', 'in_progress', 'completed', 'failed', 'cancelled', 'blocked')),
  created_at         text not null,
  updated_at         text not null,
  primary key (office_id, id)
);
create index proxy_tasks_open_idx on proxy_tasks (office_id, proxy_agent_id)
  where status in ('pending', 'in_progress', 'blocked');
create index proxy_tasks_request_idx on proxy_tasks (request_id);
