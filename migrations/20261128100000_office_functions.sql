-- The office's hot transitions as functions, each one statement for the
-- server: over Supabase one REST request (POST /rest/v1/rpc/<function>)
-- instead of a chain of reads and writes, and the same definition for the
-- PostgreSQL store, which calls them through pgx. docs/notes/store-functions.md
-- says which, and why.
--
-- Both run as the caller (security invoker) with an empty search_path, and
-- only the server's role may call them: EXECUTE is revoked from public (a
-- new function is executable by everyone otherwise) and from Supabase's
-- anon and authenticated (whose default privileges in schema public grant
-- it), and granted to service_role. Members never call them. Every
-- statement is safe to run twice (create or replace, revoke and grant).

-- +goose Up

-- office_due: everything waiting to be typed into one agent, oldest first,
-- as one JSON object: {"dependencies": [...], "answers": [...],
-- "results": [...], "messages": [...], "tasks": [...]}, each row as
-- to_jsonb gives it (bytea as "\x<hex>", as PostgREST gives it). The
-- delivery reads it at every round (engine/deliver.go readDue).
-- +goose StatementBegin
create or replace function public.office_due(p_office_id uuid, p_agent_id uuid) returns jsonb
language sql stable
security invoker
set search_path = ''
as $$
  select jsonb_build_object(
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
      where i.office_id = p_office_id and i.callee_agent_id = p_agent_id and i.status in ('pending', 'in_progress')), '[]'::jsonb))
$$;
-- +goose StatementEnd

-- office_set_session_status: one change of an agent's session row, read
-- and written in one statement (the row locked), and its event appended
-- in the same transaction when p_event_kind is set (whether or not the row
-- was written). Returns
-- {"session": <row or null>, "event": <row or null>}.
--
-- p_process true: the session layer's report (the process started, is
-- ready, busy, exited, ...): pid and exit_code are written, started_at
-- when p_started_at is set, and a row that says waiting stays waiting
-- through ready and busy while the agent has a pending question or
-- dependency request (it waits for a person, whatever its process does);
-- node, the server running it, is written when p_node is not empty.
-- p_process false: the office's view of the work (busy when an answer was
-- typed, waiting when it asked): not written over the session layer's own
-- word (needs_attention, crashed, failed, stopped, exited), in which case
-- the row is not written and session is null. The detail is always replaced.
-- +goose StatementBegin
create or replace function public.office_set_session_status(
  p_office_id uuid, p_agent_id uuid, p_status text, p_detail text,
  p_process boolean, p_pid integer, p_exit_code integer, p_started_at timestamptz,
  p_event_kind text, p_event_payload jsonb, p_node text) returns jsonb
language plpgsql volatile
security invoker
set search_path = ''
as $$
declare
  cur    public.agent_sessions;
  status text := p_status;
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
    insert into public.agent_sessions as s (office_id, agent_id, status, detail, pid, exit_code, started_at, node)
    values (p_office_id, p_agent_id, status, coalesce(p_detail, ''), coalesce(p_pid, 0), p_exit_code, p_started_at, coalesce(p_node, ''))
    on conflict (agent_id) do update set status = excluded.status, detail = excluded.detail, pid = excluded.pid,
      exit_code = excluded.exit_code, started_at = coalesce(p_started_at, s.started_at),
      node = coalesce(nullif(p_node, ''), s.node), updated_at = now()
    returning * into row;
  else
    if cur.status is null or cur.status not in ('needs_attention', 'crashed', 'failed', 'stopped', 'exited') then
      insert into public.agent_sessions as s (office_id, agent_id, status, detail)
      values (p_office_id, p_agent_id, status, coalesce(p_detail, ''))
      on conflict (agent_id) do update set status = excluded.status, detail = excluded.detail, updated_at = now()
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

revoke execute on function public.office_due(uuid, uuid) from public, anon, authenticated;
revoke execute on function public.office_set_session_status(uuid, uuid, text, text, boolean, integer, integer, timestamptz, text, jsonb, text)
  from public, anon, authenticated;
grant execute on function public.office_due(uuid, uuid) to service_role;
grant execute on function public.office_set_session_status(uuid, uuid, text, text, boolean, integer, integer, timestamptz, text, jsonb, text)
  to service_role;
