//! Liveness, readiness and the OpenAPI document.
//!
//! `/healthz` answers as long as the process serves HTTP; `/readyz` also needs the store, so a
//! load balancer stops sending traffic to a replica that lost its database. With a model probe
//! in the state (`readyz_check_models`), `/readyz` also needs every configured model endpoint
//! to answer; the 503 names the purposes whose endpoint did not, never a URL or a key.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::http::AppState;
use crate::http::error::{ApiError, Problem};
use crate::llm::ProbeFailure;
use crate::store::Backend;

/// A stuck database must not hang the probe.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// Always `ok`.
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Readiness {
    /// Always `ready`.
    pub status: String,
    /// The store this replica runs on.
    pub backend: Backend,
}

/// The process is up.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "health",
    responses((status = 200, description = "The process serves HTTP.", body = Health))
)]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
    })
}

/// Bounds the whole model probe, whatever the probe's own timeout.
const MODEL_PROBE_BOUND: Duration = Duration::from_secs(5);

/// The process is up and its store answers (and, when configured, its model endpoints).
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "health",
    responses(
        (status = 200, description = "The store answered a ping (and, with `readyz_check_models`, every model endpoint answered).", body = Readiness),
        (status = 503, description = "The store, or a configured model endpoint, did not answer.", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Readiness>, ApiError> {
    let backend = state.store.backend();
    let unavailable = |cause: String| ApiError::Unavailable {
        detail: format!("the {} store is not reachable", backend_name(backend)),
        cause,
    };
    match tokio::time::timeout(PING_TIMEOUT, state.store.ping()).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => return Err(unavailable(error.to_string())),
        Err(_) => return Err(unavailable(format!("no answer within {PING_TIMEOUT:?}"))),
    }
    if let Some(probe) = &state.models {
        let failures = tokio::time::timeout(MODEL_PROBE_BOUND, probe.unreachable())
            .await
            .unwrap_or_else(|_| {
                vec![ProbeFailure {
                    purposes: Vec::new(),
                    reason: format!("the probe took longer than {MODEL_PROBE_BOUND:?}"),
                }]
            });
        if !failures.is_empty() {
            return Err(models_unavailable(&failures));
        }
    }
    Ok(Json(Readiness {
        status: "ready".into(),
        backend,
    }))
}

/// The 503 for unreachable model endpoints: the purposes and reasons, nothing else.
fn models_unavailable(failures: &[ProbeFailure]) -> ApiError {
    let parts: Vec<String> = failures
        .iter()
        .map(|failure| {
            let purposes: Vec<&str> = failure.purposes.iter().map(|p| p.as_str()).collect();
            if purposes.is_empty() {
                failure.reason.clone()
            } else {
                format!("{} ({})", purposes.join(", "), failure.reason)
            }
        })
        .collect();
    let detail = format!("model endpoint not reachable: {}", parts.join("; "));
    ApiError::Unavailable {
        cause: detail.clone(),
        detail,
    }
}

fn backend_name(backend: Backend) -> &'static str {
    match backend {
        Backend::Postgres => "postgres",
        Backend::Sqlite => "sqlite",
    }
}

/// The OpenAPI document, rendered once when the router is built.
#[derive(Debug, Clone)]
pub struct OpenApiDocument(pub Arc<String>);

/// This API's OpenAPI 3.1 document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "health",
    responses((status = 200, description = "The OpenAPI document of this API.", content_type = "application/json", body = Object))
)]
pub async fn openapi(Extension(document): Extension<OpenApiDocument>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        document.0.as_str().to_owned(),
    )
}
