-- migrations/20261128203200_office_notices.sql in SQLite's terms: the
-- notices the engine types into agents, stored so that a stop of the
-- server loses none (office.Notices). rowid orders them; the rules of
-- office_add_notices, office_due and office_mark_delivered are in
-- store/sqlite/functions.go.

create table office_notices (
  id           text primary key,
  office_id    text not null,
  agent_id     text not null,
  text         text not null check (text <> ''),
  status       text not null default 'pending' check (status in ('pending', 'delivered')),
  created_at   text not null,
  delivered_at text,
  foreign key (office_id, agent_id) references office_agents (office_id, id) on delete cascade
);
create index office_notices_due_idx on office_notices (agent_id) where status = 'pending'; -- an index entry holds the rowid: in order
