//! The REST calls the command-line client makes, each answering the server's JSON or a
//! [`ClientError`] that says in words what went wrong.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

/// Why a call to the server did not give an answer the client can use.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No answer at all: connection refused, reset, timed out.
    #[error("cannot reach the cairn server at {url}: {reason}")]
    Unreachable {
        url: String,
        reason: String,
        #[source]
        source: reqwest::Error,
    },
    /// The server answered with a problem (`application/problem+json`).
    #[error("the server answered {status} {title}: {detail}")]
    Problem {
        status: u16,
        title: String,
        detail: String,
        errors: Vec<String>,
    },
    /// The server answered, but not with JSON the client understands.
    #[error("the server's answer from {url} is not the JSON expected: {source}")]
    BadAnswer {
        url: String,
        #[source]
        source: serde_json::Error,
    },
    /// An event stream broke off before the task's terminal event.
    #[error("the event stream broke off: {source}")]
    Stream {
        #[source]
        source: eventsource_stream::EventStreamError<reqwest::Error>,
    },
    /// An event stream ended cleanly before the task's terminal event (a server shutting down).
    #[error("the event stream ended before the task did")]
    StreamEnded,
    /// Reconnecting did not work for the whole allowed time.
    #[error("gave up after {seconds} s without the server: {last}")]
    GaveUp {
        seconds: u64,
        #[source]
        last: Box<ClientError>,
    },
}

impl ClientError {
    /// Worth trying again after a pause: the server is away, restarting or overloaded.
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Unreachable { .. } => true,
            ClientError::Stream { .. } | ClientError::StreamEnded => true,
            ClientError::Problem { status, .. } => matches!(*status, 429 | 502 | 503 | 504),
            ClientError::BadAnswer { .. } | ClientError::GaveUp { .. } => false,
        }
    }
}

/// One event as the server sends it (the SSE `data:` and the JSON pages hold the same object).
#[derive(Debug, Clone, Deserialize)]
pub struct WireEvent {
    pub seq: i64,
    pub kind: String,
    #[serde(default)]
    pub data: Value,
}

/// The opening of an event stream.
pub enum Opened {
    /// The stream is live; read it with `bytes_stream`.
    Events(reqwest::Response),
    /// 204: the task has ended and every event after the one asked for was delivered already.
    Ended,
}

/// A problem body; every field optional so a proxy's odd answer still reads.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ProblemBody {
    title: String,
    detail: String,
    errors: Option<Vec<String>>,
}

/// The server's address and key, and the HTTP clients to reach it.
pub struct Api {
    base: String,
    key: Option<String>,
    calls: reqwest::Client,
    streams: reqwest::Client,
}

impl Api {
    pub fn new(url: &str, key: Option<String>) -> Result<Api, ClientError> {
        let base = url.trim_end_matches('/').to_string();
        // One call must not hang a script; a stream has no end time, only a silence limit
        // well above the server's keep-alive period (15 s by default).
        let calls = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(30))
            .build();
        let streams = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .read_timeout(Duration::from_secs(60))
            .build();
        match (calls, streams) {
            (Ok(calls), Ok(streams)) => Ok(Api {
                base,
                key: key.filter(|k| !k.is_empty()),
                calls,
                streams,
            }),
            (Err(source), _) | (_, Err(source)) => Err(unreachable(url, source)),
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    /// Sends `request` and reads the JSON answer (`null` for an empty body).
    async fn call(
        &self,
        request: reqwest::RequestBuilder,
        url: &str,
    ) -> Result<Value, ClientError> {
        let response = self
            .authorized(request)
            .send()
            .await
            .map_err(|source| unreachable(url, source))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|source| unreachable(url, source))?;
        if !status.is_success() {
            return Err(problem(status.as_u16(), &body));
        }
        if body.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice::<Value>(&body).map_err(|source| ClientError::BadAnswer {
            url: url.to_string(),
            source,
        })
    }

    /// `POST /v1/tasks`.
    pub async fn submit(
        &self,
        body: &Value,
        idempotency_key: Option<&str>,
    ) -> Result<Value, ClientError> {
        let url = self.url("/v1/tasks");
        let mut request = self.calls.post(url.as_str()).json(body);
        if let Some(key) = idempotency_key {
            request = request.header("Idempotency-Key", key);
        }
        self.call(request, &url).await
    }

    /// `GET /v1/tasks?status=&limit=`.
    pub async fn list(
        &self,
        status: Option<&str>,
        limit: Option<u32>,
    ) -> Result<Value, ClientError> {
        let mut query: Vec<String> = Vec::new();
        if let Some(status) = status {
            query.push(format!("status={status}"));
        }
        if let Some(limit) = limit {
            query.push(format!("limit={limit}"));
        }
        let mut url = self.url("/v1/tasks");
        if !query.is_empty() {
            url = format!("{url}?{}", query.join("&"));
        }
        self.call(self.calls.get(url.as_str()), &url).await
    }

    /// `GET /v1/tasks/{id}`.
    pub async fn task(&self, id: &str) -> Result<Value, ClientError> {
        let url = self.url(&format!("/v1/tasks/{}", segment(id)));
        self.call(self.calls.get(url.as_str()), &url).await
    }

    /// `POST /v1/tasks/{id}/cancel`.
    pub async fn cancel(&self, id: &str) -> Result<Value, ClientError> {
        let url = self.url(&format!("/v1/tasks/{}/cancel", segment(id)));
        self.call(self.calls.post(url.as_str()), &url).await
    }

