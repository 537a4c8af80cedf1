//! Leases: claim, heartbeat and the reaper (the fenced commit is in `commit`).
//!
//! The invariant these keep: a task is `running` exactly when it holds a lease (`claimed_by` and
//! `lease_expires_at` set). Anything that ends a lease (a terminal status, a release, a reap)
//! clears both columns in the same statement, so a running task can never be stranded without a
//! lease the reaper would notice.

use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use sqlx::Row;

use super::SqliteStore;
use super::history::append_event;
use super::rows::{self, id_text, millis, task_columns, task_from_row};
use crate::domain::event::kinds;
use crate::domain::task::{Lease, TaskId};
use crate::store::rules;
use crate::store::{ClaimParams, Claimed, LeaseStatus, NodeLock, StoreError, Wakeup};

/// The claim statement around a subquery choosing the task (`?1` worker id, `?2` lease expiry,
/// `?3` now).
macro_rules! claim_where {
    ($pick:literal) => {
        concat!(
            "UPDATE tasks SET status = 'running', claimed_by = ?1, lease_expires_at = ?2, \
             fence = fence + 1, attempts = attempts + 1, started_at = COALESCE(started_at, ?3), \
             updated_at = ?3, last_seq = last_seq + 1 \
             WHERE status = 'queued' AND id = (",
            $pick,
            ") RETURNING ",
            task_columns!(),
            ", state, fence"
        )
    };
}

/// Without a cap: the oldest queued task that may run now (`not_before`), of a tenant not
/// passed over (`?4`, a JSON array: the tenants at their spend cap) and with no task waiting
/// for its spend period's end, judged in this statement: the pool's list is read before the
/// claim, and a task released for the spend cap in between would otherwise let a sibling start.
const CLAIM_OLDEST: &str = claim_where!(
    "SELECT id FROM tasks WHERE status = 'queued' \
         AND (not_before IS NULL OR not_before <= ?3) \
         AND tenant_id NOT IN (SELECT value FROM json_each(?4)) \
         AND tenant_id NOT IN (SELECT tenant_id FROM tasks \
         WHERE status = 'queued' AND not_before > ?3) \
     ORDER BY id LIMIT 1"
);

/// With a cap: the same, of a tenant with fewer than `?4` running tasks (`?5` passed over).
/// The running set is small (bounded by the workers) and indexed by tenant, so the full
/// tenants are computed once per claim.
const CLAIM_UNDER_CAP: &str = claim_where!(
    "SELECT id FROM tasks WHERE status = 'queued' \
         AND (not_before IS NULL OR not_before <= ?3) \
         AND tenant_id NOT IN (SELECT value FROM json_each(?5)) \
         AND tenant_id NOT IN (SELECT tenant_id FROM tasks \
         WHERE status = 'queued' AND not_before > ?3) \
         AND tenant_id NOT IN ( \
         SELECT tenant_id FROM tasks WHERE status = 'running' \
         GROUP BY tenant_id HAVING count(*) >= ?4) \
     ORDER BY id LIMIT 1"
);

/// `now + ttl` in stored milliseconds, saturating rather than panicking on absurd TTLs.
fn expiry_ms(now: DateTime<Utc>, ttl: Duration) -> i64 {
    millis(now).saturating_add(ttl.num_milliseconds())
}

impl SqliteStore {
    /// A node's lock: an exclusive lock on a file beside the database, held while it lives.
    pub(super) fn lock_node_file(&self, node: &str) -> Result<Option<NodeLock>, StoreError> {
        let path = format!(
            "{}.node-{:016x}.lock",
            self.path.display(),
            crate::store::node_key(node)
        );
        let io = |error| StoreError::Database(sqlx::Error::Io(error));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(NodeLock::new(Box::new(file)))),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(error)) => Err(io(error)),
        }
    }

    pub(super) async fn claim_tx(
        &self,
        params: ClaimParams<'_>,
    ) -> Result<Option<Claimed>, StoreError> {
        let now_ms = millis(params.now);
        let expires_ms = expiry_ms(params.now, params.lease_ttl);
        let cap = params
            .max_running_per_tenant
            .map(|cap| i64::from(cap.get()));
        let query = sqlx::query(match cap {
            None => CLAIM_OLDEST,
            Some(_) => CLAIM_UNDER_CAP,
        })
        .bind(params.worker_id)
        .bind(expires_ms)
        .bind(now_ms);
        let query = match cap {
            Some(cap) => query.bind(cap),
            None => query,
        };
        let passed_over = serde_json::to_string(params.passed_over)
            .map_err(|error| StoreError::Corrupt(error.to_string()))?;
        let query = query.bind(passed_over);
        let mut tx = self.write().await?;
        // One statement under the write lock: no other claimer can see the row in between, and
        // no other claim can start a task of the same tenant between the count and the claim.
        let row = query.fetch_optional(&mut *tx).await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let task = task_from_row(&row)?;
        let state = rows::opt_json(&row, "state")?;
        let fence: i64 = row.try_get("fence")?;
        let data = json!({
            "worker_id": params.worker_id,
            "fence": fence,
            "attempt": task.attempts,
            "lease_expires_at": rows::from_millis(expires_ms)?,
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
            worker_id: params.worker_id.to_owned(),
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
        Ok(rules::lease_status(done.rows_affected()))
    }

    /// Expired leases (`held_by` None, `task.lease_expired`), or every lease held by a worker
    /// id starting with `held_by` (`task.released`, reason `owner_restarted`).
    pub(super) async fn reap_expired_tx(
        &self,
        now: DateTime<Utc>,
        held_by: Option<&str>,
    ) -> Result<Vec<TaskId>, StoreError> {
        let now_ms = millis(now);
        let mut tx = self.write().await?;
        // No ORDER BY here: it would make SQLite walk the primary key over every task ever
        // created instead of the small partial index of running leases; sort afterwards.
        let mut expired = sqlx::query(
            "SELECT id, claimed_by, fence, lease_expires_at FROM tasks \
             WHERE status = 'running' AND CASE WHEN ?2 IS NULL THEN lease_expires_at < ?1 \
                 ELSE substr(claimed_by, 1, length(?2)) = ?2 END",
        )
        .bind(now_ms)
        .bind(held_by)
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
            let expired_at: Option<i64> = row.try_get("lease_expires_at")?;
            let expired_at = expired_at.map(rows::from_millis).transpose()?;
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
            let (kind, data) = match held_by {
                None => (
                    kinds::TASK_LEASE_EXPIRED,
                    json!({ "worker_id": worker, "fence": fence, "lease_expires_at": expired_at }),
                ),
                Some(_) => (
                    kinds::TASK_RELEASED,
                    json!({ "worker_id": worker, "fence": fence, "reason": "owner_restarted" }),
                ),
            };
            append_event(&mut tx, id, seq, kind, &data, now_ms).await?;
            let task_id = rows::parse_id(id)?;
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
