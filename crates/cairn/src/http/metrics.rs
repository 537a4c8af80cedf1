//! `GET /metrics`: this server's figures for Prometheus ([`crate::meters`]), in the
//! OpenMetrics text format, and the route layer that counts the HTTP requests it answers.
//! Behind the admin scope when authentication is on: the figures describe every tenant.

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::http::AppState;
use crate::meters::CONTENT_TYPE;

/// This server's metrics.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "health",
    responses(
        (status = 200, description = "Tasks, steps, model calls and tokens, tool calls, repairs, gate decisions, lease reclaims, open event streams, database connections in use and HTTP requests, in the OpenMetrics text format.",
         body = String, content_type = "application/openmetrics-text"),
    )
)]
pub async fn metrics(State(state): State<AppState>) -> Response {
    if let Some(in_use) = state.store.connections_in_use() {
        state.meters.set_db_pool_in_use(in_use);
    }
    (
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        state.meters.render(),
    )
        .into_response()
}

/// Counts each answered request by method, route template (never the concrete path, which
/// holds task ids) and status.
pub async fn count(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let method = request.method().as_str().to_string();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let response = next.run(request).await;
    state
        .meters
        .http_request(&method, &route, response.status().as_u16());
    response
}
