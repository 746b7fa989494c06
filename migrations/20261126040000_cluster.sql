-- Several servers (nodes) on one database (issue 19, docs/notes/cluster.md).
-- Each office is run by one node at a time, by a lease: a row with the
-- node, an expiry on the database's clock and a fencing token raised on
-- every take-over. Nodes announce themselves (address, capacity, heartbeat)
-- and keep each Claude Code agent's transcript here, so that the next owner
-- resumes the conversation. All of it lives in a schema of its own: the
-- server's, not the frontend's (PostgREST does not expose it; anon and
-- authenticated have no usage on it).

-- +goose Up
create schema if not exists office_cluster;
revoke all on schema office_cluster from public;

create table office_cluster.nodes (
  node_id    text primary key check (node_id <> ''),
  addr       text not null default '', -- internal address other nodes proxy terminals to
  capacity   integer not null default 0 check (capacity >= 0), -- agents it may run; 0: no limit
  draining   boolean not null default false,
  heartbeat  timestamptz not null default now(),
  started_at timestamptz not null default now()
);

create table office_cluster.leases (
  office_id  uuid primary key references public.offices (id) on delete cascade,
  node_id    text not null,
  token      bigint not null default 1, -- raised on every take-over
  expires_at timestamptz not null,
  taken_at   timestamptz not null default now()
);
create index leases_node_idx on office_cluster.leases (node_id);

create table office_cluster.transcripts (
  office_id       uuid not null,
  agent_id        uuid not null,
  conversation_id text not null,
  byte_offset     bigint not null check (byte_offset >= 0), -- of the line in the file
  line            text not null, -- one JSONL entry, without its newline
  primary key (agent_id, conversation_id, byte_offset),
  foreign key (office_id, agent_id) references public.office_agents (office_id, id) on delete cascade
);

-- fence refuses a write that acts for an office (an agent's session row,
-- marking a delivery) from a node that does not hold the office's lease
-- now, on the database's clock. A node names itself on each of its
-- connections (set office.node); connections that do not (the frontend,
-- migrations, tools) are not fenced.
-- +goose StatementBegin
create function office_cluster.fence() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  me text := coalesce(current_setting('office.node', true), '');
begin
  if me = '' then
    return new;
  end if;
  if not exists (select 1 from office_cluster.leases l
                 where l.office_id = new.office_id and l.node_id = me and l.expires_at > clock_timestamp()) then
    raise exception 'office % is not leased to node %: fenced', new.office_id, me
      using errcode = 'OSF01', hint = 'this node lost the office; another node runs it';
  end if;
  return new;
end $$;
-- +goose StatementEnd
revoke execute on function office_cluster.fence() from public;

create trigger agent_sessions_fence before insert or update on public.agent_sessions
  for each row execute function office_cluster.fence();
create trigger user_questions_fence before update on public.user_questions
  for each row when (new.status = 'delivered' and old.status is distinct from 'delivered')
  execute function office_cluster.fence();
create trigger user_messages_fence before update on public.user_messages
  for each row when (new.status = 'delivered' and old.status is distinct from 'delivered')
  execute function office_cluster.fence();
create trigger agent_results_fence before update on public.agent_results
  for each row when (new.status = 'delivered' and old.status is distinct from 'delivered')
  execute function office_cluster.fence();
