-- office_append_events: events appended in order in one transaction and,
-- over Supabase, one REST request (docs/notes/store-functions.md), where
-- each alone is one: the progress blocks an agent prints together (STEP,
-- STEP_COMPLETE, PHASE_COMPLETE of one chunk of its output), each with its
-- dedupe key.
--
-- p_events is a JSON array of {office_id, agent_id, session_id, kind,
-- payload, raw, dedupe_key, created_at} (all but office_id and kind may be
-- absent or null; created_at absent: now()). Each is inserted as an
-- append of one event is: an event whose dedupe key the office has
-- already is not inserted, and the one stored first stands. Returns
-- {"events": [{"event": <row inserted, or the one stored first>,
-- "inserted": <bool>}, ...]} in the order given.
--
-- security invoker with an empty search_path, EXECUTE for service_role
-- only, as the functions of 20261128100000_office_functions.sql. Safe to
-- run twice (create or replace, revoke, grant).

-- +goose Up

-- +goose StatementBegin
create or replace function public.office_append_events(p_events jsonb) returns jsonb
language plpgsql volatile
security invoker
set search_path = ''
as $$
declare
  e        jsonb;
  ev       public.office_events;
  inserted boolean;
  answer   jsonb := '[]'::jsonb;
begin
  for e in select t.v from jsonb_array_elements(coalesce(p_events, '[]'::jsonb)) with ordinality as t(v, n) order by t.n loop
    ev := null;
    insert into public.office_events (office_id, agent_id, session_id, kind, payload, raw, dedupe_key, created_at)
    values ((e->>'office_id')::uuid, nullif(e->>'agent_id', '')::uuid, nullif(e->>'session_id', ''), e->>'kind',
      case when jsonb_typeof(e->'payload') in ('object', 'array', 'string', 'number', 'boolean') then e->'payload' end,
      nullif(e->>'raw', ''), nullif(e->>'dedupe_key', ''), coalesce((e->>'created_at')::timestamptz, now()))
    on conflict (office_id, dedupe_key) where dedupe_key is not null do nothing
    returning * into ev;
    inserted := ev.id is not null;
    if not inserted then
      select * into ev from public.office_events x
        where x.office_id = (e->>'office_id')::uuid and x.dedupe_key = e->>'dedupe_key';
    end if;
    answer := answer || jsonb_build_array(jsonb_build_object('event', to_jsonb(ev), 'inserted', inserted));
  end loop;
  return jsonb_build_object('events', answer);
end
$$;
-- +goose StatementEnd

revoke execute on function public.office_append_events(jsonb) from public, anon, authenticated;
grant execute on function public.office_append_events(jsonb) to service_role;
