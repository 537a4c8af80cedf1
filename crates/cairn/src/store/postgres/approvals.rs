//! Approval requests on Postgres: parking (fenced like a commit), deciding (under the task's
//! row lock, so a decision and a cancel cannot cross) and expiring; the rules are
//! `store::approvals`.

use std::ops::ControlFlow;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgPool, Row};

use super::outbox::Outbox;
use super::rows::{self, task_columns};
use crate::domain::approval::Approval;
use crate::domain::event::kinds;
use crate::domain::task::{Lease, TaskId};
use crate::store::approvals::{self, Decide, DecideOutcome, Park, Parked};
use crate::store::{StoreError, Wakeup};

fn approval(row: &PgRow) -> Result<Approval, StoreError> {
    Ok(Approval {
        id: approvals::stored_id(i64::from(row.try_get::<i32, _>("id")?))?,
        kind: approvals::stored_kind(&row.try_get::<String, _>("kind")?)?,
        state: approvals::stored_state(&row.try_get::<String, _>("state")?)?,
        digest: row.try_get("digest")?,
        request: row.try_get("request")?,
        comment: row.try_get("comment")?,
        decided_by: row.try_get("decided_by")?,
        created_at: row.try_get("created_at")?,
        decided_at: row.try_get("decided_at")?,
        expires_at: row.try_get("expires_at")?,
    })
}

fn id_int(id: u32) -> i32 {
    i32::try_from(id).unwrap_or(i32::MAX)
}

