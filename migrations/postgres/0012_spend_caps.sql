-- Per-tenant spend caps: what each tenant's tasks were charged in money, per hour (UTC), kept by
-- the same statement that books the charges, so a period's spend is a sum of at most a month's
-- hours however many calls it took; and the time before which a queued task is not claimed
-- (a task whose next call its tenant's period cannot cover waits for the next period).
-- Embedded by crates/cairn/src/store/postgres/schema.rs.
CREATE TABLE tenant_spend (
    tenant_id  text        NOT NULL,
    hour       timestamptz NOT NULL,
    cost       bigint      NOT NULL CHECK (cost >= 0),
    -- The part of `cost` booked from estimates (calls whose endpoint reported no usage).
    estimated_cost bigint  NOT NULL DEFAULT 0 CHECK (estimated_cost >= 0),
    PRIMARY KEY (tenant_id, hour)
);
ALTER TABLE tasks ADD COLUMN not_before timestamptz;
