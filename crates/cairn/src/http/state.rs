//! What every handler can reach, and the HTTP layer's own settings.

use std::sync::Arc;

use tokio::sync::watch;

use crate::clock::Clock;
use crate::domain::price::Pricing;
use crate::domain::spend::SpendCaps;
use crate::engine::rollout::Rollout;
use crate::http::auth::{AuthGate, AuthMode};
use crate::llm::ModelProbe;
use crate::meters::Meters;
use crate::store::Store;
use crate::tools::ToolCatalog;

/// The HTTP layer's settings (the configuration composes them).
#[derive(Debug, Clone, PartialEq)]
pub struct HttpSettings {
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Keep-alive comment period on SSE streams.
    pub sse_keepalive_ms: u64,
    /// Largest page size for list endpoints.
    pub max_page_size: i64,
    /// How often a live event stream re-reads the store besides wake-up hints.
    pub poll_interval_ms: u64,
    /// Timeouts, connection, rate and stream limits (`[http]`).
    pub limits: super::limits::HttpLimits,
    /// The budget of a task submitted without one, unit by unit (`default_budget`).
    pub default_budget: crate::domain::task::Budget,
    /// Serve the web dashboard at `/` and its files at `/ui/`.
    pub dashboard: bool,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            max_body_bytes: 1024 * 1024,
            sse_keepalive_ms: 15_000,
            max_page_size: 100,
            poll_interval_ms: 1_000,
            limits: super::limits::HttpLimits::default(),
            default_budget: crate::domain::task::Budget::DEFAULT,
            dashboard: true,
        }
    }
}

/// What every handler can reach. Cheap to clone (all shared).
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub settings: Arc<HttpSettings>,
    /// The tool registry shown by `GET /v1/tools` (empty until [`AppState::with_tools`]).
    pub tools: ToolCatalog,
    /// The v2 rollout setting, shared with the engine dispatcher ([`AppState::with_rollout`]).
    pub rollout: Arc<Rollout>,
    /// When set, `/readyz` also probes the model endpoints ([`AppState::with_model_probe`]).
    pub models: Option<Arc<dyn ModelProbe>>,
    /// How requests are authenticated ([`AppState::with_auth`]); dev mode until the store holds
    /// a key by default (see [`crate::http::auth`]).
    pub auth: Arc<AuthGate>,
    /// What `GET /metrics` shows; the same meters the workers and ports record into
    /// ([`AppState::with_meters`]).
    pub meters: Meters,
    /// What a money cap (`budget.cost`) is checked against when a task asks for one; `None`
    /// (an engine-less test server) leaves the check to the engine, which refuses every call
    /// of a capped task that nobody priced.
    pub pricing: Option<Arc<Pricing>>,
    /// Each tenant's spend cap per period ([`AppState::with_spend_caps`]): a tenant at its cap
    /// submits nothing until the period ends; `/v1/stats` shows the spend per period.
    pub spend_caps: Arc<SpendCaps>,
}

impl AppState {
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        settings: impl Into<HttpSettings>,
    ) -> Self {
        Self {
            store,
            clock,
            settings: Arc::new(settings.into()),
            tools: ToolCatalog::default(),
            rollout: Arc::new(Rollout::default()),
            models: None,
            auth: Arc::new(AuthGate::new(AuthMode::DevUntilKeys)),
            meters: Meters::new(),
            pricing: None,
            spend_caps: Arc::new(SpendCaps::default()),
        }
    }

    /// Sets how requests are authenticated (`cairn serve` decides it at start-up).
    pub fn with_auth(mut self, mode: AuthMode) -> Self {
        self.auth = Arc::new(AuthGate::new(mode));
        self
    }

    pub fn with_rollout(mut self, rollout: Arc<Rollout>) -> Self {
        self.rollout = rollout;
        self
    }

    /// Makes `/readyz` answer 503 while a model endpoint is unreachable.
    pub fn with_model_probe(mut self, probe: Arc<dyn ModelProbe>) -> Self {
        self.models = Some(probe);
        self
    }

    pub fn with_tools(mut self, tools: impl Into<ToolCatalog>) -> Self {
        self.tools = tools.into();
        self
    }

    pub fn with_meters(mut self, meters: Meters) -> Self {
        self.meters = meters;
        self
    }

    /// Checks a money cap (`budget.cost`) against `pricing`: a task asking for one is refused
    /// while a configured model or a registered tool is unpriced.
    pub fn with_pricing(mut self, pricing: Pricing) -> Self {
        self.pricing = Some(Arc::new(pricing));
        self
    }

    pub fn with_spend_caps(mut self, caps: SpendCaps) -> Self {
        self.spend_caps = Arc::new(caps);
        self
    }
}

/// Flips to `true` when [`super::serve`] begins to shut down; live SSE streams end on it.
#[derive(Debug, Clone)]
pub struct ShutdownSignal(pub watch::Receiver<bool>);
