//! Messages to a task on SQLite: one `BEGIN IMMEDIATE` transaction numbers the message after
//! the task's earlier ones.

use std::ops::ControlFlow;

use sqlx::Row;

use super::SqliteStore;
use super::rows::{from_millis, id_text, millis, task_columns, task_from_row};
use crate::domain::message::TaskMessage;
use crate::domain::task::TaskId;
use crate::store::StoreError;
use crate::store::messages::{self, PostMessage, PostOutcome};

impl SqliteStore {
    pub(super) async fn post_message_tx(
        &self,
        post: PostMessage<'_>,
    ) -> Result<PostOutcome, StoreError> {
        let id = id_text(post.task_id);
        let now_ms = millis(post.now);
        let mut tx = self.write().await?;
        let current = sqlx::query(concat!(
            "SELECT ",
            task_columns!(),
            " FROM tasks WHERE tenant_id = ?1 AND id = ?2"
        ))
        .bind(post.tenant_id)
        .bind(&id)
        .fetch_optional(&mut *tx)
        .await?;
        let held: i64 = sqlx::query_scalar("SELECT count(*) FROM task_messages WHERE task_id = ?1")
            .bind(&id)
            .fetch_one(&mut *tx)
            .await?;
        let held = u32::try_from(held).unwrap_or(u32::MAX);
        let current = current.as_ref().map(task_from_row).transpose()?;
        if let ControlFlow::Break(outcome) = messages::postable(current, held, post.limit) {
            return Ok(outcome);
        }
        let message = TaskMessage {
            seq: held + 1,
            kind: post.kind,
            text: post.text.to_string(),
            author: post.author.map(str::to_string),
            created_at: post.now,
        };
        sqlx::query(
            "INSERT INTO task_messages (task_id, seq, kind, text, author, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .bind(&id)
        .bind(i64::from(message.seq))
        .bind(message.kind.as_str())
        .bind(&message.text)
        .bind(&message.author)
        .bind(now_ms)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.publish_all(messages::posted_wakeups(post.task_id));
        Ok(PostOutcome::Posted(message))
    }

    pub(super) async fn list_message_rows(
        &self,
        tenant_id: &str,
        task_id: TaskId,
        after: u32,
    ) -> Result<Vec<TaskMessage>, StoreError> {
        let found = sqlx::query(
            "SELECT m.seq, m.kind, m.text, m.author, m.created_at FROM task_messages m \
             JOIN tasks t ON t.id = m.task_id \
             WHERE t.tenant_id = ?1 AND m.task_id = ?2 AND m.seq > ?3 ORDER BY m.seq",
        )
        .bind(tenant_id)
        .bind(id_text(task_id))
        .bind(i64::from(after))
        .fetch_all(&self.pool)
        .await?;
        found
            .iter()
            .map(|row| {
                let seq: i64 = row.try_get("seq")?;
                let kind: String = row.try_get("kind")?;
                Ok(TaskMessage {
                    seq: u32::try_from(seq).unwrap_or(0),
                    kind: messages::stored_kind(&kind)?,
                    text: row.try_get("text")?,
                    author: row.try_get("author")?,
                    created_at: from_millis(row.try_get("created_at")?)?,
                })
            })
            .collect()
    }
}
