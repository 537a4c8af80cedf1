//! The engine `cairn serve` runs, from configuration: v2 for `v2`/`direct`, the baselines for
//! `one_shot`/`reactive`/`v1`, `auto` split between v2 and v1 by the rollout, and shadow copies
//! (tasks with `shadow_of`) on the same engines over sandboxed tools. One set of clients (one
//! simulator when no model is configured) serves them all, so their figures stay comparable.

use std::sync::Arc;

use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::engine::Engine;
use crate::engine::minimal::MinimalEngine;
use crate::engine::v2::adapters::{ClientTools, LlmModels};
use crate::engine::v2::ports::{ModelPort, ToolPort};
use crate::engine::v2::select::ByStrategy;
use crate::engine::v2::{V2Config, V2Engine};
use crate::eval::shadow::{ShadowRouted, ShadowTools};
use crate::rollout::Rollout;
use crate::sim::wiring::Clients;
use crate::store::Store;
use crate::tools::{ReceiptStore, StoreReceipts, ToolClient};

/// Builds the serving engine; errors name what is misconfigured.
pub fn engine(
    config: &Config,
    store: Arc<dyn Store>,
    rollout: Arc<Rollout>,
) -> Result<Arc<dyn Engine>, String> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let clients = Clients::from_config(config).map_err(|e| e.to_string())?;
    let receipts: Arc<dyn ReceiptStore> = Arc::new(StoreReceipts(store));
    let models: Arc<dyn ModelPort> = Arc::new(LlmModels::new(clients.llm));
    let tools: Arc<dyn ToolPort> = Arc::new(ClientTools::new(ToolClient::new(
        clients.tools.clone(),
        Some(receipts.clone()),
        clock.clone(),
    )));
    let sandboxed: Arc<dyn ToolPort> = Arc::new(
        ShadowTools::new(&clients.tools, Some(receipts), clock).map_err(|e| e.to_string())?,
    );
    Ok(Arc::new(ShadowRouted {
        real: matrix(models.clone(), tools, rollout, &config.engine),
        // A shadow runs the strategy it was given; `auto` there means the gate and v2.
        shadow: matrix(
            models,
            sandboxed,
            Arc::new(Rollout::default()),
            &config.engine,
        ),
    }))
}

fn matrix(
    models: Arc<dyn ModelPort>,
    tools: Arc<dyn ToolPort>,
    rollout: Arc<Rollout>,
    settings: &V2Config,
) -> Arc<dyn Engine> {
    let inner: Arc<dyn Engine> = Arc::new(ByStrategy {
        v2: Arc::new(V2Engine::new(
            models.clone(),
            tools.clone(),
            settings.clone(),
        )),
        fallback: Arc::new(MinimalEngine::default()),
    });
    super::with_baselines(inner, Some((models, tools)), rollout)
}
