//! A person's messages to a running task, taken at durable points: before the first plan, at
//! the top of every milestone's loop, and between rounds of the act loop.
//!
//! Each message is recorded (`task.message`) and raised as a person's constraint
//! (`plan.constraint_raised`) in one commit that also moves the checkpoint's `messages_seen` past
//! it, so a crash before that commit takes the message again and one after it never twice. A
//! constraint the plan in force did not know asks for a new plan version with reason
//! `new_constraint`: an L3 that keeps finished work but uses up none of the failure ladder's
//! strategy replans (the messages a task takes bound these).

use serde_json::{Value, json};

use crate::domain::event::kinds::TASK_MESSAGE;
use crate::domain::message::TaskMessage;
use crate::domain::repair::{Constraint, ConstraintSource};
use crate::engine::Halt;
use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::checkpoint::{Failure, Record};

/// Takes the messages sent since the last one the task took, when the inbox rang. `Some` is
/// the `new_constraint` failure of the first constraint the plan did not know.
pub async fn take(cx: &Attempt) -> Result<Option<Failure>, Halt> {
    let ctx = cx.journal.ctx();
    if !ctx.inbox.take() {
        return Ok(None);
    }
    let seen = cx.journal.read(|s| s.messages_seen).await;
    let task = cx.task();
    let messages = match ctx
        .store
        .list_messages(&task.tenant_id, task.id, seen)
        .await
    {
        Ok(messages) => messages,
        Err(error) => {
            // Not the task's fault: look again at the next durable point.
            tracing::warn!(task_id = %task.id, %error, "could not read the task's messages");
            ctx.inbox.ring();
            return Ok(None);
        }
    };
    if messages.is_empty() {
        return Ok(None);
    }
    let (applied, raised) = cx
        .journal
        .record(|state| {
            let mut record = Record::default();
            let mut raised = None;
            let seen = state.messages_seen;
            for message in messages.iter().filter(|m| m.seq > seen) {
                state.messages_seen = message.seq;
                record.push(TASK_MESSAGE, taken(message));
                // Its `plan.constraint_raised` is the record's next event.
                let at = record.events.len();
                let failure =
                    super::repair::raise_constraint(state, constraint(message), &mut record);
                raised = raised.or(failure.map(|failure| (failure, at)));
            }
            Ok((record, raised))
        })
        .await?;
    // The new plan version names the event that caused it.
    let offset = |at: usize| i64::try_from(at).unwrap_or(0);
    Ok(raised.map(|(failure, at)| failure.at(applied.first_seq + offset(at))))
}

/// The `task.message` event's data.
fn taken(message: &TaskMessage) -> Value {
    let mut data = json!({"message": message.seq, "kind": message.kind, "text": message.text});
    if let Some(by) = &message.author {
        data["by"] = json!(by);
    }
    data
}

fn constraint(message: &TaskMessage) -> Constraint {
    Constraint {
        text: message.text.clone(),
        source: ConstraintSource::Person {
            author: message.author.clone().unwrap_or_default(),
        },
    }
}
