-- office_ask: a question an agent asks, with what goes with it, in one
-- transaction and, over Supabase, one REST request
-- (docs/notes/store-functions.md), where the agent's session row and its
-- office's question TTL (two reads), the question, the office's waiting,
-- its event and the agent's other pending questions (a read) would be
-- six.
--
-- The question is inserted pending with p_id (derived by the office from
-- the message that asked it, so a message handled again conflicts):
-- session_id the agent's session row's, expires_at p_asked_at (now when
-- null: the office's clock, which its sweep expires by) plus the office's
-- question_ttl, or p_ttl_seconds when it has none. Then the office's
-- waiting is set through office_set_session_status (p_process false: not
-- over the session layer's own word), and the event p_event_kind (when
-- not null) appended with p_event_dedupe_key and the payload
-- {question_id, question, type, options, expires_at}. When a question
-- with p_id exists nothing is written. Returns
-- {"created": <bool>, "question": <the row, new or stored>,
--  "event": <row or null>, "pending": [the agent's other pending
--  questions, oldest first]}: those the new one may supersede.
--
-- security invoker with an empty search_path, EXECUTE for service_role
-- only, as the functions of 20261128100000_office_functions.sql.

-- +goose Up

-- +goose StatementBegin
create or replace function public.office_ask(
  p_id uuid, p_office_id uuid, p_agent_id uuid, p_question_type text, p_category text,
  p_question text, p_options jsonb, p_default_answer text, p_context text, p_required boolean,
  p_ttl_seconds double precision, p_asked_at timestamptz, p_event_kind text, p_event_dedupe_key text) returns jsonb
language plpgsql volatile
security invoker
set search_path = ''
as $$
declare
  q       public.user_questions;
  ev      public.office_events;
  created boolean := false;
begin
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
      insert into public.office_events (office_id, agent_id, kind, payload, dedupe_key)
      values (p_office_id, p_agent_id, p_event_kind,
        jsonb_build_object('question_id', q.id, 'question', q.question, 'type', q.question_type, 'options', q.options,
          'expires_at', q.expires_at),
        p_event_dedupe_key)
      on conflict (office_id, dedupe_key) where dedupe_key is not null do nothing
      returning * into ev;
    end if;
  end if;
  return jsonb_build_object(
    'created', created,
    'question', to_jsonb(q),
    'event', case when ev.id is null then null else to_jsonb(ev) end,
    'pending', coalesce((select jsonb_agg(to_jsonb(p) order by p.created_at, p.id) from public.user_questions p
      where p.office_id = q.office_id and p.agent_id = q.agent_id and p.status = 'pending' and p.id <> q.id), '[]'::jsonb));
end
$$;
-- +goose StatementEnd

revoke execute on function public.office_ask(uuid, uuid, uuid, text, text, text, jsonb, text, text, boolean, double precision, timestamptz, text, text)
  from public, anon, authenticated;
grant execute on function public.office_ask(uuid, uuid, uuid, text, text, text, jsonb, text, text, boolean, double precision, timestamptz, text, text)
  to service_role;
