-- The web frontend's contract (docs/frontend.md): what a signed-in member
-- may read and do, each refusal a clear error rather than a silent no-op.
--
--   * office_agents.launch_spec (command, args, env, dir of the office file,
--     where people put tokens) is no longer readable by members: select is
--     granted column by column without it. Realtime sends each subscriber
--     only the columns its role may select, so it stops travelling to
--     browsers as well (docs/notes/supabase.md, "The Realtime stand-in").
--   * Answers go through answer_question(question_id, response): it checks
--     membership, state, expiry and the answer against the question's type
--     and options BEFORE anything is written, and raises a clear error
--     otherwise; the question keeps its id. The plain UPDATE path is closed
--     (it answered 200 [] for a question already answered, expired or of
--     another office, and accepted any selection answer).
--   * A member provides a non-secret dependency or rejects any dependency
--     through provide_dependency / reject_dependency. Secret types (api_key,
--     env_variable) are refused there: the office stores them only
--     encrypted (AES-256-GCM with the server's OFFICE_SECRETS_KEY), which
--     the database cannot do.
--   * Owners manage their office's members: add by user id (insert into
--     office_members under RLS) or by email (add_office_member, which
--     invites an address that has no account yet), remove
--     (remove_office_member), list with emails (list_office_members); an
--     invited user joins with accept_office_invitations().
--   * A rejected invocation is stored even when no agent could take it:
--     callee_agent_id may be null for a rejected row; error says why.
--
-- Errors raised here use PostgREST's PTnnn SQLSTATEs, which it answers with
-- HTTP status nnn (Error.hs, mapSQLtoHTTP): PT404 not found (or not your
-- office: the two are not told apart), PT409 not pending any more, PT410
-- expired; 22023 (400) for a value that does not fit; 42501 (403) for what a
-- member may not do.

-- +goose Up

-- 1. No launch_spec for members.
revoke select on table public.office_agents from authenticated;
grant select (id, office_id, name, role, capabilities, priority, expertise, allowed_actions, max_load,
              status, created_at, updated_at)
  on public.office_agents to authenticated;

-- 2. Answers.
revoke update on table public.user_questions from authenticated;
drop policy user_questions_member_answer on public.user_questions;

-- +goose StatementBegin
-- office_normalize_answer returns the answer the office will type for
-- response, or raises 22023 when it does not fit the question; it is the
-- server's validAnswer (engine/api.go) in SQL: a selection is one of the
-- options (ignoring case and surrounding space; the option's own spelling
-- is returned), a confirmation yes or no (y/n, true/false, 예/네,
-- 아니오/아니요, or one of its options), a required text is not empty.
create function public.office_normalize_answer(q public.user_questions, response text) returns text
language plpgsql immutable
set search_path = ''
as $$
declare
  -- Go's unicode.IsSpace, which strings.TrimSpace trims
  ws  constant text := E' \t\n\r\f\v' || U&'\0085\00A0\1680\2000\2001\2002\2003\2004\2005\2006\2007\2008\2009\200A\2028\2029\202F\205F\3000';
  a   text := btrim(response, ws);
  opt text;
begin
  if response is null then
    raise exception 'an answer needs a response' using errcode = '22023';
  end if;
  if octet_length(response) > 65536 then
    raise exception 'the answer is longer than 65536 bytes' using errcode = '22023';
  end if;
  if q.question_type in ('selection', 'confirmation') then
    if q.question_type = 'confirmation' then
      case lower(a)
        when 'yes', 'y', 'true', '예', '네' then return 'yes';
        when 'no', 'n', 'false', '아니오', '아니요' then return 'no';
        else null;
      end case;
    end if;
    for opt in select jsonb_array_elements_text(q.options) loop
      if lower(btrim(opt, ws)) = lower(a) then
        return opt;
      end if;
    end loop;
    if q.question_type = 'selection' and jsonb_array_length(q.options) = 0 then
      return a;
    end if;
    if q.question_type = 'confirmation' then
      raise exception '"%" is not yes or no', a using errcode = '22023';
    end if;
    raise exception '"%" is not one of the options', a using errcode = '22023',
      detail = (select string_agg(o, ', ') from jsonb_array_elements_text(q.options) o),
      hint = 'answer with one of the options, as listed in the question''s options';
  end if;
  if a = '' and q.required then
    raise exception 'the answer is empty' using errcode = '22023';
  end if;
  return a;
