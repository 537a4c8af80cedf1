//! One model endpoint, as the operator configures it.

use serde::{Deserialize, Serialize};

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
