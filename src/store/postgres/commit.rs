//! The fenced worker write: one [`Change`] applied in one transaction, or nothing at all.
//!
//! The transaction first locks the task row *through the fence* (`claimed_by`, `fence`,
//! `status = 'running'`). If that finds nothing the lease is gone (reaped and reclaimed, or the
//! task was cancelled) and the outcome is [`Commit::LeaseLost`] with nothing written. Holding the
//! row lock, it numbers the events from `last_seq`, so seqs stay dense even with concurrent
//! writers (a cancel, a reaper). Batches go in with `UNNEST` so a change costs a fixed number of
//! round trips however many events or ledger entries it carries.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool, Row};

use super::notify;
use crate::domain::task::{Lease, TaskId, TaskStatus};
use crate::store::{Change, Commit, NewArtifact, NewLedgerEntry, NewPlanVersion, StoreError};

pub(super) async fn commit(
    pool: &PgPool,
    lease: &Lease,
    change: Change,
    now: DateTime<Utc>,
) -> Result<Commit, StoreError> {
    let mut tx = pool.begin().await?;
    let held = sqlx::query(
        "SELECT last_seq FROM tasks \
         WHERE id = $1 AND claimed_by = $2 AND fence = $3 AND status = 'running' FOR UPDATE",
    )
    .bind(lease.task_id)
    .bind(&lease.worker_id)
    .bind(lease.fence)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(held) = held else {
        return Ok(Commit::LeaseLost);
    };
    let first_seq = held.try_get::<i64, _>("last_seq")? + 1;
    let count = i64::try_from(change.events.len())
        .map_err(|_| StoreError::Corrupt("too many events in one change".to_string()))?;
    let last_seq = first_seq + count - 1;

    // A task without a lease cannot be running: releasing without a new status requeues it.
    let status = match change.status {
        Some(TaskStatus::Running) | None if change.release => TaskStatus::Queued,
        Some(status) => status,
        None => TaskStatus::Running,
    };
    let keeps_lease = status == TaskStatus::Running;

    sqlx::query(
        "UPDATE tasks SET status = $2, last_seq = $3, updated_at = $4, \
            finished_at = CASE WHEN $5 THEN $4 ELSE finished_at END, \
            claimed_by = CASE WHEN $6 THEN claimed_by END, \
            lease_expires_at = CASE WHEN $6 THEN lease_expires_at END, \
            result = COALESCE($7, result), state = COALESCE($8, state), \
            plan_version = COALESCE($9, plan_version) \
         WHERE id = $1",
    )
    .bind(lease.task_id)
    .bind(status.as_str())
    .bind(last_seq)
    .bind(now)
    .bind(status.is_terminal())
    .bind(keeps_lease)
    .bind(&change.result)
    .bind(&change.state)
    .bind(change.plan_version.as_ref().map(|plan| plan.version))
    .execute(&mut *tx)
    .await?;

    insert_events(&mut tx, lease.task_id, first_seq, change.events, now).await?;
    if let Some(plan) = change.plan_version {
        insert_plan_version(&mut tx, lease.task_id, plan, now).await?;
    }
    insert_ledger(&mut tx, lease.task_id, change.ledger, now).await?;
    insert_artifacts(&mut tx, lease.task_id, change.artifacts, now).await?;

    if count > 0 {
        notify::events(&mut tx, lease.task_id, last_seq).await?;
    }
    if status == TaskStatus::Queued {
        notify::tasks(&mut tx).await?;
    }
    tx.commit().await?;
    Ok(Commit::Applied {
        first_seq,
        last_seq,
    })
}

async fn insert_events(
    conn: &mut PgConnection,
    task_id: TaskId,
    first_seq: i64,
    events: Vec<crate::domain::event::NewEvent>,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    let (kinds, data): (Vec<String>, Vec<serde_json::Value>) = events
        .into_iter()
        .map(|event| (event.kind, event.data))
        .unzip();
    // WITH ORDINALITY numbers the rows from 1 in array order.
    sqlx::query(
        "INSERT INTO events (task_id, seq, kind, data, created_at) \
         SELECT $1, $2 + e.ord - 1, e.kind, e.data, $5 \
         FROM UNNEST($3::text[], $4::jsonb[]) WITH ORDINALITY AS e(kind, data, ord)",
    )
    .bind(task_id)
    .bind(first_seq)
    .bind(kinds)
    .bind(data)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

async fn insert_plan_version(
    conn: &mut PgConnection,
    task_id: TaskId,
    plan: NewPlanVersion,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO plan_versions (task_id, version, reason, caused_by_seq, plan, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(task_id)
    .bind(plan.version)
    .bind(plan.reason)
    .bind(plan.caused_by_seq)
    .bind(plan.plan)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

async fn insert_ledger(
    conn: &mut PgConnection,
    task_id: TaskId,
    entries: Vec<NewLedgerEntry>,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    if entries.is_empty() {
        return Ok(());
    }
    let mut milestones = Vec::with_capacity(entries.len());
    let mut kinds = Vec::with_capacity(entries.len());
    let mut units = Vec::with_capacity(entries.len());
    let mut amounts = Vec::with_capacity(entries.len());
    for entry in entries {
        milestones.push(entry.milestone_id);
        kinds.push(entry.kind);
        units.push(entry.unit);
        amounts.push(entry.amount);
    }
    // ORDER BY ord keeps the bigserial ids in the order the entries were given.
    sqlx::query(
        "INSERT INTO ledger_entries (task_id, milestone_id, kind, unit, amount, created_at) \
         SELECT $1, e.milestone_id, e.kind, e.unit, e.amount, $6 \
         FROM UNNEST($2::text[], $3::text[], $4::text[], $5::bigint[]) \
            WITH ORDINALITY AS e(milestone_id, kind, unit, amount, ord) \
         ORDER BY e.ord",
    )
    .bind(task_id)
    .bind(milestones)
    .bind(kinds)
    .bind(units)
    .bind(amounts)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

async fn insert_artifacts(
    conn: &mut PgConnection,
    task_id: TaskId,
    artifacts: Vec<NewArtifact>,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    if artifacts.is_empty() {
        return Ok(());
    }
    let mut milestones = Vec::with_capacity(artifacts.len());
    let mut names = Vec::with_capacity(artifacts.len());
    let mut values = Vec::with_capacity(artifacts.len());
    for artifact in artifacts {
        milestones.push(artifact.milestone_id);
        names.push(artifact.name);
        values.push(artifact.value);
    }
    sqlx::query(
        "INSERT INTO artifacts (task_id, milestone_id, name, value, created_at) \
         SELECT $1, e.milestone_id, e.name, e.value, $5 \
         FROM UNNEST($2::text[], $3::text[], $4::jsonb[]) \
            WITH ORDINALITY AS e(milestone_id, name, value, ord) \
         ORDER BY e.ord",
    )
    .bind(task_id)
    .bind(milestones)
    .bind(names)
    .bind(values)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}
