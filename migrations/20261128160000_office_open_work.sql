-- office_open_work: the work an office's agents hold, read at once for the
-- selector's snapshot of their load (engine/roster.go registryOpen): the
-- open (pending or in_progress) invocations and the open (pending,
-- in_progress or blocked) proxy tasks, each oldest first, as
-- {"invocations": [...], "proxy_tasks": [...]}. Over Supabase one REST
-- request where the two reads would be two (docs/notes/store-functions.md).
--
-- security invoker with an empty search_path, EXECUTE for service_role
-- only, as the functions of 20261128100000_office_functions.sql.

-- +goose Up

-- +goose StatementBegin
create or replace function public.office_open_work(p_office_id uuid) returns jsonb
language sql stable
security invoker
set search_path = ''
as $$
  select jsonb_build_object(
    'invocations', coalesce((select jsonb_agg(to_jsonb(i) order by i.created_at, i.id) from public.agent_invocations i
      where i.office_id = p_office_id and i.status in ('pending', 'in_progress')), '[]'::jsonb),
    'proxy_tasks', coalesce((select jsonb_agg(to_jsonb(t) order by t.created_at, t.id) from public.proxy_tasks t
      where t.office_id = p_office_id and t.status in ('pending', 'in_progress', 'blocked')), '[]'::jsonb))
$$;
-- +goose StatementEnd

revoke execute on function public.office_open_work(uuid) from public, anon, authenticated;
grant execute on function public.office_open_work(uuid) to service_role;
