-- office_deliver_result: a result an agent delivers, with what goes with
-- it, in one transaction and, over Supabase, one REST request
-- (docs/notes/store-functions.md), where finding the task it answers, the
-- result, the task completed and their two events would be five.
--
-- The result is inserted pending with p_id (derived by the office from the
-- message that delivered it, so a message handled again conflicts), for
-- the oldest open (pending or in_progress) invocation from its recipient
-- to its sender, if any. That invocation is completed with it (result_id,
-- completed_at), and then p_completed_event_kind is appended with
-- {invocation_id, result_id} and p_completed_dedupe_key. Last
-- p_event_kind is appended with {result_id, to: p_to_name, invocation_id,
-- type} and p_event_dedupe_key. When a result with p_id exists it is not
-- written again, but its invocation is completed and the events appended
-- if they were not (the dedupe keys keep each once). Returns
-- {"created": <bool>, "result": <the row>, "completed": <this call
-- completed its invocation>, "events": [the events appended, in order],
-- "next_task": <the sender has a pending task waiting>}.
--
-- security invoker with an empty search_path, EXECUTE for service_role
-- only, as the functions of 20261128100000_office_functions.sql.

-- +goose Up

-- +goose StatementBegin
create or replace function public.office_deliver_result(
  p_id uuid, p_office_id uuid, p_from_agent_id uuid, p_to_agent_id uuid, p_result_type text, p_content_type text,
  p_content text, p_to_name text, p_event_kind text, p_event_dedupe_key text,
  p_completed_event_kind text, p_completed_dedupe_key text) returns jsonb
language plpgsql volatile
security invoker
set search_path = ''
as $$
declare
  r         public.agent_results;
  inv       public.agent_invocations;
  ev        public.office_events;
  events    jsonb := '[]'::jsonb;
  created   boolean := false;
begin
  insert into public.agent_results (id, office_id, invocation_id, from_agent_id, to_agent_id, result_type, content_type, content, status)
  values (p_id, p_office_id,
    (select i.id from public.agent_invocations i
      where i.office_id = p_office_id and i.caller_agent_id = p_to_agent_id and i.callee_agent_id = p_from_agent_id
        and i.status in ('pending', 'in_progress')
      order by i.created_at, i.id limit 1),
    p_from_agent_id, p_to_agent_id, coalesce(nullif(p_result_type, ''), 'message'),
    coalesce(nullif(p_content_type, ''), 'text/plain'), p_content, 'pending')
  on conflict (id) do nothing
  returning * into r;
  if r.id is null then
    select * into r from public.agent_results where id = p_id;
  else
    created := true;
  end if;
  if r.invocation_id is not null then
    update public.agent_invocations set status = 'completed', result_id = r.id, completed_at = now()
      where id = r.invocation_id and status in ('pending', 'in_progress')
      returning * into inv;
    if inv.id is not null and p_completed_event_kind is not null then
      insert into public.office_events (office_id, agent_id, kind, payload, dedupe_key)
      values (p_office_id, p_from_agent_id, p_completed_event_kind,
        jsonb_build_object('invocation_id', inv.id, 'result_id', r.id), p_completed_dedupe_key)
      on conflict (office_id, dedupe_key) where dedupe_key is not null do nothing
      returning * into ev;
      if ev.id is not null then
        events := events || jsonb_build_array(to_jsonb(ev));
      end if;
    end if;
  end if;
  if p_event_kind is not null then
    ev := null;
    insert into public.office_events (office_id, agent_id, kind, payload, dedupe_key)
    values (p_office_id, p_from_agent_id, p_event_kind,
      jsonb_build_object('result_id', r.id, 'to', p_to_name, 'invocation_id', coalesce(r.invocation_id::text, ''), 'type', r.result_type),
      p_event_dedupe_key)
    on conflict (office_id, dedupe_key) where dedupe_key is not null do nothing
    returning * into ev;
    if ev.id is not null then
      events := events || jsonb_build_array(to_jsonb(ev));
    end if;
  end if;
  return jsonb_build_object(
    'created', created,
    'result', to_jsonb(r),
    'completed', inv.id is not null,
    'events', events,
    'next_task', exists (select 1 from public.agent_invocations i
      where i.office_id = p_office_id and i.callee_agent_id = p_from_agent_id and i.status = 'pending'));
end
$$;
-- +goose StatementEnd

revoke execute on function public.office_deliver_result(uuid, uuid, uuid, uuid, text, text, text, text, text, text, text, text)
  from public, anon, authenticated;
grant execute on function public.office_deliver_result(uuid, uuid, uuid, uuid, text, text, text, text, text, text, text, text)
  to service_role;
