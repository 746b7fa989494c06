-- Every grant the office's API roles need, written out. Supabase projects
-- created since 30 May 2026 (and every project from 30 October 2026) grant
-- new objects in schema public to nobody: a table, sequence or function a
-- role should use needs its own GRANT (supabase.com/changelog/45329). The
-- earlier files already grant what they create; this one states the whole
-- set in one place, so that the schema does not depend on a project's
-- default privileges whichever they are, and takes EXECUTE on the trigger
-- functions away from PUBLIC (PostgreSQL's default for a new function),
-- which no role calls. Granting what is granted changes nothing, so the
-- file is safe to run again.
--
--   service_role (the server over the REST API; it bypasses RLS): every
--     office table in full, the events sequence, and the functions it calls;
--   authenticated (signed-in members): what docs/frontend.md lists, under
--     RLS, as granted by office_rls, proxy_work and frontend_contract
--     (column grants keep launch_spec and dependency values out);
--   anon: nothing.
--
-- Functions added later are granted by their own files (for example the
-- server's REST functions of 20261128100000).

-- +goose Up
grant usage on schema public to service_role, authenticated;

grant select, insert, update, delete on table
  public.offices, public.office_members, public.office_agents, public.agent_sessions,
  public.user_questions, public.user_messages, public.agent_invocations, public.agent_results,
  public.dependency_requests, public.office_events, public.proxy_requests, public.proxy_tasks,
  public.office_invitations, public.permission_grants
  to service_role;
grant usage, select on sequence public.office_events_id_seq to service_role;

grant execute on function
  public.answer_question(uuid, text),
  public.provide_dependency(uuid, text),
  public.reject_dependency(uuid, text),
  public.office_admin_add_member(uuid, uuid, text, text),
  public.office_admin_list_members(uuid),
  public.office_admin_remove_member(uuid, uuid, text),
  public.office_is_member(uuid),
  public.office_is_owner(uuid)
  to service_role;

grant execute on function
  public.answer_question(uuid, text),
  public.provide_dependency(uuid, text),
  public.reject_dependency(uuid, text),
  public.add_office_member(uuid, text, text),
  public.remove_office_member(uuid, uuid),
  public.list_office_members(uuid),
  public.accept_office_invitations(),
  public.office_is_member(uuid),
  public.office_is_owner(uuid)
  to authenticated;

revoke execute on function
  public.office_set_updated_at(),
  public.office_guard_member_answer(),
  public.office_stamp_member_message(),
  public.office_notify_change(),
  public.office_keep_an_owner()
  from public, anon, authenticated;
