//! API errors as `application/problem+json` (RFC 9457).
//!
//! # Error policy
//!
//! - Every failure a client can see is an [`ApiError`], rendered as
//!   `{type, title, status, detail, errors?}` with content type `application/problem+json`.
//! - `type` is a stable, relative URI from [`codes`]; clients branch on it, never on `detail`,
//!   whose wording may improve. `errors` lists every individual problem when there are several
//!   (for example each out-of-range budget unit).
//! - Bad input is always a 4xx, never a 500 and never a panic: the HTTP layer replaces every axum
//!   rejection (JSON syntax, wrong types, unknown fields, missing content type, unparsable path or
//!   query, oversized body), unknown routes and wrong methods with a problem, and validates
//!   everything before the store is called, so a rejected request writes nothing.
//! - 5xx responses say only that something failed on our side. The cause (a database error, a
//!   corrupt row) is logged with `tracing::error!` and never sent: internals such as SQL, file
//!   paths or connection strings must not leak to clients.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::store::StoreError;

/// The stable `type` codes. Adding one is fine; renaming one breaks clients.
pub mod codes {
    /// The body is not syntactically valid JSON.
    pub const INVALID_JSON: &str = "/problems/invalid-json";
    /// Well-formed JSON that does not fit the schema or its rules (wrong type, unknown or missing
    /// field, empty goal, absurd budget, oversized metadata).
    pub const VALIDATION: &str = "/problems/validation";
    /// A path, query or header parameter cannot be parsed or is out of range.
    pub const INVALID_PARAMETER: &str = "/problems/invalid-parameter";
    /// The body is not declared as `application/json`.
    pub const UNSUPPORTED_MEDIA_TYPE: &str = "/problems/unsupported-media-type";
    /// The body is larger than `max_body_bytes`.
    pub const PAYLOAD_TOO_LARGE: &str = "/problems/payload-too-large";
    /// No API key, or one that is malformed, unknown or revoked (`WWW-Authenticate: Bearer`).
    pub const UNAUTHORIZED: &str = "/problems/unauthorized";
    /// The API key lacks the scope the route needs.
    pub const FORBIDDEN: &str = "/problems/forbidden";
    /// No such task, plan version or route.
    pub const NOT_FOUND: &str = "/problems/not-found";
    /// The route exists but not with this method.
    pub const METHOD_NOT_ALLOWED: &str = "/problems/method-not-allowed";
    /// An `Idempotency-Key` was reused with a different request body.
    pub const IDEMPOTENCY_CONFLICT: &str = "/problems/idempotency-conflict";
    /// A list cursor that this server did not issue.
    pub const INVALID_CURSOR: &str = "/problems/invalid-cursor";
    /// A `Last-Event-ID` header or `after` parameter that is not a non-negative integer.
    pub const INVALID_LAST_EVENT_ID: &str = "/problems/invalid-last-event-id";
    /// The request conflicts with the resource's state (cancelling a finished task).
    pub const CONFLICT: &str = "/problems/conflict";
    /// A dependency (the database) is not reachable.
    pub const UNAVAILABLE: &str = "/problems/unavailable";
    /// Anything else that failed on the server's side.
    pub const INTERNAL: &str = "/problems/internal";
    // The server's own limits (`crate::http::limits`).
    /// The request target is longer than `http.max_uri_bytes` (414).
    pub const URI_TOO_LONG: &str = "/problems/uri-too-long";
    /// The request headers exceed `http.max_header_bytes` or `http.max_headers` (431).
    pub const HEADERS_TOO_LARGE: &str = "/problems/headers-too-large";
    /// The body did not arrive within `http.body_timeout_ms` (408).
    pub const REQUEST_TIMEOUT: &str = "/problems/request-timeout";
    /// The server did not finish the request within `http.request_timeout_ms` (503).
    pub const TIMEOUT: &str = "/problems/timeout";
    /// This client sent more requests than its rate allows (429, `Retry-After`).
    pub const RATE_LIMITED: &str = "/problems/rate-limited";
    /// This client already holds `http.sse_per_client` live event streams (429).
    pub const TOO_MANY_STREAMS: &str = "/problems/too-many-streams";
    /// The request is not HTTP/1.1 that the server can parse (400; the connection closes).
    pub const BAD_REQUEST: &str = "/problems/bad-request";
    /// The server holds `http.max_connections` busy connections (503, `Retry-After`).
    pub const OVERLOADED: &str = "/problems/overloaded";
    /// The tenant has spent its cap for the period (`[spend_caps]`): no new task until the
    /// period ends (429, `Retry-After`).
    pub const SPEND_CAP_REACHED: &str = "/problems/spend-cap-reached";
}

