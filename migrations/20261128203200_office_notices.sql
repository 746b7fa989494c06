-- office_notices: the notices the engine types into agents (a proxy's
-- response, a proxy request, a permission refused, a task failed, a
-- reminder after a restart; office.Notices), stored so that a stop of the
-- server between queueing a notice and typing it loses nothing. The
-- delivery reads them with what else is due (office_due: "notices", typed
-- first, oldest first) and marks each delivered after its typing
-- (office_mark_delivered, p_kind 'notice'), with the typing marker of any
-- other row ('typed:notice:<id>'): exactly once across stops
-- (docs/guarantees.md, docs/notes/engine.md).
--
-- office_add_notices appends notices in order, as many as fit under
-- p_max pending notices of the agent (the flood bound of engine/limit.go:
-- an agent that makes the office tell it too much cannot fill the table),
-- with the agent's row locked so that two writers cannot both pass the
-- bound. Returns {"added": <how many were stored: the first of p_texts>}.
--
-- The server's own state, as permission_grants: RLS on and no member
-- policy; the server (service_role) reads and writes it. The functions
-- are security invoker with an empty search_path, EXECUTE for
-- service_role only, as those of 20261128100000_office_functions.sql;
-- office_due and office_mark_delivered keep their signatures (replaced in
-- place: every branch of 20261128194100_office_due_typing.sql and
-- 20261128120000_office_mark_delivered.sql is kept as it is).

-- +goose Up
create table if not exists public.office_notices (
  id           uuid primary key default gen_random_uuid(),
  seq          bigint generated always as identity,
  office_id    uuid not null,
  agent_id     uuid not null,
  text         text not null check (text <> ''),
  status       text not null default 'pending' check (status in ('pending', 'delivered')),
  created_at   timestamptz not null default now(),
  delivered_at timestamptz,
  foreign key (office_id, agent_id) references public.office_agents (office_id, id) on delete cascade
);
create index if not exists office_notices_due_idx on public.office_notices (agent_id, seq) where status = 'pending';

alter table public.office_notices enable row level security;
revoke all on table public.office_notices from anon, authenticated;
grant all on table public.office_notices to service_role;
revoke all on sequence public.office_notices_seq_seq from anon, authenticated;
grant usage, select on sequence public.office_notices_seq_seq to service_role;

-- A notice marked delivered acts for the office, as a message marked
-- delivered does: only the node holding its lease may (the fence of
-- 20261126040000_cluster.sql; docs/notes/cluster.md).
drop trigger if exists office_notices_fence on public.office_notices;
create trigger office_notices_fence before update on public.office_notices
  for each row when (new.status = 'delivered' and old.status is distinct from 'delivered')
  execute function office_cluster.fence();

-- +goose StatementBegin
create or replace function public.office_add_notices(p_office_id uuid, p_agent_id uuid, p_texts jsonb, p_max integer) returns jsonb
language plpgsql volatile
security invoker
set search_path = ''
as $$
declare
  room  integer;
  added integer;
begin
  perform 1 from public.office_agents a where a.id = p_agent_id and a.office_id = p_office_id for no key update;
  if not found then
    raise exception 'office_add_notices: no agent % in office %', p_agent_id, p_office_id using errcode = '23503';
  end if;
  room := jsonb_array_length(p_texts);
  if p_max > 0 then
    room := least(room, greatest(0, p_max - (select count(*) from public.office_notices n
      where n.agent_id = p_agent_id and n.status = 'pending')::integer));
  end if;
  insert into public.office_notices (office_id, agent_id, text)
  select p_office_id, p_agent_id, t.v from jsonb_array_elements_text(p_texts) with ordinality as t(v, i)
    where t.i <= room order by t.i;
  get diagnostics added = row_count;
  return jsonb_build_object('added', added);
end
$$;
-- +goose StatementEnd

revoke execute on function public.office_add_notices(uuid, uuid, jsonb, integer) from public, anon, authenticated;
grant execute on function public.office_add_notices(uuid, uuid, jsonb, integer) to service_role;

-- office_due: the agent's pending notices first ("notices", oldest first:
-- by seq), and, with p_typing_at, the first notice's typing marker before
-- any other row's (office.TypingFirst).
-- +goose StatementBegin
create or replace function public.office_due(p_office_id uuid, p_agent_id uuid, p_typing_at timestamptz default null) returns jsonb
language plpgsql volatile
security invoker
set search_path = ''
as $$
declare
  due       jsonb;
  typed_row text;
  agent_st  text;
  ev        public.office_events;
  inserted  boolean;