end
$$;
-- +goose StatementEnd
revoke execute on function public.office_normalize_answer(public.user_questions, text) from public, anon, authenticated;

-- +goose StatementBegin
-- answer_question answers a pending question of the caller's office and
-- returns the answered row. Errors (nothing is written): PT404 no such
-- question in the caller's offices, PT409 not pending (answered, delivered
-- or cancelled; details says which), PT410 expired, 22023 an answer that
-- does not fit (not one of the options, not yes/no, empty for a required
-- question, over 64 KiB).
create function public.answer_question(question_id uuid, response text) returns public.user_questions
language plpgsql volatile security definer
set search_path = ''
as $$
declare
  q public.user_questions;
  a text;
begin
  select * into q from public.user_questions where id = question_id for update;
  if not found or auth.uid() is null or not public.office_is_member(q.office_id) then
    raise exception 'question % not found', question_id using errcode = 'PT404',
      hint = 'the question does not exist or is not in one of your offices';
  end if;
  if q.status = 'expired' or (q.status = 'pending' and q.expires_at <= now()) then
    raise exception 'question % expired at %', q.id, q.expires_at using errcode = 'PT410', detail = 'expired';
  end if;
  if q.status <> 'pending' then
    raise exception 'question % is %: only a pending question can be answered', q.id, q.status
      using errcode = 'PT409', detail = q.status;
  end if;
  a := public.office_normalize_answer(q, response);
  update public.user_questions u
     set response = a, status = 'answered', answered_by = auth.uid()::text, answered_at = now()
   where u.id = q.id
  returning * into q;
  return q;
end
$$;
-- +goose StatementEnd
revoke execute on function public.answer_question(uuid, text) from public, anon;
grant execute on function public.answer_question(uuid, text) to authenticated, service_role;

-- 3. Dependencies.
-- +goose StatementBegin
-- office_pending_dependency locks and returns a pending dependency request
-- of the caller's office, or raises PT404, PT409 or PT410 as
-- answer_question does.
create function public.office_pending_dependency(dependency_id uuid) returns public.dependency_requests
language plpgsql volatile
set search_path = ''
as $$
declare
  d public.dependency_requests;
begin
  select * into d from public.dependency_requests where id = dependency_id for update;
  if not found or auth.uid() is null or not public.office_is_member(d.office_id) then
    raise exception 'dependency request % not found', dependency_id using errcode = 'PT404',
      hint = 'the request does not exist or is not in one of your offices';
  end if;
  if d.status = 'expired' or (d.status = 'pending' and d.expires_at <= now()) then
    raise exception 'dependency request % expired at %', d.id, d.expires_at using errcode = 'PT410', detail = 'expired';
  end if;
  if d.status <> 'pending' then
    raise exception 'dependency request % is %: only a pending request can be provided or rejected', d.id, d.status
      using errcode = 'PT409', detail = d.status;
  end if;
  return d;
end
$$;
-- +goose StatementEnd
revoke execute on function public.office_pending_dependency(uuid) from public, anon, authenticated;

-- +goose StatementBegin
-- provide_dependency gives a pending request of a non-secret type its
-- value and returns the row (without value). The value is checked as the
-- server checks it (protocol/validate.go) and stored in the office's
-- sealed form for values kept in clear (office/secrets.go: the byte 'P'
-- and the text). api_key and env_variable values are refused (42501):
-- they are stored only encrypted with the server's key, so they go through
-- the server (POST /api/dependencies/{id}/provide).
create function public.provide_dependency(dependency_id uuid, value text)
returns table (id uuid, office_id uuid, agent_id uuid, type text, name text, status text, provided_at timestamptz)
language plpgsql volatile security definer
set search_path = ''
as $$
declare
  d public.dependency_requests;
  v text := value;
  t text := btrim(value, E' \t\n\r\f\v' || U&'\0085\00A0\1680\2000\2001\2002\2003\2004\2005\2006\2007\2008\2009\200A\2028\2029\202F\205F\3000');
