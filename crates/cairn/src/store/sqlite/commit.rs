//! The fenced worker write: one [`Change`] applied in one `BEGIN IMMEDIATE` transaction, or
//! nothing at all.
//!
//! The transaction first reads the task's `last_seq` *through the fence* (`claimed_by`, `fence`,
//! `status = 'running'`); when that finds no row, dropping the transaction writes nothing and the
//! outcome is [`Commit::LeaseLost`]. Otherwise the events are numbered after that `last_seq`
//! while the write lock is held (so seqs stay dense), the plan version, ledger entries and
//! artifacts are inserted, and the task row is updated as [`CommitEffect`] says: status,
//! `finished_at` for a terminal status, the lease cleared unless still running. Hints go out
//! after commit.

use chrono::{DateTime, Utc};
use sqlx::{Row, SqliteConnection};

use super::SqliteStore;
use super::history::append_event;
use super::rows::{self, id_text, millis};
use super::spend::HOUR_MS;
use crate::domain::task::Lease;
use crate::store::rules::CommitEffect;
use crate::store::{Change, Commit, StateJson, StoreError};

impl SqliteStore {
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
        let effect = CommitEffect::of(&change);
        update_task_row(&mut tx, &id, effect, seq, &change, now_ms).await?;
        tx.commit().await?;

        let events = seq - before;
        self.publish_all(effect.wakeups(lease.task_id, seq, events));
        Ok(CommitEffect::applied(seq, events))
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
        .bind(rows::json_text(&plan.plan))
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
    let charged = change.charged_cost();
    if charged > 0 {
        // The tenant's spend per hour, booked with the charges (`Store::spend`).
        sqlx::query(
            "INSERT INTO tenant_spend (tenant_id, hour, cost, estimated_cost) \
             SELECT tenant_id, ?2, ?3, ?4 FROM tasks WHERE id = ?1 \
             ON CONFLICT (tenant_id, hour) DO UPDATE SET cost = cost + excluded.cost, \
                 estimated_cost = estimated_cost + excluded.estimated_cost",
        )
        .bind(id)
        .bind(now_ms - now_ms.rem_euclid(HOUR_MS))
        .bind(charged)
        .bind(change.estimated_cost())
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
        .bind(rows::json_text(&artifact.value))
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
    effect: CommitEffect,
    seq: i64,
    change: &Change,
    now_ms: i64,
) -> Result<(), StoreError> {
    let ends_lease = !effect.keeps_lease();
    sqlx::query(
        "UPDATE tasks SET status = ?2, updated_at = ?3, last_seq = ?4, \
         finished_at = CASE WHEN ?5 THEN ?3 ELSE finished_at END, \
         result = COALESCE(?6, result), state = COALESCE(?7, state), \
         plan_version = COALESCE(?8, plan_version), \
         claimed_by = CASE WHEN ?9 THEN NULL ELSE claimed_by END, \
         lease_expires_at = CASE WHEN ?9 THEN NULL ELSE lease_expires_at END, \
         not_before = ?10 \
         WHERE id = ?1",
    )
    .bind(id)
    .bind(effect.status.as_str())
    .bind(now_ms)
    .bind(seq)
    .bind(effect.sets_finished_at())
    .bind(change.result.as_ref().map(rows::json_text))
    .bind(change.state.as_ref().map(StateJson::as_str))
    .bind(change.plan_version.as_ref().map(|plan| plan.version))
    .bind(ends_lease)
    .bind(change.not_before.map(millis))
    .execute(&mut *conn)
    .await?;
    Ok(())
}
