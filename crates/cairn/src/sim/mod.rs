//! The simulator: a scripted OpenAI-compatible model and tool endpoints in one HTTP server.
//!
//! It is how the engine is tested, how the worked example (docs/scenarios.md, "The worked
//! example") is replayed with exact token figures, how the evaluation runs without a paid model,
//! and what `cairn serve` talks to when no model is configured. The same code runs as
//! `cairn sim --scenario FILE --port P` and in-process on `127.0.0.1:0` ([`SimServer`]).
//!
//! - [`scenario`]: the scenario file format (replies, usage, tools with state rules, faults);
//! - [`llm`]: `POST /v1/chat/completions`, matched on `X-Cairn-Purpose`, `-Milestone`,
//!   `-Attempt`;
//! - [`tools`]: `POST /tools/{name}` under the tool contract;
//! - [`faults`]: 5xx, 429 with `Retry-After`, hangs, malformed JSON, truncated bodies, invalid
//!   plans;
//! - [`generic`]: answers for goals no scenario covers;
//! - [`state`]: per-task memory and the counters served at `GET /sim/stats`.
//!
//! Everything it produces is labelled: the model is `cairn-sim`, bodies carry
//! `"simulated": true`, responses the `X-Cairn-Simulated: true` header, and its tools are
//! registered with `simulated = true`.

pub mod faults;
pub mod generic;
pub mod llm;
pub mod scenario;
pub mod state;
pub mod tools;

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::llm::LlmEndpoint;
use crate::secret::Secret;
use crate::tools::{RegistryError, ToolRegistry, ToolSpec};
pub use scenario::{Scenario, ScenarioError};
pub use state::{SimState, SimStats};

/// Adds the generic tools to a scenario, except where it defines a tool of the same name.
pub fn with_generic_tools(mut scenario: Scenario) -> Scenario {
    for tool in generic::tools() {
        if !scenario.tools.iter().any(|t| t.name == tool.name) {
            scenario.tools.push(tool);
        }
    }
    scenario
}

/// The tool registry of a scenario served at `base_url`.
pub fn registry_for(scenario: &Scenario, base_url: &str) -> Result<ToolRegistry, RegistryError> {
    let base = base_url.trim_end_matches('/');
    let specs = scenario
        .tools
        .iter()
        .map(|tool| ToolSpec {
            name: tool.name.clone(),
            description: tool.description.clone(),
            args_schema: tool.args_schema.clone(),
            url: format!("{base}/tools/{}", tool.name),
            timeout_ms: tool.timeout_ms.unwrap_or(30_000),
            side_effects: tool.side_effects,
            artifacts: tool.artifacts.clone(),
            idempotent: tool.idempotent,
            sandbox_url: None,
            simulated: true,
        })
        .collect();
    ToolRegistry::from_specs(specs, &format!("simulator scenario {:?}", scenario.name))
}

/// The simulator's routes.
pub fn router(state: Arc<SimState>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(llm::chat))
        .route("/tools/{name}", post(tools::call_tool))
        .route("/sim/stats", get(stats))
        .route("/sim/reset", post(reset))
        .route("/sim/registry.json", get(registry_json))
        .with_state(state)
}

async fn stats(State(state): State<Arc<SimState>>) -> axum::Json<SimStats> {
    axum::Json(state.stats())
}

async fn reset(State(state): State<Arc<SimState>>) -> StatusCode {
    state.reset();
    StatusCode::NO_CONTENT
}

/// The scenario's tools as a registry file pointing at this server, in the JSON form of the
/// registry format (save it as `tools.json` and point `CAIRN_TOOLS_FILE` at it).
async fn registry_json(State(state): State<Arc<SimState>>, headers: HeaderMap) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    match registry_for(&state.scenario, &format!("http://{host}")) {
        Ok(registry) => {
            let tools: Vec<&ToolSpec> = registry.specs().collect();
            axum::Json(serde_json::json!({ "tools": tools })).into_response()
        }
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response(),
    }
}

/// A running simulator. Dropping it stops the server.
#[derive(Debug)]
pub struct SimServer {
    addr: SocketAddr,
    base_url: String,
    state: Arc<SimState>,
    registry: Arc<ToolRegistry>,
    /// `None` once detached.
    task: Option<tokio::task::JoinHandle<()>>,
}

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error("simulator tools: {0}")]
    Registry(#[from] RegistryError),
    #[error("simulator could not listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

impl SimServer {
    /// Serves `scenario` (plus the generic tools) on `addr`; port 0 picks a free port.
    pub async fn start(scenario: Scenario, addr: SocketAddr) -> Result<SimServer, SimError> {
        Self::spawn(scenario, addr)
    }

    /// [`SimServer::start`] for synchronous callers; must run inside a Tokio runtime.
    pub fn spawn(scenario: Scenario, addr: SocketAddr) -> Result<SimServer, SimError> {
        let bind_error = |source| SimError::Bind { addr, source };
        let std_listener = std::net::TcpListener::bind(addr).map_err(bind_error)?;
        std_listener.set_nonblocking(true).map_err(bind_error)?;
        let listener = tokio::net::TcpListener::from_std(std_listener).map_err(bind_error)?;
        let addr = listener
            .local_addr()
            .map_err(|source| SimError::Bind { addr, source })?;
        let base_url = format!("http://{addr}");
        let scenario = with_generic_tools(scenario);
        let registry = Arc::new(registry_for(&scenario, &base_url)?);
        let state = Arc::new(SimState::new(scenario));
        let app = router(state.clone());
        let task = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                tracing::error!(%error, "simulator stopped");
            }
        });
        Ok(SimServer {
            addr,
            base_url,
            state,
            registry,
            task: Some(task),
        })
    }

    /// Loads a scenario file and serves it on 127.0.0.1:`port`.
    pub async fn start_file(path: &Path, port: u16) -> Result<SimServer, SimError> {
        let scenario = Scenario::load(path)?;
        Self::start(scenario, SocketAddr::from(([127, 0, 0, 1], port))).await
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`: the base URL for both the model and the tools.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// A model endpoint pointing at this simulator.
    pub fn llm_endpoint(&self) -> LlmEndpoint {
        LlmEndpoint {
            base_url: self.base_url.clone(),
            api_key: Secret::default(),
            model: self.state.scenario.model.clone(),
        }
    }

    /// The scenario's tools, registered at this server.
    pub fn registry(&self) -> Arc<ToolRegistry> {
        self.registry.clone()
    }

    pub fn stats(&self) -> SimStats {
        self.state.stats()
    }

    pub fn reset(&self) {
        self.state.reset()
    }

    pub fn scenario(&self) -> &Scenario {
        &self.state.scenario
    }
}

impl SimServer {
    /// Leaves the server running until the runtime stops (for `cairn serve`'s built-in model),
    /// returning its base URL.
    pub fn detach(mut self) -> String {
        self.task = None;
        self.base_url.clone()
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// `cairn sim`: serves a scenario file until `shutdown` resolves.
pub async fn run(
    path: &Path,
    port: u16,
    shutdown: impl Future<Output = ()>,
) -> Result<(), SimError> {
    let server = SimServer::start_file(path, port).await?;
    tracing::info!(
        scenario = %server.scenario().name,
        base_url = %server.base_url(),
        "simulator listening (everything it answers is simulated); \
         model: {0}/v1/chat/completions, tools: {0}/tools/NAME, \
         registry file: {0}/sim/registry.json, stats: {0}/sim/stats",
        server.base_url()
    );
    shutdown.await;
    drop(server);
    Ok(())
}
