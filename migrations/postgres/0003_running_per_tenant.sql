-- The per-tenant cap on running tasks (`max_running_per_tenant`, issue #13): a capped claim
-- counts each tenant's running tasks, so index them by tenant. Partial, like the reaper's
-- index: only running rows, a set bounded by the workers of every replica.
CREATE INDEX tasks_running_tenant_idx ON tasks (tenant_id) WHERE status = 'running';
