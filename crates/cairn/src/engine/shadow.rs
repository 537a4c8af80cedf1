//! Shadow runs: a candidate strategy runs on a copy of a real task, with every side-effecting
//! tool sent to its `sandbox_url`, or refused when it has none, so the real world is never
//! touched by the shadow and the two outcomes can be compared task by task before a rollout
//! (docs/evaluation.md, "Shadow runs").
//!
//! The copy is an ordinary task (same tenant, goal and budget, the candidate strategy) whose
//! metadata names the original (`shadow_of`), so both outcomes are stored side by side in the
//! same tables, with the same events and ledger, and [`side_by_side`] reads them back together.
//! The engine dispatch (`crate::engine::dispatch`) sends tasks marked `shadow_of` to engines
//! built over the sandboxed tools (`crate::engine::runtime::sandbox::ShadowTools`).

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::domain::task::{NewTask, SHADOW_OF, Strategy, Task, TaskId};
use crate::store::{Store, StoreError};

/// Creates the shadow copy of `original` for `candidate`.
pub async fn start_shadow(
    store: &dyn Store,
    original: &Task,
    candidate: Strategy,
    now: DateTime<Utc>,
) -> Result<Task, StoreError> {
    start_shadow_by(store, original, candidate, None, now).await
}

/// [`start_shadow`], recording who started it (`by`: an API key id) in the copy's
/// `task.created` event.
pub async fn start_shadow_by(
    store: &dyn Store,
    original: &Task,
    candidate: Strategy,
    by: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Task, StoreError> {
    let new = NewTask {
        id: uuid::Uuid::now_v7(),
        tenant_id: original.tenant_id.clone(),
        goal: original.goal.clone(),
        strategy: candidate,
        budget: original.budget,
        metadata: json!({ SHADOW_OF: original.id, "original_strategy": original.strategy }),
        tools: original.tools.clone(),
        // A shadow copy's tools are sandboxed: nothing for a person to sign off.
        approval: Default::default(),
    };
    Ok(store.create_task_by(new, None, by, now).await?.task)
}

/// Both outcomes, for comparison: status, whether the goal was verified, and spend.
pub async fn side_by_side(
    store: &dyn Store,
    tenant: &str,
    original: TaskId,
    shadow: TaskId,
) -> Result<Value, StoreError> {
    let summary = |task: Option<Task>| match task {
        Some(task) => {
            let result = task.result.clone().unwrap_or(Value::Null);
            json!({"id": task.id, "strategy": task.strategy, "status": task.status,
                   "verified": result["verified"], "spend": result["spend"],
                   "reason": result["reason"]})
        }
        None => Value::Null,
    };
    let real = store.get_task(tenant, original).await?;
    let copy = store.get_task(tenant, shadow).await?;
    Ok(json!({"original": summary(real), "shadow": summary(copy)}))
}
