-- The fence (office_cluster.fence, migration 20261126040000) also covers
-- the two deliveries it missed: a dependency marked delivered, and a task
-- (invocation) moved to in_progress when it is typed into its callee or
-- back to pending when its callee's process died. Both act for the office,
-- so only the node holding its lease may make them (docs/notes/cluster.md).

-- +goose Up
create trigger dependency_requests_fence before update on public.dependency_requests
  for each row when (new.delivered_at is not null and old.delivered_at is null)
  execute function office_cluster.fence();
create trigger agent_invocations_fence before update on public.agent_invocations
  for each row when ((old.status = 'pending' and new.status = 'in_progress')
                  or (old.status = 'in_progress' and new.status = 'pending'))
  execute function office_cluster.fence();
