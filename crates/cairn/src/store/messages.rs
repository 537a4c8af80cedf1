//! Messages to a task as both backends store them: what a post asks, how it can end, and the
//! rules they share (who may post, the `task.message` event).

use std::ops::ControlFlow;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::Wakeup;
use crate::domain::event::kinds;
use crate::domain::message::{MessageKind, TaskMessage};
use crate::domain::task::{Task, TaskId, TaskStatus};

/// A message to commit to a task.
#[derive(Debug, Clone, PartialEq)]
pub struct PostMessage<'a> {
    pub tenant_id: &'a str,
    pub task_id: TaskId,
    pub kind: MessageKind,
    /// Checked already (`MessageRequest::checked_text`).
    pub text: &'a str,
    /// The API key that sends it.
    pub author: Option<&'a str>,
    /// Most messages one task takes (the operator's `max_task_messages`).
    pub limit: u32,
    pub now: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PostOutcome {
    /// No such task for this tenant.
    NotFound,
    /// The task has ended with this status; nothing was written.
    Finished(TaskStatus),
    /// The task already holds `limit` messages; nothing was written.
    Full { limit: u32 },
    /// Committed, with its `task.message` event.
    Posted(TaskMessage),
}

/// Whether a message may be posted to `current` that already holds `held` messages.
pub(crate) fn postable(
    current: Option<Task>,
    held: u32,
    limit: u32,
) -> ControlFlow<PostOutcome, Task> {
    match current {
        None => ControlFlow::Break(PostOutcome::NotFound),
        Some(task) if task.status.is_terminal() => {
            ControlFlow::Break(PostOutcome::Finished(task.status))
        }
        Some(_) if held >= limit => ControlFlow::Break(PostOutcome::Full { limit }),
        Some(task) => ControlFlow::Continue(task),
    }
}

/// The kind of the event a post records.
pub(crate) const MESSAGE_EVENT: &str = kinds::TASK_MESSAGE;

/// The data of the `task.message` event.
pub(crate) fn message_event(message: &TaskMessage) -> Value {
    let mut data = json!({"message": message.seq, "kind": message.kind, "text": message.text});
    if let (Some(by), Some(object)) = (&message.author, data.as_object_mut()) {
        object.insert("by".into(), Value::String(by.clone()));
    }
    data
}

/// The hints after a post: its one event, and the message for the worker running the task.
pub(crate) fn posted_wakeups(task_id: TaskId, last_seq: i64) -> Vec<Wakeup> {
    vec![
        Wakeup::Events { task_id, last_seq },
        Wakeup::Message { task_id },
    ]
}

/// A stored message's kind, or a clear error for one this version does not know.
pub(crate) fn stored_kind(text: &str) -> Result<MessageKind, super::StoreError> {
    MessageKind::parse(text)
        .ok_or_else(|| super::StoreError::Corrupt(format!("unknown message kind {text:?}")))
}
