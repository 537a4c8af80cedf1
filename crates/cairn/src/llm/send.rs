//! One HTTP request of a logical call: building it, sending it, and classifying how it ended
//! (an answer, a transient failure to retry, a refused `response_format`, or a fatal error).

use std::time::Duration;

use reqwest::StatusCode;

use super::endpoint::LlmEndpoint;
use super::error::LlmError;
use super::request::ChatRequest;
use super::retry::parse_retry_after;
use super::{Purpose, headers, wire};
use crate::clock::{Clock, SystemClock};
use crate::schema::truncate;

/// How one HTTP request ended, before the retry decision.
pub(super) enum Attempt {
    Done(wire::Response),
    Transient(Transient),
    /// The server refused `response_format`: try once more without it.
    FormatRejected,
    Fatal(LlmError),
}

pub(super) enum Transient {
    Connect(String),
    Timeout,
    RateLimited(Option<Duration>),
    Server(u16, String),
    BadResponse(String),
}

impl Transient {
    pub(super) fn retry_after(&self) -> Option<Duration> {
        match self {
            Transient::RateLimited(after) => *after,
            _ => None,
        }
    }

    pub(super) fn into_error(self, purpose: Purpose, attempts: u32, timeout: Duration) -> LlmError {
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

    pub(super) fn describe(&self) -> String {
        match self {
            Transient::Connect(message) => format!("connect: {message}"),
            Transient::Timeout => "timeout".into(),
            Transient::RateLimited(after) => format!("HTTP 429, retry-after {after:?}"),
            Transient::Server(status, message) => format!("HTTP {status}: {message}"),
            Transient::BadResponse(message) => format!("bad response: {message}"),
        }
    }
}

/// The request for one attempt: the wire body (with `response_format` when `with_format`),
/// the `X-Cairn-*` headers and the bearer token.
fn build_request(
    http: &reqwest::Client,
    endpoint: &LlmEndpoint,
    url: &str,
    request: &ChatRequest,
    with_format: bool,
) -> reqwest::RequestBuilder {
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
        temperature: request.temperature,
        stream: false,
    };
    let mut builder = http
        .post(url)
        .json(&body)
        .header(headers::PURPOSE, request.purpose.as_str());
    // The call's span (crate::traces), so a model server that traces joins the task's trace.
    if let Some(traceparent) = crate::traces::traceparent() {
        builder = builder.header("traceparent", traceparent);
    }
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
    builder
}

/// What came back over HTTP, read in full.
struct Received<'a> {
    status: StatusCode,
    retry_after: Option<Duration>,
    bytes: &'a [u8],
}

/// Sends one request and classifies its outcome.
pub(super) async fn send_once(
    http: &reqwest::Client,
    endpoint: &LlmEndpoint,
    url: &str,
    request: &ChatRequest,
    with_format: bool,
) -> Attempt {
    let builder = build_request(http, endpoint, url, request, with_format);
    let redact = |text: String| redact(&text, endpoint);
    let response = match builder.send().await {
        Ok(response) => response,
        // A connect timeout is both `is_connect` and `is_timeout`: it counts as unreachable.
        Err(error) if error.is_connect() => {
            return Attempt::Transient(Transient::Connect(redact(error_chain(&error))));
        }
        Err(error) if error.is_timeout() => return Attempt::Transient(Transient::Timeout),
        Err(error) => {
            return Attempt::Transient(Transient::BadResponse(redact(error_chain(&error))));
        }
    };
    let status = response.status();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| parse_retry_after(value, SystemClock.now()));
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
    let received = Received {
        status,
        retry_after,
        bytes: &bytes,
    };
    classify(endpoint, request.purpose, with_format, received)
}

/// The outcome of a request that was answered: by status, then by whether the body parses as a
/// chat completion with at least one choice.
fn classify(
    endpoint: &LlmEndpoint,
    purpose: Purpose,
    with_format: bool,
    received: Received<'_>,
) -> Attempt {
    let Received {
        status,
        retry_after,
        bytes,
    } = received;
    let redact = |text: String| redact(&text, endpoint);
    let text = String::from_utf8_lossy(bytes);
    if status == StatusCode::TOO_MANY_REQUESTS {
        return Attempt::Transient(Transient::RateLimited(retry_after));
    }
    if status.is_server_error() || status == StatusCode::REQUEST_TIMEOUT {
        let message = redact(wire::error_message(&text));
        return Attempt::Transient(Transient::Server(status.as_u16(), message));
    }
    if !status.is_success() {
        let message = redact(wire::error_message(&text));
        if with_format && status == StatusCode::BAD_REQUEST && message.contains("response_format") {
            return Attempt::FormatRejected;
        }
        return Attempt::Fatal(LlmError::Refused {
            purpose,
            status: status.as_u16(),
            message,
        });
    }
    match serde_json::from_slice::<wire::Response>(bytes) {
        Ok(parsed) if !parsed.choices.is_empty() => Attempt::Done(parsed),
        Ok(_) => Attempt::Transient(Transient::BadResponse("no choices in the answer".into())),
        Err(error) => Attempt::Transient(Transient::BadResponse(format!(
            "the answer is not a chat completion ({error}); began: {:?}",
            redact(truncate(&text, 80))
        ))),
    }
}

/// Removes the endpoint's API key from text a server or library produced, in case it echoes it.
pub(super) fn redact(text: &str, endpoint: &LlmEndpoint) -> String {
    let key = endpoint.api_key.expose();
    if key.is_empty() {
        text.to_string()
    } else {
        text.replace(key, "[redacted]")
    }
}

/// An error with its causes, which is where reqwest keeps the useful part.
pub(super) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
