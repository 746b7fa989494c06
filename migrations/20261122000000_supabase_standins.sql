-- Stand-ins for what a Supabase project provides, created ONLY WHEN ABSENT so
-- that these migrations also apply to a plain PostgreSQL. On Supabase every
-- object below already exists and nothing here does anything.
--
--   roles anon, authenticated (the API's roles, no login) and service_role
--   (the server's role, bypasses row-level security); schema auth with a
--   minimal auth.users and auth.uid() reading the request's JWT claims as
--   Supabase's does.
--
-- Roles are cluster-wide: another database on the same server may create them
-- at the same moment, so duplicates are tolerated.

-- +goose Up
-- +goose StatementBegin
do $$
declare
  r text;
begin
  foreach r in array array['anon', 'authenticated', 'service_role'] loop
    if not exists (select 1 from pg_roles where rolname = r) then
      begin
        if r = 'service_role' then
          execute format('create role %I nologin noinherit bypassrls', r);
        else
          execute format('create role %I nologin noinherit', r);
        end if;
      exception when duplicate_object or unique_violation then
        null; -- created concurrently by another database's migration
      end;
    end if;
  end loop;
end
$$;
-- +goose StatementEnd

-- +goose StatementBegin
do $$
begin
  if not exists (select 1 from pg_namespace where nspname = 'auth') then
    create schema auth;
    grant usage on schema auth to anon, authenticated, service_role;
  end if;
  if to_regclass('auth.users') is null then
    -- stand-in: Supabase's auth.users has many more columns; the office
    -- needs only the id (office_members.user_id references it).
    create table auth.users (
      id    uuid primary key,
      email text
    );
  end if;
  if to_regprocedure('auth.uid()') is null then
    -- stand-in: the same definition as Supabase's auth.uid().
    create function auth.uid() returns uuid
    language sql stable
    as $f$
      select coalesce(
        nullif(current_setting('request.jwt.claim.sub', true), ''),
        (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub')
      )::uuid
    $f$;
    grant execute on function auth.uid() to anon, authenticated, service_role;
  end if;
end
$$;
-- +goose StatementEnd
