//! The model and tool clients `cairn serve` runs with, built from configuration.
//!
//! The rule (docs/configuration.md, "Settings"): a purpose without its own endpoint uses
//! `llm.default`; with no model configured at all, cairn starts the simulator in-process (generic
//! mode, on a loopback port) and talks to it over HTTP like any other model, so a fresh machine
//! does real work end to end, every answer labelled simulated; with no tools file, the simulator's
//! generic tools are then the registry. A configured (real) model needs a tools file: without one,
//! start-up fails with [`WiringError::NoToolsFile`] rather than quietly handing a real model the
//! simulator's tools.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::SystemClock;
use crate::config::Config;
use crate::llm::{EndpointProbe, Endpoints, LlmClient, LlmError, ModelProbe, RetryPolicy};
use crate::sim::{Scenario, SimError, SimServer};
use crate::tools::mcp::{McpCatalog, McpCatalogParams, McpHub};
use crate::tools::{RegistryError, SharedRegistry, ToolCatalog, ToolsFile};

/// What the engine and the API need to reach models and tools.
#[derive(Debug, Clone)]
pub struct Clients {
    pub llm: LlmClient,
    /// The registry, fed by the MCP servers the tools file names (listed once serving starts,
    /// [`ToolCatalog::start`]).
    pub tools: ToolCatalog,
    /// The base URL of the in-process simulator, when one was started. It runs until the
    /// runtime stops.
    pub sim_base_url: Option<String>,
    /// True when the model is the simulator.
    pub simulated_model: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum WiringError {
    #[error("model configuration: {0}")]
    Llm(String),
    #[error(
        "a model endpoint is configured (CAIRN_LLM_*) but no tool registry: set CAIRN_TOOLS_FILE \
         (tools_file in the config file) to the tools it may call; the simulator's tools are \
         used only when no model is configured"
    )]
    NoToolsFile,
    #[error(transparent)]
    Client(#[from] LlmError),
    #[error(transparent)]
    Prices(crate::config::prices::PriceError),
    #[error("invalid value for spend_caps: {0}")]
    SpendCaps(String),
    #[error(transparent)]
    Tools(#[from] RegistryError),
    #[error(transparent)]
    Sim(#[from] SimError),
}

impl Clients {
    /// Builds the clients `config` asks for (see the module docs). Synchronous so engine
    /// factories can call it, but it must run inside a Tokio runtime (it may start the
    /// simulator).
    pub fn from_config(config: &Config) -> Result<Clients, WiringError> {
        let endpoints = Endpoints::from_config(&config.llm).map_err(WiringError::Llm)?;
        if let Some(endpoints) = endpoints {
            let path = config.tools_file.as_ref().ok_or(WiringError::NoToolsFile)?;
            return Ok(Clients {
                llm: LlmClient::new(endpoints, retry_policy(config))?,
                tools: catalog(ToolsFile::load(path)?, config.mcp_relist_min_ms),
                sim_base_url: None,
                simulated_model: false,
            });
        }
        let scenario = Scenario {
            latency_ms: config.sim_latency_ms,
            ..Scenario::generic()
        };
        let sim = SimServer::spawn(scenario, SocketAddr::from(([127, 0, 0, 1], 0)))?;
        tracing::warn!(
            base_url = %sim.base_url(),
            "no model configured: using the built-in simulator; every answer is simulated"
        );
        let tools = match &config.tools_file {
            Some(path) => catalog(ToolsFile::load(path)?, config.mcp_relist_min_ms),
            None => ToolCatalog::fixed(sim.registry()),
        };
        Ok(Clients {
            llm: LlmClient::new(Endpoints::uniform(sim.llm_endpoint()), retry_policy(config))?,
            tools,
            sim_base_url: Some(sim.detach()),
            simulated_model: true,
        })
    }
}

/// The catalog of a tools file: fixed, or fed by its MCP servers.
fn catalog(file: ToolsFile, relist_min_ms: u64) -> ToolCatalog {
    if file.mcp.is_empty() {
        return ToolCatalog::fixed(Arc::new(file.registry));
    }
    let shared = SharedRegistry::new(Arc::new(file.registry.clone()));
    let mcp = McpCatalog::new(McpCatalogParams {
        file: file.registry,
        servers: file.mcp,
        hub: McpHub::default(),
        shared: shared.clone(),
        clock: Arc::new(SystemClock),
        relist_min: Duration::from_millis(relist_min_ms),
    });
    ToolCatalog::with_mcp(shared, Arc::new(mcp))
}

/// How long `/readyz` waits for each model endpoint.
pub const MODEL_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The `/readyz` model probe: `Some` when `readyz_check_models` is on and a model is
/// configured (the in-process simulator is not probed).
pub fn model_probe(config: &Config) -> Result<Option<Arc<dyn ModelProbe>>, WiringError> {
    if !config.readyz_check_models {
        return Ok(None);
    }
    let Some(endpoints) = Endpoints::from_config(&config.llm).map_err(WiringError::Llm)? else {
        tracing::info!("readyz_check_models is set but no model is configured: nothing to probe");
        return Ok(None);
    };
    let client = LlmClient::new(endpoints, retry_policy(config))?;
    Ok(Some(Arc::new(EndpointProbe {
        client,
        timeout: MODEL_PROBE_TIMEOUT,
    })))
}

/// The model client's retry policy, with the configured per-call timeout.
pub fn retry_policy(config: &Config) -> RetryPolicy {
    RetryPolicy {
        timeout: Duration::from_millis(config.llm_timeout_ms),
        ..RetryPolicy::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::LlmEndpoint;
    use crate::llm::{ChatMessage, ChatRequest, Purpose};

    #[tokio::test]
    async fn no_model_means_the_simulator_and_its_generic_tools() {
        let clients = Clients::from_config(&Config::default()).expect("wired");
        assert!(clients.simulated_model && clients.sim_base_url.is_some());
        let tools = clients.tools.current();
        assert!(tools.contains("lookup") && tools.contains("write_note"));
        let answer = clients
            .llm
            .complete(&ChatRequest::new(
                Purpose::Verifier,
                vec![ChatMessage::user("ok?")],
            ))
            .await
            .expect("the simulator answers");
        assert!(answer.simulated);
    }

    fn with_model(mut config: Config) -> Config {
        config.llm.insert(
            "default".into(),
            LlmEndpoint {
                base_url: "http://127.0.0.1:1".into(),
                api_key: crate::secret::Secret::new("sk-wiring-secret"),
                model: "m".into(),
            },
        );
        config
    }

    #[tokio::test]
    async fn a_configured_model_with_a_tools_file_starts_no_simulator() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tools.toml");
        std::fs::write(
            &path,
            "[[tools]]\nname = \"t\"\ndescription = \"d\"\nurl = \"http://127.0.0.1:1/t\"\n\
             side_effects = false\nargs_schema = { type = \"object\" }\n",
        )
        .expect("write");
        let config = with_model(Config {
            tools_file: Some(path),
            ..Config::default()
        });
        let clients = Clients::from_config(&config).expect("wired");
        assert!(clients.sim_base_url.is_none() && !clients.simulated_model);
        assert_eq!(clients.tools.current().len(), 1);
    }

    /// The rule changed: a real model no longer falls back to the simulator's tools.
    #[tokio::test]
    async fn a_configured_model_without_a_tools_file_is_an_error_naming_the_variable() {
        let error = Clients::from_config(&with_model(Config::default())).expect_err("refused");
        assert!(matches!(error, WiringError::NoToolsFile), "{error}");
        let message = error.to_string();
        assert!(message.contains("CAIRN_TOOLS_FILE"), "{message}");
        assert!(!message.contains('\n') && !message.contains("sk-wiring-secret"));
    }

    #[tokio::test]
    async fn the_model_probe_is_built_only_when_asked_and_a_model_is_configured() {
        assert!(
            model_probe(&with_model(Config::default()))
                .expect("ok")
                .is_none()
        );
        let asked = Config {
            readyz_check_models: true,
            ..Config::default()
        };
        assert!(
            model_probe(&asked).expect("ok").is_none(),
            "no model: nothing to probe"
        );
        let probe = model_probe(&with_model(asked))
            .expect("ok")
            .expect("a probe");
        // Nothing listens on port 1: the default endpoint is reported for every purpose.
        let failures = probe.unreachable().await;
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert_eq!(failures[0].purposes, Purpose::ALL.to_vec());
    }
}
