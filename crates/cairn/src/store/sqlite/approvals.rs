//! Approval requests on SQLite: parking, deciding and expiring, each one `BEGIN IMMEDIATE`
//! transaction (the rules are `store::approvals`).

use std::ops::ControlFlow;

use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};

use super::SqliteStore;
use super::history::append_event;
use super::rows::{
    from_millis, id_text, json_text, millis, opt_from_millis, task_columns, task_from_row,
};
use crate::domain::approval::Approval;
use crate::domain::event::kinds;
use crate::domain::task::{Lease, TaskId};
use crate::store::StoreError;
use crate::store::approvals::{self, Decide, DecideOutcome, Park, Parked};
use crate::store::rules;

fn approval_from_row(row: &SqliteRow) -> Result<Approval, StoreError> {
    let request: String = row.try_get("request")?;
    Ok(Approval {
        id: approvals::stored_id(row.try_get("id")?)?,
        kind: approvals::stored_kind(&row.try_get::<String, _>("kind")?)?,
        state: approvals::stored_state(&row.try_get::<String, _>("state")?)?,
        digest: row.try_get("digest")?,
        request: rules::parse_json("task_approvals.request", &request)?,
        comment: row.try_get("comment")?,
        decided_by: row.try_get("decided_by")?,
        created_at: from_millis(row.try_get("created_at")?)?,
        decided_at: opt_from_millis(row.try_get("decided_at")?)?,
        expires_at: opt_from_millis(row.try_get("expires_at")?)?,
    })
}

async fn find(
    conn: &mut SqliteConnection,
    task: &str,
    approval: u32,
) -> Result<Option<Approval>, StoreError> {
    let row = sqlx::query(
        "SELECT id, kind, state, digest, request, comment, decided_by, created_at, decided_at, \
         expires_at FROM task_approvals WHERE task_id = ?1 AND id = ?2",
    )
    .bind(task)
    .bind(i64::from(approval))
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(approval_from_row).transpose()
}

impl SqliteStore {
    pub(super) async fn park_tx(
        &self,
        lease: &Lease,
        park: Park,
        now: DateTime<Utc>,
    ) -> Result<Parked, StoreError> {
        let id = id_text(lease.task_id);
        let now_ms = millis(now);
        let mut tx = self.write().await?;
        let moved = sqlx::query(
            "UPDATE tasks SET status = 'awaiting_approval', claimed_by = NULL, \
             lease_expires_at = NULL, updated_at = ?4, last_seq = last_seq + 1 \
             WHERE id = ?1 AND claimed_by = ?2 AND fence = ?3 AND status = 'running' \
             RETURNING last_seq",
        )
        .bind(&id)
        .bind(&lease.worker_id)
        .bind(lease.fence)
        .bind(now_ms)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(moved) = moved else {
            return Ok(Parked::LeaseLost);
        };
        let last_seq: i64 = moved.try_get("last_seq")?;
        let held: i64 =
            sqlx::query_scalar("SELECT count(*) FROM task_approvals WHERE task_id = ?1")
                .bind(&id)
                .fetch_one(&mut *tx)
                .await?;
        let approval = approvals::stored_id(held + 1)?;
        sqlx::query(
            "INSERT INTO task_approvals (task_id, id, kind, state, digest, request, created_at, \
             expires_at) VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6, ?7)",
        )
        .bind(&id)
        .bind(i64::from(approval))
        .bind(park.kind.as_str())
        .bind(&park.digest)
        .bind(json_text(&park.request))
        .bind(now_ms)
        .bind(park.expires_at.map(millis))
        .execute(&mut *tx)
        .await?;
        let data = approvals::requested_event(approval, &park);
        append_event(
            &mut tx,
            &id,
            last_seq,
            kinds::APPROVAL_REQUESTED,
            &data,
            now_ms,
        )
        .await?;
        tx.commit().await?;
        self.publish_all(approvals::parked_wakeups(lease.task_id, last_seq));
        Ok(Parked::Waiting { approval })
    }

    pub(super) async fn list_approval_rows(
        &self,
        tenant_id: &str,
        task_id: TaskId,
    ) -> Result<Vec<Approval>, StoreError> {
        let found = sqlx::query(
            "SELECT a.id, a.kind, a.state, a.digest, a.request, a.comment, a.decided_by, \
             a.created_at, a.decided_at, a.expires_at FROM task_approvals a \
             JOIN tasks t ON t.id = a.task_id WHERE t.tenant_id = ?1 AND a.task_id = ?2 \
             ORDER BY a.id",
        )
        .bind(tenant_id)
        .bind(id_text(task_id))
        .fetch_all(&self.pool)
        .await?;
        found.iter().map(approval_from_row).collect()
    }

