-- The change feed also reports pending questions and dependency requests as
-- they are inserted, with their deadline (expires_at), so that the engine
-- knows when something can expire without polling the tables (engine
-- sweep.go). Answered, provided, rejected and expired rows are reported as
-- before, without expires_at.

-- +goose Up
-- +goose StatementBegin
create or replace function public.office_notify_change() returns trigger
language plpgsql
as $$
begin
  perform pg_notify('office_changes', json_build_object(
    'table', tg_table_name,
    'op', tg_op,
    'id', new.id,
    'office_id', new.office_id,
    'agent_id', new.agent_id,
    'status', new.status,
    'expires_at', case when new.status = 'pending' then to_jsonb(new)->'expires_at' end)::text);
  return null;
end
$$;
-- +goose StatementEnd

drop trigger user_questions_notify_insert on public.user_questions;
create trigger user_questions_notify_insert after insert on public.user_questions
  for each row when (new.status in ('answered', 'pending'))
  execute function public.office_notify_change();

drop trigger dependency_requests_notify_insert on public.dependency_requests;
create trigger dependency_requests_notify_insert after insert on public.dependency_requests
  for each row when (new.status in ('pending', 'provided', 'rejected', 'expired'))
  execute function public.office_notify_change();
