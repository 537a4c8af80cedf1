//! The HTTP server's limits: their settings ([`HttpLimits`], `[http]` in the config file,
//! `CAIRN_HTTP_*`), and the answers a client gets when it reaches one ([`Rejection`], always
//! `application/problem+json` with a stable `type`).
//!
//! Where each limit is enforced:
//! - [`super::conn`], below hyper: the header read timeout, the idle keep-alive timeout and the
//!   connection limit (at it, or when `accept` fails for lack of file descriptors, the oldest
//!   idle keep-alive connection is closed so that the new one is served);
//! - [`super::guard`], the outermost layer of the router: URI length and header size (414, 431),
//!   the per-client request rate (429), the per-request time limit (503), the body timeout (408)
//!   and the per-client cap on live event streams (429).
//!
//! hyper keeps its own, larger, limits (a request head over about 400 KiB, more than 100 headers,
//! a URI over 64 KiB); this module's checks sit below them, so a client meets these first and
//! the connection stays open. Past hyper's limits, or for a head that is not HTTP, hyper answers
//! by itself and closes; [`super::conn_io`] turns that empty answer into a problem as well.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::error::{Problem, codes, problem_response};

/// The HTTP server's limits; `[http]` in the config file, each also a `CAIRN_HTTP_*` variable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpLimits {
    /// A request head must arrive complete within this long of the server starting to wait for
    /// it (when the connection opens, or the previous response on it ends); then the
    /// connection is closed (a slowloris client is cut off here).
    pub header_timeout_ms: u64,
    /// A keep-alive connection that has sent nothing for this long since its last response
    /// (or since it opened) is closed. At most `header_timeout_ms`.
    pub idle_timeout_ms: u64,
    /// A request body must arrive complete within this long of its head, else 408.
    pub body_timeout_ms: u64,
    /// A request other than a live event stream must be answered within this long, else 503
    /// `/problems/timeout`. An event stream is not cut: only the wait for its first byte counts.
    pub request_timeout_ms: u64,
    /// Connections held at once. At the limit the oldest idle one is closed for a new one; with
    /// none idle the new one is answered 503 `/problems/overloaded` and closed.
    pub max_connections: usize,
    /// Longest request target (path and query), in bytes; longer is 414.
    pub max_uri_bytes: usize,
    /// Largest total of header names and values, in bytes; larger is 431.
    pub max_header_bytes: usize,
    /// Most header fields in one request; more is 431 (hyper's own limit is 100).
    pub max_headers: usize,
    /// Requests per second each client may send on average (token bucket); 0 turns the rate
    /// limit off. `/healthz` and `/readyz` are not limited.
    pub rate_per_s: u32,
    /// How many requests a client may send at once above its rate (the bucket's size).
    pub rate_burst: u32,
    /// Live event streams (`GET /v1/tasks/{id}/events` as SSE) each client may hold at once;
    /// 0 means no cap.
    pub sse_per_client: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            header_timeout_ms: 10_000,
            idle_timeout_ms: 5_000,
            body_timeout_ms: 30_000,
            request_timeout_ms: 30_000,
            max_connections: 4_096,
            max_uri_bytes: 8 * 1024,
            max_header_bytes: 32 * 1024,
            max_headers: 64,
            rate_per_s: 100,
            rate_burst: 200,
            sse_per_client: 64,
        }
    }
}

/// hyper refuses a request head with more header fields than this on its own (empty 431).
pub const HYPER_MAX_HEADERS: usize = 100;
/// hyper refuses a longer request target on its own (empty 414).
pub const HYPER_MAX_URI: usize = 65_534;
/// hyper refuses a larger request head on its own (its default read buffer limit).
pub const HYPER_MAX_HEAD: usize = 400 * 1024;

impl HttpLimits {
    /// The defaults without the per-client rate limit and stream cap: for a server whose only
    /// client is this process (`cairn eval` drives its own API with hundreds of polls a second).
    pub fn without_client_limits() -> Self {
        Self {
            rate_per_s: 0,
            sse_per_client: 0,
            ..Self::default()
        }
    }

    pub fn header_timeout(&self) -> Duration {
        Duration::from_millis(self.header_timeout_ms)
    }

    pub fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }

    pub fn body_timeout(&self) -> Duration {
        Duration::from_millis(self.body_timeout_ms)
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }
}

/// Why a limit refused a request; rendered as a problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    #[error("the request target is {len} bytes long; the limit is {max}")]
    UriTooLong { len: usize, max: usize },
    #[error("the request headers take {len} bytes; the limit is {max}")]
    HeadersTooLarge { len: usize, max: usize },
    #[error("the request has {count} header fields; the limit is {max}")]
    TooManyHeaders { count: usize, max: usize },
    #[error("the request body did not arrive within {0:?}")]
    BodyTimeout(Duration),
    #[error("the server did not answer within {0:?}; retry later")]
    Timeout(Duration),
    #[error("too many requests from this client (at most {per_s} per second, bursts of {burst})")]
    RateLimited {
        per_s: u32,
        burst: u32,
        retry_after_s: u64,
    },
    #[error("this client already holds {max} live event streams; close one first")]
    TooManyStreams { max: usize },
    #[error("the server holds its maximum of {max} busy connections; retry shortly")]
    Overloaded { max: usize },
}

