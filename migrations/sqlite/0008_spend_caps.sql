-- Per-tenant spend caps, mirroring migrations/postgres/0012_spend_caps.sql: money charged per
-- tenant and hour (UTC, milliseconds since the epoch, as every time here), and the time before
-- which a queued task is not claimed.
CREATE TABLE tenant_spend (
    tenant_id  TEXT    NOT NULL,
    hour       INTEGER NOT NULL,
    cost       INTEGER NOT NULL CHECK (cost >= 0),
    estimated_cost INTEGER NOT NULL DEFAULT 0 CHECK (estimated_cost >= 0),
    PRIMARY KEY (tenant_id, hour)
) STRICT;
ALTER TABLE tasks ADD COLUMN not_before INTEGER;
