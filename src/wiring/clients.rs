//! The model and tool clients `cairn serve` runs with, built from configuration.
//!
//! The rule (ARCHITECTURE §7-8): a purpose without its own endpoint uses `llm.default`; with no
//! model configured at all, cairn starts the simulator in-process (generic mode, on a loopback
//! port) and talks to it over HTTP like any other model, so a fresh machine does real work end
//! to end, every answer labelled simulated. With no tools file, the simulator's generic tools
//! are the registry.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::config::Config;
use crate::llm::{Endpoints, LlmClient, LlmError, RetryPolicy};
use crate::sim::{Scenario, SimError, SimServer};
use crate::tools::{RegistryError, ToolRegistry};

/// What the engine and the API need to reach models and tools.
#[derive(Debug, Clone)]
pub struct Clients {
    pub llm: LlmClient,
    pub tools: Arc<ToolRegistry>,
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
    #[error(transparent)]
    Client(#[from] LlmError),
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
        let sim = if endpoints.is_none() || config.tools_file.is_none() {
            let addr = SocketAddr::from(([127, 0, 0, 1], 0));
            Some(SimServer::spawn(Scenario::generic(), addr)?)
        } else {
            None
        };
        let (endpoints, simulated_model) = match (endpoints, &sim) {
            (Some(endpoints), _) => (endpoints, false),
            (None, Some(sim)) => {
                tracing::warn!(
                    base_url = %sim.base_url(),
                    "no model configured: using the built-in simulator; every answer is simulated"
                );
                (Endpoints::uniform(sim.llm_endpoint()), true)
            }
            (None, None) => {
                return Err(WiringError::Llm("no model and no simulator".into()));
            }
        };
        let tools = match (&config.tools_file, &sim) {
            (Some(path), _) => Arc::new(ToolRegistry::load(path)?),
            (None, Some(sim)) => sim.registry(),
            (None, None) => Arc::new(ToolRegistry::default()),
        };
        Ok(Clients {
            llm: LlmClient::new(endpoints, RetryPolicy::default())?,
            tools,
            sim_base_url: sim.map(SimServer::detach),
            simulated_model,
        })
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
        assert!(clients.tools.contains("lookup") && clients.tools.contains("write_note"));
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
        let mut config = Config {
            tools_file: Some(path),
            ..Config::default()
        };
        config.llm.insert(
            "default".into(),
            LlmEndpoint {
                base_url: "http://127.0.0.1:1".into(),
                api_key: Default::default(),
                model: "m".into(),
            },
        );
        let clients = Clients::from_config(&config).expect("wired");
        assert!(clients.sim_base_url.is_none() && !clients.simulated_model);
        assert_eq!(clients.tools.len(), 1);
    }
}