impl Rejection {
    pub fn status(&self) -> StatusCode {
        match self {
            Rejection::UriTooLong { .. } => StatusCode::URI_TOO_LONG,
            Rejection::HeadersTooLarge { .. } | Rejection::TooManyHeaders { .. } => {
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
            }
            Rejection::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Rejection::RateLimited { .. } | Rejection::TooManyStreams { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            Rejection::Timeout(_) | Rejection::Overloaded { .. } => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Rejection::UriTooLong { .. } => codes::URI_TOO_LONG,
            Rejection::HeadersTooLarge { .. } | Rejection::TooManyHeaders { .. } => {
                codes::HEADERS_TOO_LARGE
            }
            Rejection::BodyTimeout(_) => codes::REQUEST_TIMEOUT,
            Rejection::Timeout(_) => codes::TIMEOUT,
            Rejection::RateLimited { .. } => codes::RATE_LIMITED,
            Rejection::TooManyStreams { .. } => codes::TOO_MANY_STREAMS,
            Rejection::Overloaded { .. } => codes::OVERLOADED,
        }
    }

    fn title(&self) -> &'static str {
        match self {
            Rejection::UriTooLong { .. } => "URI too long",
            Rejection::HeadersTooLarge { .. } | Rejection::TooManyHeaders { .. } => {
                "Request headers too large"
            }
            Rejection::BodyTimeout(_) => "Request body timeout",
            Rejection::Timeout(_) => "Request timed out",
            Rejection::RateLimited { .. } => "Too many requests",
            Rejection::TooManyStreams { .. } => "Too many event streams",
            Rejection::Overloaded { .. } => "Server overloaded",
        }
    }

    /// Seconds a client should wait before it tries again, where that is known.
    fn retry_after(&self) -> Option<u64> {
        match self {
            Rejection::RateLimited { retry_after_s, .. } => Some(*retry_after_s),
            Rejection::TooManyStreams { .. } => Some(1),
            _ => None,
        }
    }

    pub fn to_problem(&self) -> Problem {
        Problem {
            kind: self.code().to_string(),
            title: self.title().to_string(),
            status: self.status().as_u16(),
            detail: self.to_string(),
            errors: None,
        }
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        // 503s get `Retry-After: 1` from `problem_response`.
        let mut response = problem_response(self.status(), &self.to_problem());
        if let Some(seconds) = self.retry_after() {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        }
        response
    }
}

/// The size checks of a request head: target length, header bytes, header count.
pub fn check_head(limits: &HttpLimits, request: &axum::extract::Request) -> Result<(), Rejection> {
    let uri_len = request
        .uri()
        .path_and_query()
        .map_or(0, |target| target.as_str().len());
    if uri_len > limits.max_uri_bytes {
        return Err(Rejection::UriTooLong {
            len: uri_len,
            max: limits.max_uri_bytes,
        });
    }
    let headers = request.headers();
    if headers.len() > limits.max_headers {
        return Err(Rejection::TooManyHeaders {
            count: headers.len(),
            max: limits.max_headers,
        });
    }
    let bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    if bytes > limits.max_header_bytes {
        return Err(Rejection::HeadersTooLarge {
            len: bytes,
            max: limits.max_header_bytes,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rejection_is_a_problem_with_its_status_and_code() {
        let limited = Rejection::RateLimited {
            per_s: 5,
            burst: 10,
            retry_after_s: 3,
        };
        let response = limited.clone().into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "3");
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            super::super::error::PROBLEM_JSON
        );
        assert_eq!(limited.to_problem().kind, codes::RATE_LIMITED);
        let timeout = Rejection::Timeout(Duration::from_secs(1)).into_response();
        assert_eq!(timeout.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(timeout.headers()[header::RETRY_AFTER], "1");
        let slow = Rejection::BodyTimeout(Duration::from_secs(1));
        assert_eq!(slow.status(), StatusCode::REQUEST_TIMEOUT);
    }

    #[test]
    fn head_checks_name_the_limit() {
        let limits = HttpLimits {
            max_uri_bytes: 16,
            max_header_bytes: 64,
            max_headers: 3,
            ..HttpLimits::default()
        };
        let ok = axum::http::Request::builder()
            .uri("/v1/tasks")
            .body(axum::body::Body::empty())
            .unwrap();
        assert_eq!(check_head(&limits, &ok), Ok(()));
        let long = axum::http::Request::builder()
            .uri(format!("/v1/tasks?{}", "a".repeat(20)))
            .body(axum::body::Body::empty())
            .unwrap();
        assert!(matches!(
            check_head(&limits, &long),
            Err(Rejection::UriTooLong { max: 16, .. })
        ));
        let big = axum::http::Request::builder()
            .uri("/")
            .header("x-big", "b".repeat(80))
            .body(axum::body::Body::empty())
            .unwrap();
        assert!(matches!(
            check_head(&limits, &big),
            Err(Rejection::HeadersTooLarge { max: 64, .. })
        ));
        let mut many = axum::http::Request::builder().uri("/");
        for n in 0..4 {
            many = many.header(format!("x-{n}"), "v");
        }
        let many = many.body(axum::body::Body::empty()).unwrap();
        assert!(matches!(
            check_head(&limits, &many),
            Err(Rejection::TooManyHeaders { count: 4, max: 3 })
        ));
    }
}
