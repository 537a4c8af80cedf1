//! Lease writes: claim, heartbeat, the fenced commit, and the reaper.
//!
//! The invariant these keep: a task is `running` exactly when it holds a lease (`claimed_by` and
//! `lease_expires_at` set). Anything that ends a lease (a terminal status, a release, a reap)
//! clears both columns in the same statement, so a running task can never be stranded without a
//! lease the reaper would notice.

use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use sqlx::{Row, SqliteConnection};

use super::SqliteStore;
use super::codec::{self, id_text, millis, task_columns, task_from_row};
use super::tasks::append_event;
use crate::domain::event::kinds;
use crate::domain::task::{Lease, TaskId, TaskStatus};
use crate::store::{Change, Claimed, Commit, LeaseStatus, StoreError, Wakeup};

/// `now + ttl` in stored milliseconds, saturating rather than panicking on absurd TTLs.
fn expiry_ms(now: DateTime<Utc>, ttl: Duration) -> i64 {
    millis(now).saturating_add(ttl.num_milliseconds())
}

impl SqliteStore {
    pub(super) async fn claim_tx(
        &self,
        worker_id: &str,
        now: DateTime<Utc>,
        lease_ttl: Duration,
    ) -> Result<Option<Claimed>, StoreError> {
        let now_ms = millis(now);
        let expires_ms = expiry_ms(now, lease_ttl);
        let mut tx = self.write().await?;
        // One statement under the write lock: no other claimer can see the row in between.
        let row = sqlx::query(concat!(
            "UPDATE tasks SET status = 'running', claimed_by = ?1, lease_expires_at = ?2, \
             fence = fence + 1, attempts = attempts + 1, started_at = COALESCE(started_at, ?3), \
             updated_at = ?3, last_seq = last_seq + 1 \
             WHERE status = 'queued' \
               AND id = (SELECT id FROM tasks WHERE status = 'queued' ORDER BY id LIMIT 1) \
             RETURNING ",
            task_columns!(),
            ", state, fence"
        ))
        .bind(worker_id)
        .bind(expires_ms)
        .bind(now_ms)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let task = task_from_row(&row)?;
        let state = codec::opt_json(&row, "state")?;
        let fence: i64 = row.try_get("fence")?;
        let data = json!({
            "worker_id": worker_id,
            "fence": fence,
            "attempt": task.attempts,
            "lease_expires_at": codec::from_millis(expires_ms)?,
        });
        let id = id_text(task.id);
        append_event(
            &mut tx,
            &id,
            task.last_seq,
            kinds::TASK_CLAIMED,
            &data,
            now_ms,
        )
        .await?;
        tx.commit().await?;

        self.publish(Wakeup::Events {
            task_id: task.id,
            last_seq: task.last_seq,
        });
        let lease = Lease {
            task_id: task.id,
            worker_id: worker_id.to_owned(),
            fence,
        };
        Ok(Some(Claimed { task, lease, state }))
    }

    pub(super) async fn heartbeat_row(
        &self,
        lease: &Lease,
        now: DateTime<Utc>,
        lease_ttl: Duration,
    ) -> Result<LeaseStatus, StoreError> {
        // A single autocommit statement takes the write lock directly; no upgrade to deadlock on.
        let done = sqlx::query(
            "UPDATE tasks SET lease_expires_at = ?1 \
             WHERE id = ?2 AND claimed_by = ?3 AND fence = ?4 AND status = 'running'",
        )
        .bind(expiry_ms(now, lease_ttl))
        .bind(id_text(lease.task_id))
        .bind(&lease.worker_id)
        .bind(lease.fence)
        .execute(&self.pool)
        .await?;
        Ok(if done.rows_affected() == 1 {
            LeaseStatus::Held
        } else {
            LeaseStatus::Lost
        })
    }

    pub(super) async fn commit_tx(
        &self,
        lease: &Lease,
        change: Change,
        now: DateTime<Utc>,
    ) -> Result<Commit, StoreError> {
        let now_ms = millis(now);
        let id = id_text(lease.task_id);
        let mut tx = self.write().await?;
        let Some(before) = fenced_last_seq(&mut tx, &id, lease).await? else {
            // Dropping `tx` rolls back; nothing was written.
            return Ok(Commit::LeaseLost);
        };
        let seq = insert_change_rows(&mut tx, &id, before, &change, now_ms).await?;
        let status = resulting_status(&change);
        update_task_row(&mut tx, &id, status, seq, &change, now_ms).await?;
        tx.commit().await?;

        if seq > before {
            self.publish(Wakeup::Events {
                task_id: lease.task_id,
                last_seq: seq,
            });
        }
        if status == TaskStatus::Queued {
            self.publish(Wakeup::TaskRunnable);
        }
        Ok(Commit::Applied {
            first_seq: before + 1,
            last_seq: seq,
        })
    }

