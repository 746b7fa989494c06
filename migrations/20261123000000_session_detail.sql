-- Why a session is in its status (office.SessionRecord.Detail): the text of a
-- dialog the agent shows instead of its input prompt (the new status
-- needs_attention), or the exit code and last screen lines of an agent that
-- exited, crashed or failed; '' otherwise. The server rewrites it with every
-- status it records.
--
-- Members of the office read it with the rest of the row: select on
-- agent_sessions is granted on the whole table (office_rls), which covers
-- columns added later, and the member_read policy picks the rows. It never
-- holds secrets. The server cuts it to 4000 bytes (office.MaxSessionDetail);
-- the check holds any other writer to the same cap.
--
-- agent_sessions is in the supabase_realtime publication without a column
-- list and has replica identity full (office_change_feed), so detail travels
-- with its changes; no change-feed trigger watches agent_sessions.

-- +goose Up
alter table public.agent_sessions
  drop constraint agent_sessions_status_check,
  add constraint agent_sessions_status_check
    check (status in ('starting', 'ready', 'busy', 'waiting', 'needs_attention', 'stopped', 'exited', 'crashed', 'failed')),
  add column detail text not null default ''
    constraint agent_sessions_detail_check check (octet_length(detail) <= 4000);
