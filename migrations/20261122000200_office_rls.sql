-- Row-level security (docs/protocol.md, Tables; issue 4). The rules, enforced by the
-- database whatever the client does:
--   * members of an office (office_members) read their office's rows;
--   * a member may answer a PENDING question of their office: only response
--     and status (to 'answered'); answered_by and answered_at are set here,
--     by a trigger, from auth.uid(); an answered question cannot be answered
--     again or changed in any other way;
--   * a member may write a user_messages row for an agent of their office;
--   * anon gets nothing; the server works as service_role (bypasses RLS).
-- Supabase's default privileges grant everything on new tables in public to
-- anon and authenticated, so we first revoke all and grant back exactly what
-- the rules need: table privileges say which columns, policies which rows,
-- triggers which values.

-- +goose Up
-- +goose StatementBegin
-- office_is_member runs as its owner so that the policies of office_members
-- do not recurse into themselves.
create function public.office_is_member(office uuid) returns boolean
language sql stable security definer
set search_path = ''
as $$
  select exists (
    select 1 from public.office_members m
    where m.office_id = office and m.user_id = auth.uid()
  )
$$;
-- +goose StatementEnd
-- from anon too: Supabase's default privileges grant it functions by name.
revoke execute on function public.office_is_member(uuid) from public, anon;
grant execute on function public.office_is_member(uuid) to authenticated, service_role;

alter table public.offices             enable row level security;
alter table public.office_members      enable row level security;
alter table public.office_agents       enable row level security;
alter table public.agent_sessions      enable row level security;
alter table public.user_questions      enable row level security;
alter table public.user_messages       enable row level security;
alter table public.agent_invocations   enable row level security;
alter table public.agent_results       enable row level security;
alter table public.dependency_requests enable row level security;
alter table public.office_events       enable row level security;

revoke all on table
  public.offices, public.office_members, public.office_agents, public.agent_sessions,
  public.user_questions, public.user_messages, public.agent_invocations, public.agent_results,
  public.dependency_requests, public.office_events
  from anon, authenticated;
revoke all on sequence public.office_events_id_seq from anon, authenticated;

grant all on table
  public.offices, public.office_members, public.office_agents, public.agent_sessions,
  public.user_questions, public.user_messages, public.agent_invocations, public.agent_results,
  public.dependency_requests, public.office_events
  to service_role;
grant usage, select on sequence public.office_events_id_seq to service_role;

-- Members read (rows: the policies below).
grant select on table
  public.offices, public.office_members, public.office_agents, public.agent_sessions,
  public.user_questions, public.user_messages, public.agent_invocations, public.agent_results,
  public.office_events
  to authenticated;
-- Every column but value: provided secrets never leave through the API.
grant select (id, office_id, agent_id, session_id, type, name, description, required, "default",
              status, rejection_reason, expires_at, provided_at, delivered_at, created_at, updated_at)
  on public.dependency_requests to authenticated;
-- Members answer (only these two columns can appear in their UPDATE).
grant update (response, status) on public.user_questions to authenticated;
-- Members write messages (only these three; the rest are defaults or set by trigger).
grant insert (office_id, agent_id, content) on public.user_messages to authenticated;

create policy offices_member_read on public.offices
  for select to authenticated using (public.office_is_member(id));
create policy office_members_member_read on public.office_members
  for select to authenticated using (public.office_is_member(office_id));
create policy office_agents_member_read on public.office_agents
  for select to authenticated using (public.office_is_member(office_id));
create policy agent_sessions_member_read on public.agent_sessions
  for select to authenticated using (public.office_is_member(office_id));
create policy user_questions_member_read on public.user_questions
  for select to authenticated using (public.office_is_member(office_id));
create policy user_messages_member_read on public.user_messages
  for select to authenticated using (public.office_is_member(office_id));
create policy agent_invocations_member_read on public.agent_invocations
  for select to authenticated using (public.office_is_member(office_id));
create policy agent_results_member_read on public.agent_results
  for select to authenticated using (public.office_is_member(office_id));
create policy dependency_requests_member_read on public.dependency_requests
  for select to authenticated using (public.office_is_member(office_id));
create policy office_events_member_read on public.office_events
  for select to authenticated using (public.office_is_member(office_id));

create policy user_questions_member_answer on public.user_questions
  for update to authenticated
  using (public.office_is_member(office_id) and status = 'pending')
  with check (public.office_is_member(office_id) and status = 'answered');

create policy user_messages_member_write on public.user_messages
  for insert to authenticated
  with check (
    public.office_is_member(office_id)
    and exists (select 1 from public.office_agents a where a.id = agent_id and a.office_id = user_messages.office_id)
  );

-- +goose StatementBegin
-- office_guard_member_answer: what a member's UPDATE of a question may do,
-- whatever the grants and policies allow: pending → answered once, with a
-- response, nothing else; who and when are the database's to say.
create function public.office_guard_member_answer() returns trigger
language plpgsql
as $$
begin
  if current_user not in ('anon', 'authenticated') then
    return new; -- the server (service_role or the owner)
  end if;
  if old.status <> 'pending' then
    raise exception 'question % is %, only a pending question can be answered', old.id, old.status
      using errcode = 'check_violation';
  end if;
  if new.status <> 'answered' then
    raise exception 'a member may only set status to answered'
      using errcode = 'insufficient_privilege';
  end if;
  if new.response is null then
    raise exception 'an answer needs a response'
      using errcode = 'not_null_violation';
  end if;
  if (to_jsonb(new) - array['response', 'status', 'answered_by', 'answered_at', 'updated_at'])
     is distinct from
     (to_jsonb(old) - array['response', 'status', 'answered_by', 'answered_at', 'updated_at']) then
    raise exception 'a member may only change response and status'
      using errcode = 'insufficient_privilege';
  end if;
  new.answered_by := auth.uid()::text;
  new.answered_at := now();
  return new;
end
$$;
-- +goose StatementEnd
create trigger user_questions_guard_member_answer before update on public.user_questions
  for each row execute function public.office_guard_member_answer();

-- +goose StatementBegin
-- office_stamp_member_message: a member's message is theirs and pending.
create function public.office_stamp_member_message() returns trigger
language plpgsql
as $$
begin
  if current_user not in ('anon', 'authenticated') then
    return new;
  end if;
  new.user_id := auth.uid()::text;
  new.status := 'pending';
  new.delivered_at := null;
  new.created_at := now();
  new.updated_at := now();
  return new;
end
$$;
-- +goose StatementEnd
create trigger user_messages_stamp_member_message before insert on public.user_messages
  for each row execute function public.office_stamp_member_message();