    pub(super) async fn reap_expired_tx(
        &self,
        now: DateTime<Utc>,
    ) -> Result<Vec<TaskId>, StoreError> {
        let now_ms = millis(now);
        let mut tx = self.write().await?;
        // No ORDER BY here: it would make SQLite walk the primary key over every task ever
        // created instead of the small partial index of running leases; sort afterwards.
        let mut expired = sqlx::query(
            "SELECT id, claimed_by, fence, lease_expires_at FROM tasks \
             WHERE status = 'running' AND lease_expires_at < ?1",
        )
        .bind(now_ms)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(|row| Ok((row.try_get::<String, _>("id")?, row)))
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
        expired.sort_by(|(a, _), (b, _)| a.cmp(b));
        let mut reaped = Vec::with_capacity(expired.len());
        let mut wakeups = Vec::with_capacity(expired.len());
        for (id, row) in &expired {
            let worker: Option<String> = row.try_get("claimed_by")?;
            let fence: i64 = row.try_get("fence")?;
            let expired_at = codec::from_millis(row.try_get("lease_expires_at")?)?;
            // Clearing `claimed_by` is what turns the old worker's next fenced write into
            // LeaseLost; the next claim bumps the fence as well.
            let seq_row = sqlx::query(
                "UPDATE tasks SET status = 'queued', claimed_by = NULL, lease_expires_at = NULL, \
                 updated_at = ?2, last_seq = last_seq + 1 WHERE id = ?1 RETURNING id, last_seq",
            )
            .bind(id)
            .bind(now_ms)
            .fetch_one(&mut *tx)
            .await?;
            let seq: i64 = seq_row.try_get("last_seq")?;
            let data =
                json!({ "worker_id": worker, "fence": fence, "lease_expires_at": expired_at });
            append_event(&mut tx, id, seq, kinds::TASK_LEASE_EXPIRED, &data, now_ms).await?;
            let task_id = codec::parse_id(id)?;
            reaped.push(task_id);
            wakeups.push(Wakeup::Events {
                task_id,
                last_seq: seq,
            });
        }
        tx.commit().await?;

        for wakeup in wakeups {
            self.publish(wakeup);
        }
        if !reaped.is_empty() {
            self.publish(Wakeup::TaskRunnable);
        }
        Ok(reaped)
    }
}

/// The task's `last_seq` when `lease` still holds it (right worker, current fence, running).
async fn fenced_last_seq(
    conn: &mut SqliteConnection,
    id: &str,
    lease: &Lease,
) -> Result<Option<i64>, StoreError> {
    let row = sqlx::query(
        "SELECT last_seq FROM tasks \
         WHERE id = ?1 AND claimed_by = ?2 AND fence = ?3 AND status = 'running'",
    )
    .bind(id)
    .bind(&lease.worker_id)
    .bind(lease.fence)
    .fetch_optional(&mut *conn)
    .await?;
    match row {
        Some(row) => Ok(Some(row.try_get("last_seq")?)),
        None => Ok(None),
    }
}

/// The change's events (numbered after `before`), plan version, ledger entries and artifacts;
/// returns the last event sequence number.
async fn insert_change_rows(
    conn: &mut SqliteConnection,
    id: &str,
    before: i64,
    change: &Change,
    now_ms: i64,
) -> Result<i64, StoreError> {
    let mut seq = before;
    for event in &change.events {
        seq += 1;
        append_event(conn, id, seq, &event.kind, &event.data, now_ms).await?;
    }
    if let Some(plan) = &change.plan_version {
        sqlx::query(
            "INSERT INTO plan_versions (task_id, version, reason, caused_by_seq, plan, \
             created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .bind(id)
        .bind(plan.version)
        .bind(&plan.reason)
        .bind(plan.caused_by_seq)
        .bind(codec::json_text(&plan.plan))
        .bind(now_ms)
        .execute(&mut *conn)
        .await?;
    }
    for entry in &change.ledger {
        sqlx::query(
            "INSERT INTO ledger_entries (task_id, milestone_id, kind, unit, amount, \
             created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .bind(id)
        .bind(&entry.milestone_id)
        .bind(&entry.kind)
        .bind(&entry.unit)
        .bind(entry.amount)
        .bind(now_ms)
        .execute(&mut *conn)
        .await?;
    }
    for artifact in &change.artifacts {
        sqlx::query(
            "INSERT INTO artifacts (task_id, milestone_id, name, value, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .bind(id)
        .bind(&artifact.milestone_id)
        .bind(&artifact.name)
        .bind(codec::json_text(&artifact.value))
        .bind(now_ms)
        .execute(&mut *conn)
        .await?;
    }
    Ok(seq)
}

/// The task row after the commit: status, sequence, result, checkpoint, plan version, and the
/// lease cleared when the status leaves `running`.
async fn update_task_row(
    conn: &mut SqliteConnection,
    id: &str,
    status: TaskStatus,
    seq: i64,
    change: &Change,
    now_ms: i64,
) -> Result<(), StoreError> {
    let ends_lease = status != TaskStatus::Running;
    sqlx::query(
        "UPDATE tasks SET status = ?2, updated_at = ?3, last_seq = ?4, \
         finished_at = CASE WHEN ?5 THEN ?3 ELSE finished_at END, \
         result = COALESCE(?6, result), state = COALESCE(?7, state), \
         plan_version = COALESCE(?8, plan_version), \
         claimed_by = CASE WHEN ?9 THEN NULL ELSE claimed_by END, \
         lease_expires_at = CASE WHEN ?9 THEN NULL ELSE lease_expires_at END \
         WHERE id = ?1",
    )
    .bind(id)
    .bind(status.as_str())
    .bind(now_ms)
    .bind(seq)
    .bind(status.is_terminal())
    .bind(change.result.as_ref().map(codec::json_text))
    .bind(change.state.as_ref().map(codec::json_text))
    .bind(change.plan_version.as_ref().map(|plan| plan.version))
    .bind(ends_lease)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The status a commit leaves the task in. A release (or an explicit `queued`) hands the task
/// back to the queue; releasing while keeping `running` would strand it without a lease.
fn resulting_status(change: &Change) -> TaskStatus {
    match change.status {
        Some(status) if status != TaskStatus::Running => status,
        _ if change.release => TaskStatus::Queued,
        _ => TaskStatus::Running,
    }
}
