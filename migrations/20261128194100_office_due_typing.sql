-- office_due takes p_typing_at: the delivery read of a round about to type
-- into a running agent appends, in the same call, the typing marker of the
-- row the round types first, where the marker appended on its own before
-- the typing made a second REST request (docs/notes/store-functions.md;
-- exactly once across stops, docs/notes/engine.md).
--
-- With p_typing_at null the function reads, as its first version
-- (20261128100000_office_functions.sql) does. Otherwise, when the round's
-- first typing is known from what is due (office.TypingFirst, the order of
-- engine/deliver.go round): no dependency due (its delivery may restart
-- the agent first), then the oldest answer unless it is a permission
-- request's (decided, not typed, while its hook waits), else the oldest
-- result, else the oldest message, else the oldest pending task when none
-- is in progress and the agent is neither disabled nor failed. Its marker
-- is the event 'delivery.typing' with the dedupe key 'typed:<row>' and the
-- payload {"row": <row>, "at": p_typing_at}, <row> being
-- '<question|result|message|task>:<id>'; one stored before (an earlier
-- typing of the row) is kept and returned. The answer then holds
-- "typing": {"row": <row>, "event": <the marker>, "inserted": <bool>}.
--
-- The old signature is dropped (a function with one more argument would
-- be a second function beside it), so running this twice gives the same
-- result. security invoker with an empty search_path, EXECUTE for
-- service_role only, as the functions of 20261128100000_office_functions.sql.

-- +goose Up
drop function if exists public.office_due(uuid, uuid);

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
  if p_typing_at is null or jsonb_array_length(due->'dependencies') > 0 then
    return due;
  end if;
  if jsonb_array_length(due->'answers') > 0 then
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

revoke execute on function public.office_due(uuid, uuid, timestamptz) from public, anon, authenticated;
grant execute on function public.office_due(uuid, uuid, timestamptz) to service_role;
