//! Which engine runs a task, and the v2 engine built from configuration.
//!
//! `auto`, `v2` and `direct` tasks run on the v2 engine (the gate decides for `auto`; `direct`
//! and `v2` force the route). Other strategies (`one_shot`, `reactive`, `v1`) are baselines of
//! the evaluation and, until they exist, fall back to the minimal engine. So do tasks that
//! carry the minimal engine's own tuning metadata (`engine_steps`): the lifecycle tests use
//! the minimal engine through the real binary to exercise leases and crashes cheaply.

use std::sync::Arc;

use async_trait::async_trait;

use super::adapters::{ClientTools, LlmModels};
use super::ports::{ModelPort, ToolPort};
use super::{V2Config, V2Engine};
use crate::clock::Clock;
use crate::config::Config;
use crate::domain::task::Strategy;
use crate::engine::minimal::{META_STEPS, MinimalEngine};
use crate::engine::{Engine, EngineError, RunContext, RunOutcome};
use crate::sim::wiring::Clients;
use crate::store::Store;
use crate::tools::{StoreReceipts, ToolClient};

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

/// The two ports an engine talks through.
pub type Ports = (Arc<dyn ModelPort>, Arc<dyn ToolPort>);

/// The model port and tool port `cairn serve` uses, from configuration: the configured model
/// endpoints and tools file, or the in-process simulator where either is missing (see
/// [`crate::sim::wiring`]). Side-effecting tool calls keep their receipts in `store`.
pub fn ports(
    config: &Config,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
) -> Result<Ports, String> {
    let clients = Clients::from_config(config).map_err(|e| e.to_string())?;
    let tools = ToolClient::new(clients.tools, Some(Arc::new(StoreReceipts(store))), clock);
    Ok((
        Arc::new(LlmModels::new(clients.llm)),
        Arc::new(ClientTools::new(tools)),
    ))
}

/// The engine `cairn serve` runs: v2 for `auto`/`v2`/`direct`, the minimal engine otherwise.
pub fn from_config(
    config: &Config,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn Engine>, String> {
    let (models, tools) = ports(config, store, clock)?;
    Ok(Arc::new(ByStrategy {
        v2: Arc::new(V2Engine::new(models, tools, V2Config::default())),
        fallback: Arc::new(MinimalEngine::default()),
    }))
}