async fn event(
    conn: &mut PgConnection,
    task: TaskId,
    seq: i64,
    kind: &str,
    data: &Value,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO events (task_id, seq, kind, data, created_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(task)
    .bind(seq)
    .bind(kind)
    .bind(data.to_string())
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

pub(super) async fn park(
    pool: &PgPool,
    hints: &Outbox,
    lease: &Lease,
    park: Park,
    now: DateTime<Utc>,
) -> Result<Parked, StoreError> {
    let mut tx = pool.begin().await?;
    let moved: Option<i64> = sqlx::query_scalar(
        "UPDATE tasks SET status = 'awaiting_approval', claimed_by = NULL, \
         lease_expires_at = NULL, updated_at = $4, last_seq = last_seq + 1 \
         WHERE id = $1 AND claimed_by = $2 AND fence = $3 AND status = 'running' \
         RETURNING last_seq",
    )
    .bind(lease.task_id)
    .bind(&lease.worker_id)
    .bind(lease.fence)
    .bind(now)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(last_seq) = moved else {
        return Ok(Parked::LeaseLost);
    };
    let held: i64 = sqlx::query_scalar("SELECT count(*) FROM task_approvals WHERE task_id = $1")
        .bind(lease.task_id)
        .fetch_one(&mut *tx)
        .await?;
    let id = approvals::stored_id(held + 1)?;
    sqlx::query(
        "INSERT INTO task_approvals (task_id, id, kind, state, digest, request, created_at, \
         expires_at) VALUES ($1, $2, $3, 'pending', $4, $5, $6, $7)",
    )
    .bind(lease.task_id)
    .bind(id_int(id))
    .bind(park.kind.as_str())
    .bind(&park.digest)
    .bind(&park.request)
    .bind(now)
    .bind(park.expires_at)
    .execute(&mut *tx)
    .await?;
    let data = approvals::requested_event(id, &park);
    event(
        &mut tx,
        lease.task_id,
        last_seq,
        kinds::APPROVAL_REQUESTED,
        &data,
        now,
    )
    .await?;
    tx.commit().await?;
    hints.publish(approvals::parked_wakeups(lease.task_id, last_seq));
    Ok(Parked::Waiting { approval: id })
}

pub(super) async fn list(
    pool: &PgPool,
    tenant_id: &str,
    task_id: TaskId,
) -> Result<Vec<Approval>, StoreError> {
    let found = sqlx::query(
        "SELECT a.id, a.kind, a.state, a.digest, a.request, a.comment, a.decided_by, \
         a.created_at, a.decided_at, a.expires_at FROM task_approvals a \
         JOIN tasks t ON t.id = a.task_id WHERE t.tenant_id = $1 AND a.task_id = $2 \
         ORDER BY a.id",
    )
    .bind(tenant_id)
    .bind(task_id)
    .fetch_all(pool)
    .await?;
    found.iter().map(approval).collect()
}

pub(super) async fn decide(
    pool: &PgPool,
    hints: &Outbox,
    decide: Decide<'_>,
) -> Result<DecideOutcome, StoreError> {
    let mut tx = pool.begin().await?;
    let task = sqlx::query(concat!(
        "SELECT ",
        task_columns!(),
        " FROM tasks WHERE tenant_id = $1 AND id = $2 FOR UPDATE"
    ))
    .bind(decide.tenant_id)
    .bind(decide.task_id)
    .fetch_optional(&mut *tx)
    .await?;
    let task = task.as_ref().map(rows::task).transpose()?;
    let found = match task {
        Some(_) => sqlx::query(
            "SELECT id, kind, state, digest, request, comment, decided_by, created_at, \
             decided_at, expires_at FROM task_approvals WHERE task_id = $1 AND id = $2",
        )
        .bind(decide.task_id)
        .bind(id_int(decide.approval))
        .fetch_optional(&mut *tx)
        .await?
        .as_ref()
        .map(approval)
        .transpose()?,
        None => None,
    };
    let pending = match approvals::decidable(task.as_ref(), found, decide.digest) {
        ControlFlow::Continue(pending) => pending,
        ControlFlow::Break(outcome) => return Ok(outcome),
    };
    let decided = approvals::decided(pending, &decide);
    sqlx::query(
        "UPDATE task_approvals SET state = $3, comment = $4, decided_by = $5, decided_at = $6 \
         WHERE task_id = $1 AND id = $2",
    )
    .bind(decide.task_id)
    .bind(id_int(decided.id))
    .bind(decided.state.as_str())
    .bind(&decided.comment)
    .bind(&decided.decided_by)
    .bind(decide.now)
    .execute(&mut *tx)
    .await?;
    let last_seq: i64 = sqlx::query_scalar(
        "UPDATE tasks SET status = 'queued', updated_at = $2, last_seq = last_seq + 1 \
         WHERE id = $1 RETURNING last_seq",
    )
    .bind(decide.task_id)
    .bind(decide.now)
    .fetch_one(&mut *tx)
    .await?;
    let data = approvals::decided_event(&decided);
    event(
        &mut tx,
        decide.task_id,
        last_seq,
        kinds::APPROVAL_DECIDED,
        &data,
        decide.now,
    )
    .await?;
    tx.commit().await?;
    hints.publish(approvals::decided_wakeups(decide.task_id, last_seq));
    Ok(DecideOutcome::Decided(decided))
}

pub(super) async fn expire(
    pool: &PgPool,
    hints: &Outbox,
    now: DateTime<Utc>,
) -> Result<Vec<TaskId>, StoreError> {
    let mut tx = pool.begin().await?;
    let due = sqlx::query(
        "SELECT a.task_id, a.id FROM task_approvals a JOIN tasks t ON t.id = a.task_id \
         WHERE a.state = 'pending' AND a.expires_at < $1 AND t.status = 'awaiting_approval' \
         ORDER BY a.task_id FOR UPDATE OF t SKIP LOCKED",
    )
    .bind(now)
    .fetch_all(&mut *tx)
    .await?;
    let mut expired = Vec::with_capacity(due.len());
    let mut wakeups = Vec::new();
    for row in &due {
        let task: TaskId = row.try_get("task_id")?;
        let id: i32 = row.try_get("id")?;
        sqlx::query(
            "UPDATE task_approvals SET state = 'expired', decided_at = $3 \
             WHERE task_id = $1 AND id = $2",
        )
        .bind(task)
        .bind(id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let approval = approvals::stored_id(i64::from(id))?;
        let report = approvals::expired_report(approval);
        let last_seq: i64 = sqlx::query_scalar(
            "UPDATE tasks SET status = 'failed', result = $3, finished_at = $2, updated_at = $2, \
             last_seq = last_seq + 2 WHERE id = $1 RETURNING last_seq",
        )
        .bind(task)
        .bind(now)
        .bind(&report)
        .fetch_one(&mut *tx)
        .await?;
        let data = serde_json::json!({"approval": approval});
        event(
            &mut tx,
            task,
            last_seq - 1,
            kinds::APPROVAL_EXPIRED,
            &data,
            now,
        )
        .await?;
        event(&mut tx, task, last_seq, kinds::TASK_FAILED, &report, now).await?;
        wakeups.push(Wakeup::Events {
            task_id: task,
            last_seq,
        });
        expired.push(task);
    }
    tx.commit().await?;
    hints.publish(wakeups);
    Ok(expired)
}