begin
  d := public.office_pending_dependency(dependency_id);
  if d.type in ('api_key', 'env_variable') then
    raise exception '% values are secrets: the office stores them only encrypted, through the server', d.type
      using errcode = '42501', hint = 'POST /api/dependencies/{id}/provide on the office server';
  end if;
  if v is null or t = '' then
    raise exception 'the value is empty' using errcode = '22023';
  end if;
  case d.type
    when 'service' then
      if t !~* '^https?://[^/?#[:space:]]+' then
        raise exception 'only absolute http and https URLs with a host are allowed' using errcode = '22023';
      end if;
    when 'file' then
      if octet_length(v) > 500 then
        raise exception 'file path too long: % bytes, at most 500', octet_length(v) using errcode = '22023';
      end if;
      if v ~ '(^|[/\\])\.\.([/\\]|$)' then
        raise exception 'path traversal detected: ''..'' is not allowed' using errcode = '22023';
      end if;
    when 'permission' then
      if lower(t) not in ('true', 'false', 'yes', 'no') then
        raise exception 'permission must be true/false or yes/no' using errcode = '22023';
      end if;
    when 'package' then
      if octet_length(v) > 214 or v !~ '^(@[a-z0-9~-][a-z0-9._~-]*/)?[a-z0-9~-][a-z0-9._~-]*$' then
        raise exception 'invalid package name format: "name" or "@scope/name" in lower case letters, digits, ''-'', ''.'', ''_'' and ''~'''
          using errcode = '22023';
      end if;
    else
      raise exception 'unknown dependency type %', d.type using errcode = '22023';
  end case;
  update public.dependency_requests r
     set value = '\x50'::bytea || convert_to(v, 'UTF8'), status = 'provided', provided_at = now()
   where r.id = d.id;
  return query select d.id, d.office_id, d.agent_id, d.type, d.name, 'provided'::text, now();
end
$$;
-- +goose StatementEnd
revoke execute on function public.provide_dependency(uuid, text) from public, anon;
grant execute on function public.provide_dependency(uuid, text) to authenticated, service_role;

-- +goose StatementBegin
-- reject_dependency rejects a pending request with a reason (the agent is
-- told it) and returns the row (without value).
create function public.reject_dependency(dependency_id uuid, reason text)
returns table (id uuid, office_id uuid, agent_id uuid, type text, name text, status text, rejection_reason text)
language plpgsql volatile security definer
set search_path = ''
as $$
declare
  d public.dependency_requests;
  why text := coalesce(nullif(btrim(reason), ''), 'rejected by ' || auth.uid()::text);
begin
  d := public.office_pending_dependency(dependency_id);
  if octet_length(why) > 4000 then
    raise exception 'the reason is longer than 4000 bytes' using errcode = '22023';
  end if;
  update public.dependency_requests r
     set status = 'rejected', rejection_reason = why
   where r.id = d.id;
  return query select d.id, d.office_id, d.agent_id, d.type, d.name, 'rejected'::text, why;
end
$$;
-- +goose StatementEnd
revoke execute on function public.reject_dependency(uuid, text) from public, anon;
grant execute on function public.reject_dependency(uuid, text) to authenticated, service_role;

-- 4. Members and invitations.
-- +goose StatementBegin
-- office_is_owner runs as its owner so that office_members' policies do
-- not recurse into themselves (as office_is_member).
create function public.office_is_owner(office uuid) returns boolean
language sql stable security definer
set search_path = ''
as $$
  select exists (
    select 1 from public.office_members m
    where m.office_id = office and m.user_id = auth.uid() and m.role = 'owner'
  )
$$;
-- +goose StatementEnd
revoke execute on function public.office_is_owner(uuid) from public, anon;
grant execute on function public.office_is_owner(uuid) to authenticated, service_role;

