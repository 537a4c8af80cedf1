//! One model endpoint, as the operator configures it, and the endpoints resolved per purpose.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Purpose;
use crate::secret::Secret;

/// One model endpoint: any OpenAI-compatible `/v1/chat/completions` server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct LlmEndpoint {
    /// Base URL up to and excluding `/v1/chat/completions`, e.g. `http://127.0.0.1:8000`.
    pub base_url: String,
    #[serde(default)]
    pub api_key: Secret,
    pub model: String,
}

/// Endpoints resolved per purpose: a purpose without its own entry uses `default`.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoints {
    by_purpose: BTreeMap<Purpose, LlmEndpoint>,
}

impl Endpoints {
    /// Resolves `Config.llm`. `Ok(None)` when nothing is configured (cairn then runs against
    /// its simulator); an error names the first purpose that has neither its own entry nor a
    /// `default`.
    pub fn from_config(map: &BTreeMap<String, LlmEndpoint>) -> Result<Option<Endpoints>, String> {
        if map.is_empty() {
            return Ok(None);
        }
        let mut by_purpose = BTreeMap::new();
        for purpose in Purpose::ALL {
            let endpoint = map
                .get(purpose.as_str())
                .or_else(|| map.get("default"))
                .ok_or_else(|| {
                    format!(
                        "llm.{purpose}: no endpoint for this purpose and no llm.default \
                         (set CAIRN_LLM_{}_BASE_URL and _MODEL, or CAIRN_LLM_DEFAULT_*)",
                        purpose.as_str().to_ascii_uppercase()
                    )
                })?;
            by_purpose.insert(purpose, endpoint.clone());
        }
        Ok(Some(Endpoints { by_purpose }))
    }

    /// The same endpoint for every purpose.
    pub fn uniform(endpoint: LlmEndpoint) -> Endpoints {
        Endpoints {
            by_purpose: Purpose::ALL
                .into_iter()
                .map(|purpose| (purpose, endpoint.clone()))
                .collect(),
        }
    }

    pub fn get(&self, purpose: Purpose) -> Option<&LlmEndpoint> {
        self.by_purpose.get(&purpose)
    }
}
