//! Shadow runs: a candidate strategy runs on a copy of a real task, with every side-effecting
//! tool sent to its `sandbox_url`, or refused when it has none, so the real world is never
//! touched by the shadow (first seed: "run v2 in shadow on a copy of real tasks where side
//! effects are sandboxed, compare per-task outcomes").
//!
//! The copy is an ordinary task (same tenant, goal and budget, the candidate strategy) whose
//! metadata names the original (`shadow_of`), so both outcomes are stored side by side in the
//! same tables, with the same events and ledger, and [`side_by_side`] reads them back together.
//! [`ShadowRouted`] sends tasks marked `shadow_of` to an engine built over [`ShadowTools`].
//!
//! Read-only tools still reach their real endpoint: they change nothing, and a shadow that
//! cannot observe the world would measure nothing.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::clock::Clock;
use crate::domain::task::{NewTask, Strategy, Task, TaskId};
use crate::engine::v2::adapters::ClientTools;
use crate::engine::v2::ports::{FailureKind, PortError, ToolCall, ToolPort, ToolReply, ToolSpec};
use crate::engine::{Engine, EngineError, RunContext, RunOutcome};
use crate::store::{Store, StoreError};
use crate::tools::{ReceiptStore, RegistryError, ToolClient, ToolRegistry};

/// Metadata key of a shadow copy: the id of the task it copies.
pub const SHADOW_OF: &str = "shadow_of";

/// Tools as a shadow sees them: side-effecting calls go to the sandbox or are refused.
pub struct ShadowTools {
    inner: ClientTools,
    /// Side-effecting tools without a `sandbox_url`.
    refused: BTreeSet<String>,
}

impl ShadowTools {
    /// Builds the shadow's view of `registry`: every side-effecting tool's URL replaced by its
    /// sandbox URL; those without one are refused at call time (and still listed, so the plan
    /// and the refusal are both visible).
    pub fn new(
        registry: &ToolRegistry,
        receipts: Option<Arc<dyn ReceiptStore>>,
        clock: Arc<dyn Clock>,
    ) -> Result<ShadowTools, RegistryError> {
        let mut refused = BTreeSet::new();
        let specs = registry
            .specs()
            .cloned()
            .map(|mut spec| {
                if spec.side_effects {
                    match spec.sandbox_url.clone() {
                        Some(sandbox) => spec.url = sandbox,
                        None => {
                            refused.insert(spec.name.clone());
                        }
                    }
                }
                spec
            })
            .collect();
        let sandboxed = ToolRegistry::from_specs(specs, "shadow (sandboxed)")?;
        let client = ToolClient::new(Arc::new(sandboxed), receipts, clock);
        Ok(ShadowTools {
            inner: ClientTools::new(client),
            refused,
        })
    }

    pub fn refused(&self) -> &BTreeSet<String> {
        &self.refused
    }
}

#[async_trait]
impl ToolPort for ShadowTools {
    fn specs(&self) -> Vec<ToolSpec> {
        self.inner.specs()
    }

    async fn call(&self, call: ToolCall) -> Result<ToolReply, PortError> {
        if self.refused.contains(&call.tool) {
            return Err(PortError::new(
                FailureKind::Permanent,
                format!(
                    "{}: refused in a shadow run (side effects and no sandbox_url)",
                    call.tool
                ),
            ));
        }
        self.inner.call(call).await
    }
}

/// Runs shadow copies on `shadow`, every other task on `real`.
pub struct ShadowRouted {
    pub real: Arc<dyn Engine>,
    pub shadow: Arc<dyn Engine>,
}

#[async_trait]
impl Engine for ShadowRouted {
    async fn run(&self, ctx: RunContext) -> Result<RunOutcome, EngineError> {
        if ctx.task.metadata.get(SHADOW_OF).is_some() {
            self.shadow.run(ctx).await
        } else {
            self.real.run(ctx).await
        }
    }
}

/// Creates the shadow copy of `original` for `candidate`.
pub async fn start_shadow(
    store: &dyn Store,
    original: &Task,
    candidate: Strategy,
    now: DateTime<Utc>,
) -> Result<Task, StoreError> {
    let new = NewTask {
        id: uuid::Uuid::now_v7(),
        tenant_id: original.tenant_id.clone(),
        goal: original.goal.clone(),
        strategy: candidate,
        budget: original.budget,
        metadata: json!({ SHADOW_OF: original.id, "original_strategy": original.strategy }),
    };
    Ok(store.create_task(new, None, now).await?.task)
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