grant insert (office_id, user_id, role), update (role), delete on public.office_members to authenticated;
create policy office_members_owner_insert on public.office_members
  for insert to authenticated with check (public.office_is_owner(office_id));
create policy office_members_owner_update on public.office_members
  for update to authenticated using (public.office_is_owner(office_id)) with check (public.office_is_owner(office_id));
create policy office_members_owner_delete on public.office_members
  for delete to authenticated using (public.office_is_owner(office_id));

-- +goose StatementBegin
-- office_keep_an_owner: a member's change may not leave an office without
-- an owner (the server and the admin API may).
create function public.office_keep_an_owner() returns trigger
language plpgsql
as $$
begin
  if current_user in ('anon', 'authenticated') and old.role = 'owner'
     and (tg_op = 'DELETE' or new.role <> 'owner')
     and not exists (select 1 from public.office_members m
                     where m.office_id = old.office_id and m.role = 'owner' and m.user_id <> old.user_id) then
    raise exception 'office % would have no owner', old.office_id using errcode = 'PT409',
      hint = 'make another member owner first';
  end if;
  if tg_op = 'DELETE' then
    return old;
  end if;
  return new;
end
$$;
-- +goose StatementEnd
create trigger office_members_keep_an_owner before update or delete on public.office_members
  for each row execute function public.office_keep_an_owner();

create table public.office_invitations (
  office_id  uuid not null references public.offices (id) on delete cascade,
  email      text not null check (email ~ '^[^@[:space:]]+@[^@[:space:]]+$'),
  role       text not null default 'member' check (role in ('owner', 'admin', 'member')),
  invited_by uuid references auth.users (id) on delete set null,
  created_at timestamptz not null default now(),
  primary key (office_id, email)
);
alter table public.office_invitations enable row level security;
revoke all on table public.office_invitations from anon, authenticated;
grant all on table public.office_invitations to service_role;
grant select, delete on table public.office_invitations to authenticated;
create policy office_invitations_owner_read on public.office_invitations
  for select to authenticated using (public.office_is_owner(office_id));
create policy office_invitations_owner_delete on public.office_invitations
  for delete to authenticated using (public.office_is_owner(office_id));

-- +goose StatementBegin
-- add_office_member adds the user with this email (case-insensitive) to
-- the office, or, when no user has it yet, records an invitation that
-- accept_office_invitations turns into a membership once they signed up.
-- Returns {"status": "added"|"invited", "user_id"?, "email", "role"}.
-- Errors: 42501 the caller is not the office's owner, PT409 already a
-- member, 22023 a malformed email or role.
create function public.add_office_member(office_id uuid, email text, role text default 'member') returns jsonb
language plpgsql volatile security definer
set search_path = ''
as $$
declare
  e   text := lower(btrim(email));
  uid uuid;
begin
  if auth.uid() is null or not public.office_is_owner(add_office_member.office_id) then
    raise exception 'only an owner of office % may add members', add_office_member.office_id using errcode = '42501';
  end if;
  if e !~ '^[^@[:space:]]+@[^@[:space:]]+$' then
    raise exception '"%" is not an email address', email using errcode = '22023';
  end if;
  if role is null or role not in ('owner', 'admin', 'member') then
    raise exception 'role must be owner, admin or member' using errcode = '22023';
  end if;
  select u.id into uid from auth.users u where lower(u.email) = e order by u.id limit 1;
  if uid is null then
    insert into public.office_invitations as i (office_id, email, role, invited_by)
    values (add_office_member.office_id, e, add_office_member.role, auth.uid())
    on conflict on constraint office_invitations_pkey do update set role = excluded.role, invited_by = excluded.invited_by;
    return jsonb_build_object('status', 'invited', 'email', e, 'role', role);
  end if;
  if exists (select 1 from public.office_members m where m.office_id = add_office_member.office_id and m.user_id = uid) then
    raise exception '% is already a member of office %', e, add_office_member.office_id using errcode = 'PT409';
  end if;
  insert into public.office_members (office_id, user_id, role) values (add_office_member.office_id, uid, add_office_member.role);
  return jsonb_build_object('status', 'added', 'user_id', uid, 'email', e, 'role', role);