/// The media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// The body of every error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Problem {
    /// Stable problem code, e.g. `/problems/validation`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Short, fixed summary of the problem type.
    pub title: String,
    /// The HTTP status, repeated for clients that only keep the body.
    pub status: u16,
    /// What went wrong with this request, in words.
    pub detail: String,
    /// Each individual problem when there are several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<String>>,
}

/// An error returned by a handler. The variant fixes the status and the `type` code.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidJson(String),
    #[error("{detail}")]
    Validation { detail: String, errors: Vec<String> },
    #[error("{0}")]
    InvalidParameter(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{0}")]
    IdempotencyConflict(String),
    #[error("{0}")]
    InvalidCursor(String),
    #[error("{0}")]
    InvalidLastEventId(String),
    #[error("{0}")]
    Conflict(String),
    /// The tenant's spend cap for the period is reached; `retry_after_s` until it ends.
    #[error("{detail}")]
    SpendCapReached { detail: String, retry_after_s: u64 },
    /// `detail` is sent; `cause` is only logged.
    #[error("{detail}: {cause}")]
    Unavailable { detail: String, cause: String },
    /// Only logged; the client sees a fixed message.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    /// A validation problem with a single message.
    pub fn validation(message: impl Into<String>) -> Self {
        let message = message.into();
        ApiError::Validation {
            detail: message.clone(),
            errors: vec![message],
        }
    }

    pub fn internal(cause: impl std::fmt::Display) -> Self {
        ApiError::Internal(cause.to_string())
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidJson(_)
            | ApiError::InvalidParameter(_)
            | ApiError::InvalidCursor(_)
            | ApiError::InvalidLastEventId(_) => StatusCode::BAD_REQUEST,
            ApiError::Validation { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::IdempotencyConflict(_) | ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::SpendCapReached { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable `type` code.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidJson(_) => codes::INVALID_JSON,
            ApiError::Validation { .. } => codes::VALIDATION,
            ApiError::InvalidParameter(_) => codes::INVALID_PARAMETER,
            ApiError::UnsupportedMediaType(_) => codes::UNSUPPORTED_MEDIA_TYPE,
            ApiError::PayloadTooLarge(_) => codes::PAYLOAD_TOO_LARGE,
            ApiError::Unauthorized(_) => codes::UNAUTHORIZED,
            ApiError::Forbidden(_) => codes::FORBIDDEN,
            ApiError::NotFound(_) => codes::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => codes::METHOD_NOT_ALLOWED,
            ApiError::IdempotencyConflict(_) => codes::IDEMPOTENCY_CONFLICT,
            ApiError::InvalidCursor(_) => codes::INVALID_CURSOR,
            ApiError::InvalidLastEventId(_) => codes::INVALID_LAST_EVENT_ID,
            ApiError::Conflict(_) => codes::CONFLICT,
            ApiError::SpendCapReached { .. } => codes::SPEND_CAP_REACHED,
            ApiError::Unavailable { .. } => codes::UNAVAILABLE,
            ApiError::Internal(_) => codes::INTERNAL,
        }
    }

    fn title(&self) -> &'static str {
        match self {
            ApiError::InvalidJson(_) => "Malformed JSON body",
            ApiError::Validation { .. } => "Invalid request",
            ApiError::InvalidParameter(_) => "Invalid parameter",
            ApiError::UnsupportedMediaType(_) => "Unsupported media type",
            ApiError::PayloadTooLarge(_) => "Request body too large",
            ApiError::Unauthorized(_) => "Authentication required",
            ApiError::Forbidden(_) => "Missing scope",
            ApiError::NotFound(_) => "Not found",
            ApiError::MethodNotAllowed(_) => "Method not allowed",
            ApiError::IdempotencyConflict(_) => "Idempotency key reused with a different body",
            ApiError::InvalidCursor(_) => "Invalid cursor",
            ApiError::InvalidLastEventId(_) => "Invalid Last-Event-ID",
            ApiError::Conflict(_) => "Conflict",
            ApiError::SpendCapReached { .. } => "Spend cap reached",
            ApiError::Unavailable { .. } => "Service unavailable",
            ApiError::Internal(_) => "Internal server error",
        }
    }

    /// The body sent to the client: internals stay out of 5xx details.
    pub fn to_problem(&self) -> Problem {
        let (detail, errors) = match self {
            ApiError::Validation { detail, errors } => (detail.clone(), Some(errors.clone())),
            ApiError::Unavailable { detail, .. } => (detail.clone(), None),
            ApiError::Internal(_) => (
                "the server failed to handle the request; it has been logged".to_string(),
                None,
            ),
            other => (other.to_string(), None),
        };
        Problem {
            kind: self.code().to_string(),
            title: self.title().to_string(),
            status: self.status().as_u16(),
            detail,
            errors,
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::IdempotencyConflict { existing_task } => {
                ApiError::IdempotencyConflict(format!(
                    "this Idempotency-Key was already used to create task {existing_task} with a \
                     different request body; reuse a key only to retry the identical request, or \
                     send a new key"
                ))
            }
            // The database is restarting or out of connections: the request may be retried.
            other if other.is_transient() => ApiError::Unavailable {
                detail: "the database is temporarily unavailable; retry shortly".into(),
                cause: other.to_string(),
            },
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        match &self {
            ApiError::Internal(cause) => tracing::error!(%cause, "request failed"),
            ApiError::Unavailable { detail, cause } => {
                tracing::error!(%cause, detail = %detail, "dependency unavailable")
            }
            _ => {}
        }
        let mut response = problem_response(status, &self.to_problem());
        if let ApiError::SpendCapReached { retry_after_s, .. } = &self {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_s));
        }
        response
    }
}

