//! Which engine runs a task.
//!
//! `auto`, `v2` and `direct` tasks run on the v2 engine (the gate decides for `auto`; `direct`
//! and `v2` force the route); `engine::strategies` puts the baselines (`one_shot`, `reactive`,
//! `v1`) and the rollout in front of this. Tasks that carry the minimal engine's own tuning
//! metadata (`engine_steps`) run on the minimal engine: the lifecycle tests and the foundation
//! benchmark use it through the real binary to exercise leases and crashes cheaply.

use std::sync::Arc;

use async_trait::async_trait;

use crate::domain::task::Strategy;
use crate::engine::minimal::META_STEPS;
use crate::engine::{Engine, EngineError, RunContext, RunOutcome};

/// Dispatches each task to the engine for its strategy.
pub struct ByStrategy {
    pub v2: Arc<dyn Engine>,
    pub fallback: Arc<dyn Engine>,
}

impl ByStrategy {
    fn pick(&self, ctx: &RunContext) -> &Arc<dyn Engine> {
        let minimal_tuned = ctx.task.metadata.get(META_STEPS).is_some();
        match ctx.task.strategy {
            Strategy::V2 | Strategy::Direct => &self.v2,
            Strategy::Auto if !minimal_tuned => &self.v2,
            _ => &self.fallback,
        }
    }
}

#[async_trait]
impl Engine for ByStrategy {
    async fn run(&self, ctx: RunContext) -> Result<RunOutcome, EngineError> {
        self.pick(&ctx).clone().run(ctx).await
    }
}