end
$$;
-- +goose StatementEnd
revoke execute on function public.add_office_member(uuid, text, text) from public, anon;
grant execute on function public.add_office_member(uuid, text, text) to authenticated, service_role;

-- +goose StatementBegin
-- remove_office_member removes a member; an owner may remove anyone of the
-- office, every member may remove themselves (leave). Errors: PT404 not a
-- member (or not your office), 42501 not allowed, PT409 the last owner.
create function public.remove_office_member(office_id uuid, user_id uuid) returns jsonb
language plpgsql volatile security definer
set search_path = ''
as $$
declare
  m public.office_members;
begin
  if auth.uid() is null or not public.office_is_member(remove_office_member.office_id) then
    raise exception 'office % not found', remove_office_member.office_id using errcode = 'PT404';
  end if;
  if remove_office_member.user_id <> auth.uid() and not public.office_is_owner(remove_office_member.office_id) then
    raise exception 'only an owner may remove another member' using errcode = '42501';
  end if;
  select * into m from public.office_members x
   where x.office_id = remove_office_member.office_id and x.user_id = remove_office_member.user_id for update;
  if not found then
    raise exception 'user % is not a member of office %', remove_office_member.user_id, remove_office_member.office_id
      using errcode = 'PT404';
  end if;
  if m.role = 'owner' and not exists (select 1 from public.office_members x
       where x.office_id = m.office_id and x.role = 'owner' and x.user_id <> m.user_id) then
    raise exception 'office % would have no owner', m.office_id using errcode = 'PT409',
      hint = 'make another member owner first';
  end if;
  delete from public.office_members x where x.office_id = m.office_id and x.user_id = m.user_id;
  return jsonb_build_object('status', 'removed', 'user_id', m.user_id, 'role', m.role);
end
$$;
-- +goose StatementEnd
revoke execute on function public.remove_office_member(uuid, uuid) from public, anon;
grant execute on function public.remove_office_member(uuid, uuid) to authenticated, service_role;

-- +goose StatementBegin
-- list_office_members lists the members of an office of the caller with
-- their email (auth.users is not readable through the API). PT404 when
-- the caller is not a member.
create function public.list_office_members(office_id uuid)
returns table (user_id uuid, email text, role text, created_at timestamptz)
language plpgsql stable security definer
set search_path = ''
as $$
begin
  if auth.uid() is null or not public.office_is_member(list_office_members.office_id) then
    raise exception 'office % not found', list_office_members.office_id using errcode = 'PT404';
  end if;
  return query
    select m.user_id, u.email::text, m.role, m.created_at
      from public.office_members m left join auth.users u on u.id = m.user_id
     where m.office_id = list_office_members.office_id
     order by m.created_at, m.user_id;
end
$$;
-- +goose StatementEnd
revoke execute on function public.list_office_members(uuid) from public, anon;
grant execute on function public.list_office_members(uuid) to authenticated, service_role;

-- +goose StatementBegin
-- accept_office_invitations makes the caller a member of every office that
-- invited their email, and returns those offices' ids.
create function public.accept_office_invitations() returns setof uuid
language plpgsql volatile security definer
set search_path = ''
as $$
declare
  e text;
begin
  select lower(u.email) into e from auth.users u where u.id = auth.uid();
  if e is null then
    return;
  end if;
  return query
    with taken as (
      delete from public.office_invitations i where i.email = e returning i.office_id, i.role
    ), joined as (
      insert into public.office_members (office_id, user_id, role)
      select t.office_id, auth.uid(), t.role from taken t
      on conflict do nothing
      returning office_members.office_id
    )
    select t.office_id from taken t;
end
$$;
-- +goose StatementEnd
revoke execute on function public.accept_office_invitations() from public, anon;
grant execute on function public.accept_office_invitations() to authenticated, service_role;

-- 5. Rejected invocations: stored even when no agent was chosen.
alter table public.agent_invocations
  alter column callee_agent_id drop not null,
  add constraint agent_invocations_callee_check check (callee_agent_id is not null or status = 'rejected');