/// Renders a problem body. Serialising a `Problem` cannot fail (strings and numbers only); the
/// fallback keeps even that impossible case a valid problem.
pub(crate) fn problem_response(status: StatusCode, problem: &Problem) -> Response {
    let body = serde_json::to_vec(problem).unwrap_or_else(|_| {
        br#"{"type":"/problems/internal","title":"Internal server error","status":500,"detail":"error rendering failed"}"#
            .to_vec()
    });
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    if status == StatusCode::SERVICE_UNAVAILABLE {
        // A database restart or a full pool passes in seconds.
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    if status == StatusCode::UNAUTHORIZED {
        headers.insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"cairn\""),
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_passing_database_fault_is_a_503_with_retry_after() {
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer");
        let error = ApiError::from(StoreError::Database(sqlx::Error::Io(reset)));
        assert_eq!(error.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(!error.to_problem().detail.contains("peer"));
        let response = error.into_response();
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
    }

    #[test]
    fn internal_details_never_reach_the_body() {
        let error = ApiError::from(StoreError::Corrupt("password=hunter2 in row".into()));
        let problem = error.to_problem();
        assert_eq!(problem.status, 500);
        assert_eq!(problem.kind, codes::INTERNAL);
        assert!(!problem.detail.contains("hunter2"), "{}", problem.detail);
        let unavailable = ApiError::Unavailable {
            detail: "the database is not reachable".into(),
            cause: "connection refused to 10.0.0.1".into(),
        };
        assert!(!unavailable.to_problem().detail.contains("10.0.0.1"));
    }

    #[test]
    fn idempotency_conflict_is_a_409_with_its_code() {
        let id = uuid::Uuid::now_v7();
        let error = ApiError::from(StoreError::IdempotencyConflict { existing_task: id });
        assert_eq!(error.status(), StatusCode::CONFLICT);
        assert_eq!(error.code(), codes::IDEMPOTENCY_CONFLICT);
        assert!(error.to_problem().detail.contains(&id.to_string()));
    }

    #[test]
    fn validation_lists_every_error() {
        let error = ApiError::Validation {
            detail: "2 problems".into(),
            errors: vec!["a".into(), "b".into()],
        };
        let json = serde_json::to_value(error.to_problem()).expect("serializes");
        assert_eq!(json["type"], codes::VALIDATION);
        assert_eq!(json["errors"], serde_json::json!(["a", "b"]));
    }
}
