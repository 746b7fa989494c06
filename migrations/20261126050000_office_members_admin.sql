-- Members managed by the office server's admin API (and its console):
-- add by user id or by email, remove, list. The server works as the
-- service role (Supabase) or the database owner (PostgreSQL), for which
-- auth.uid() is null, so the owners' functions of
-- 20261125000100_frontend_contract.sql (add_office_member, ...) refuse it;
-- these three are for the server alone (execute granted to service_role
-- only, never to anon or authenticated). auth.users is not exposed by
-- PostgREST, so emails are resolved here, in the database, for both
-- stores. Errors as in the frontend contract: PT404 no such office, user
-- or member; PT409 already a member; 22023 a malformed argument.

-- +goose Up

-- +goose StatementBegin
-- office_admin_add_member adds a user to an office by user id, or by email
-- (case-insensitive, resolved through auth.users); an email no user has
-- yet becomes an invitation that accept_office_invitations() turns into a
-- membership once they sign up. Returns {"status": "added"|"invited",
-- "user_id"?, "email"?, "role"}.
create function public.office_admin_add_member(office_id uuid, user_id uuid default null, email text default null,
                                               role text default 'member') returns jsonb
language plpgsql volatile security definer
set search_path = ''
as $$
declare
  e   text := lower(btrim(coalesce(email, '')));
  uid uuid := user_id;
begin
  if not exists (select 1 from public.offices o where o.id = office_admin_add_member.office_id) then
    raise exception 'office % not found', office_admin_add_member.office_id using errcode = 'PT404';
  end if;
  if role is null or role not in ('owner', 'admin', 'member') then
    raise exception 'role must be owner, admin or member' using errcode = '22023';
  end if;
  if (uid is null) = (e = '') then
    raise exception 'give either a user id or an email' using errcode = '22023';
  end if;
  if uid is null then
    if e !~ '^[^@[:space:]]+@[^@[:space:]]+$' then
      raise exception '"%" is not an email address', email using errcode = '22023';
    end if;
    select u.id into uid from auth.users u where lower(u.email) = e order by u.id limit 1;
    if uid is null then
      insert into public.office_invitations as i (office_id, email, role)
      values (office_admin_add_member.office_id, e, office_admin_add_member.role)
      on conflict on constraint office_invitations_pkey do update set role = excluded.role;
      return jsonb_build_object('status', 'invited', 'email', e, 'role', role);
    end if;
  else
    select lower(u.email) into e from auth.users u where u.id = uid;
    if not found then
      raise exception 'no user %', uid using errcode = 'PT404',
        hint = 'a user id is the id of a Supabase Auth user (auth.users)';
    end if;
  end if;
  if exists (select 1 from public.office_members m where m.office_id = office_admin_add_member.office_id and m.user_id = uid) then
    raise exception 'user % is already a member of office %', coalesce(e, uid::text), office_admin_add_member.office_id
      using errcode = 'PT409';
  end if;
  insert into public.office_members (office_id, user_id, role)
  values (office_admin_add_member.office_id, uid, office_admin_add_member.role);
  return jsonb_strip_nulls(jsonb_build_object('status', 'added', 'user_id', uid, 'email', e, 'role', role));
end
$$;
-- +goose StatementEnd
revoke execute on function public.office_admin_add_member(uuid, uuid, text, text) from public, anon, authenticated;
grant execute on function public.office_admin_add_member(uuid, uuid, text, text) to service_role;

-- +goose StatementBegin
-- office_admin_list_members lists an office's members with their emails,
-- then its pending invitations (status 'invited', no user id).
create function public.office_admin_list_members(office_id uuid)
returns table (user_id uuid, email text, role text, status text, created_at timestamptz)
language plpgsql stable security definer
set search_path = ''
as $$
begin
  if not exists (select 1 from public.offices o where o.id = office_admin_list_members.office_id) then
    raise exception 'office % not found', office_admin_list_members.office_id using errcode = 'PT404';
  end if;
  return query
    select * from (
      select m.user_id, u.email::text, m.role, 'member'::text, m.created_at
        from public.office_members m left join auth.users u on u.id = m.user_id
       where m.office_id = office_admin_list_members.office_id
       order by m.created_at, m.user_id
    ) members
    union all
    select * from (
      select null::uuid, i.email, i.role, 'invited'::text, i.created_at
        from public.office_invitations i
       where i.office_id = office_admin_list_members.office_id
       order by i.created_at, i.email
    ) invited;
end
$$;
-- +goose StatementEnd
revoke execute on function public.office_admin_list_members(uuid) from public, anon, authenticated;
grant execute on function public.office_admin_list_members(uuid) to service_role;

-- +goose StatementBegin
-- office_admin_remove_member removes a member by user id, or the member or
-- the invitation with an email. The operator may remove the last owner
-- (office_keep_an_owner binds members only). Returns {"status":
-- "removed"|"uninvited", "user_id"?, "email"?, "role"}.
create function public.office_admin_remove_member(office_id uuid, user_id uuid default null, email text default null)
returns jsonb
language plpgsql volatile security definer
set search_path = ''
as $$
declare
  e   text := lower(btrim(coalesce(email, '')));
  uid uuid := user_id;
  r   text;
begin
  if (uid is null) = (e = '') then
    raise exception 'give either a user id or an email' using errcode = '22023';
  end if;
  if uid is null then
    select m.user_id into uid from public.office_members m join auth.users u on u.id = m.user_id
     where m.office_id = office_admin_remove_member.office_id and lower(u.email) = e
     order by m.user_id limit 1;
    if uid is null then
      delete from public.office_invitations i
       where i.office_id = office_admin_remove_member.office_id and i.email = e
      returning i.role into r;
      if r is null then
        raise exception 'no member or invitation % in office %', e, office_admin_remove_member.office_id
          using errcode = 'PT404';
      end if;
      return jsonb_build_object('status', 'uninvited', 'email', e, 'role', r);
    end if;
  end if;
  delete from public.office_members m
   where m.office_id = office_admin_remove_member.office_id and m.user_id = uid
  returning m.role into r;
  if r is null then
    raise exception 'user % is not a member of office %', uid, office_admin_remove_member.office_id
      using errcode = 'PT404';
  end if;
  return jsonb_strip_nulls(jsonb_build_object('status', 'removed', 'user_id', uid, 'email', nullif(e, ''), 'role', r));
end
$$;
-- +goose StatementEnd
revoke execute on function public.office_admin_remove_member(uuid, uuid, text) from public, anon, authenticated;
grant execute on function public.office_admin_remove_member(uuid, uuid, text) to service_role;
