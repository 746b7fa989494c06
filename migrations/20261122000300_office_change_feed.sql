-- The change feed. Two consumers:
--   * store/postgres LISTENs on channel office_changes: a NOTIFY with a small
--     JSON payload {table, op, id, office_id, agent_id, status} whenever a row
--     the office must act on appears: a question answered, a user message
--     written, a dependency request provided, rejected or expired. The
--     notification is sent at commit, and only if the transaction commits.
--   * Supabase Realtime (postgres_changes): the watched tables join the
--     supabase_realtime publication when it exists (not on plain Postgres),
--     with replica identity full so that updates carry the old row.

-- +goose Up
-- +goose StatementBegin
create function public.office_notify_change() returns trigger
language plpgsql
as $$
begin
  perform pg_notify('office_changes', json_build_object(
    'table', tg_table_name,
    'op', tg_op,
    'id', new.id,
    'office_id', new.office_id,
    'agent_id', new.agent_id,
    'status', new.status)::text);
  return null;
end
$$;
-- +goose StatementEnd

create trigger user_questions_notify_insert after insert on public.user_questions
  for each row when (new.status = 'answered')
  execute function public.office_notify_change();
create trigger user_questions_notify_update after update of status on public.user_questions
  for each row when (new.status = 'answered' and old.status is distinct from new.status)
  execute function public.office_notify_change();

create trigger user_messages_notify_insert after insert on public.user_messages
  for each row when (new.status = 'pending')
  execute function public.office_notify_change();

create trigger dependency_requests_notify_insert after insert on public.dependency_requests
  for each row when (new.status in ('provided', 'rejected', 'expired'))
  execute function public.office_notify_change();
create trigger dependency_requests_notify_update after update of status on public.dependency_requests
  for each row when (new.status in ('provided', 'rejected', 'expired') and old.status is distinct from new.status)
  execute function public.office_notify_change();

alter table public.office_agents     replica identity full;
alter table public.agent_sessions    replica identity full;
alter table public.user_questions    replica identity full;
alter table public.user_messages     replica identity full;
alter table public.agent_invocations replica identity full;
alter table public.agent_results     replica identity full;
alter table public.office_events     replica identity full;

-- +goose StatementBegin
do $$
declare
  t text;
begin
  if not exists (select 1 from pg_publication where pubname = 'supabase_realtime') then
    return; -- plain Postgres: no Realtime
  end if;
  foreach t in array array['office_agents', 'agent_sessions', 'user_questions', 'user_messages',
                           'agent_invocations', 'agent_results', 'office_events'] loop
    if not exists (select 1 from pg_publication_tables
                   where pubname = 'supabase_realtime' and schemaname = 'public' and tablename = t) then
      execute format('alter publication supabase_realtime add table public.%I', t);
    end if;
  end loop;
  -- dependency_requests is published without its value column. That list
  -- binds pgoutput subscribers only: Realtime reads the WAL with wal2json,
  -- which ignores column lists, and sends each subscriber the columns its
  -- role may select. What keeps value from members is the column grant
  -- (office_rls: value is not granted to authenticated). A column list must
  -- cover the replica identity, so this table keeps the default identity
  -- (its key), and an update's old row carries only the key.
  if current_setting('server_version_num')::int >= 150000
     and not exists (select 1 from pg_publication_tables
                     where pubname = 'supabase_realtime' and schemaname = 'public'
                       and tablename = 'dependency_requests') then
    execute 'alter publication supabase_realtime add table public.dependency_requests
      (id, office_id, agent_id, session_id, type, name, description, required, "default", status,
       rejection_reason, expires_at, provided_at, delivered_at, created_at, updated_at)';
  end if;
end
$$;
-- +goose StatementEnd