begin
  due := jsonb_build_object(
    'notices', coalesce((select jsonb_agg(to_jsonb(n) - 'seq' order by n.seq) from public.office_notices n
      where n.agent_id = p_agent_id and n.office_id = p_office_id and n.status = 'pending'), '[]'::jsonb),
    'dependencies', coalesce((select jsonb_agg(to_jsonb(d) order by d.created_at, d.id) from public.dependency_requests d
      where d.office_id = p_office_id and d.agent_id = p_agent_id
        and d.status in ('provided', 'rejected', 'expired') and d.delivered_at is null), '[]'::jsonb),
    'answers', coalesce((select jsonb_agg(to_jsonb(q) order by q.created_at, q.id) from public.user_questions q
      where q.office_id = p_office_id and q.agent_id = p_agent_id and q.status = 'answered'), '[]'::jsonb),
    'results', coalesce((select jsonb_agg(to_jsonb(r) order by r.created_at, r.id) from public.agent_results r
      where r.office_id = p_office_id and r.to_agent_id = p_agent_id and r.status = 'pending'), '[]'::jsonb),
    'messages', coalesce((select jsonb_agg(to_jsonb(m) order by m.created_at, m.id) from public.user_messages m
      where m.office_id = p_office_id and m.agent_id = p_agent_id and m.status = 'pending'), '[]'::jsonb),
    'tasks', coalesce((select jsonb_agg(to_jsonb(i) order by i.created_at, i.id) from public.agent_invocations i
      where i.office_id = p_office_id and i.callee_agent_id = p_agent_id and i.status in ('pending', 'in_progress')), '[]'::jsonb));
  if p_typing_at is null then
    return due;
  end if;
  if jsonb_array_length(due->'notices') > 0 then
    typed_row := 'notice:' || (due->'notices'->0->>'id');
  elsif jsonb_array_length(due->'dependencies') > 0 then
    return due;
  elsif jsonb_array_length(due->'answers') > 0 then
    if coalesce(due->'answers'->0->>'category', '') <> 'permission' then
      typed_row := 'question:' || (due->'answers'->0->>'id');
    end if;
  elsif jsonb_array_length(due->'results') > 0 then
    typed_row := 'result:' || (due->'results'->0->>'id');
  elsif jsonb_array_length(due->'messages') > 0 then
    typed_row := 'message:' || (due->'messages'->0->>'id');
  else
    select a.status into agent_st from public.office_agents a where a.id = p_agent_id and a.office_id = p_office_id;
    if coalesce(agent_st, '') not in ('disabled', 'failed')
      and not exists (select 1 from jsonb_array_elements(due->'tasks') t where t->>'status' = 'in_progress') then
      select 'task:' || (t.v->>'id') into typed_row from jsonb_array_elements(due->'tasks') with ordinality as t(v, n)
        where t.v->>'status' = 'pending' order by t.n limit 1;
    end if;
  end if;
  if typed_row is null then
    return due;
  end if;
  insert into public.office_events (office_id, agent_id, kind, payload, dedupe_key)
  values (p_office_id, p_agent_id, 'delivery.typing', jsonb_build_object('row', typed_row, 'at', p_typing_at), 'typed:' || typed_row)
  on conflict (office_id, dedupe_key) where dedupe_key is not null do nothing
  returning * into ev;
  inserted := ev.id is not null;
  if not inserted then
    select * into ev from public.office_events e where e.office_id = p_office_id and e.dedupe_key = 'typed:' || typed_row;
  end if;
  return due || jsonb_build_object('typing', jsonb_build_object('row', typed_row, 'event', to_jsonb(ev), 'inserted', inserted));
end
$$;
-- +goose StatementEnd

-- office_mark_delivered: p_kind 'notice', office_notices pending →
-- delivered (delivered_at = now), the agent's own.
-- +goose StatementBegin
create or replace function public.office_mark_delivered(
  p_office_id uuid, p_agent_id uuid, p_kind text, p_id uuid,
  p_event_kind text, p_event_payload jsonb, p_busy boolean) returns jsonb
language plpgsql volatile
security invoker
set search_path = ''
as $$
declare
  at timestamptz;
  ev public.office_events;
begin
  if p_kind = 'question' then
    update public.user_questions set status = 'delivered', delivered_at = now()
      where id = p_id and office_id = p_office_id and agent_id = p_agent_id and status = 'answered'
      returning delivered_at into at;
  elsif p_kind = 'result' then
    update public.agent_results set status = 'delivered', delivered_at = now()
      where id = p_id and office_id = p_office_id and to_agent_id = p_agent_id and status = 'pending'
      returning delivered_at into at;
  elsif p_kind = 'notice' then
    update public.office_notices set status = 'delivered', delivered_at = now()
      where id = p_id and office_id = p_office_id and agent_id = p_agent_id and status = 'pending'
      returning delivered_at into at;
  elsif p_kind = 'task' then
    update public.agent_invocations set status = 'in_progress', started_at = coalesce(started_at, now())
      where id = p_id and office_id = p_office_id and callee_agent_id = p_agent_id and status = 'pending'
      returning started_at into at;
  else
    raise exception 'office_mark_delivered: unknown kind %', p_kind using errcode = '22023';
  end if;
  if at is null then
    return jsonb_build_object('ok', false);
  end if;
  if p_event_kind is not null then
    insert into public.office_events (office_id, agent_id, kind, payload)
    values (p_office_id, p_agent_id, p_event_kind, p_event_payload)
    returning * into ev;
  end if;
  if p_busy then
    perform public.office_set_session_status(p_office_id, p_agent_id, 'busy', '', false, 0, null, null, null, null, '');
  end if;
  return jsonb_build_object('ok', true, 'at', at, 'event', case when ev.id is null then null else to_jsonb(ev) end);
end
$$;
-- +goose StatementEnd
