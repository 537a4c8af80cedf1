//! The chat client: one logical call = up to `max_attempts` HTTP requests, then a typed result.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::endpoint::LlmEndpoint;
use super::error::LlmError;
use super::output::parse_and_validate;
use super::retry::{RetryPolicy, parse_retry_after};
use super::{Purpose, Usage, headers, wire};
use crate::schema::truncate;

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> Self {
        Self::with_role("system", content)
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self::with_role("user", content)
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::with_role("assistant", content)
    }
    fn with_role(role: &str, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.to_string(),
            content: content.into(),
        }
    }
}

/// The JSON Schema an answer must match; sent as `response_format` and checked on receipt.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSchema {
    pub name: String,
    pub schema: Value,
}

/// One logical model call.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub purpose: Purpose,
    pub task_id: Option<Uuid>,
    /// The milestone this call is for (`direct` for the act loop), sent as `X-Cairn-Milestone`.
    pub milestone: Option<String>,
    /// The logical attempt (1-based) for this purpose and milestone, sent as `X-Cairn-Attempt`.
    pub attempt: Option<u32>,
    pub messages: Vec<ChatMessage>,
    /// When set, the answer must be JSON matching this schema.
    pub output: Option<OutputSchema>,
    pub max_tokens: Option<u32>,
}

impl ChatRequest {
    pub fn new(purpose: Purpose, messages: Vec<ChatMessage>) -> Self {
        ChatRequest {
            purpose,
            task_id: None,
            milestone: None,
            attempt: None,
            messages,
            output: None,
            max_tokens: None,
        }
    }
    pub fn task(mut self, task_id: Uuid) -> Self {
        self.task_id = Some(task_id);
        self
    }
    pub fn milestone(mut self, milestone: impl Into<String>, attempt: u32) -> Self {
        self.milestone = Some(milestone.into());
        self.attempt = Some(attempt);
        self
    }
    pub fn json_output(mut self, name: impl Into<String>, schema: Value) -> Self {
        self.output = Some(OutputSchema {
            name: name.into(),
            schema,
        });
        self
    }
}

/// A successful answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The assistant's text as received.
    pub text: String,
    /// The validated JSON value, when the request asked for structured output.
    pub json: Option<Value>,
    pub usage: Usage,
    /// The model that answered (`cairn-sim` for the simulator).
    pub model: String,
    /// True when the answer came from cairn's simulator.
    pub simulated: bool,
    /// HTTP requests this call took (more than 1 after retries).
    pub attempts: u32,
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

/// The client. Cheap to clone; share one per process.
#[derive(Debug, Clone)]
pub struct LlmClient {
    http: reqwest::Client,
    endpoints: Arc<Endpoints>,
    policy: RetryPolicy,
}

/// How one HTTP request ended, before the retry decision.
enum Attempt {
    Done(wire::Response),
    Transient(Transient),
    /// The server refused `response_format`: try once more without it.
    FormatRejected,
    Fatal(LlmError),
}

enum Transient {
    Connect(String),
    Timeout,
    RateLimited(Option<Duration>),
    Server(u16, String),
    BadResponse(String),
}

impl Transient {
    fn retry_after(&self) -> Option<Duration> {
        match self {
            Transient::RateLimited(after) => *after,
            _ => None,
        }
    }

    fn into_error(self, purpose: Purpose, attempts: u32, timeout: Duration) -> LlmError {
        match self {
            Transient::Connect(message) => LlmError::Connect {
                purpose,
                attempts,
                message,
            },
            Transient::Timeout => LlmError::Timeout {
                purpose,
                attempts,
                timeout,
            },
            Transient::RateLimited(retry_after) => LlmError::RateLimited {
                purpose,
                attempts,
                retry_after,
            },
            Transient::Server(status, message) => LlmError::Server {
                purpose,
                attempts,
                status,
                message,
            },
            Transient::BadResponse(message) => LlmError::BadResponse {
                purpose,
                attempts,
                message,
            },
        }
    }

