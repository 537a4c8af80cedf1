//! The fenced worker write: one [`Change`] applied by one statement, or nothing at all.
//!
//! The statement's first step updates the task row *through the fence* (`claimed_by`, `fence`,
//! `status = 'running'`), which also row-locks it and bumps `last_seq` by the number of events.
//! Every insert that follows reads from that step, so when the fence does not match nothing at
//! all is written and the outcome is [`Commit::LeaseLost`]. Events are numbered from the bumped
//! `last_seq` while the row lock is held, so seqs stay dense even against a concurrent cancel or
//! reaper. Batches are bound as arrays and expanded with `UNNEST`: a change costs one round trip
//! and one implicit transaction however many rows it carries; the hints go out after it.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgPool, Row};

use super::outbox::Outbox;
use crate::domain::task::Lease;
use crate::store::rules::CommitEffect;
use crate::store::{Change, Commit, StoreError};

const COMMIT: &str = "\
WITH moved AS ( \
    UPDATE tasks SET status = $4, last_seq = last_seq + $5, updated_at = $6, \
        finished_at = CASE WHEN $7 THEN $6 ELSE finished_at END, \
        claimed_by = CASE WHEN $8 THEN claimed_by END, \
        lease_expires_at = CASE WHEN $8 THEN lease_expires_at END, \
        result = COALESCE($9, result), state = COALESCE($10, state), \
        plan_version = COALESCE($11, plan_version) \
    WHERE id = $1 AND claimed_by = $2 AND fence = $3 AND status = 'running' \
    RETURNING id, last_seq \
), logged AS ( \
    INSERT INTO events (task_id, seq, kind, data, created_at) \
    SELECT m.id, m.last_seq - $5 + e.ord, e.kind, e.data, $6 \
    FROM moved m, UNNEST($12::text[], $13::jsonb[]) WITH ORDINALITY AS e(kind, data, ord) \
), planned AS ( \
    INSERT INTO plan_versions (task_id, version, reason, caused_by_seq, plan, created_at) \
    SELECT m.id, $11, $14, $15, $16, $6 FROM moved m WHERE $11::integer IS NOT NULL \
), charged AS ( \
    INSERT INTO ledger_entries (task_id, milestone_id, kind, unit, amount, created_at) \
    SELECT m.id, e.milestone_id, e.kind, e.unit, e.amount, $6 \
    FROM moved m, UNNEST($17::text[], $18::text[], $19::text[], $20::bigint[]) \
        WITH ORDINALITY AS e(milestone_id, kind, unit, amount, ord) \
    ORDER BY e.ord \
), kept AS ( \
    INSERT INTO artifacts (task_id, milestone_id, name, value, created_at) \
    SELECT m.id, e.milestone_id, e.name, e.value, $6 \
    FROM moved m, UNNEST($21::text[], $22::text[], $23::jsonb[]) \
        WITH ORDINALITY AS e(milestone_id, name, value, ord) \
    ORDER BY e.ord \
) \
SELECT last_seq FROM moved";

pub(super) async fn commit(
    pool: &PgPool,
    hints: &Outbox,
    lease: &Lease,
    change: Change,
    now: DateTime<Utc>,
) -> Result<Commit, StoreError> {
    let effect = CommitEffect::of(&change);
    let count = i64::try_from(change.events.len())
        .map_err(|_| StoreError::Corrupt("too many events in one change".to_string()))?;
    let columns = Columns::from(change.events, change.ledger, change.artifacts);
    let plan = change.plan_version;

    let row = sqlx::query(COMMIT)
        .bind(lease.task_id)
        .bind(&lease.worker_id)
        .bind(lease.fence)
        .bind(effect.status.as_str())
        .bind(count)
        .bind(now)
        .bind(effect.sets_finished_at())
        .bind(effect.keeps_lease())
        .bind(change.result)
        .bind(change.state)
        .bind(plan.as_ref().map(|plan| plan.version))
        .bind(columns.event_kinds)
        .bind(columns.event_data)
        .bind(plan.as_ref().map(|plan| plan.reason.clone()))
        .bind(plan.as_ref().and_then(|plan| plan.caused_by_seq))
        .bind(plan.map(|plan| plan.plan))
        .bind(columns.ledger_milestones)
        .bind(columns.ledger_kinds)
        .bind(columns.ledger_units)
        .bind(columns.ledger_amounts)
        .bind(columns.artifact_milestones)
        .bind(columns.artifact_names)
        .bind(columns.artifact_values)
        .fetch_optional(pool)
        .await?;
    let Some(row) = row else {
        return Ok(Commit::LeaseLost);
    };
    let last_seq: i64 = row.try_get("last_seq")?;
    hints.publish(effect.wakeups(lease.task_id, last_seq, count));
    Ok(CommitEffect::applied(last_seq, count))
}

/// A change's rows turned inside out: one array per column, as `UNNEST` wants them.
#[derive(Default)]
struct Columns {
    event_kinds: Vec<String>,
    event_data: Vec<Value>,
    ledger_milestones: Vec<Option<String>>,
    ledger_kinds: Vec<String>,
    ledger_units: Vec<String>,
    ledger_amounts: Vec<i64>,
    artifact_milestones: Vec<String>,
    artifact_names: Vec<String>,
    artifact_values: Vec<Value>,
}

impl Columns {
    fn from(
        events: Vec<crate::domain::event::NewEvent>,
        ledger: Vec<crate::store::NewLedgerEntry>,
        artifacts: Vec<crate::store::NewArtifact>,
    ) -> Self {
        let mut columns = Columns::default();
        for event in events {
            columns.event_kinds.push(event.kind);
            columns.event_data.push(event.data);
        }
        for entry in ledger {
            columns.ledger_milestones.push(entry.milestone_id);
            columns.ledger_kinds.push(entry.kind);
            columns.ledger_units.push(entry.unit);
            columns.ledger_amounts.push(entry.amount);
        }
        for artifact in artifacts {
            columns.artifact_milestones.push(artifact.milestone_id);
            columns.artifact_names.push(artifact.name);
            columns.artifact_values.push(artifact.value);
        }
        columns
    }
}
