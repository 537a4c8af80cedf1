//! The one composition root: [`Config`] -> store, clients, engines, dispatch.
//!
//! Only this module (with `server` and `main`) reads the whole configuration. It builds one set
//! of model and tool clients (the in-process simulator when no model is configured, see
//! [`clients`]), puts the engine ports over them, and hands every strategy's engines to the one
//! [`Dispatch`]: the real tools for ordinary tasks, the sandboxed tools for shadow copies, the
//! rollout for `auto`. So the figures of every strategy stay comparable.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::domain::price::{Pricing, PurposeModels};
use crate::engine::Engine;
use crate::engine::baselines::BaselineConfig;
use crate::engine::dispatch::{Dispatch, Engines};
use crate::engine::minimal::MinimalEngine;
use crate::engine::rollout::Rollout;
use crate::engine::runtime::adapters::{ClientTools, LlmModels};
use crate::engine::runtime::ports::{ModelPort, ToolPort};
use crate::engine::runtime::sandbox::ShadowTools;
use crate::meters::Meters;
use crate::store::Store;
use crate::tools::{ReceiptStore, StoreReceipts, ToolCatalog, ToolClient};
use crate::worker::PoolParams;

pub mod clients;
pub mod metered;
pub mod traced;

use metered::{MeteredModels, MeteredTools};
use traced::{TracedModels, TracedTools};

pub use clients::{Clients, WiringError};

/// What serving runs on: the engine, and the tool registry it calls, which the API shows
/// (`GET /v1/tools`) and checks a task's tool list against. Serving lists its MCP servers
/// ([`ToolCatalog::start`]) before it accepts requests.
pub struct Wired {
    pub engine: Arc<dyn Engine>,
    pub tools: ToolCatalog,
    /// The price table as resolved for the configured models: what a money cap is checked
    /// against when a task asks for one.
    pub pricing: Pricing,
}

/// Builds the serving engine; errors name what is misconfigured.
pub fn engine(
    config: &Config,
    store: Arc<dyn Store>,
    rollout: Arc<Rollout>,
    meters: &Meters,
) -> Result<Wired, WiringError> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let clients = Clients::from_config(config)?;
    let registry = clients.tools.clone();
    let (settings, pricing) = priced(config, &clients)?;
    let receipts: Arc<dyn ReceiptStore> = Arc::new(StoreReceipts(store));
    let models: Arc<dyn ModelPort> = Arc::new(MeteredModels {
        inner: Arc::new(TracedModels::over(
            LlmModels::new(clients.llm),
            config.otel_capture_content,
        )),
        meters: meters.clone(),
    });
    let live = ToolClient::new(clients.tools.clone(), Some(receipts), clock);
    let metered = |inner: Arc<dyn ToolPort>| -> Arc<dyn ToolPort> {
        Arc::new(MeteredTools {
            inner: Arc::new(TracedTools { inner }),
            meters: meters.clone(),
        })
    };
    let sandboxed = metered(Arc::new(ShadowTools::new(&live)));
    let tools = metered(Arc::new(ClientTools::new(live)));
    let engines = |tools| {
        Engines::new(
            models.clone(),
            tools,
            settings.clone(),
            BaselineConfig::default(),
        )
    };
    let dispatch = Dispatch::new(engines(tools), engines(sandboxed), rollout);
    let engine = Arc::new(if config.test_minimal_engine {
        tracing::warn!(
            "CAIRN_TEST_MINIMAL_ENGINE is set: tasks with engine_steps run on the test engine"
        );
        dispatch.with_test_engine(Arc::new(MinimalEngine::default()))
    } else {
        dispatch
    });
    Ok(Wired {
        engine,
        tools: registry,
        pricing,
    })
}

/// The engine's settings with the price table resolved for the configured models, and the
/// pricing the API checks a money cap against. A server whose default budget caps money, or
/// that caps a tenant's spend, does not start while a model or registered tool is unpriced: it would be sent calls nobody can
/// book (an MCP server's tools, listed later, are checked when a task asks for a cap).
fn priced(
    config: &Config,
    clients: &Clients,
) -> Result<(crate::domain::settings::EngineSettings, Pricing), WiringError> {
    use crate::config::prices::PriceError;
    use crate::llm::Purpose;
    let model = |purpose| clients.llm.model(purpose).map(str::to_string);
    let models = PurposeModels {
        gate: model(Purpose::Gate),
        strategic: model(Purpose::Strategic),
        tactical: model(Purpose::Tactical),
        verifier: model(Purpose::Verifier),
    };
    let prices = config
        .prices
        .resolve(&models)
        .map_err(WiringError::Prices)?;
    let pricing = Pricing { prices, models };
    let registry = clients.tools.current();
    let unpriced = pricing.unpriced(registry.specs().map(|spec| spec.name.as_str()));
    let spend_caps = config
        .spend_caps
        .resolve()
        .map_err(WiringError::SpendCaps)?;
    let money_capped = config.default_budget.cost.is_some() || spend_caps.any();
    if let (true, Some(what)) = (money_capped, unpriced) {
        return Err(WiringError::Prices(PriceError::Unpriced(what)));
    }
    let mut settings = config.engine.clone();
    settings.prices = pricing.prices.clone();
    settings.spend_caps = spend_caps;
    Ok((settings, pricing))
}
/// A worker pool over `store` and `engine` with the configuration's timings.
pub fn pool_params(
    config: &Config,
    store: Arc<dyn Store>,
    engine: Arc<dyn Engine>,
    clock: Arc<dyn Clock>,
    worker_id: String,
    meters: Meters,
) -> PoolParams {
    PoolParams {
        meters,
        store,
        engine,
        clock,
        worker_id,
        workers: config.workers,
        max_running_per_tenant: std::num::NonZeroU32::new(config.max_running_per_tenant),
        lease_ttl: Duration::from_millis(config.lease_ttl_ms),
        heartbeat: Duration::from_millis(config.heartbeat_ms),
        poll_interval: Duration::from_millis(config.poll_interval_ms),
        // Validated with the configuration.
        spend_caps: config.spend_caps.resolve().unwrap_or_default(),
    }
}
