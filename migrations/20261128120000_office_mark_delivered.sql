-- office_mark_delivered: a row typed into an agent marked delivered, with
-- what goes with it, in one transaction and, over Supabase, one REST
-- request (docs/notes/store-functions.md), where the mark, its event and
-- (for an answer) the office's busy would be three.
--
-- p_kind names the row and its transition:
--   question: user_questions answered → delivered (delivered_at = now),
--             the asker's;
--   result:   agent_results pending → delivered (delivered_at = now),
--             the recipient's;
--   task:     agent_invocations pending → in_progress (started_at), the
--             callee's.
-- Only when the row changed, the event p_event_kind (when not null) is
-- appended, and with p_busy the office's busy is set through
-- office_set_session_status (p_process false: not over the session
-- layer's own word). Returns {"ok": false} when the row was not in the
-- expected state (another caller marked it), else
-- {"ok": true, "at": <delivered_at or started_at>, "event": <row or null>}.
--
-- security invoker with an empty search_path, EXECUTE for service_role
-- only, as the functions of 20261128100000_office_functions.sql. The
-- fence triggers of the cluster (office_cluster.fence) run on the task's
-- update as on any other.

-- +goose Up

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

revoke execute on function public.office_mark_delivered(uuid, uuid, text, uuid, text, jsonb, boolean)
  from public, anon, authenticated;
grant execute on function public.office_mark_delivered(uuid, uuid, text, uuid, text, jsonb, boolean)
  to service_role;
