-- office_invoke: a task one agent gives another (an invocation, pending)
-- and its event in one transaction and, over Supabase, one REST request
-- (docs/notes/store-functions.md), where the row and the event would be
-- two.
--
-- The invocation is inserted with p_id (derived by the office from the
-- message that gave the task, so a message handled again conflicts);
-- then p_event_kind (when not null) is appended with p_event_payload and
-- p_event_dedupe_key. When an invocation with p_id exists nothing is
-- written. Returns {"created": <bool>, "invocation": <the row, new or
-- stored>, "event": <row or null>}.
--
-- security invoker with an empty search_path, EXECUTE for service_role
-- only, as the functions of 20261128100000_office_functions.sql.

-- +goose Up

-- +goose StatementBegin
create or replace function public.office_invoke(
  p_id uuid, p_office_id uuid, p_caller_agent_id uuid, p_callee_agent_id uuid, p_parent_invocation_id uuid,
  p_depth integer, p_reason text, p_context text,
  p_event_kind text, p_event_payload jsonb, p_event_dedupe_key text) returns jsonb
language plpgsql volatile
security invoker
set search_path = ''
as $$
declare
  inv     public.agent_invocations;
  ev      public.office_events;
  created boolean := false;
begin
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
      insert into public.office_events (office_id, agent_id, kind, payload, dedupe_key)
      values (p_office_id, p_caller_agent_id, p_event_kind, p_event_payload, p_event_dedupe_key)
      on conflict (office_id, dedupe_key) where dedupe_key is not null do nothing
      returning * into ev;
    end if;
  end if;
  return jsonb_build_object('created', created, 'invocation', to_jsonb(inv),
    'event', case when ev.id is null then null else to_jsonb(ev) end);
end
$$;
-- +goose StatementEnd

revoke execute on function public.office_invoke(uuid, uuid, uuid, uuid, uuid, integer, text, text, text, jsonb, text)
  from public, anon, authenticated;
grant execute on function public.office_invoke(uuid, uuid, uuid, uuid, uuid, integer, text, text, text, jsonb, text)
  to service_role;