    fn describe(&self) -> String {
        match self {
            Transient::Connect(message) => format!("connect: {message}"),
            Transient::Timeout => "timeout".into(),
            Transient::RateLimited(after) => format!("HTTP 429, retry-after {after:?}"),
            Transient::Server(status, message) => format!("HTTP {status}: {message}"),
            Transient::BadResponse(message) => format!("bad response: {message}"),
        }
    }
}

impl LlmClient {
    pub fn new(endpoints: Endpoints, policy: RetryPolicy) -> Result<LlmClient, LlmError> {
        let http = reqwest::Client::builder()
            .timeout(policy.timeout)
            .connect_timeout(policy.timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|error| LlmError::Setup {
                purpose: Purpose::Gate,
                message: format!("cannot build the HTTP client: {error}"),
            })?;
        Ok(LlmClient {
            http,
            endpoints: Arc::new(endpoints),
            policy,
        })
    }

    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// The model configured for a purpose.
    pub fn model(&self, purpose: Purpose) -> Option<&str> {
        self.endpoints.get(purpose).map(|e| e.model.as_str())
    }

    /// Makes one logical call: retries transient failures up to the policy's bound, then
    /// returns the answer (validated when `request.output` is set) or a classified error.
    pub async fn complete(&self, request: &ChatRequest) -> Result<Completion, LlmError> {
        let purpose = request.purpose;
        let endpoint = self.endpoints.get(purpose).ok_or_else(|| LlmError::Setup {
            purpose,
            message: "no endpoint configured".into(),
        })?;
        let url = format!(
            "{}/v1/chat/completions",
            endpoint.base_url.trim_end_matches('/')
        );
        let mut with_format = request.output.is_some();
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            match self.send_once(endpoint, &url, request, with_format).await {
                Attempt::Done(response) => {
                    return self.finish(endpoint, request, response, attempts);
                }
                Attempt::Fatal(error) => return Err(error),
                Attempt::FormatRejected => {
                    tracing::info!(%purpose, "server refused response_format; asking without it");
                    with_format = false;
                    if attempts >= self.policy.max_attempts.max(2) {
                        return Err(LlmError::Refused {
                            purpose,
                            status: 400,
                            message: "the server refused the response_format".into(),
                        });
                    }
                }
                Attempt::Transient(failure) => {
                    let timeout = self.policy.timeout;
                    if attempts >= self.policy.max_attempts {
                        return Err(failure.into_error(purpose, attempts, timeout));
                    }
                    let Some(wait) = self.policy.wait(attempts + 1, failure.retry_after()) else {
                        return Err(failure.into_error(purpose, attempts, timeout));
                    };
                    tracing::warn!(
                        %purpose,
                        attempt = attempts,
                        wait_ms = wait.as_millis() as u64,
                        reason = %failure.describe(),
                        "model call failed; retrying"
                    );
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    async fn send_once(
        &self,
        endpoint: &LlmEndpoint,
        url: &str,
        request: &ChatRequest,
        with_format: bool,
    ) -> Attempt {
        let body = wire::Request {
            model: &endpoint.model,
            messages: &request.messages,
            response_format: request
                .output
                .as_ref()
                .filter(|_| with_format)
                .map(|output| wire::ResponseFormat {
                    kind: "json_schema",
                    json_schema: wire::JsonSchemaFormat {
                        name: &output.name,
                        schema: &output.schema,
                        strict: false,
                    },
                }),
            max_tokens: request.max_tokens,
            temperature: None,
            stream: false,
        };
        let mut builder = self
            .http
            .post(url)
            .json(&body)
            .header(headers::PURPOSE, request.purpose.as_str());
        if let Some(task) = request.task_id {
            builder = builder.header(headers::TASK, task.to_string());
        }
        if let Some(milestone) = &request.milestone {
            builder = builder.header(headers::MILESTONE, milestone.as_str());
        }
        if let Some(attempt) = request.attempt {
            builder = builder.header(headers::ATTEMPT, attempt.to_string());
        }
        if !endpoint.api_key.is_empty() {
            builder = builder.bearer_auth(endpoint.api_key.expose());
        }
        let redact = |text: String| redact(&text, endpoint);
        let response = match builder.send().await {
            Ok(response) => response,
            Err(error) if error.is_timeout() => return Attempt::Transient(Transient::Timeout),
            Err(error) if error.is_connect() => {
                return Attempt::Transient(Transient::Connect(redact(error_chain(&error))));
            }
            Err(error) => {
                return Attempt::Transient(Transient::BadResponse(redact(error_chain(&error))));
            }
        };
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| parse_retry_after(value, chrono::Utc::now()));
        let bytes = match response.bytes().await {
            Ok(bytes) => bytes,
            Err(error) if error.is_timeout() => return Attempt::Transient(Transient::Timeout),
            Err(error) => {
                return Attempt::Transient(Transient::BadResponse(format!(
                    "body cut short: {}",
                    redact(error_chain(&error))
                )));
            }
        };
        let text = String::from_utf8_lossy(&bytes);
        if status == StatusCode::TOO_MANY_REQUESTS {
            return Attempt::Transient(Transient::RateLimited(retry_after));
        }
        if status.is_server_error() || status == StatusCode::REQUEST_TIMEOUT {
            let message = redact(wire::error_message(&text));
            return Attempt::Transient(Transient::Server(status.as_u16(), message));
        }
        if !status.is_success() {
            let message = redact(wire::error_message(&text));
            if with_format
                && status == StatusCode::BAD_REQUEST
                && message.contains("response_format")
            {
                return Attempt::FormatRejected;
            }
            return Attempt::Fatal(LlmError::Refused {
                purpose: request.purpose,
                status: status.as_u16(),
                message,
            });
        }
        match serde_json::from_slice::<wire::Response>(&bytes) {
            Ok(parsed) if !parsed.choices.is_empty() => Attempt::Done(parsed),
            Ok(_) => Attempt::Transient(Transient::BadResponse("no choices in the answer".into())),
            Err(error) => Attempt::Transient(Transient::BadResponse(format!(
                "the answer is not a chat completion ({error}); began: {:?}",
                redact(truncate(&text, 80))
            ))),
        }
    }

    fn finish(
        &self,
        endpoint: &LlmEndpoint,
        request: &ChatRequest,
        response: wire::Response,
        attempts: u32,
    ) -> Result<Completion, LlmError> {
        let text = response
            .choices
            .first()
            .map(|choice| choice.message.text())
            .unwrap_or_default();
        let usage = match &response.usage {
            Some(usage) => Usage::reported(
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.total_tokens,
            ),
            None => {
                let prompt_chars = request.messages.iter().map(|m| m.content.len()).sum();
                Usage::estimate(prompt_chars, text.len())
            }
        };
        let json = match &request.output {
            None => None,
            Some(output) => match parse_and_validate(&text, &output.schema) {
                Ok(value) => Some(value),
                Err(messages) => {
                    return Err(LlmError::InvalidOutput {
                        purpose: request.purpose,
                        messages: messages
                            .into_iter()
                            .map(|message| redact(&message, endpoint))
                            .collect(),
                        raw: redact(&truncate(&text, 2000), endpoint),
                        usage,
                    });
                }
            },
        };
        tracing::debug!(
            purpose = %request.purpose,
            attempts,
            total_tokens = usage.total_tokens,
            estimated = usage.estimated,
            "model call done"
        );
        Ok(Completion {
            text,
            json,
            usage,
            model: response.model.unwrap_or_else(|| endpoint.model.clone()),
            simulated: response.simulated,
            attempts,
        })
    }
}

/// Removes the endpoint's API key from text a server or library produced, in case it echoes it.
fn redact(text: &str, endpoint: &LlmEndpoint) -> String {
    let key = endpoint.api_key.expose();
    if key.is_empty() {
        text.to_string()
    } else {
        text.replace(key, "[redacted]")
    }
}

/// An error with its causes, which is where reqwest keeps the useful part.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
