-- The session status hibernated (office.SessionHibernated): an idle agent
-- whose process the server stopped to give its memory back; its
-- conversation is kept and the next work for it resumes it
-- (docs/notes/hibernate.md). Not stopped (an operator's or a server's
-- stop), not failed.
--
-- office_set_session_status keeps the session layer's own word against
-- the office's view of the work; hibernated is one of those words (a
-- hibernated agent is not "busy" because an answer was typed: nothing is
-- typed until it is awake). Otherwise the function is the one of
-- 20261128170000_session_conversation.sql, unchanged.

-- +goose Up
alter table public.agent_sessions
  drop constraint agent_sessions_status_check,
  add constraint agent_sessions_status_check
    check (status in ('starting', 'ready', 'busy', 'waiting', 'needs_attention', 'stopped', 'exited', 'crashed', 'failed', 'hibernated'));

-- +goose StatementBegin
create or replace function public.office_set_session_status(
  p_office_id uuid, p_agent_id uuid, p_status text, p_detail text,
  p_process boolean, p_pid integer, p_exit_code integer, p_started_at timestamptz,
  p_event_kind text, p_event_payload jsonb, p_node text, p_agent_session_id text default '') returns jsonb
language plpgsql volatile
security invoker
set search_path = ''
as $$
declare
  cur    public.agent_sessions;
  status text := p_status;
  conv   text := coalesce(p_agent_session_id, '');
  row    public.agent_sessions;
  ev     public.office_events;
begin
  select * into cur from public.agent_sessions where agent_id = p_agent_id for update;
  if p_process then
    if cur.status = 'waiting' and p_status in ('ready', 'busy') and (
         exists (select 1 from public.user_questions q where q.agent_id = p_agent_id and q.status = 'pending')
         or exists (select 1 from public.dependency_requests d where d.agent_id = p_agent_id and d.status = 'pending')) then
      status := 'waiting';
    end if;
    insert into public.agent_sessions as s (office_id, agent_id, status, detail, pid, exit_code, started_at, node, agent_session_id)
    values (p_office_id, p_agent_id, status, coalesce(p_detail, ''), coalesce(p_pid, 0), p_exit_code, p_started_at, coalesce(p_node, ''), conv)
    on conflict (agent_id) do update set status = excluded.status, detail = excluded.detail, pid = excluded.pid,
      exit_code = excluded.exit_code, started_at = coalesce(p_started_at, s.started_at),
      node = coalesce(nullif(p_node, ''), s.node),
      agent_session_id = case when s.agent_session_id = '' then excluded.agent_session_id else s.agent_session_id end,
      updated_at = now()
    returning * into row;
  elsif coalesce(p_status, '') = '' then
    insert into public.agent_sessions as s (office_id, agent_id, status, node, agent_session_id)
    values (p_office_id, p_agent_id, 'starting', coalesce(p_node, ''), conv)
    on conflict (agent_id) do update set node = coalesce(nullif(p_node, ''), s.node),
      agent_session_id = case when s.agent_session_id = '' then excluded.agent_session_id else s.agent_session_id end,
      updated_at = now()
    returning * into row;
  else
    if cur.status is null or cur.status not in ('needs_attention', 'crashed', 'failed', 'stopped', 'exited', 'hibernated') then
      insert into public.agent_sessions as s (office_id, agent_id, status, detail, agent_session_id)
      values (p_office_id, p_agent_id, status, coalesce(p_detail, ''), conv)
      on conflict (agent_id) do update set status = excluded.status, detail = excluded.detail,
        agent_session_id = case when s.agent_session_id = '' then excluded.agent_session_id else s.agent_session_id end,
        updated_at = now()
      returning * into row;
    end if;
  end if;
  if p_event_kind is not null then
    insert into public.office_events (office_id, agent_id, kind, payload)
    values (p_office_id, p_agent_id, p_event_kind, p_event_payload)
    returning * into ev;
  end if;
  return jsonb_build_object('session', case when row.id is null then null else to_jsonb(row) end, 'event', case when ev.id is null then null else to_jsonb(ev) end);
end
$$;
-- +goose StatementEnd

revoke execute on function public.office_set_session_status(uuid, uuid, text, text, boolean, integer, integer, timestamptz, text, jsonb, text, text)
  from public, anon, authenticated;
grant execute on function public.office_set_session_status(uuid, uuid, text, text, boolean, integer, integer, timestamptz, text, jsonb, text, text)
  to service_role;
