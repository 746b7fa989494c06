-- TEST ONLY. Recreates, on a plain PostgreSQL, what a Supabase project
-- provides before any user migration runs, as Supabase defines it:
--   * roles anon and authenticated (no login, used by PostgREST via SET ROLE)
--     and service_role (bypasses row-level security);
--   * schema auth with auth.users and auth.uid(), auth.role(), auth.jwt()
--     reading the request's JWT claims (request.jwt.claims, and the older
--     per-claim setting request.jwt.claim.sub);
--   * the default privileges of a project created today (since 30 May
--     2026; every project from 30 October 2026): new tables, sequences and
--     functions in schema public are granted to nobody, neither to anon,
--     authenticated, service_role nor (functions) to PUBLIC, so a migration
--     must grant each object it wants the API roles to use. Source: the
--     Supabase changelog, "Breaking Change: Tables not exposed to Data and
--     GraphQL API automatically" (supabase.com/changelog/45329, the project
--     setting "Automatically expose new tables and functions", off); the
--     strictest reading is taken for functions;
--   * the (empty) publication supabase_realtime.
-- Applying it twice is harmless.

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
        null; -- roles are cluster-wide; a parallel test made it
      end;
    end if;
  end loop;
end
$$;

create schema if not exists auth;

create table if not exists auth.users (
  instance_id        uuid,
  id                 uuid not null primary key,
  aud                varchar(255),
  role               varchar(255),
  email              varchar(255),
  encrypted_password varchar(255),
  email_confirmed_at timestamptz,
  raw_app_meta_data  jsonb,
  raw_user_meta_data jsonb,
  is_super_admin     boolean,
  created_at         timestamptz,
  updated_at         timestamptz
);

create or replace function auth.uid() returns uuid
language sql stable
as $$
  select
  coalesce(
    nullif(current_setting('request.jwt.claim.sub', true), ''),
    (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub')
  )::uuid
$$;

create or replace function auth.role() returns text
language sql stable
as $$
  select
  coalesce(
    nullif(current_setting('request.jwt.claim.role', true), ''),
    (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'role')
  )::text
$$;

create or replace function auth.jwt() returns jsonb
language sql stable
as $$
  select
    coalesce(
        nullif(current_setting('request.jwt.claim', true), ''),
        nullif(current_setting('request.jwt.claims', true), '')
    )::jsonb
$$;

grant usage on schema auth to anon, authenticated, service_role;
grant execute on all functions in schema auth to anon, authenticated, service_role;

grant usage on schema public to anon, authenticated, service_role;
-- Undo what an older version of this script set on a reused database, then
-- take PUBLIC's default EXECUTE on new functions away.
alter default privileges in schema public revoke all on tables from anon, authenticated, service_role;
alter default privileges in schema public revoke all on sequences from anon, authenticated, service_role;
alter default privileges in schema public revoke all on functions from anon, authenticated, service_role;
alter default privileges revoke execute on functions from public;

do $$
begin
  if not exists (select 1 from pg_publication where pubname = 'supabase_realtime') then
    create publication supabase_realtime;
  end if;
end
$$;
