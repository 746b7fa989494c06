-- office_ask, office_invoke and office_deliver_result append the agent's
-- message that makes their transition (its message.* event: the parsed
-- block, its raw text and its dedupe key, the name of the message's
-- source) first, in the same transaction: over Supabase the block and
-- what it does are one REST request, where the event appended on its own
-- before the transition made them two (docs/notes/store-functions.md).
--
-- p_message_kind, when not null, is appended with p_message_payload,
-- p_message_raw and p_message_dedupe_key whether or not the row is new;
-- an event with that key stored before is kept (the message was handled
-- before: the row's id, derived from the same key, then conflicts too).
-- Each function returns "events": the events it appended, in order (the
-- message's first), in place of the one "event" of its first version.
--
-- The rest is the functions of 20261128130000_office_ask.sql,
-- 20261128140000_office_deliver_result.sql and
-- 20261128150000_office_invoke.sql. The new arguments default to null.
-- The old signatures are dropped (a function with more arguments would
-- be a second function beside the first), so running this twice gives
-- the same result. security invoker with an empty search_path, EXECUTE
-- for service_role only, as the functions of
-- 20261128100000_office_functions.sql.

-- +goose Up
drop function if exists public.office_ask(uuid, uuid, uuid, text, text, text, jsonb, text, text, boolean, double precision, timestamptz, text, text);
drop function if exists public.office_deliver_result(uuid, uuid, uuid, uuid, text, text, text, text, text, text, text, text);
drop function if exists public.office_invoke(uuid, uuid, uuid, uuid, uuid, integer, text, text, text, jsonb, text);

-- +goose StatementBegin
create or replace function public.office_ask(
  p_id uuid, p_office_id uuid, p_agent_id uuid, p_question_type text, p_category text,
  p_question text, p_options jsonb, p_default_answer text, p_context text, p_required boolean,
  p_ttl_seconds double precision, p_asked_at timestamptz, p_event_kind text, p_event_dedupe_key text,
  p_message_kind text default null, p_message_payload jsonb default null, p_message_raw text default null,
  p_message_dedupe_key text default null) returns jsonb
language plpgsql volatile
security invoker
set search_path = ''
as $$
declare
  q       public.user_questions;
  ev      public.office_events;
  events  jsonb := '[]'::jsonb;
  created boolean := false;
begin
  if p_message_kind is not null then
    insert into public.office_events (office_id, agent_id, kind, payload, raw, dedupe_key)
    values (p_office_id, p_agent_id, p_message_kind, p_message_payload, p_message_raw, p_message_dedupe_key)
    on conflict (office_id, dedupe_key) where dedupe_key is not null do nothing
    returning * into ev;
    if ev.id is not null then
      events := events || jsonb_build_array(to_jsonb(ev));
    end if;
  end if;
  insert into public.user_questions (id, office_id, agent_id, session_id, question_type, category, question, options,
    default_answer, context, required, status, expires_at)
  values (p_id, p_office_id, p_agent_id,
    (select s.id::text from public.agent_sessions s where s.agent_id = p_agent_id),
    coalesce(nullif(p_question_type, ''), 'text'), nullif(p_category, ''), p_question, coalesce(p_options, '[]'::jsonb),
    nullif(p_default_answer, ''), nullif(p_context, ''), coalesce(p_required, false), 'pending',
    coalesce(p_asked_at, now()) + coalesce((select nullif(o.question_ttl, interval '0') from public.offices o where o.id = p_office_id),
      make_interval(secs => p_ttl_seconds)))
  on conflict (id) do nothing
  returning * into q;
  if q.id is null then
    select * into q from public.user_questions where id = p_id;
  else
    created := true;
    perform public.office_set_session_status(p_office_id, p_agent_id, 'waiting', '', false, 0, null, null, null, null, '');
    if p_event_kind is not null then
      ev := null;
      insert into public.office_events (office_id, agent_id, kind, payload, dedupe_key)
      values (p_office_id, p_agent_id, p_event_kind,
        jsonb_build_object('question_id', q.id, 'question', q.question, 'type', q.question_type, 'options', q.options,
          'expires_at', q.expires_at),
        p_event_dedupe_key)
      on conflict (office_id, dedupe_key) where dedupe_key is not null do nothing
      returning * into ev;
      if ev.id is not null then
        events := events || jsonb_build_array(to_jsonb(ev));
      end if;
    end if;
  end if;
  return jsonb_build_object(
    'created', created,
    'question', to_jsonb(q),
    'events', events,
    'pending', coalesce((select jsonb_agg(to_jsonb(p) order by p.created_at, p.id) from public.user_questions p
      where p.office_id = q.office_id and p.agent_id = q.agent_id and p.status = 'pending' and p.id <> q.id), '[]'::jsonb));
end
$$;
-- +goose StatementEnd

revoke execute on function public.office_ask(uuid, uuid, uuid, text, text, text, jsonb, text, text, boolean, double precision, timestamptz, text, text,
  text, jsonb, text, text) from public, anon, authenticated;
grant execute on function public.office_ask(uuid, uuid, uuid, text, text, text, jsonb, text, text, boolean, double precision, timestamptz, text, text,
  text, jsonb, text, text) to service_role;

-- +goose StatementBegin
create or replace function public.office_deliver_result(
  p_id uuid, p_office_id uuid, p_from_agent_id uuid, p_to_agent_id uuid, p_result_type text, p_content_type text,
  p_content text, p_to_name text, p_event_kind text, p_event_dedupe_key text,
  p_completed_event_kind text, p_completed_dedupe_key text,
  p_message_kind text default null, p_message_payload jsonb default null, p_message_raw text default null,
  p_message_dedupe_key text default null) returns jsonb
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
  if p_message_kind is not null then
    insert into public.office_events (office_id, agent_id, kind, payload, raw, dedupe_key)
    values (p_office_id, p_from_agent_id, p_message_kind, p_message_payload, p_message_raw, p_message_dedupe_key)
    on conflict (office_id, dedupe_key) where dedupe_key is not null do nothing
    returning * into ev;
    if ev.id is not null then
      events := events || jsonb_build_array(to_jsonb(ev));
    end if;
  end if;
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
      ev := null;
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

revoke execute on function public.office_deliver_result(uuid, uuid, uuid, uuid, text, text, text, text, text, text, text, text,
  text, jsonb, text, text) from public, anon, authenticated;
grant execute on function public.office_deliver_result(uuid, uuid, uuid, uuid, text, text, text, text, text, text, text, text,
  text, jsonb, text, text) to service_role;

-- +goose StatementBegin
create or replace function public.office_invoke(
  p_id uuid, p_office_id uuid, p_caller_agent_id uuid, p_callee_agent_id uuid, p_parent_invocation_id uuid,
  p_depth integer, p_reason text, p_context text,
  p_event_kind text, p_event_payload jsonb, p_event_dedupe_key text,
  p_message_kind text default null, p_message_payload jsonb default null, p_message_raw text default null,
  p_message_dedupe_key text default null) returns jsonb
language plpgsql volatile
security invoker
set search_path = ''
as $$
declare
  inv     public.agent_invocations;
  ev      public.office_events;
  events  jsonb := '[]'::jsonb;
  created boolean := false;
begin
  if p_message_kind is not null then
    insert into public.office_events (office_id, agent_id, kind, payload, raw, dedupe_key)
    values (p_office_id, p_caller_agent_id, p_message_kind, p_message_payload, p_message_raw, p_message_dedupe_key)
    on conflict (office_id, dedupe_key) where dedupe_key is not null do nothing
    returning * into ev;
    if ev.id is not null then
      events := events || jsonb_build_array(to_jsonb(ev));
    end if;
  end if;
  insert into public.agent_invocations (id, office_id, caller_agent_id, callee_agent_id, parent_invocation_id, depth,
    reason, context, status)
  values (p_id, p_office_id, p_caller_agent_id, p_callee_agent_id, p_parent_invocation_id, coalesce(p_depth, 0),
    p_reason, nullif(p_context, ''), 'pending')
  on conflict (id) do nothing
  returning * into inv;
  if inv.id is null then
    select * into inv from public.agent_invocations where id = p_id;
  else
    created := true;
    if p_event_kind is not null then
      ev := null;
      insert into public.office_events (office_id, agent_id, kind, payload, dedupe_key)
      values (p_office_id, p_caller_agent_id, p_event_kind, p_event_payload, p_event_dedupe_key)
      on conflict (office_id, dedupe_key) where dedupe_key is not null do nothing
      returning * into ev;
      if ev.id is not null then
        events := events || jsonb_build_array(to_jsonb(ev));
      end if;
    end if;
  end if;
  return jsonb_build_object('created', created, 'invocation', to_jsonb(inv), 'events', events);
end
$$;
-- +goose StatementEnd

revoke execute on function public.office_invoke(uuid, uuid, uuid, uuid, uuid, integer, text, text, text, jsonb, text,
  text, jsonb, text, text) from public, anon, authenticated;
grant execute on function public.office_invoke(uuid, uuid, uuid, uuid, uuid, integer, text, text, text, jsonb, text,
  text, jsonb, text, text) to service_role;