    /// `POST /v1/tasks/{id}/messages`: a constraint for a running task.
    pub async fn steer(&self, id: &str, text: &str) -> Result<Value, ClientError> {
        let url = self.url(&format!("/v1/tasks/{}/messages", segment(id)));
        let body = serde_json::json!({"text": text, "kind": "constraint"});
        self.call(self.calls.post(url.as_str()).json(&body), &url)
            .await
    }

    /// `GET /v1/tasks/{id}/approvals`.
    pub async fn approvals(&self, id: &str) -> Result<Value, ClientError> {
        let url = self.url(&format!("/v1/tasks/{}/approvals", segment(id)));
        self.call(self.calls.get(url.as_str()), &url).await
    }

    /// `POST /v1/tasks/{id}/approvals/{approval}`: a decision bound to the request's digest.
    pub async fn decide(
        &self,
        id: &str,
        approval: u64,
        body: &Value,
    ) -> Result<Value, ClientError> {
        let url = self.url(&format!("/v1/tasks/{}/approvals/{approval}", segment(id)));
        self.call(self.calls.post(url.as_str()).json(body), &url)
            .await
    }

    /// `GET /v1/tools`.
    pub async fn tools(&self) -> Result<Value, ClientError> {
        let url = self.url("/v1/tools");
        self.call(self.calls.get(url.as_str()), &url).await
    }

    /// `GET /v1/tasks/{id}/plans/{version}`.
    pub async fn plan(&self, id: &str, version: i64) -> Result<Value, ClientError> {
        let url = self.url(&format!("/v1/tasks/{}/plans/{version}", segment(id)));
        self.call(self.calls.get(url.as_str()), &url).await
    }

    /// `GET /v1/tasks/{id}/ledger`.
    pub async fn ledger(&self, id: &str) -> Result<Value, ClientError> {
        let url = self.url(&format!("/v1/tasks/{}/ledger", segment(id)));
        self.call(self.calls.get(url.as_str()), &url).await
    }

    /// One page of events after `after`, as JSON: `{items, next_after, terminal}`.
    pub async fn events_page(&self, id: &str, after: i64) -> Result<Value, ClientError> {
        let url = self.url(&format!("/v1/tasks/{}/events?after={after}", segment(id)));
        let request = self
            .calls
            .get(url.as_str())
            .header("Accept", "application/json");
        self.call(request, &url).await
    }

    /// Opens the task's event stream after `last_seq` (`Last-Event-ID`).
    pub async fn open_events(&self, id: &str, last_seq: i64) -> Result<Opened, ClientError> {
        let url = self.url(&format!("/v1/tasks/{}/events", segment(id)));
        let request = self
            .streams
            .get(url.as_str())
            .header("Accept", "text/event-stream")
            .header("Last-Event-ID", last_seq.to_string());
        let response = self
            .authorized(request)
            .send()
            .await
            .map_err(|source| unreachable(&url, source))?;
        let status = response.status();
        if status.as_u16() == 204 {
            return Ok(Opened::Ended);
        }
        if !status.is_success() {
            let body = response
                .bytes()
                .await
                .map_err(|source| unreachable(&url, source))?;
            return Err(problem(status.as_u16(), &body));
        }
        Ok(Opened::Events(response))
    }
}

/// A task id as one path segment: anything but the id's own characters is dropped, so a
/// stray `/` or `?` cannot reach another route (the server answers 400 for a non-UUID).
fn segment(id: &str) -> String {
    let kept: String = id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    if kept.is_empty() {
        "-".to_string()
    } else {
        kept
    }
}

fn unreachable(url: &str, source: reqwest::Error) -> ClientError {
    ClientError::Unreachable {
        url: url.to_string(),
        reason: causes(&source),
        source,
    }
}

/// The error and its causes in one line, since reqwest's own message names only the top one.
fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let line = cause.to_string();
        if !text.contains(&line) {
            text = format!("{text}: {line}");
        }
        next = cause.source();
    }
    text
}

fn problem(status: u16, body: &[u8]) -> ClientError {
    let parsed = serde_json::from_slice::<ProblemBody>(body).unwrap_or_default();
    let detail = if parsed.detail.is_empty() {
        let text = String::from_utf8_lossy(body).trim().to_string();
        if text.is_empty() {
            "no explanation given".to_string()
        } else {
            text.chars().take(300).collect()
        }
    } else {
        parsed.detail
    };
    let title = if parsed.title.is_empty() {
        "error".to_string()
    } else {
        parsed.title
    };
    ClientError::Problem {
        status,
        title,
        detail,
        errors: parsed.errors.unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn a_problem_body_gives_its_detail_and_a_bare_body_its_text() {
        let body = br#"{"type":"/problems/not-found","title":"Not Found","status":404,"detail":"no task 1"}"#;
        let error = problem(404, body);
        assert_eq!(
            error.to_string(),
            "the server answered 404 Not Found: no task 1"
        );
        let error = problem(502, b"bad gateway");
        assert_eq!(
            error.to_string(),
            "the server answered 502 error: bad gateway"
        );
        assert!(error.is_transient());
    }

    #[test]
    fn an_id_stays_one_path_segment() {
        assert_eq!(segment("0190-ab"), "0190-ab");
        assert_eq!(segment("../x?y"), "xy");
        assert_eq!(segment("/"), "-");
    }
}
