-- migrations/20261123000000_session_detail.sql in SQLite's terms: the
-- session status needs_attention, and detail (why the session is in its
-- status; the store cuts it to 4000 bytes, office.MaxSessionDetail).
--
-- SQLite cannot change a CHECK constraint in place, so agent_sessions is
-- rebuilt as SQLite's ALTER TABLE documentation prescribes: a new table, the
-- rows copied with their rowids (the list order's tiebreak), the old table
-- dropped, the new one renamed, its index made again. No
-- table references agent_sessions by foreign key and none of its own change,
-- so this is safe with foreign_keys on, inside the migration's transaction.

create table agent_sessions_0002 (
  id               text primary key,
  office_id        text not null,
  agent_id         text not null,
  node             text not null default '',
  pid              integer not null default 0,
  status           text not null default 'starting'
                   check (status in ('starting', 'ready', 'busy', 'waiting', 'needs_attention', 'stopped', 'exited', 'crashed', 'failed')),
  agent_session_id text not null default '',
  started_at       text,
  last_output_at   text,
  exit_code        integer,
  detail           text not null default '' check (length(cast(detail as blob)) <= 4000),
  created_at       text not null,
  updated_at       text not null,
  constraint agent_sessions_agent_id_key unique (agent_id),
  foreign key (office_id, agent_id) references office_agents (office_id, id) on delete cascade
);

insert into agent_sessions_0002 (rowid, id, office_id, agent_id, node, pid, status, agent_session_id,
    started_at, last_output_at, exit_code, created_at, updated_at)
  select rowid, id, office_id, agent_id, node, pid, status, agent_session_id,
    started_at, last_output_at, exit_code, created_at, updated_at
  from agent_sessions;

drop table agent_sessions;
alter table agent_sessions_0002 rename to agent_sessions;
create index agent_sessions_office_id_idx on agent_sessions (office_id);
