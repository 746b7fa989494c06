-- migrations/20261128180000_session_hibernated.sql in SQLite's terms: the
-- session status hibernated (office.SessionHibernated). The rule that
-- keeps it against the office's view of the work is
-- office.StickySessionStatus (store/sqlite/functions.go).
--
-- SQLite cannot change a CHECK constraint in place: agent_sessions is
-- rebuilt as in 0002_session_detail.sql (SQLite's ALTER TABLE
-- documentation, "Making Other Kinds Of Table Schema Changes").

create table agent_sessions_0007 (
  id               text primary key,
  office_id        text not null,
  agent_id         text not null,
  node             text not null default '',
  pid              integer not null default 0,
  status           text not null default 'starting'
                   check (status in ('starting', 'ready', 'busy', 'waiting', 'needs_attention', 'stopped', 'exited', 'crashed', 'failed', 'hibernated')),
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

insert into agent_sessions_0007 (rowid, id, office_id, agent_id, node, pid, status, agent_session_id,
    started_at, last_output_at, exit_code, detail, created_at, updated_at)
  select rowid, id, office_id, agent_id, node, pid, status, agent_session_id,
    started_at, last_output_at, exit_code, detail, created_at, updated_at
  from agent_sessions;

drop table agent_sessions;
alter table agent_sessions_0007 rename to agent_sessions;
create index agent_sessions_office_id_idx on agent_sessions (office_id);