    pub(super) async fn decide_tx(&self, decide: Decide<'_>) -> Result<DecideOutcome, StoreError> {
        let id = id_text(decide.task_id);
        let now_ms = millis(decide.now);
        let mut tx = self.write().await?;
        let task = sqlx::query(concat!(
            "SELECT ",
            task_columns!(),
            " FROM tasks WHERE tenant_id = ?1 AND id = ?2"
        ))
        .bind(decide.tenant_id)
        .bind(&id)
        .fetch_optional(&mut *tx)
        .await?;
        let task = task.as_ref().map(task_from_row).transpose()?;
        let found = match task {
            Some(_) => find(&mut tx, &id, decide.approval).await?,
            None => None,
        };
        let pending = match approvals::decidable(task.as_ref(), found, decide.digest) {
            ControlFlow::Continue(pending) => pending,
            ControlFlow::Break(outcome) => return Ok(outcome),
        };
        let approval = approvals::decided(pending, &decide);
        sqlx::query(
            "UPDATE task_approvals SET state = ?3, comment = ?4, decided_by = ?5, \
             decided_at = ?6 WHERE task_id = ?1 AND id = ?2",
        )
        .bind(&id)
        .bind(i64::from(approval.id))
        .bind(approval.state.as_str())
        .bind(&approval.comment)
        .bind(&approval.decided_by)
        .bind(now_ms)
        .execute(&mut *tx)
        .await?;
        let last_seq: i64 = sqlx::query_scalar(
            "UPDATE tasks SET status = 'queued', updated_at = ?2, last_seq = last_seq + 1 \
             WHERE id = ?1 RETURNING last_seq",
        )
        .bind(&id)
        .bind(now_ms)
        .fetch_one(&mut *tx)
        .await?;
        let data = approvals::decided_event(&approval);
        append_event(
            &mut tx,
            &id,
            last_seq,
            kinds::APPROVAL_DECIDED,
            &data,
            now_ms,
        )
        .await?;
        tx.commit().await?;
        self.publish_all(approvals::decided_wakeups(decide.task_id, last_seq));
        Ok(DecideOutcome::Decided(approval))
    }

    pub(super) async fn expire_tx(&self, now: DateTime<Utc>) -> Result<Vec<TaskId>, StoreError> {
        let now_ms = millis(now);
        let mut tx = self.write().await?;
        let due = sqlx::query(
            "SELECT a.task_id, a.id FROM task_approvals a JOIN tasks t ON t.id = a.task_id \
             WHERE a.state = 'pending' AND a.expires_at < ?1 \
             AND t.status = 'awaiting_approval' ORDER BY a.task_id",
        )
        .bind(now_ms)
        .fetch_all(&mut *tx)
        .await?;
        let mut expired = Vec::with_capacity(due.len());
        let mut wakeups = Vec::new();
        for row in &due {
            let task: String = row.try_get("task_id")?;
            let approval = approvals::stored_id(row.try_get("id")?)?;
            sqlx::query(
                "UPDATE task_approvals SET state = 'expired', decided_at = ?3 \
                 WHERE task_id = ?1 AND id = ?2",
            )
            .bind(&task)
            .bind(i64::from(approval))
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
            let report = approvals::expired_report(approval);
            let last_seq: i64 = sqlx::query_scalar(
                "UPDATE tasks SET status = 'failed', result = ?3, finished_at = ?2, \
                 updated_at = ?2, last_seq = last_seq + 2 WHERE id = ?1 RETURNING last_seq",
            )
            .bind(&task)
            .bind(now_ms)
            .bind(json_text(&report))
            .fetch_one(&mut *tx)
            .await?;
            let data = serde_json::json!({"approval": approval});
            append_event(
                &mut tx,
                &task,
                last_seq - 1,
                kinds::APPROVAL_EXPIRED,
                &data,
                now_ms,
            )
            .await?;
            append_event(
                &mut tx,
                &task,
                last_seq,
                kinds::TASK_FAILED,
                &report,
                now_ms,
            )
            .await?;
            let task_id = super::rows::parse_id(&task)?;
            wakeups.push(crate::store::Wakeup::Events { task_id, last_seq });
            expired.push(task_id);
        }
        tx.commit().await?;
        self.publish_all(wakeups);
        Ok(expired)
    }
}
