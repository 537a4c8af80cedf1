-- The per-tenant cap on running tasks, mirroring migrations/postgres/0003_running_per_tenant.sql:
-- a capped claim counts each tenant's running tasks.
CREATE INDEX tasks_running_tenant ON tasks (tenant_id) WHERE status = 'running';
