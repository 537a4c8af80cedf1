//! The chat client: one logical call = up to `max_attempts` HTTP requests, then a typed result.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::endpoint::{Endpoints, LlmEndpoint};
use super::error::LlmError;
use super::output::parse_and_validate;
use super::request::ChatRequest;
use super::retry::RetryPolicy;
use super::send::{Attempt, redact, send_once};
use super::{Purpose, Usage, wire};
use crate::schema::truncate;

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
    /// The answer stopped at its token budget (`finish_reason: "length"`). A structured answer
    /// that validated anyway is returned with this set.
    pub truncated: bool,
    /// The answer tokens asked for in all: `max_tokens`, plus the re-ask's budget when a
    /// cut-off answer was asked again (0 when the request set none). A provider that reports more
    /// than this reports more than it was asked to write.
    pub asked_tokens: u32,
}

/// The client. Cheap to clone; share one per process.
#[derive(Debug, Clone)]
pub struct LlmClient {
    http: reqwest::Client,
    endpoints: Arc<Endpoints>,
    policy: RetryPolicy,
}

impl LlmClient {
    pub fn new(endpoints: Endpoints, policy: RetryPolicy) -> Result<LlmClient, LlmError> {
        let http = reqwest::Client::builder()
            .timeout(policy.timeout)
            // Shorter than the whole request, so an endpoint that cannot be reached fails as
            // a connect error (`is_unreachable`) rather than racing the request timeout.
            .connect_timeout((policy.timeout * 3 / 4).min(Duration::from_secs(10)))
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

    pub(super) fn endpoint(&self, purpose: Purpose) -> Option<&LlmEndpoint> {
        self.endpoints.get(purpose)
    }

    pub(super) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The model configured for a purpose.
    pub fn model(&self, purpose: Purpose) -> Option<&str> {
        self.endpoints.get(purpose).map(|e| e.model.as_str())
    }

    /// Makes one logical call: retries transient failures up to the policy's bound, then
    /// returns the answer (validated when `request.output` is set) or a classified error.
    ///
    /// A structured answer that does not validate *and* stopped at its token budget
    /// (`finish_reason: "length"`) is asked for once more with a larger budget (twice the
    /// request's `max_tokens`, or [`TRUNCATED_RETRY_MAX_TOKENS`] when it set none) before it
    /// is reported as [`LlmError::InvalidOutput`] with `truncated` set. The tokens of both
    /// answers are counted.
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
        let (response, attempts) = self.exchange(endpoint, &url, request).await?;
        let first = self.finish(endpoint, request, response, attempts);
        let spent = match &first {
            Err(LlmError::InvalidOutput {
                truncated: true,
                usage,
                ..
            }) => *usage,
            _ => return first,
        };
        let Some(budget) = larger_budget(request.max_tokens, request.retry_max_tokens) else {
            // The caller reserved no larger answer: the cut-off one is the call's result.
            return first;
        };
        tracing::info!(
            %purpose,
            max_tokens = budget,
            "structured answer cut off at the token limit; asking once more with a larger budget"
        );
        let retry = ChatRequest {
            max_tokens: Some(budget),
            ..request.clone()
        };
        let (response, more) = self.exchange(endpoint, &url, &retry).await?;
        match self.finish(endpoint, &retry, response, attempts + more) {
            Ok(mut completion) => {
                completion.usage = completion.usage.plus(spent);
                completion.asked_tokens = completion
                    .asked_tokens
                    .saturating_add(request.max_tokens.unwrap_or(0));
                Ok(completion)
            }
            Err(LlmError::InvalidOutput {
                purpose,
                attempts,
                truncated,
                messages,
                raw,
                usage,
            }) => Err(LlmError::InvalidOutput {
                purpose,
                attempts,
                truncated,
                messages,
                raw,
                usage: usage.plus(spent),
            }),
            Err(other) => Err(other),
        }
    }

    /// The HTTP requests of one answer: retries transient failures up to the policy's bound
    /// and a refused `response_format` once; the parsed response and the requests it took.
    async fn exchange(
        &self,
        endpoint: &LlmEndpoint,
        url: &str,
        request: &ChatRequest,
    ) -> Result<(wire::Response, u32), LlmError> {
        let purpose = request.purpose;
        let mut with_format = request.output.is_some();
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            match send_once(&self.http, endpoint, url, request, with_format).await {
                Attempt::Done(response) => return Ok((response, attempts)),
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
        let truncated = response
            .choices
            .first()
            .and_then(|choice| choice.finish_reason.as_deref())
            == Some("length");
        let json = match &request.output {
            None => None,
            Some(output) => match parse_and_validate(&text, &output.schema) {
                Ok(value) => Some(value),
                Err(mut messages) => {
                    if truncated {
                        messages.insert(0, truncation_message(request.max_tokens));
                    }
                    return Err(LlmError::InvalidOutput {
                        purpose: request.purpose,
                        attempts,
                        truncated,
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
            truncated,
            asked_tokens: request.max_tokens.unwrap_or(0),
        })
    }
}

/// The budget of the one retry of a truncated structured answer when the request set none.
pub const TRUNCATED_RETRY_MAX_TOKENS: u32 = 4096;

/// The budget for asking again after an answer ran out of tokens: twice the first, or the
/// caller's ceiling when it set one; `None` when the ceiling leaves no larger answer.
fn larger_budget(max_tokens: Option<u32>, ceiling: Option<u32>) -> Option<u32> {
    let doubled = match max_tokens {
        Some(tokens) => tokens.saturating_mul(2).max(1),
        None => TRUNCATED_RETRY_MAX_TOKENS,
    };
    match ceiling {
        None => Some(doubled),
        Some(ceiling) if ceiling > max_tokens.unwrap_or(0) => Some(doubled.min(ceiling)),
        Some(_) => None,
    }
}

/// The message put first when a truncated answer did not validate, for the planner to send on.
fn truncation_message(max_tokens: Option<u32>) -> String {
    let limit = match max_tokens {
        Some(tokens) => format!(" of {tokens} tokens"),
        None => String::new(),
    };
    format!(
        "the answer was cut off at the token limit{limit} (finish_reason \"length\") and is \
         incomplete; answer with shorter JSON"
    )
}
