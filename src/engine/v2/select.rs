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
use crate::llm::{Endpoints, LlmClient, RetryPolicy};
use crate::store::Store;
use crate::tools::{StoreReceipts, ToolClient, ToolRegistry};

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

/// The model port and tool port `cairn serve` uses, from configuration; `None` when no model
/// endpoint is configured.
pub fn ports(
    config: &Config,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
) -> Result<Option<Ports>, String> {
    let Some(endpoints) = Endpoints::from_config(&config.llm)? else {
        return Ok(None);
    };
    let client = LlmClient::new(endpoints, RetryPolicy::default()).map_err(|e| e.to_string())?;
    let registry = match &config.tools_file {
        Some(path) => ToolRegistry::load(path).map_err(|e| e.to_string())?,
        None => ToolRegistry::from_specs(Vec::new(), "none").map_err(|e| e.to_string())?,
    };
    let tools = ToolClient::new(
        Arc::new(registry),
        Some(Arc::new(StoreReceipts(store))),
        clock,
    );
    Ok(Some((
        Arc::new(LlmModels::new(client)),
        Arc::new(ClientTools::new(tools)),
    )))
}

/// The engine `cairn serve` runs: v2 for `auto`/`v2`/`direct`, the minimal engine otherwise.
/// Without any model endpoint every task falls back to the minimal engine, with a warning, so a
/// bare `cairn serve` still starts; a broken model or tools configuration is an error.
pub fn from_config(
    config: &Config,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn Engine>, String> {
    let fallback: Arc<dyn Engine> = Arc::new(MinimalEngine::default());
    Ok(match ports(config, store, clock)? {
        Some((models, tools)) => Arc::new(ByStrategy {
            v2: Arc::new(V2Engine::new(models, tools, V2Config::default())),
            fallback,
        }),
        None => {
            tracing::warn!("no model endpoint configured; tasks run on the minimal engine");
            fallback
        }
    })
}
