-- office_events.raw is an agent's raw output: the text of the block an
-- event records, as the agent printed it. An agent that prints a variable
-- of its environment (an API key from its launch spec or a provided
-- dependency) puts the value there, so members do not read it: select on
-- office_events is granted column by column without raw, as
-- office_agents.launch_spec and dependency_requests.value are. Realtime
-- sends each subscriber only the columns its role may select, so raw does
-- not travel to browsers either. The server (service_role) keeps it for
-- the audit log and the admin API.

-- +goose Up
revoke select on table public.office_events from authenticated;
grant select (id, office_id, agent_id, session_id, kind, payload, dedupe_key, created_at)
  on public.office_events to authenticated;
