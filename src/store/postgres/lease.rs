//! Leases: claim, heartbeat and the reaper.
//!
//! Claim and reap are each a single statement (autocommit), so the row change and its event
//! commit together in one round trip; their hints go out after it. `FOR UPDATE SKIP LOCKED` lets any
//! number of workers on any number of replicas claim at once: each skips rows another claimer
//! has locked, and a row that stopped being `queued` while we waited is re-checked and skipped.

use chrono::{DateTime, Duration, Utc};
use sqlx::{PgPool, Row};

use super::outbox::Outbox;
use super::rows::{self, task_columns};
use crate::domain::event::kinds;
use crate::domain::task::{Lease, TaskId};
use crate::store::rules;
use crate::store::{Claimed, LeaseStatus, StoreError};

pub(super) async fn claim(
    pool: &PgPool,
    hints: &Outbox,
    worker_id: &str,
    now: DateTime<Utc>,
    lease_ttl: Duration,
) -> Result<Option<Claimed>, StoreError> {
    let row = sqlx::query(concat!(
        "WITH picked AS ( \
            SELECT id FROM tasks WHERE status = 'queued' ORDER BY id LIMIT 1 \
            FOR UPDATE SKIP LOCKED \
         ), claimed AS ( \
            UPDATE tasks t SET status = 'running', claimed_by = $1, lease_expires_at = $3, \
                fence = t.fence + 1, attempts = t.attempts + 1, last_seq = t.last_seq + 1, \
                started_at = COALESCE(t.started_at, $2), updated_at = $2 \
            FROM picked WHERE t.id = picked.id \
            RETURNING t.* \
         ), logged AS ( \
            INSERT INTO events (task_id, seq, kind, data, created_at) \
            SELECT id, last_seq, $4, \
                jsonb_build_object('worker_id', claimed_by, 'fence', fence, \
                    'attempt', attempts, 'lease_expires_at', lease_expires_at), $2 \
            FROM claimed \
         ) \
         SELECT ",
        task_columns!(),
        ", state, fence FROM claimed"
    ))
    .bind(worker_id)
    .bind(now)
    .bind(now + lease_ttl)
    .bind(kinds::TASK_CLAIMED)
    .fetch_optional(pool)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let task = rows::task(&row)?;
    hints.events(task.id, task.last_seq);
    Ok(Some(Claimed {
        lease: Lease {
            task_id: task.id,
            worker_id: worker_id.to_string(),
            fence: row.try_get("fence")?,
        },
        state: row.try_get("state")?,
        task,
    }))
}

pub(super) async fn heartbeat(
    pool: &PgPool,
    lease: &Lease,
    now: DateTime<Utc>,
    lease_ttl: Duration,
) -> Result<LeaseStatus, StoreError> {
    let updated = sqlx::query(
        "UPDATE tasks SET lease_expires_at = $4 \
         WHERE id = $1 AND claimed_by = $2 AND fence = $3 AND status = 'running'",
    )
    .bind(lease.task_id)
    .bind(&lease.worker_id)
    .bind(lease.fence)
    .bind(now + lease_ttl)
    .execute(pool)
    .await?
    .rows_affected();
    Ok(rules::lease_status(updated))
}

/// Requeues every running task whose lease ended before `now`. The fence is left as is: the
/// cleared `claimed_by` already refuses the old worker, and the next claim bumps the fence.
pub(super) async fn reap_expired(
    pool: &PgPool,
    hints: &Outbox,
    now: DateTime<Utc>,
) -> Result<Vec<TaskId>, StoreError> {
    requeue(pool, hints, now, None).await
}

/// Requeues the running tasks a dead process of this node held (`claimed_by` starting with
/// `prefix`), each with a `task.released` event (reason `owner_restarted`).
pub(super) async fn reclaim(
    pool: &PgPool,
    hints: &Outbox,
    prefix: &str,
    now: DateTime<Utc>,
) -> Result<Vec<TaskId>, StoreError> {
    requeue(pool, hints, now, Some(prefix)).await
}

/// Expired leases (`held_by` None, `task.lease_expired`), or every lease held by a worker id
/// starting with `held_by` (`task.released`, reason `owner_restarted`).
async fn requeue(
    pool: &PgPool,
    hints: &Outbox,
    now: DateTime<Utc>,
    held_by: Option<&str>,
) -> Result<Vec<TaskId>, StoreError> {
    let kind = match held_by {
        None => kinds::TASK_LEASE_EXPIRED,
        Some(_) => kinds::TASK_RELEASED,
    };
    let found = sqlx::query(
        "WITH expired AS ( \
            SELECT id, claimed_by, fence, lease_expires_at FROM tasks \
            WHERE status = 'running' AND CASE WHEN $3::text IS NULL THEN lease_expires_at < $1 \
                ELSE starts_with(claimed_by, $3::text) END \
            ORDER BY id FOR UPDATE SKIP LOCKED \
         ), requeued AS ( \
            UPDATE tasks t SET status = 'queued', claimed_by = NULL, lease_expires_at = NULL, \
                last_seq = t.last_seq + 1, updated_at = $1 \
            FROM expired WHERE t.id = expired.id \
            RETURNING t.id, t.last_seq, expired.claimed_by, expired.fence, \
                expired.lease_expires_at \
         ), logged AS ( \
            INSERT INTO events (task_id, seq, kind, data, created_at) \
            SELECT id, last_seq, $2, \
                CASE WHEN $3::text IS NULL THEN \
                    jsonb_build_object('worker_id', claimed_by, 'fence', fence, \
                        'lease_expires_at', lease_expires_at) \
                ELSE jsonb_build_object('worker_id', claimed_by, 'fence', fence, \
                        'reason', 'owner_restarted') END, $1 \
            FROM requeued \
         ) \
         SELECT id, last_seq FROM requeued ORDER BY id",
    )
    .bind(now)
    .bind(kind)
    .bind(held_by)
    .fetch_all(pool)
    .await?;
    let mut reaped = Vec::with_capacity(found.len());
    for row in &found {
        let id: TaskId = row.try_get("id")?;
        hints.events(id, row.try_get("last_seq")?);
        reaped.push(id);
    }
    if !reaped.is_empty() {
        hints.runnable();
    }
    Ok(reaped)
}

/// Takes the session-level advisory lock of `node` on a connection of its own, held for as
/// long as the returned connection lives; `None` when another live session holds it.
pub(super) async fn lock_node(
    pool: &PgPool,
    node: &str,
) -> Result<Option<sqlx::PgConnection>, StoreError> {
    let mut conn = pool.acquire().await?.detach();
    let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(crate::store::node_key(node))
        .fetch_one(&mut conn)
        .await?;
    Ok(locked.then_some(conn))
}
